package authserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Signing in with an upstream OpenID Connect provider: the sign-in page's
// "Sign in with …" button posts action=oidc; this server sends the browser
// to the provider (authorization code, PKCE S256, state, nonce) and takes
// it back at GET /oauth/oidc/callback, where the ID token is verified and
// the person checked against the allow lists.
//
// The upstream state is "<request id>.<random>": the id finds the request,
// whose UpstreamState is the SHA-256 of the whole state, and the browser
// cookie of that request must come with it, so a callback cannot be
// replayed, or finished in another browser.

const oidcTimeout = 15 * time.Second

// upstream is the configured provider, discovered on first use and then
// kept: a provider that is down when the server starts must not stop it.
type upstream struct {
	cfg         OIDCConfig
	name        string
	redirectURL string
	client      *http.Client

	mu       sync.Mutex
	provider *oidc.Provider
	// failedAt is when discovery last failed: sign-in pages do not wait on
	// a provider that was down a moment ago (see authEndpoint).
	failedAt time.Time
}

// discoveryPause is how long after a failed discovery the sign-in page
// shows the provider button without trying again.
const discoveryPause = 30 * time.Second

func newUpstream(cfg OIDCConfig, redirectURL string) (*upstream, error) {
	iss, err := url.Parse(cfg.Issuer)
	if err != nil || iss.Host == "" {
		return nil, fmt.Errorf("authserver: the OIDC issuer %q is not a URL", cfg.Issuer)
	}
	if iss.Scheme != "https" && !(iss.Scheme == "http" && loopbackHost(iss.Hostname())) {
		return nil, fmt.Errorf("authserver: the OIDC issuer %q must be https (http only on a loopback host)", cfg.Issuer)
	}
	if cfg.ClientID == "" {
		return nil, errors.New("authserver: the OIDC client id is required")
	}
	if !anyNonEmpty(cfg.AllowedSubjects) && !anyNonEmpty(cfg.AllowedEmails) {
		return nil, errors.New("authserver: OIDC needs allowed subjects or allowed emails: " +
			"without them anyone with an account at the provider could sign in")
	}
	u := &upstream{cfg: cfg, name: cfg.Name, redirectURL: redirectURL, client: cfg.HTTPClient}
	if u.name == "" {
		u.name = iss.Hostname()
	}
	if u.client == nil {
		u.client = &http.Client{Timeout: oidcTimeout}
	}
	return u, nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

func anyNonEmpty(list []string) bool {
	for _, v := range list {
		if strings.TrimSpace(v) != "" {
			return true
		}
	}
	return false
}

// ctx carries the provider's HTTP client to go-oidc and x/oauth2.
func (u *upstream) ctx(ctx context.Context) context.Context { return oidc.ClientContext(ctx, u.client) }

// discover reads the provider's discovery document once; a failure is
// retried on the next use.
func (u *upstream) discover(ctx context.Context) (*oidc.Provider, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.provider != nil {
		return u.provider, nil
	}
	ctx, cancel := context.WithTimeout(ctx, oidcTimeout)
	defer cancel()
	p, err := oidc.NewProvider(u.ctx(ctx), u.cfg.Issuer)
	if err != nil {
		u.failedAt = time.Now()
		return nil, err
	}
	u.provider = p
	return p, nil
}

func (u *upstream) recentlyFailed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.provider == nil && !u.failedAt.IsZero() && time.Since(u.failedAt) < discoveryPause
}

// authEndpoint is the provider's authorization endpoint (for the sign-in
// page's form-action). The button's post tries discovery again anyway.
func (u *upstream) authEndpoint(ctx context.Context) (string, error) {
	if u.recentlyFailed() {
		return "", errors.New("the provider's discovery failed a moment ago")
	}
	p, err := u.discover(ctx)
	if err != nil {
		return "", err
	}
	return p.Endpoint().AuthURL, nil
}

func (u *upstream) oauth2(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     u.cfg.ClientID,
		ClientSecret: u.cfg.ClientSecret,
		Endpoint:     p.Endpoint(),
		RedirectURL:  u.redirectURL,
		Scopes:       []string{oidc.ScopeOpenID, "email", "profile"},
	}
}

