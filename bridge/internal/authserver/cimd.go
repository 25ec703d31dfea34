package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/browserbridge/browserbridge/bridge/internal/netguard"
)

// Client ID Metadata Documents (MCP 2025-11-25, draft-ietf-oauth-client-
// id-metadata-document): a client whose client_id is an https URL with a
// path publishes its metadata there, and this server fetches it instead
// of a registration. The URL is chosen by whoever sends an authorization
// request, so the fetch is the SSRF surface of this server: netguard
// checks the URL and every address connected to, and the limits below
// bound what one client id can cost.

func init() { fetchCIMD = (*Server).fetchClientMetadata }

// Limits of fetching and caching a metadata document.
const (
	cimdTimeout   = 5 * time.Second
	cimdMaxBytes  = 64 << 10
	cimdMaxURLLen = 2048
	// A document is kept for its Cache-Control max-age within these
	// bounds: at least a minute, so no-cache or max-age=0 cannot make
	// every authorization request a fetch; at most a day, so an edited
	// document is seen again.
	cimdMinAge     = time.Minute
	cimdMaxAge     = 24 * time.Hour
	cimdDefaultAge = 5 * time.Minute
	// cimdFailureAge: a document that could not be used is not asked for
	// again for this long, so requests naming it cannot make this server
	// hammer its host.
	cimdFailureAge = 30 * time.Second
)

// bucketCIMD caches fetched documents: sha256(url) -> cimdEntry. The
// cache is in the KV, not in this process: the Server keeps no other
// state of its own, the entries expire by the KV's TTL, and on a cluster
// (JetStream KV) one fetch serves every node. The key is the URL's hash
// because JetStream keys allow no ':' or '?'.
const bucketCIMD = "cimd"

// cimdEntry is one cached outcome: the client, or why there is none.
type cimdEntry struct {
	Client  *Client `json:"client,omitempty"`
	Failure string  `json:"failure,omitempty"`
}

// ErrClientMetadata is what every error of a client metadata document
// that could not be used matches (errors.Is): the OAuth answer is
// invalid_client (token endpoint) or an error page (authorize), never a
// redirect to a URI the document was to vouch for.
var ErrClientMetadata = errors.New("client metadata document unusable")

// cimdError is why the document at URL could not be used.
type cimdError struct {
	url    string
	reason string // a clause, no final period
}

func (e *cimdError) Error() string {
	return "the client's metadata document at " + echo(e.url) + " could not be used: " + e.reason + "."
}

func (e *cimdError) Is(target error) bool { return target == ErrClientMetadata }

// cimdFlight makes concurrent lookups of one URL share one fetch.
var cimdFlight singleflight.Group

// cimdClients are the netguard clients, built once: strict, and with the
// test allowance for loopback and private addresses (AllowPrivateCIMD).
var cimdClients = [2]func() *http.Client{
	sync.OnceValue(func() *http.Client { return netguard.NewClient(cimdNetOptions(false)) }),
	sync.OnceValue(func() *http.Client { return netguard.NewClient(cimdNetOptions(true)) }),
}

func cimdNetOptions(allowPrivate bool) netguard.Options {
	return netguard.Options{
		AllowPrivateForTests:  allowPrivate,
		Purpose:               "the client metadata document",
		DialTimeout:           cimdTimeout,
		TLSHandshakeTimeout:   cimdTimeout,
		ResponseHeaderTimeout: cimdTimeout,
		Timeout:               cimdTimeout,
		// The document must be served at the client id itself (the
		// draft: no redirects, 200 only); a 3xx is refused as a status.
		MaxRedirects: -1,
	}
}

// fetchClientMetadata returns the Client a client id that is an https URL
// stands for: its metadata document, fetched (or taken from the cache)
// and checked. Errors are sentences (ErrClientMetadata), or the store's.
func (s *Server) fetchClientMetadata(ctx context.Context, clientID string) (*Client, error) {
	return s.fetchClientMetadataWithin(ctx, clientID, cimdTimeout)
}

