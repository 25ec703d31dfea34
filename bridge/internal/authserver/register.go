package authserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Grant types and client authentication methods this server knows.
const (
	grantAuthorizationCode = "authorization_code"
	grantRefreshToken      = "refresh_token"

	authNone        = "none"
	authSecretPost  = "client_secret_post"
	authSecretBasic = "client_secret_basic"
)

// Limits of a registration.
const (
	maxRegistrationBody = 64 << 10
	maxRedirectURIs     = 20
	maxURILen           = 2048
	maxClientNameRunes  = 100
	// registrationRetryAfter is the Retry-After, in seconds, of a refusal
	// at MaxClients, which only clients that signed in can fill: a slot
	// frees when one goes unused for ClientIdleTTL, which nothing predicts
	// better than "later".
	registrationRetryAfter = "3600"
	// registrationRateRetryAfter is the Retry-After, in seconds, of a
	// refusal by the per-address rate: its window is a minute.
	registrationRateRetryAfter = "60"
)

// fetchCIMD resolves a client id that is an https URL through its Client
// ID Metadata Document. cimd.go sets it from its init; while it is nil,
// such ids are unknown clients and the metadata does not announce
// client_id_metadata_document_supported.
var fetchCIMD func(s *Server, ctx context.Context, id string) (*Client, error)

// lookupClient returns a registered client, or for an https client id
// the Client of its metadata document (cimd.go): ErrNotFound when there
// is none. Other errors are the store's, or why a metadata document
// could not be used.
func (s *Server) lookupClient(ctx context.Context, clientID string) (*Client, error) {
	if strings.HasPrefix(clientID, "https://") {
		if fetchCIMD == nil {
			return nil, ErrNotFound
		}
		return fetchCIMD(s, ctx, clientID)
	}
	var c Client
	if _, err := s.getJSON(ctx, bucketClients, clientID, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// touchClient moves a registration's LastUsedAt and its expiry: a client
// that keeps getting tokens keeps its registration. The first token marks
// it signed in: from then on it lives ClientIdleTTL from its last use, no
// longer UnusedClientTTL, and no new registration can push it out.
func (s *Server) touchClient(ctx context.Context, c *Client) {
	if c.MetadataDocument {
		return // not stored here: its document is the registration
	}
	var cur Client
	rev, err := s.getJSON(ctx, bucketClients, c.ID, &cur)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			s.log.Warn("authserver: reading a client to mark it used", "client_id", c.ID, "err", err)
		}
		return
	}
	cur.LastUsedAt = s.now()
	cur.SignedIn = true
	// A conflict means another request just touched it: that is enough.
	if _, err := s.updateJSON(ctx, bucketClients, c.ID, cur, rev, s.cfg.ClientIdleTTL); err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound) {
		s.log.Warn("authserver: marking a client used", "client_id", c.ID, "err", err)
		return
	}
	s.pendingClients.remove(c.ID)
}

// signedIn reports a registration that has obtained a token. One stored
// before SignedIn existed counts when its LastUsedAt moved.
func (c *Client) signedIn() bool {
	return c.SignedIn || c.LastUsedAt.After(c.CreatedAt)
}

// registrationResponse is RFC 7591 §3.2.1's answer. The SDK's
// ClientRegistrationResponse leaves client_secret_expires_at out when it
// is 0, which the RFC requires whenever a secret is issued ("0: never").
type registrationResponse struct {
	oauthex.ClientRegistrationMetadata
	ClientID              string `json:"client_id"`
	ClientSecret          string `json:"client_secret,omitempty"`
	ClientIDIssuedAt      int64  `json:"client_id_issued_at"`
	ClientSecretExpiresAt int64  `json:"client_secret_expires_at"`
}

