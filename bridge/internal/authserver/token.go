package authserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxFormBody bounds the token and revocation requests: a few short
// parameters.
const maxFormBody = 64 << 10

// codeEntry is what bucketCodes holds under a code's hash. An exchange
// claims the code by writing FamilyID (compare-and-swap on the entry's
// revision), so of two exchanges exactly one wins; the entry stays a
// while after, so that a second use of the code is recognised and
// revokes the family the first one created (OAuth 2.1 §4.1.3).
type codeEntry struct {
	Code
	FamilyID string `json:"family_id,omitempty"`
}

// accessEntry is what bucketAccess holds under an access token's hash.
type accessEntry struct {
	FamilyID  string    `json:"family_id"`
	ClientID  string    `json:"client_id"`
	Subject   Subject   `json:"subject"`
	Resource  string    `json:"resource"`
	Scope     string    `json:"scope,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// tokenResponse is RFC 6749 §5.1's answer.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope,omitempty"`
}

// issueCode turns an approved request, whose Subject is set, into a
// single-use authorization code for req.RedirectURI. It stores only the
// code (under its hash); the token family is created by the exchange.
func (s *Server) issueCode(ctx context.Context, req *AuthRequest) (string, error) {
	if req.Subject == nil {
		return "", errors.New("authserver: a code for a request nobody signed in to")
	}
	code := randomToken("bbc_")
	c := codeEntry{Code: Code{ClientID: req.ClientID, RedirectURI: req.RedirectURI, Resource: req.Resource, Scope: req.Scope,
		CodeChallenge: req.CodeChallenge, Subject: *req.Subject, ExpiresAt: s.now().Add(s.cfg.CodeTTL)}}
	if _, err := s.createJSON(ctx, bucketCodes, hashSecret(code), c, s.cfg.CodeTTL); err != nil {
		return "", err
	}
	return code, nil
}

// handleToken is the token endpoint: authorization_code (PKCE S256) and
// refresh_token (rotating).
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	form, oerr := readForm(w, r)
	if oerr == nil {
		var resp *tokenResponse
		resp, oerr = s.token(r, form)
		if oerr == nil {
			writeJSON(w, http.StatusOK, resp)
			return
		}
	}
	writeOAuthError(w, oerr)
}

func (s *Server) token(r *http.Request, form url.Values) (*tokenResponse, *oauthError) {
	grant := form.Get("grant_type")
	if grant == "" {
		return nil, oauthErr(errInvalidRequest, "grant_type is missing: send authorization_code or refresh_token.")
	}
	if grant != grantAuthorizationCode && grant != grantRefreshToken {
		return nil, oauthErr(errUnsupportedGrantType, "grant_type %q is not supported here; this server issues tokens for authorization_code and refresh_token.", echo(grant))
	}
	ctx := r.Context()
	client, oerr := s.authenticateClient(r, form)
	if oerr != nil {
		return nil, oerr
	}
	if !slices.Contains(clientGrants(client), grant) {
		return nil, oauthErr(errUnauthorizedClient, "This client is not registered for the %s grant (its grant_types are %s).", grant, strings.Join(clientGrants(client), ", "))
	}
	var resp *tokenResponse
	if grant == grantAuthorizationCode {
		resp, oerr = s.exchangeCode(ctx, client, form)
	} else {
		resp, oerr = s.refresh(ctx, client, form)
	}
	if oerr == nil {
		s.touchClient(ctx, client)
	}
	return resp, oerr
}

// readForm reads a bounded application/x-www-form-urlencoded body. A
// parameter sent twice is refused (RFC 6749 §3.2); parameters in the URL
// query are not read.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, *oauthError) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, oauthErr(errInvalidRequest, "Send the parameters as a form: Content-Type: application/x-www-form-urlencoded.")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &oauthError{status: http.StatusRequestEntityTooLarge, code: errInvalidRequest,
				description: fmt.Sprintf("The request body is larger than %d KiB.", maxFormBody>>10)}
		}
		return nil, oauthErr(errInvalidRequest, "The form could not be read: %v.", err)
	}
	for k, v := range r.PostForm {
		if len(v) > 1 {
			if k == "resource" {
				return nil, oauthErr(errInvalidTarget, "A token here is for one resource; send one resource parameter.")
			}
			return nil, oauthErr(errInvalidRequest, "The parameter %q is sent more than once.", echo(k))
		}
	}
	return r.PostForm, nil
}