// fetchClientMetadataWithin is fetchClientMetadata with the fetch's time
// limit as a parameter, so a test can wait for it without waiting 5 s.
func (s *Server) fetchClientMetadataWithin(ctx context.Context, clientID string, timeout time.Duration) (*Client, error) {
	if reason := s.checkClientIDURL(clientID); reason != "" {
		// Decided from the URL alone, without a request: nothing to cache.
		return nil, &cimdError{clientID, reason}
	}
	key := hashSecret(clientID)
	if c, err := s.cachedCIMD(ctx, clientID, key); c != nil || err != nil {
		return c, err
	}

	// One fetch per URL at a time on this node. It runs apart from the
	// caller's context, so a caller that gives up does not fail the
	// others, and its outcome is cached for the next ones.
	ch := cimdFlight.DoChan(fmt.Sprintf("%p %s", s, clientID), func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		// A flight that ended between our cache read and this one left
		// its outcome in the cache: use it rather than fetch again.
		var ce *cimdError
		switch c, err := s.cachedCIMD(fctx, clientID, key); {
		case c != nil:
			return cimdEntry{Client: c}, nil
		case errors.As(err, &ce):
			return cimdEntry{Failure: ce.reason}, nil
		}
		c, ttl, reason := s.fetchCIMDDocument(fctx, clientID, timeout)
		entry := cimdEntry{Client: c, Failure: reason}
		if c == nil {
			ttl = cimdFailureAge
			s.log.Info("authserver: a client metadata document could not be used", "url", echo(clientID), "reason", reason)
		}
		s.cacheCIMD(context.WithoutCancel(ctx), key, entry, ttl)
		return entry, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		entry := res.Val.(cimdEntry)
		if entry.Client == nil {
			return nil, &cimdError{clientID, entry.Failure}
		}
		c := *entry.Client
		return &c, nil
	}
}

// checkClientIDURL returns why clientID cannot be a metadata document URL
// (the draft's rules for the URL, then netguard's SSRF rules), or "".
func (s *Server) checkClientIDURL(clientID string) string {
	if len(clientID) > cimdMaxURLLen {
		return fmt.Sprintf("a client id URL of %d bytes is longer than the %d this server accepts", len(clientID), cimdMaxURLLen)
	}
	u, err := url.Parse(clientID)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return "it is not an https URL"
	}
	if u.Fragment != "" || strings.Contains(clientID, "#") {
		return "it has a fragment (#…), which a client id URL may not have"
	}
	if u.Path == "" || u.Path == "/" {
		return "it has no path; a client id URL names a document, like https://app.example/oauth/client.json"
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if seg == "." || seg == ".." || strings.EqualFold(seg, "%2e") || strings.EqualFold(seg, "%2e%2e") {
			return "its path has a . or .. segment, which a client id URL may not have"
		}
	}
	if _, err := netguard.CheckURL(clientID, cimdNetOptions(s.cfg.AllowPrivateCIMD)); err != nil {
		return refusedReason(err)
	}
	return ""
}

// refusedReason words a netguard refusal as the reason of a cimdError.
func refusedReason(err error) string {
	var re *netguard.RefusedError
	if !errors.As(err, &re) {
		return err.Error()
	}
	reason := re.Reason
	if re.What == "" && re.Target != "" { // refused at connect time: name the host
		reason = strings.Replace(reason, "it ", re.Target+" ", 1)
	}
	return "this server refuses to fetch it (SSRF protection): " + reason
}

// cachedCIMD is the cached outcome for clientID: a client, a cimdError,
// or neither (nil, nil) when nothing is cached.
func (s *Server) cachedCIMD(ctx context.Context, clientID, key string) (*Client, error) {
	var e cimdEntry
	_, err := s.getJSON(ctx, bucketCIMD, key, &e)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("authserver: reading the client metadata cache: %w", err)
	case e.Client != nil:
		return e.Client, nil
	}
	return nil, &cimdError{clientID, e.Failure}
}