// handleRegister is RFC 7591 dynamic client registration.
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	meta, oerr := readRegistration(w, r)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	c, oerr := checkRegistration(meta)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}

	now := s.now()
	addr := s.id.address(r)
	if !s.registrations.Allow(addr) {
		s.log.Warn("authserver: registration refused: per-address limit", "address", addr, "per_minute", s.cfg.Limits.RegistrationsPerMinute)
		w.Header().Set("Retry-After", registrationRateRetryAfter)
		writeOAuthError(w, &oauthError{status: http.StatusTooManyRequests, code: errTemporarilyUnavailable,
			description: fmt.Sprintf("Your network registered %d clients with this server in the last minute, which is its limit; wait a minute and try again.",
				s.cfg.Limits.RegistrationsPerMinute)})
		return
	}

	var secret string
	if c.TokenEndpointAuthMethod != authNone {
		secret = randomToken("bbs_")
		c.SecretHash = hashSecret(secret)
	}
	c.ID = randomToken("bbcl_")
	c.CreatedAt, c.LastUsedAt = now, now
	c.Address = addr

	if oerr := s.storeClient(r.Context(), c); oerr != nil {
		if oerr.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", registrationRetryAfter)
		}
		writeOAuthError(w, oerr)
		return
	}
	s.log.Info("authserver: client registered", "client_id", c.ID, "client_name", c.Name,
		"token_endpoint_auth_method", c.TokenEndpointAuthMethod)

	writeJSON(w, http.StatusCreated, registrationResponse{
		ClientRegistrationMetadata: oauthex.ClientRegistrationMetadata{
			RedirectURIs:            c.RedirectURIs,
			TokenEndpointAuthMethod: c.TokenEndpointAuthMethod,
			GrantTypes:              c.GrantTypes,
			ResponseTypes:           []string{"code"},
			ClientName:              c.Name,
			ClientURI:               c.URI,
			Scope:                   c.Scope,
		},
		ClientID:         c.ID,
		ClientSecret:     secret,
		ClientIDIssuedAt: now.Unix(),
	})
}

// storeClient stores a new registration. At MaxClients live ones, those
// that never obtained a token make room (pending.go); only when every one
// has signed in is the registration refused.
func (s *Server) storeClient(ctx context.Context, c *Client) *oauthError {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	s.loadPending(ctx)
	max := s.cfg.Limits.MaxClients
	reloaded := false
	for {
		n, err := s.kv.Count(ctx, bucketClients)
		if err != nil {
			s.log.Error("authserver: counting clients", "err", err)
			return storeErr()
		}
		if n < max {
			break
		}
		if s.evictClients(ctx, n-max+1) > 0 {
			continue // count again: an evicted one may have been gone already
		}
		if !reloaded {
			// The index may not know them all: written by another node,
			// or by a version that kept unused ones for ClientIdleTTL.
			reloaded = true
			if err := s.loadClients(ctx); err == nil {
				continue
			}
		}
		s.log.Warn("authserver: registration refused: every client slot holds a client that signed in", "max_clients", max)
		// 503, not 400 (nothing is wrong with the metadata) nor 429 (this
		// caller has not sent too many requests): the server is full for
		// everyone until a client that signed in goes unused.
		return &oauthError{status: http.StatusServiceUnavailable, code: errTemporarilyUnavailable,
			description: fmt.Sprintf("This server already holds its maximum of %d client registrations, all of apps that signed in; one frees when such an app goes unused for %s. Try again later, or ask its operator to raise the limit (max_clients).",
				max, s.cfg.ClientIdleTTL)}
	}
	ttl := s.cfg.Limits.UnusedClientTTL
	if _, err := s.createJSON(ctx, bucketClients, c.ID, c, ttl); err != nil {
		s.log.Error("authserver: storing a client", "client_id", c.ID, "err", err)
		return storeErr()
	}
	s.pendingClients.add(c.Address, c.ID, c.CreatedAt, c.CreatedAt.Add(ttl))
	return nil
}

// evictClients deletes up to n registrations that never obtained a token
// and returns how many it deleted.
func (s *Server) evictClients(ctx context.Context, n int) int {
	ids := s.pendingClients.evict(n, s.now())
	for _, id := range ids {
		if err := s.kv.Delete(ctx, bucketClients, id); err != nil {
			s.log.Warn("authserver: deleting an unused registration", "client_id", id, "err", err)
		}
	}
	if len(ids) > 0 {
		s.log.Debug("authserver: unused registrations made room for a new one", "deleted", len(ids))
	}
	return len(ids)
}

