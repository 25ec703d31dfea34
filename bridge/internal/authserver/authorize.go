package authserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// The authorization endpoint and the consent decision: what happens
// between an app sending a person to GET /oauth/authorize and the person
// landing back at the app's redirect URI with a code (or a refusal).
//
// A request lives in the KV (bucketRequests) under a random id. The
// browser that opened it holds a cookie bb_req_<id> whose SHA-256 is the
// request's BrowserHash; every form carries the request id and its CSRF
// token. A POST is accepted only with both, so neither another site nor
// another browser (login CSRF: signing the victim in as the attacker) can
// drive someone's request.

const (
	requestCookiePrefix = "bb_req_"
	maxFormBytes        = 16 << 10
)

// authFlow is a request loaded for a form post: the request at its
// revision (for compare-and-swap updates), its client and its resource.
type authFlow struct {
	req      *AuthRequest
	rev      uint64
	client   *Client
	resource Resource
}

func (s *Server) requestTTL() time.Duration {
	if s.cfg.RequestTTL > 0 {
		return s.cfg.RequestTTL
	}
	return 15 * time.Minute // New's default; kept here for a Server built without New (tests)
}

// handleAuthorize serves GET /oauth/authorize: checks the request, stores
// it and shows the sign-in page (or, for a browser already signed in, the
// consent page). Until the client and its redirect URI are known good,
// refusals are pages: redirecting to an unchecked URI would make this
// server an open redirector. After that they go back to the app.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	for _, k := range []string{"client_id", "redirect_uri"} {
		if len(q[k]) > 1 {
			s.errorPageFor(w, http.StatusBadRequest, "This sign-in link is broken",
				"The link names more than one "+k+".", "Go back to the app and connect again.")
			return
		}
	}
	clientID := q.Get("client_id")
	if clientID == "" {
		s.errorPageFor(w, http.StatusBadRequest, "This sign-in link is broken",
			"The link does not say which app is asking (client_id is missing).", "Go back to the app and connect again.")
		return
	}
	client, err := s.lookupClient(ctx, clientID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			s.errorPageFor(w, http.StatusBadRequest, "Unknown app",
				"The app asking to connect is not registered with this server, or its registration expired.",
				"Remove the connector in the app and add it again: it will register anew.")
			return
		}
		s.log.Warn("authserver: looking up a client", "client", clientID, "err", err)
		s.errorPageFor(w, http.StatusBadRequest, "Unknown app",
			"The app asking to connect could not be looked up: "+err.Error(), "Go back to the app and try again.")
		return
	}
	redirectURI, ok := matchRedirectURI(client.RedirectURIs, q["redirect_uri"])
	if !ok {
		msg := "The app asked to be sent back to an address it did not register, so this server will not send you there."
		if len(q["redirect_uri"]) == 0 {
			msg = "The link does not say where to send you back (redirect_uri), and the app registered more than one address."
		}
		s.errorPageFor(w, http.StatusBadRequest, "Unregistered return address", msg,
			"This protects you from being sent to a site that is not the app. Connect again from the app.")
		return
	}

	// From here on the redirect URI is the client's own: refusals go back
	// to the app, which can tell the person what happened. But anyone can
	// register a client with any redirect URI, so until the person has
	// seen this app's consent page (and so its name and where it sends
	// them), refusals stay on this server's page: otherwise a link to
	// this server would be a way to send people anywhere (RFC 9700
	// §4.11.2).
	state := q.Get("state")
	known := s.consentSeen(ctx, client.ID)
	fail := func(code, desc string) {
		if !known {
			status := http.StatusBadRequest
			if code == "server_error" {
				status = http.StatusInternalServerError
			}
			s.errorPageFor(w, status, "This sign-in link is broken", desc+" ("+code+")",
				"Go back to the app and connect again; if this keeps happening, the app has a bug.")
			return
		}
		s.redirectError(w, r, http.StatusFound, redirectURI, state, code, desc)
	}
	for _, k := range []string{"response_type", "state", "scope", "code_challenge", "code_challenge_method"} {
		if len(q[k]) > 1 {
			fail("invalid_request", "The parameter "+k+" appears more than once.")
			return
		}
	}
	if rt := q.Get("response_type"); rt != "code" {
		fail("unsupported_response_type", "Only the authorization code flow (response_type=code) is supported.")
		return
	}
	if len(client.GrantTypes) > 0 && !contains(client.GrantTypes, "authorization_code") {
		fail("unauthorized_client", "This client did not register for the authorization_code grant.")
		return
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		fail("invalid_request", "PKCE with S256 is required: send code_challenge and code_challenge_method=S256.")
		return
	}
	if !isS256Challenge(q.Get("code_challenge")) {
		fail("invalid_request", "code_challenge must be the base64url SHA-256 of the code verifier: 43 characters.")
		return
	}
	switch len(q["resource"]) {
	case 0:
		fail("invalid_request", "Send the MCP server URL as the resource parameter (RFC 8707), so the token is bound to it.")
		return
	case 1:
	default:
		fail("invalid_target", "Ask for one resource per authorization: a token here is bound to one MCP server.")
		return
	}
	resource, ok := s.cfg.Resources(q.Get("resource"))
	if !ok {
		fail("invalid_target", "The resource "+q.Get("resource")+" is not an MCP server this authorization server signs in to.")
		return
	}

	if !s.id.opened.Allow(s.id.address(r)) {
		s.log.Warn("authserver: authorization requests limited", "address", s.id.address(r))
		w.Header().Set("Retry-After", "60")
		s.errorPageFor(w, http.StatusTooManyRequests, "Too many sign-ins",
			"Too many sign-ins were started from your network in the last minute.", "Wait a minute, then connect again from the app.")
		return
	}
	s.loadPending(ctx)
	browser := randomToken("")
	req := &AuthRequest{
		ID:                  randomToken(""),
		ClientID:            client.ID,
		RedirectURI:         redirectURI,
		State:               state,
		Scope:               grantScope(q.Get("scope")),
		Resource:            resource.URI,
		CodeChallenge:       q.Get("code_challenge"),
		CodeChallengeMethod: "S256",
		BrowserHash:         hashSecret(browser),
		CSRF:                randomToken(""),
		CreatedAt:           s.now(),
		Address:             s.id.address(r),
	}
	// A browser signed in a short while ago goes straight to consent.
	if subj := s.sessionSubject(r); subj != nil && s.admitted(*subj) == nil {
		req.Subject = subj
	}
	rev, err := s.createJSON(ctx, bucketRequests, req.ID, req, s.requestTTL())
	if err != nil {
		s.log.Error("authserver: storing an authorization request", "err", err)
		fail("server_error", "The authorization server could not store the request; try again.")
		return
	}
	s.dropRequests(ctx, s.requests.add(req.Address, req.ID, req.CreatedAt, req.CreatedAt.Add(s.requestTTL())))
	http.SetCookie(w, s.cookie(requestCookiePrefix+req.ID, browser, s.requestTTL()))
	f := &authFlow{req: req, rev: rev, client: client, resource: resource}
	if req.Subject != nil {
		s.showConsent(w, r, f)
		return
	}
	s.showSignIn(w, r, f, http.StatusOK, "", false)
}