// cacheCIMD stores an outcome for ttl, replacing an older one.
func (s *Server) cacheCIMD(ctx context.Context, key string, e cimdEntry, ttl time.Duration) {
	_, err := s.createJSON(ctx, bucketCIMD, key, e, ttl)
	if errors.Is(err, ErrExists) {
		var old cimdEntry
		var rev uint64
		if rev, err = s.getJSON(ctx, bucketCIMD, key, &old); err == nil {
			_, err = s.updateJSON(ctx, bucketCIMD, key, e, rev, ttl)
		}
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			err = nil // another node's fresh outcome, or just expired: fine either way
		}
	}
	if err != nil {
		s.log.Warn("authserver: caching a client metadata document", "err", err)
	}
}

// fetchCIMDDocument fetches and checks the document: the client and how
// long to keep it, or why it cannot be used.
func (s *Server) fetchCIMDDocument(ctx context.Context, clientID string, timeout time.Duration) (*Client, time.Duration, string) {
	client := cimdClients[0]()
	if s.cfg.AllowPrivateCIMD {
		client = cimdClients[1]()
	}
	if s.cfg.HTTPClient != nil {
		c := *s.cfg.HTTPClient
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		client = &c
	}
	timedOut := fmt.Sprintf("it did not arrive within %s", timeout)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientID, nil)
	if err != nil {
		return nil, 0, "it is not a URL this server can request"
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, netguard.ErrRefused):
			return nil, 0, refusedReason(err)
		case ctx.Err() != nil:
			return nil, 0, timedOut
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its "Get "<url>":" prefix repeats the URL
		}
		return nil, 0, "it could not be fetched: " + err.Error()
	}
	defer resp.Body.Close()
	if ctx.Err() != nil {
		// The deadline passed as the answer came: closing the connection
		// at the deadline can make a host that was still waiting answer
		// (its request's context ends), and the transport may hand that
		// answer over. It came too late all the same.
		return nil, 0, timedOut
	}
	if resp.StatusCode != http.StatusOK {
		reason := fmt.Sprintf("its server answered %s, not 200 OK", resp.Status)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			reason += "; the document must be served at the client id URL itself, so redirects are not followed"
		}
		return nil, 0, reason
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, 0, fmt.Sprintf("it is served as %q, not as JSON (application/json)", echo(ct))
	}
	body, err := netguard.ReadBody(resp, cimdMaxBytes)
	switch {
	case errors.Is(err, netguard.ErrTooLarge):
		return nil, 0, fmt.Sprintf("it is larger than %s, the most this server reads", netguard.FormatSize(cimdMaxBytes))
	case err != nil && ctx.Err() != nil:
		return nil, 0, timedOut
	case err != nil:
		return nil, 0, "it could not be read: " + err.Error()
	}
	c, reason := parseCIMD(clientID, body)
	if c == nil {
		return nil, 0, reason
	}
	c.CreatedAt = s.now()
	c.LastUsedAt = c.CreatedAt
	return c, cimdCacheAge(resp.Header), ""
}

// cimdCacheAge is how long to keep a document: its Cache-Control max-age
// within [cimdMinAge, cimdMaxAge], cimdDefaultAge when it says none.
func cimdCacheAge(h http.Header) time.Duration {
	age := cimdDefaultAge
	for _, cc := range h.Values("Cache-Control") {
		for _, d := range strings.Split(cc, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			switch {
			case d == "no-store" || d == "no-cache":
				// Keep it for the floor: fetching on every request is
				// what the cache is there to prevent.
				return cimdMinAge
			case strings.HasPrefix(d, "max-age="):
				if n, err := strconv.ParseInt(strings.Trim(d[len("max-age="):], `"`), 10, 64); err == nil && n >= 0 {
					age = time.Duration(min(n, int64(cimdMaxAge/time.Second))) * time.Second
				}
			}
		}
	}
	return min(max(age, cimdMinAge), cimdMaxAge)
}