// readRegistration reads the JSON body of a registration request.
func readRegistration(w http.ResponseWriter, r *http.Request) (*oauthex.ClientRegistrationMetadata, *oauthError) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, oauthErr(errInvalidClientMetadata, "Send the client metadata as a JSON object with Content-Type: application/json (RFC 7591 §3.1).")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRegistrationBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &oauthError{status: http.StatusRequestEntityTooLarge, code: errInvalidClientMetadata,
				description: fmt.Sprintf("The client metadata is larger than %d KiB, which is more than any client needs.", maxRegistrationBody>>10)}
		}
		return nil, oauthErr(errInvalidRequest, "The request body could not be read.")
	}
	var meta oauthex.ClientRegistrationMetadata
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&meta); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return nil, oauthErr(errInvalidClientMetadata, "The client metadata field %q has the wrong type (%s where %s belongs).", te.Field, te.Value, te.Type)
		}
		return nil, oauthErr(errInvalidClientMetadata, "The client metadata is not a JSON object: %v.", err)
	}
	if dec.More() {
		return nil, oauthErr(errInvalidClientMetadata, "The body holds more than one JSON value; send one object.")
	}
	return &meta, nil
}

// checkRegistration validates requested metadata and returns the client
// this server registers: defaults filled in, untrusted text bounded.
func checkRegistration(m *oauthex.ClientRegistrationMetadata) (*Client, *oauthError) {
	if len(m.RedirectURIs) == 0 {
		return nil, oauthErr(errInvalidRedirectURI, "redirect_uris is required: the URLs this client's authorization responses may be sent to.")
	}
	if len(m.RedirectURIs) > maxRedirectURIs {
		return nil, oauthErr(errInvalidRedirectURI, "%d redirect_uris is more than the %d this server keeps for one client.", len(m.RedirectURIs), maxRedirectURIs)
	}
	for _, u := range m.RedirectURIs {
		if msg := checkRedirectURI(u); msg != "" {
			return nil, oauthErr(errInvalidRedirectURI, "%s", msg)
		}
	}

	// RFC 7591 §2's default is client_secret_basic.
	method := m.TokenEndpointAuthMethod
	if method == "" {
		method = authSecretBasic
	}
	if method != authNone && method != authSecretPost && method != authSecretBasic {
		return nil, oauthErr(errInvalidClientMetadata, "token_endpoint_auth_method %q is not supported; use none (a public client with PKCE), client_secret_post or client_secret_basic.", echo(method))
	}

	// RFC 7591's default is authorization_code alone; both are filled in
	// because every MCP client expects to refresh, and the response says
	// what was registered.
	grants := m.GrantTypes
	if len(grants) == 0 {
		grants = []string{grantAuthorizationCode, grantRefreshToken}
	}
	for _, g := range grants {
		if g != grantAuthorizationCode && g != grantRefreshToken {
			return nil, oauthErr(errInvalidClientMetadata, "grant_types %q is not supported; this server issues tokens only for authorization_code (with PKCE) and refresh_token.", echo(g))
		}
	}
	if !slices.Contains(grants, grantAuthorizationCode) {
		return nil, oauthErr(errInvalidClientMetadata, "grant_types must include authorization_code: it is the only way this server issues a first token.")
	}
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			return nil, oauthErr(errInvalidClientMetadata, "response_types %q is not supported; only code is (OAuth 2.1 has no implicit flow).", echo(rt))
		}
	}

	if m.ClientURI != "" {
		u, err := url.Parse(m.ClientURI)
		if err != nil || u.Scheme != "https" || u.Host == "" || len(m.ClientURI) > maxURILen {
			return nil, oauthErr(errInvalidClientMetadata, "client_uri must be an https URL (it may be shown as a link on the consent page).")
		}
	}

	return &Client{
		Name:                    cleanClientName(m.ClientName),
		URI:                     m.ClientURI,
		RedirectURIs:            slices.Clone(m.RedirectURIs),
		GrantTypes:              dedupe(grants),
		TokenEndpointAuthMethod: method,
		Scope:                   knownScopes(m.Scope),
	}, nil
}