// bucketConsentSeen notes the clients whose consent page a person has
// seen: sha256(client id) -> "1", for ClientIdleTTL.
const bucketConsentSeen = "consent_seen"

// consentSeen reports whether a person has seen the consent page of
// client: only then may a refusal of its authorization request go to its
// redirect URI. A store that does not answer counts as not seen.
func (s *Server) consentSeen(ctx context.Context, clientID string) bool {
	_, _, err := s.kv.Get(ctx, bucketConsentSeen, hashSecret(clientID))
	return err == nil
}

func (s *Server) markConsentSeen(ctx context.Context, clientID string) {
	_, err := s.kv.Create(ctx, bucketConsentSeen, hashSecret(clientID), []byte("1"), s.cfg.ClientIdleTTL)
	if err != nil && !errors.Is(err, ErrExists) {
		s.log.Warn("authserver: noting that a consent page was seen", "client", clientID, "err", err)
	}
}

// matchRedirectURI picks the redirect URI: the one given if the client
// registered it, or the client's only one if none is given. A loopback IP
// literal matches on any port (RFC 8252 section 7.3, OAuth 2.1 section
// 8.4.2): native apps get an ephemeral port from the system.
func matchRedirectURI(registered, given []string) (string, bool) {
	if len(given) == 0 {
		if len(registered) == 1 {
			return registered[0], true
		}
		return "", false
	}
	want := given[0]
	for _, r := range registered {
		if r == want || sameLoopbackRedirect(r, want) {
			return want, true
		}
	}
	return "", false
}

func sameLoopbackRedirect(registered, given string) bool {
	a, err1 := url.Parse(registered)
	b, err2 := url.Parse(given)
	if err1 != nil || err2 != nil || a.Scheme != "http" || b.Scheme != "http" {
		return false
	}
	ip, err := netip.ParseAddr(a.Hostname())
	if err != nil || !ip.IsLoopback() || a.Hostname() != b.Hostname() {
		return false
	}
	return a.User == nil && b.User == nil && a.Path == b.Path && a.RawQuery == b.RawQuery && a.Fragment == "" && b.Fragment == ""
}

// isS256Challenge: the base64url (no padding) of 32 bytes.
func isS256Challenge(c string) bool {
	return len(c) == 43 && isBase64URL(c)
}