// cimdDocument is the metadata a document may hold that this server
// reads; other members are ignored.
type cimdDocument struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope"`
}

// parseCIMD checks a document fetched from clientID: the Client it
// describes, or why it cannot be used.
func parseCIMD(clientID string, body []byte) (*Client, string) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil || members == nil {
		return nil, "it is not a JSON object"
	}
	var d cimdDocument
	if err := json.Unmarshal(body, &d); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Sprintf("its %s has the wrong type (%s where %s belongs)", te.Field, te.Value, te.Type)
		}
		return nil, "it is not valid JSON: " + err.Error()
	}
	if _, ok := members["client_id"]; !ok {
		return nil, "it has no client_id; it must hold the URL it is served at"
	}
	if d.ClientID != clientID {
		return nil, fmt.Sprintf("its client_id is %q, not the URL it was fetched from", echo(d.ClientID))
	}
	for _, k := range []string{"client_secret", "client_secret_expires_at"} {
		if _, ok := members[k]; ok {
			return nil, "it holds " + k + "; a client identified by a metadata document is public (anyone can read the document) and has no secret"
		}
	}
	switch m := d.TokenEndpointAuthMethod; m {
	case "", authNone:
	case "private_key_jwt":
		return nil, `its token_endpoint_auth_method is private_key_jwt, which this server does not support; a metadata document client here is public: use "none" (with PKCE)`
	case authSecretBasic, authSecretPost, "client_secret_jwt":
		return nil, fmt.Sprintf(`its token_endpoint_auth_method is %s, which needs a shared secret that a metadata document cannot hold; use "none" (with PKCE)`, m)
	default:
		return nil, fmt.Sprintf(`its token_endpoint_auth_method %q is not supported; use "none" (with PKCE)`, echo(m))
	}
	if len(d.RedirectURIs) == 0 {
		return nil, "it has no redirect_uris: the URLs authorization responses may be sent to"
	}
	if len(d.RedirectURIs) > maxRedirectURIs {
		return nil, fmt.Sprintf("its %d redirect_uris are more than the %d this server keeps for one client", len(d.RedirectURIs), maxRedirectURIs)
	}
	for _, u := range d.RedirectURIs {
		if msg := checkRedirectURI(u); msg != "" {
			// checkRedirectURI speaks in sentences; here it is a clause.
			return nil, "in redirect_uris: " + strings.TrimSuffix(msg, ".")
		}
	}
	grants := d.GrantTypes
	if len(grants) == 0 {
		// As for a registration (register.go): RFC 7591's default is
		// authorization_code alone, but every MCP client refreshes.
		grants = []string{grantAuthorizationCode, grantRefreshToken}
	}
	for _, g := range grants {
		if g != grantAuthorizationCode && g != grantRefreshToken {
			return nil, fmt.Sprintf("its grant_types include %q; this server issues tokens only for authorization_code (with PKCE) and refresh_token", echo(g))
		}
	}
	if !slices.Contains(grants, grantAuthorizationCode) {
		return nil, "its grant_types leave out authorization_code, the only way this server issues a first token"
	}
	for _, rt := range d.ResponseTypes {
		if rt != "code" {
			return nil, fmt.Sprintf("its response_types include %q; only code is supported", echo(rt))
		}
	}
	if d.ClientURI != "" {
		u, err := url.Parse(d.ClientURI)
		if err != nil || u.Scheme != "https" || u.Host == "" || len(d.ClientURI) > maxURILen {
			return nil, "its client_uri is not an https URL (it may be shown as a link on the consent page)"
		}
	}
	return &Client{
		ID:                      clientID,
		Name:                    cleanClientName(d.ClientName),
		URI:                     d.ClientURI,
		RedirectURIs:            slices.Clone(d.RedirectURIs),
		GrantTypes:              dedupe(grants),
		TokenEndpointAuthMethod: authNone,
		Scope:                   knownScopes(d.Scope),
		MetadataDocument:        true,
	}, ""
}