// checkRedirectURI returns why raw cannot be a redirect URI, or "".
func checkRedirectURI(raw string) string {
	if len(raw) > maxURILen {
		return fmt.Sprintf("A redirect URI of %d bytes is longer than the %d this server accepts.", len(raw), maxURILen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return fmt.Sprintf("Redirect URI %q is not an absolute URL.", echo(raw))
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return fmt.Sprintf("Redirect URI %q has a fragment, which a redirect URI may not have (RFC 6749 §3.1.2).", echo(raw))
	}
	if u.User != nil {
		return fmt.Sprintf("Redirect URI %q carries user info, which this server refuses.", echo(raw))
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return fmt.Sprintf("Redirect URI %q has no host.", echo(raw))
		}
		return ""
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return "" // a native app's loopback listener (RFC 8252 §7.3)
		}
		return fmt.Sprintf("Redirect URI %q uses http on a host other than this machine's loopback; use https (http is accepted only for 127.0.0.1, [::1] and localhost).", echo(raw))
	}
	return checkPrivateUseScheme(raw, u)
}

// refusedSchemes are schemes that name no native app: a browser runs,
// reads or shows them itself (RFC 8252 §8.4 asks the server to refuse
// redirects that could run script or reach other content).
var refusedSchemes = []string{"javascript", "vbscript", "data", "file", "about", "blob", "filesystem",
	"view-source", "ws", "wss", "ftp", "mailto", "tel", "sms", "intent", "chrome", "chrome-extension",
	"moz-extension", "edge", "opera", "resource", "jar"}

// checkPrivateUseScheme accepts a native app's private-use URI scheme
// (RFC 8252 §7.1), as Cursor (cursor://…) and VS Code (vscode://…) sign in
// to MCP servers: a scheme of RFC 3986 syntax naming no browser-handled
// content. Any app on a device may claim such a scheme, which is why the
// code is worth nothing without its PKCE verifier (S256 is required of
// every client here, RFC 8252 §8.1).
func checkPrivateUseScheme(raw string, u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	if slices.Contains(refusedSchemes, scheme) || !validScheme(scheme) {
		return fmt.Sprintf("Redirect URI %q uses the scheme %q, which names no app: use https, http on 127.0.0.1, [::1] or localhost, or an app's own scheme (com.example.app:/callback, cursor://…).", echo(raw), echo(u.Scheme))
	}
	if u.Opaque != "" && !strings.HasPrefix(u.Opaque, "/") {
		// "app:callback" has no path an app could route on.
		return fmt.Sprintf("Redirect URI %q has no path after its scheme; write it as %s:/path or %s://host/path (RFC 8252 §7.1).", echo(raw), echo(u.Scheme), echo(u.Scheme))
	}
	return ""
}

// validScheme: RFC 3986 §3.1, ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ),
// already lower-cased; at most 64 characters.
func validScheme(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// cleanClientName bounds a client's self-chosen name, which the consent
// page shows: no control or formatting characters (no right-to-left
// overrides to disguise it), at most maxClientNameRunes runes.
func cleanClientName(name string) string {
	var b strings.Builder
	n := 0
	for _, r := range strings.TrimSpace(name) {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		if n == maxClientNameRunes {
			break
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}

// knownScopes keeps the scopes of a space-separated list this server
// knows, in order, once each (RFC 7591 lets the server register fewer).
func knownScopes(scope string) string {
	var keep []string
	for _, sc := range strings.Fields(scope) {
		if slices.Contains(scopesSupported, sc) && !slices.Contains(keep, sc) {
			keep = append(keep, sc)
		}
	}
	return strings.Join(keep, " ")
}

// grantScope is the scope a sign-in grants for the one requested (RFC
// 6749 §3.3): the scopes this server knows, once each, and "mcp" when
// none is left. An unknown scope ("admin") is not granted; the token
// response's scope says what was, so the client is not misled.
func grantScope(requested string) string {
	if s := knownScopes(requested); s != "" {
		return s
	}
	return scopeMCP
}

func dedupe(list []string) []string {
	var out []string
	for _, v := range list {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