func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// validRequestID: what randomToken("") makes, so nothing else reaches the
// store or a cookie name.
func validRequestID(id string) bool { return len(id) == 43 && isBase64URL(id) }

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// redirectError sends the person back to the app with an RFC 6749 error,
// its state and this server's issuer (RFC 9207).
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, status int, redirectURI, state, code, desc string) {
	s.redirectBack(w, r, status, redirectURI, url.Values{"error": {code}, "error_description": {desc}}, state)
}

func (s *Server) redirectBack(w http.ResponseWriter, r *http.Request, status int, redirectURI string, params url.Values, state string) {
	u, err := url.Parse(redirectURI)
	if err != nil {
		// Registration accepted it, so this is a bug, not the person's.
		s.errorPageFor(w, http.StatusInternalServerError, "Cannot return to the app",
			"The app's return address cannot be parsed.", "")
		return
	}
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	if state != "" {
		q.Set("state", state)
	}
	q.Set("iss", s.cfg.Issuer)
	u.RawQuery = q.Encode()
	u.Fragment = ""
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, u.String(), status)
}

// cookie makes a cookie for the /oauth/ paths; maxAge < 0 deletes it.
func (s *Server) cookie(name, value string, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     s.id.cookiePath,
		HttpOnly: true,
		Secure:   s.id.secure,
		SameSite: http.SameSiteLaxMode,
	}
	if maxAge < 0 {
		c.MaxAge = -1
		c.Value = ""
	} else {
		c.MaxAge = int(maxAge / time.Second)
	}
	return c
}

// crossSite reports a form post that another site made. Origin is "null"
// on our own forms, since the pages' Referrer-Policy is no-referrer (Fetch
// sends "null" for a POST under that policy), so only another named origin
// counts; Sec-Fetch-Site, which that policy leaves alone, does the rest.
func (s *Server) crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	o := r.Header.Get("Origin")
	return o != "" && o != "null" && !strings.EqualFold(o, s.id.issuerOrigin)
}

// formRequest checks a form post (POST /oauth/signin, /oauth/consent) and
// loads its request: from this site, for a live request, from the browser
// that started it, with the request's CSRF token. On a refusal it has
// written the page and returns false.
func (s *Server) formRequest(w http.ResponseWriter, r *http.Request) (*authFlow, bool) {
	ctx := r.Context()
	if s.crossSite(r) {
		s.errorPageFor(w, http.StatusForbidden, "Refused",
			"This form was sent from another site, so it was refused.", "Start again from the app.")
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.errorPageFor(w, http.StatusBadRequest, "Refused", "The form could not be read.", "Start again from the app.")
		return nil, false
	}
	id := r.PostForm.Get("request")
	var req AuthRequest
	var rev uint64
	var err error = ErrNotFound
	if validRequestID(id) {
		rev, err = s.getJSON(ctx, bucketRequests, id, &req)
	}
	if err == nil && req.CSRF == "" {
		err = ErrNotFound // spent: see spend
	}
	if err != nil {
		s.requestGone(w, err)
		return nil, false
	}
	c, err := r.Cookie(requestCookiePrefix + id)
	if err != nil || req.BrowserHash == "" ||
		subtle.ConstantTimeCompare([]byte(hashSecret(c.Value)), []byte(req.BrowserHash)) != 1 {
		s.errorPageFor(w, http.StatusForbidden, "Refused",
			"This sign-in was started in another browser (or this browser's cookies were cleared), so it cannot be finished here.",
			"Start again from the app, in this browser.")
		return nil, false
	}
	csrf := r.PostForm.Get("csrf")
	if req.CSRF == "" || subtle.ConstantTimeCompare([]byte(csrf), []byte(req.CSRF)) != 1 {
		s.errorPageFor(w, http.StatusForbidden, "Refused",
			"The form did not carry this sign-in's security token, so it was refused.", "Start again from the app.")
		return nil, false
	}
	return s.loadFlow(ctx, w, &req, rev)
}

// loadFlow finds the client and resource of a stored request; they can
// vanish while it waits (a registration expiring, a server removed).
func (s *Server) loadFlow(ctx context.Context, w http.ResponseWriter, req *AuthRequest, rev uint64) (*authFlow, bool) {
	client, err := s.lookupClient(ctx, req.ClientID)
	if err != nil {
		s.errorPageFor(w, http.StatusBadRequest, "Unknown app",
			"The app's registration is gone.", "Go back to the app and connect again.")
		return nil, false
	}
	resource, ok := s.cfg.Resources(req.Resource)
	if !ok {
		s.errorPageFor(w, http.StatusBadRequest, "Unknown server",
			"The MCP server this app asked for is no longer served here.", "")
		return nil, false
	}
	return &authFlow{req: req, rev: rev, client: client, resource: resource}, true
}