// authenticateClient identifies the client: a public one by client_id
// alone, a confidential one by its secret in the form
// (client_secret_post) or in HTTP Basic (client_secret_basic). A client
// that is not registered (or no longer) gets 401 invalid_client, which
// is what makes claude.ai register again.
func (s *Server) authenticateClient(r *http.Request, form url.Values) (*Client, *oauthError) {
	id, secret := form.Get("client_id"), form.Get("client_secret")
	basicID, basicSecret, basic := r.BasicAuth()
	fail := func(format string, args ...any) *oauthError {
		e := oauthErr(errInvalidClient, format, args...)
		e.basic = basic
		return e
	}
	if basic {
		// RFC 6749 §2.3.1: both parts are form-encoded before Basic.
		var err1, err2 error
		basicID, err1 = url.QueryUnescape(basicID)
		basicSecret, err2 = url.QueryUnescape(basicSecret)
		if err1 != nil || err2 != nil {
			return nil, fail("The Basic credentials are not form-encoded as RFC 6749 §2.3.1 requires.")
		}
		if secret != "" {
			return nil, oauthErr(errInvalidRequest, "The client authenticates twice (HTTP Basic and client_secret); use one method.")
		}
		if id != "" && id != basicID {
			return nil, oauthErr(errInvalidRequest, "client_id in the form differs from the one in HTTP Basic.")
		}
		id, secret = basicID, basicSecret
	}
	if id == "" {
		return nil, fail("client_id is missing: a public client sends its client_id, a confidential one authenticates with client_secret_post or client_secret_basic.")
	}
	c, err := s.lookupClient(r.Context(), id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, fail("Client %q is not registered here (a registration expires %s after it is made if it obtains no token, and %s after its last use if it does); register again.",
			echo(id), s.cfg.Limits.UnusedClientTTL, s.cfg.ClientIdleTTL)
	case err != nil && strings.HasPrefix(id, "https://"):
		// cimd.go's errors are sentences about the document.
		return nil, fail("%s", capitalize(err.Error()))
	case err != nil:
		s.log.Error("authserver: reading a client", "client_id", id, "err", err)
		return nil, storeErr()
	}
	if c.SecretHash == "" {
		if secret != "" {
			return nil, fail("This client is registered as a public client (token_endpoint_auth_method none) and has no secret; send client_id alone.")
		}
		return c, nil
	}
	if secret == "" {
		return nil, fail("This client is confidential: authenticate with its client_secret (client_secret_post or client_secret_basic).")
	}
	if subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(c.SecretHash)) != 1 {
		return nil, fail("The client secret is wrong.")
	}
	return c, nil
}