// startOIDC sends the browser to the provider, remembering on the request
// what the callback must see again.
func (s *Server) startOIDC(w http.ResponseWriter, r *http.Request, f *authFlow) {
	up := s.id.oidc
	p, err := up.discover(r.Context())
	if err != nil {
		s.log.Warn("authserver: OIDC discovery", "issuer", up.cfg.Issuer, "err", err)
		s.showSignIn(w, r, f, http.StatusBadGateway, up.name+" cannot be reached right now. Try again in a moment.", false)
		return
	}
	state := f.req.ID + "." + randomToken("")
	nonce := randomToken("")
	verifier := oauth2.GenerateVerifier()
	f.req.UpstreamState, f.req.UpstreamNonce, f.req.UpstreamVerifier = hashSecret(state), nonce, verifier
	if !s.saveRequest(r.Context(), w, f) {
		return
	}
	target := up.oauth2(p).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// handleOIDCCallback serves GET /oauth/oidc/callback: the provider sends
// the browser back with a code (or an error) and the state.
func (s *Server) handleOIDCCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	up := s.id.oidc
	if up == nil {
		s.errorPageFor(w, http.StatusNotFound, "Not set up", "Signing in with a provider is not set up here.", "")
		return
	}
	q := r.URL.Query()
	id, _, _ := strings.Cut(q.Get("state"), ".")
	var req AuthRequest
	var rev uint64
	err := ErrNotFound
	if validRequestID(id) {
		rev, err = s.getJSON(ctx, bucketRequests, id, &req)
	}
	if err == nil && req.CSRF == "" {
		err = ErrNotFound // spent
	}
	if err != nil {
		s.requestGone(w, err)
		return
	}
	c, cerr := r.Cookie(requestCookiePrefix + id)
	if cerr != nil || subtle.ConstantTimeCompare([]byte(hashSecret(c.Value)), []byte(req.BrowserHash)) != 1 {
		s.errorPageFor(w, http.StatusForbidden, "Refused",
			"This sign-in was started in another browser (or this browser's cookies were cleared), so it cannot be finished here.",
			"Start again from the app, in this browser.")
		return
	}
	if req.UpstreamState == "" ||
		subtle.ConstantTimeCompare([]byte(hashSecret(q.Get("state"))), []byte(req.UpstreamState)) != 1 {
		s.errorPageFor(w, http.StatusBadRequest, "This sign-in has ended",
			"This return from "+up.name+" was already used, or it does not belong to the current sign-in.",
			"Go back to the app and connect again.")
		return
	}
	f, ok := s.loadFlow(ctx, w, &req, rev)
	if !ok {
		return
	}
	// The state is single use: clear it before anything else can fail.
	nonce, verifier := req.UpstreamNonce, req.UpstreamVerifier
	req.UpstreamState, req.UpstreamNonce, req.UpstreamVerifier = "", "", ""
	if !s.saveRequest(ctx, w, f) {
		return
	}

	if e := q.Get("error"); e != "" {
		why := q.Get("error_description")
		if why == "" {
			why = e
		}
		s.log.Info("authserver: the OIDC provider refused", "error", e)
		s.showSignIn(w, r, f, http.StatusForbidden, up.name+" did not sign you in: "+sentence(why), false)
		return
	}
	code := q.Get("code")
	if code == "" {
		s.showSignIn(w, r, f, http.StatusBadRequest, up.name+" sent you back without a sign-in code. Try again.", false)
		return
	}
	p, err := up.discover(ctx)
	if err != nil {
		s.log.Warn("authserver: OIDC discovery", "issuer", up.cfg.Issuer, "err", err)
		s.showSignIn(w, r, f, http.StatusBadGateway, up.name+" cannot be reached right now. Try again in a moment.", false)
		return
	}
	xctx, cancel := context.WithTimeout(up.ctx(ctx), oidcTimeout)
	defer cancel()
	tok, err := up.oauth2(p).Exchange(xctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		s.log.Warn("authserver: OIDC code exchange", "issuer", up.cfg.Issuer, "err", err)
		s.showSignIn(w, r, f, http.StatusBadGateway, "Signing in with "+up.name+" could not be finished: the provider did not accept the code. Try again.", false)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		s.showSignIn(w, r, f, http.StatusBadGateway, up.name+" sent no ID token, so who you are is unknown.", false)
		return
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: up.cfg.ClientID}).Verify(xctx, raw)
	if err != nil {
		s.log.Warn("authserver: OIDC ID token refused", "issuer", up.cfg.Issuer, "err", err)
		s.showSignIn(w, r, f, http.StatusBadGateway, "The ID token from "+up.name+" did not verify, so the sign-in was refused.", false)
		return
	}
	if nonce == "" || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		s.log.Warn("authserver: OIDC ID token with the wrong nonce", "issuer", up.cfg.Issuer)
		s.showSignIn(w, r, f, http.StatusForbidden, "The ID token from "+up.name+" belongs to another sign-in, so it was refused.", false)
		return
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified any    `json:"email_verified"`
	}
	if err := idt.Claims(&claims); err != nil {
		s.showSignIn(w, r, f, http.StatusBadGateway, "The ID token from "+up.name+" could not be read.", false)
		return
	}
	// Some providers send email_verified as a string.
	verified := claims.EmailVerified == true || claims.EmailVerified == "true"
	who := idt.Subject
	if claims.Email != "" {
		who = claims.Email
	}
	if !up.allowed(idt.Subject, claims.Email, verified) {
		s.log.Warn("authserver: OIDC account not allowed", "issuer", idt.Issuer, "subject", idt.Subject)
		msg := "The account " + who + " may not sign in here."
		if claims.Email != "" && !verified && containsFold(up.cfg.AllowedEmails, claims.Email) {
			msg = "The account " + who + " may not sign in here: " + up.name + " has not verified that email address."
		}
		s.showSignIn(w, r, f, http.StatusForbidden, msg, false)
		return
	}
	display := idt.Subject
	if verified && claims.Email != "" {
		display = claims.Email
	}
	s.signedIn(w, r, f, Subject{ID: "oidc:" + idt.Issuer + "#" + idt.Subject, Display: display, Method: "oidc"})
}

// allowed: a listed subject, or a listed email the provider has verified.
func (u *upstream) allowed(sub, email string, emailVerified bool) bool {
	if sub != "" && contains(u.cfg.AllowedSubjects, sub) {
		return true
	}
	return emailVerified && email != "" && containsFold(u.cfg.AllowedEmails, email)
}

func containsFold(list []string, v string) bool {
	for _, x := range list {
		if strings.EqualFold(strings.TrimSpace(x), v) {
			return true
		}
	}
	return false
}