// handleConsent serves POST /oauth/consent: the person's decision.
// Approve sends the app a code, Deny an access_denied; either way the
// request is spent, so a second post of the same form finds nothing.
func (s *Server) handleConsent(w http.ResponseWriter, r *http.Request) {
	f, ok := s.formRequest(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	decision := r.PostForm.Get("decision")
	switch decision {
	case "approve", "deny":
	case "switch":
		// "Use another account": forget this browser's sign-in and ask again.
		s.endSession(ctx, w, r)
		f.req.Subject = nil
		if !s.saveRequest(ctx, w, f) {
			return
		}
		s.showSignIn(w, r, f, http.StatusOK, "", false)
		return
	default:
		s.errorPageFor(w, http.StatusBadRequest, "Refused", "The form did not say Approve or Deny.",
			"Go back to the app and connect again.")
		return
	}
	if f.req.Subject == nil {
		s.showSignIn(w, r, f, http.StatusForbidden, "Sign in before you approve or deny.", false)
		return
	}
	if err := s.admitted(*f.req.Subject); err != nil && decision == "approve" {
		s.showSignIn(w, r, f, http.StatusForbidden, sentence(err.Error()), false)
		return
	}
	if !s.spend(ctx, w, f) {
		return
	}
	http.SetCookie(w, s.cookie(requestCookiePrefix+f.req.ID, "", -1))
	if decision == "deny" {
		s.log.Info("authserver: the person denied an app", "client", f.req.ClientID, "subject", f.req.Subject.ID)
		s.redirectError(w, r, http.StatusSeeOther, f.req.RedirectURI, f.req.State,
			"access_denied", "The person declined to connect this app.")
		return
	}
	code, err := s.issueCode(ctx, f.req)
	if err != nil {
		s.log.Error("authserver: issuing a code", "client", f.req.ClientID, "err", err)
		s.redirectError(w, r, http.StatusSeeOther, f.req.RedirectURI, f.req.State,
			"server_error", "The authorization server could not issue a code; connect again.")
		return
	}
	s.log.Info("authserver: the person approved an app", "client", f.req.ClientID,
		"subject", f.req.Subject.ID, "resource", f.req.Resource)
	s.redirectBack(w, r, http.StatusSeeOther, f.req.RedirectURI, url.Values{"code": {code}}, f.req.State)
}

// remainingTTL keeps a request's expiry where GET /oauth/authorize set it
// when it is rewritten: signing in must not extend it.
func (s *Server) remainingTTL(req *AuthRequest) time.Duration {
	return req.CreatedAt.Add(s.requestTTL()).Sub(s.now())
}

// saveRequest writes f.req back if nobody else has since (the same
// request in two tabs); on a refusal it has written the page.
func (s *Server) saveRequest(ctx context.Context, w http.ResponseWriter, f *authFlow) bool {
	ttl := s.remainingTTL(f.req)
	if ttl <= 0 {
		s.requestGone(w, ErrNotFound)
		return false
	}
	rev, err := s.updateJSON(ctx, bucketRequests, f.req.ID, f.req, f.rev, ttl)
	if err != nil {
		s.requestGone(w, err)
		return false
	}
	f.rev = rev
	return true
}

// spend ends a request exactly once: the compare-and-swap lets one of two
// simultaneous decisions through, then the request is deleted.
func (s *Server) spend(ctx context.Context, w http.ResponseWriter, f *authFlow) bool {
	spent := AuthRequest{ID: f.req.ID, ClientID: f.req.ClientID, CreatedAt: f.req.CreatedAt}
	if _, err := s.updateJSON(ctx, bucketRequests, f.req.ID, spent, f.rev, time.Minute); err != nil {
		s.requestGone(w, err)
		return false
	}
	if err := s.kv.Delete(ctx, bucketRequests, f.req.ID); err != nil {
		// The spent entry carries no CSRF token, so no form can use it.
		s.log.Warn("authserver: deleting a spent request", "err", err)
	}
	s.requests.remove(f.req.ID)
	return true
}

// requestGone is the page for a request that changed under a form.
func (s *Server) requestGone(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrConflict):
		s.errorPageFor(w, http.StatusConflict, "This sign-in has ended",
			"This sign-in was used in another tab or window at the same moment.", "Go back to the app and connect again.")
	case errors.Is(err, ErrNotFound):
		s.errorPageFor(w, http.StatusBadRequest, "This sign-in has ended",
			"This sign-in request was already used, or it expired, or many newer ones from your network replaced it.", "Go back to the app and connect again.")
	default:
		s.log.Error("authserver: writing an authorization request", "err", err)
		s.errorPageFor(w, http.StatusInternalServerError, "Something went wrong",
			"The authorization server could not read or save this sign-in.", "Go back to the app and connect again.")
	}
}