// exchangeCode is the authorization_code grant.
func (s *Server) exchangeCode(ctx context.Context, client *Client, form url.Values) (*tokenResponse, *oauthError) {
	code, verifier := form.Get("code"), form.Get("code_verifier")
	if code == "" {
		return nil, oauthErr(errInvalidRequest, "code is missing.")
	}
	if verifier == "" {
		return nil, oauthErr(errInvalidRequest, "code_verifier is missing: this server requires PKCE (S256).")
	}
	if !validVerifier(verifier) {
		return nil, oauthErr(errInvalidRequest, "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~ (RFC 7636 §4.1).")
	}
	key := hashSecret(code)
	var e codeEntry
	rev, err := s.getJSON(ctx, bucketCodes, key, &e)
	if errors.Is(err, ErrNotFound) {
		return nil, oauthErr(errInvalidGrant, "The authorization code is unknown or has expired (codes live %s); sign in again.", s.cfg.CodeTTL)
	}
	if err != nil {
		s.log.Error("authserver: reading a code", "err", err)
		return nil, storeErr()
	}
	if e.FamilyID != "" {
		return nil, s.codeReused(ctx, client, e.FamilyID)
	}
	now := s.now()
	switch {
	case !now.Before(e.ExpiresAt):
		return nil, oauthErr(errInvalidGrant, "The authorization code has expired (codes live %s); sign in again.", s.cfg.CodeTTL)
	case e.ClientID != client.ID:
		return nil, oauthErr(errInvalidGrant, "The authorization code was issued to another client.")
	}
	if ru, ok := form["redirect_uri"]; ok {
		if ru[0] != e.RedirectURI {
			return nil, oauthErr(errInvalidGrant, "redirect_uri differs from the one of the authorization request.")
		}
	} else if len(client.RedirectURIs) != 1 || client.RedirectURIs[0] != e.RedirectURI {
		// Omitting it is fine only where it could not have been chosen.
		return nil, oauthErr(errInvalidRequest, "redirect_uri is missing: send the one of the authorization request.")
	}
	if e.CodeChallenge == "" || subtle.ConstantTimeCompare([]byte(s256(verifier)), []byte(e.CodeChallenge)) != 1 {
		return nil, oauthErr(errInvalidGrant, "code_verifier does not match the code_challenge of the authorization request.")
	}
	if oerr := s.checkResource(form, e.Resource); oerr != nil {
		return nil, oerr
	}

	// Claim the code: of two exchanges racing here, one update wins.
	fam := &Family{ID: randomToken("bbf_"), ClientID: client.ID, Subject: e.Subject, Resource: e.Resource,
		Scope: grantScope(e.Scope), CreatedAt: now}
	e.FamilyID = fam.ID
	if _, err := s.updateJSON(ctx, bucketCodes, key, e, rev, s.cfg.CodeTTL); err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			var other codeEntry
			if _, err := s.getJSON(ctx, bucketCodes, key, &other); err == nil && other.FamilyID != "" {
				return nil, s.codeReused(ctx, client, other.FamilyID)
			}
			return nil, oauthErr(errInvalidGrant, "The authorization code was used by another request at the same moment.")
		}
		s.log.Error("authserver: claiming a code", "err", err)
		return nil, storeErr()
	}

	var refresh string
	if slices.Contains(clientGrants(client), grantRefreshToken) {
		refresh = randomToken("bbr_")
		fam.Current = hashSecret(refresh)
	}
	// Create, not put: a replay of the code that came in between may have
	// left a revoked tombstone under this id, and then nothing is issued.
	if _, err := s.createJSON(ctx, bucketFamilies, fam.ID, fam, s.familyTTL()); err != nil {
		if errors.Is(err, ErrExists) {
			return nil, oauthErr(errInvalidGrant, "The authorization code was used twice; the tokens issued for it are revoked. Sign in again.")
		}
		s.log.Error("authserver: storing a token family", "err", err)
		return nil, storeErr()
	}
	s.log.Info("authserver: tokens issued", "client_id", client.ID, "family", fam.ID, "subject", fam.Subject.ID, "resource", fam.Resource)
	return s.issueTokens(ctx, fam, refresh, fam.Scope)
}

// codeReused answers a second use of a code, revoking what the first
// one produced.
func (s *Server) codeReused(ctx context.Context, client *Client, familyID string) *oauthError {
	s.log.Warn("authserver: authorization code used twice; revoking its tokens", "client_id", client.ID, "family", familyID)
	if err := s.revokeFamily(ctx, familyID); err != nil {
		s.log.Error("authserver: revoking a family", "family", familyID, "err", err)
	}
	return oauthErr(errInvalidGrant, "The authorization code was already used; the tokens issued for it are revoked. Sign in again.")
}

// refresh is the refresh_token grant: each refresh token works once and
// is replaced by a new one; a second use of one is taken as theft and
// ends the whole family (OAuth 2.1 §4.3.1, refresh token rotation), except
// for the same client within Config.RefreshReuseGrace of the rotation,
// which gets the same new pair again (grace.go): two windows of one app,
// or a retry after a lost answer, refresh with one token at once.
func (s *Server) refresh(ctx context.Context, client *Client, form url.Values) (*tokenResponse, *oauthError) {
	token := form.Get("refresh_token")
	if token == "" {
		return nil, oauthErr(errInvalidRequest, "refresh_token is missing.")
	}
	hash := hashSecret(token)
	var famID string
	if _, err := s.getJSON(ctx, bucketRefresh, hash, &famID); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, oauthErr(errInvalidGrant, "The refresh token is unknown or has expired; sign in again.")
		}
		s.log.Error("authserver: reading a refresh token", "err", err)
		return nil, storeErr()
	}
	var fam Family
	rev, err := s.getJSON(ctx, bucketFamilies, famID, &fam)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, oauthErr(errInvalidGrant, "The refresh token has expired; sign in again.")
		}
		s.log.Error("authserver: reading a family", "family", famID, "err", err)
		return nil, storeErr()
	}
	switch {
	case fam.Revoked:
		return nil, oauthErr(errInvalidGrant, "The refresh token was revoked; sign in again.")
	case fam.Current != hash:
		// A replaced token: from another client, or after the grace, it
		// ends the family whoever sends it.
		return s.reusedRefresh(ctx, client, &fam, token)
	case fam.ClientID != client.ID:
		return nil, oauthErr(errInvalidGrant, "The refresh token was issued to another client.")
	}
	if oerr := s.checkResource(form, fam.Resource); oerr != nil {
		return nil, oerr
	}
	scope := fam.Scope
	if req, ok := form["scope"]; ok {
		granted := strings.Fields(fam.Scope)
		for _, sc := range strings.Fields(req[0]) {
			if !slices.Contains(granted, sc) {
				return nil, oauthErr(errInvalidScope, "Scope %q was not granted at sign-in; a refresh can only narrow the scope.", echo(sc))
			}
		}
		if narrowed := strings.Join(strings.Fields(req[0]), " "); narrowed != "" {
			scope = narrowed
		}
	}

	// The new pair is stored before the family names it, so that a
	// request replaying it in the grace finds both tokens in place.
	next := randomToken("bbr_")
	resp, oerr := s.issueTokens(ctx, &fam, next, scope)
	if oerr != nil {
		return nil, oerr
	}
	fam.Current = hashSecret(next)
	fam.Rotation = s.newRotation(hash, token, resp)
	if _, err := s.updateJSON(ctx, bucketFamilies, famID, fam, rev, s.familyTTL()); err != nil {
		s.dropTokens(ctx, resp)
		if errors.Is(err, ErrConflict) {
			// Another request rotated (or revoked) the family since it was
			// read: this token is no longer the current one.
			var cur Family
			if _, err := s.getJSON(ctx, bucketFamilies, famID, &cur); err != nil {
				return nil, s.refreshReused(ctx, client, famID)
			}
			return s.reusedRefresh(ctx, client, &cur, token)
		}
		if errors.Is(err, ErrNotFound) {
			return nil, oauthErr(errInvalidGrant, "The refresh token has expired; sign in again.")
		}
		s.log.Error("authserver: rotating a refresh token", "family", famID, "err", err)
		return nil, storeErr()
	}
	return resp, nil
}

// reusedRefresh answers a refresh token that is no longer its family's
// current one: the pair it was replaced by, for the same client within
// the grace, else the family's end.
func (s *Server) reusedRefresh(ctx context.Context, client *Client, fam *Family, token string) (*tokenResponse, *oauthError) {
	if fam.Revoked {
		return nil, oauthErr(errInvalidGrant, "The refresh token was revoked; sign in again.")
	}
	if resp := s.replayRotation(fam, client, token); resp != nil {
		s.log.Info("authserver: refresh token reused within its grace; the same new tokens are sent again",
			"client_id", client.ID, "family", fam.ID)
		return resp, nil
	}
	return nil, s.refreshReused(ctx, client, fam.ID)
}

// refreshReused answers a use of a refresh token that is no longer the
// current one of its family: the family ends, for the thief and the
// owner both, and the owner signs in again.
func (s *Server) refreshReused(ctx context.Context, client *Client, familyID string) *oauthError {
	s.log.Warn("authserver: refresh token used twice; revoking its family", "client_id", client.ID, "family", familyID)
	if err := s.revokeFamily(ctx, familyID); err != nil {
		s.log.Error("authserver: revoking a family", "family", familyID, "err", err)
	}
	return oauthErr(errInvalidGrant, "The refresh token was already used; every token of this sign-in is revoked. Sign in again.")
}

// checkResource checks an RFC 8707 resource parameter, when sent,
// against the grant's, and that the grant's resource is still served.
func (s *Server) checkResource(form url.Values, granted string) *oauthError {
	if rs, ok := form["resource"]; ok && rs[0] != granted {
		return oauthErr(errInvalidTarget, "This grant is for the resource %s, not %s; sign in to that one separately.", granted, echo(rs[0]))
	}
	if _, ok := s.cfg.Resources(granted); !ok {
		return oauthErr(errInvalidTarget, "The resource %s is no longer served here.", granted)
	}
	return nil
}

// issueTokens stores a new access token (and refresh, when not "") of
// fam and answers with them.
func (s *Server) issueTokens(ctx context.Context, fam *Family, refresh, scope string) (*tokenResponse, *oauthError) {
	access := randomToken("bba_")
	ttl := s.cfg.AccessTokenTTL
	a := accessEntry{FamilyID: fam.ID, ClientID: fam.ClientID, Subject: fam.Subject, Resource: fam.Resource,
		Scope: scope, ExpiresAt: s.now().Add(ttl)}
	if _, err := s.createJSON(ctx, bucketAccess, hashSecret(access), a, ttl); err != nil {
		s.log.Error("authserver: storing an access token", "family", fam.ID, "err", err)
		return nil, storeErr()
	}
	if refresh != "" {
		// Old refresh hashes keep pointing at the family until they
		// expire, so a reuse is recognised as one.
		if _, err := s.createJSON(ctx, bucketRefresh, hashSecret(refresh), fam.ID, s.cfg.RefreshTokenTTL); err != nil {
			s.log.Error("authserver: storing a refresh token", "family", fam.ID, "err", err)
			return nil, storeErr()
		}
	}
	return &tokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(ttl / time.Second),
		RefreshToken: refresh, Scope: scope}, nil
}

// dropTokens deletes a pair issueTokens stored that will not be handed
// out (the rotation it was for lost a race); no one holds it, so a
// failure only leaves entries that expire.
func (s *Server) dropTokens(ctx context.Context, resp *tokenResponse) {
	for bucket, tok := range map[string]string{bucketAccess: resp.AccessToken, bucketRefresh: resp.RefreshToken} {
		if tok == "" {
			continue
		}
		if err := s.kv.Delete(ctx, bucket, hashSecret(tok)); err != nil && !errors.Is(err, ErrNotFound) {
			s.log.Warn("authserver: deleting tokens of a lost rotation", "bucket", bucket, "err", err)
		}
	}
}

// familyTTL is how long a family outlives its last use: as long as its
// refresh token, and at least as long as an access token of it.
func (s *Server) familyTTL() time.Duration {
	return max(s.cfg.RefreshTokenTTL, s.cfg.AccessTokenTTL)
}

// revokeFamily marks a family revoked, ending its access and refresh
// tokens. A family not yet stored gets a revoked tombstone, which makes
// the exchange about to create it fail.
func (s *Server) revokeFamily(ctx context.Context, id string) error {
	for range 16 {
		var fam Family
		rev, err := s.getJSON(ctx, bucketFamilies, id, &fam)
		if errors.Is(err, ErrNotFound) {
			_, err = s.createJSON(ctx, bucketFamilies, id, Family{ID: id, Revoked: true, CreatedAt: s.now()}, s.familyTTL())
			if errors.Is(err, ErrExists) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		if fam.Revoked {
			return nil
		}
		fam.Revoked = true
		fam.Current = ""
		fam.Rotation = nil
		if _, err = s.updateJSON(ctx, bucketFamilies, id, fam, rev, s.familyTTL()); errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			continue
		}
		return err
	}
	return fmt.Errorf("authserver: family %s kept changing while being revoked", id)
}

// clientGrants are the grants a client may use. A client without
// grant_types (a metadata document that leaves them out) gets what a
// registration without them gets.
func clientGrants(c *Client) []string {
	if len(c.GrantTypes) == 0 {
		return []string{grantAuthorizationCode, grantRefreshToken}
	}
	return c.GrantTypes
}

// capitalize upper-cases the first letter of an error's text.
func capitalize(msg string) string {
	if msg == "" {
		return msg
	}
	r, n := utf8.DecodeRuneInString(msg)
	return string(unicode.ToUpper(r)) + msg[n:]
}

// s256 is RFC 7636's S256 transform.
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// validVerifier: RFC 7636 §4.1's 43 to 128 unreserved characters.
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}
