package authserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
)

const claudeCallback = "https://claude.ai/api/mcp/auth_callback"

// testPassword is long enough for the password sign-in's minimum.
const testPassword = "correct horse battery staple"

// fakeClock is the server's and the store's clock in tests: it moves only
// when a test moves it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// syncBuffer collects log output written from handler goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// testEnv is one authorization server on a loopback httptest server, whose
// URL is the issuer, protecting two resources under it: /a/mcp and /b/mcp.
type testEnv struct {
	t      *testing.T
	s      *Server
	ts     *httptest.Server
	clock  *fakeClock
	logs   *syncBuffer
	resA   Resource
	resB   Resource
	metaA  string // resource metadata URL of A
	called chan *Grant
}

func newTestEnv(t *testing.T, tweak func(*Config)) *testEnv {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	e := &testEnv{t: t, ts: ts, clock: newFakeClock(), logs: &syncBuffer{},
		resA:   Resource{URI: issuer + "/a/mcp", Name: "a"},
		resB:   Resource{URI: issuer + "/b/mcp", Name: "b"},
		called: make(chan *Grant, 16)}
	e.metaA = issuer + ResourceMetadataPath("/a/mcp")
	cfg := Config{
		Issuer: issuer,
		Resources: func(uri string) (Resource, bool) {
			switch uri {
			case e.resA.URI:
				return e.resA, true
			case e.resB.URI:
				return e.resB, true
			}
			return Resource{}, false
		},
		Identity: IdentityConfig{Password: testPassword},
		Logger:   slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:      e.clock.Now,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
	mux := http.NewServeMux()
	mux.Handle("/", s.Handler())
	mcp := func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the protected handler saw the Authorization header")
		}
		e.called <- GrantFrom(r.Context())
		_, _ = io.WriteString(w, "ok")
	}
	mux.Handle("/a/mcp", s.Protect(e.resA, e.metaA, http.HandlerFunc(mcp)))
	mux.Handle("/b/mcp", s.Protect(e.resB, issuer+ResourceMetadataPath("/b/mcp"), http.HandlerFunc(mcp)))
	mux.Handle(ResourceMetadataPath("/a/mcp"), s.ResourceMetadataHandler(e.resA))
	ts.Config.Handler = mux
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		_ = s.Close()
	})
	return e
}

// testResponse is an endpoint's answer, its JSON body decoded.
type testResponse struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r testResponse) str(key string) string { s, _ := r.body[key].(string); return s }

func (e *testEnv) do(req *http.Request) testResponse {
	e.t.Helper()
	res, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := testResponse{status: res.StatusCode, header: res.Header, raw: string(raw)}
	if len(raw) > 0 && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			e.t.Fatalf("%s %s: body is not JSON: %v: %s", req.Method, req.URL.Path, err, raw)
		}
	}
	return out
}

// post sends a form; basic, when not nil, is [id, secret] for HTTP Basic.
func (e *testEnv) post(path string, form url.Values, basic []string) testResponse {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.ts.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic != nil {
		req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
	}
	return e.do(req)
}

func (e *testEnv) register(meta any) testResponse {
	e.t.Helper()
	var body []byte
	if s, ok := meta.(string); ok {
		body = []byte(s)
	} else {
		body, _ = json.Marshal(meta)
	}
	req, _ := http.NewRequest("POST", e.ts.URL+"/oauth/register", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return e.do(req)
}

// testClient is a registered client as the tests drive it.
type testClient struct {
	id, secret string
	basic      bool // authenticate with HTTP Basic, not the form
}

func (e *testEnv) registerClaude() testClient {
	e.t.Helper()
	r := e.register(oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{claudeCallback}, ClientName: "Claude", TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
	})
	if r.status != http.StatusCreated {
		e.t.Fatalf("register: %d %s", r.status, r.raw)
	}
	return testClient{id: r.str("client_id")}
}

// form adds c's authentication to f (for the form methods) and returns
// the Basic pair when c uses Basic.
func (c testClient) auth(f url.Values) (url.Values, []string) {
	if c.basic {
		return f, []string{c.id, c.secret}
	}
	f.Set("client_id", c.id)
	if c.secret != "" {
		f.Set("client_secret", c.secret)
	}
	return f, nil
}

const testVerifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk" // RFC 7636 appendix B

// code issues a code for c as the consent page does once a person said yes.
func (e *testEnv) code(c testClient, resource, verifier string) string {
	e.t.Helper()
	code, err := e.s.issueCode(context.Background(), &AuthRequest{
		ID: randomToken("bbq_"), ClientID: c.id, RedirectURI: claudeCallback, Resource: resource, Scope: "mcp offline_access",
		CodeChallenge: s256(verifier), CodeChallengeMethod: "S256",
		Subject: &Subject{ID: "password:owner", Display: "owner", Method: "password"}, CreatedAt: e.clock.Now(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return code
}

func (e *testEnv) exchange(c testClient, code, verifier string, extra url.Values) testResponse {
	e.t.Helper()
	f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "redirect_uri": {claudeCallback}}
	for k, v := range extra {
		f[k] = v
	}
	f, basic := c.auth(f)
	return e.post("/oauth/token", f, basic)
}

func (e *testEnv) refresh(c testClient, token string, extra url.Values) testResponse {
	e.t.Helper()
	f := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}}
	for k, v := range extra {
		f[k] = v
	}
	f, basic := c.auth(f)
	return e.post("/oauth/token", f, basic)
}

func (e *testEnv) revoke(c testClient, token, hint string) testResponse {
	e.t.Helper()
	f := url.Values{"token": {token}}
	if hint != "" {
		f.Set("token_type_hint", hint)
	}
	f, basic := c.auth(f)
	return e.post("/oauth/revoke", f, basic)
}

// call calls a protected resource path with token ("" sends none).
func (e *testEnv) call(path, token string) testResponse {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.ts.URL+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r := e.do(req)
	if r.status == http.StatusOK {
		<-e.called
	}
	return r
}

// tokens exchanges a fresh code for c on resource A.
func (e *testEnv) tokens(c testClient) (access, refresh string) {
	e.t.Helper()
	r := e.exchange(c, e.code(c, e.resA.URI, testVerifier), testVerifier, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("exchange: %d %s", r.status, r.raw)
	}
	return r.str("access_token"), r.str("refresh_token")
}

func wantOAuthError(t *testing.T, r testResponse, status int, code string) {
	t.Helper()
	if r.status != status || r.str("error") != code {
		t.Fatalf("got %d %s, want %d error %q", r.status, r.raw, status, code)
	}
	if r.str("error_description") == "" {
		t.Errorf("refusal without error_description: %s", r.raw)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", r.header.Get("Cache-Control"))
	}
}

// TestFlowClaude walks claude.ai's connector flow end to end: register,
// code, exchange with PKCE, call, refresh with rotation, a reuse that
// ends the family, a new sign-in, revocation, and re-registration after
// invalid_client. Nothing secret reaches the log.
func TestFlowClaude(t *testing.T) {
	e := newTestEnv(t, nil)
	var secrets []string

	c := e.registerClaude()

	code := e.code(c, e.resA.URI, testVerifier)
	secrets = append(secrets, code)
	r := e.exchange(c, code, testVerifier, url.Values{"resource": {e.resA.URI}})
	if r.status != http.StatusOK {
		t.Fatalf("exchange: %d %s", r.status, r.raw)
	}
	if r.str("token_type") != "Bearer" || r.body["expires_in"] != float64(3600) || r.str("scope") != "mcp offline_access" ||
		!strings.HasPrefix(r.str("access_token"), "bba_") || !strings.HasPrefix(r.str("refresh_token"), "bbr_") {
		t.Fatalf("token response: %s", r.raw)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("token response Cache-Control %q", r.header.Get("Cache-Control"))
	}
	access1, refresh1 := r.str("access_token"), r.str("refresh_token")
	secrets = append(secrets, access1, refresh1)

	req, _ := http.NewRequest("POST", e.ts.URL+"/a/mcp", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+access1)
	if r := e.do(req); r.status != http.StatusOK {
		t.Fatalf("protected call: %d %s", r.status, r.raw)
	}
	if g := <-e.called; g == nil || g.ClientID != c.id || g.Subject.ID != "password:owner" || g.Resource != e.resA.URI {
		t.Fatalf("grant in the handler: %+v", g)
	}

	// Refresh: a new pair, the old refresh token spent.
	r = e.refresh(c, refresh1, url.Values{"resource": {e.resA.URI}})
	if r.status != http.StatusOK {
		t.Fatalf("refresh: %d %s", r.status, r.raw)
	}
	access2, refresh2 := r.str("access_token"), r.str("refresh_token")
	secrets = append(secrets, access2, refresh2)
	if refresh2 == "" || refresh2 == refresh1 || access2 == access1 {
		t.Fatalf("refresh did not rotate: %s", r.raw)
	}
	if r := e.call("/a/mcp", access2); r.status != http.StatusOK {
		t.Fatalf("call with the refreshed token: %d %s", r.status, r.raw)
	}

	// The old refresh token again, past the reuse grace: a reuse, and the
	// family ends.
	e.clock.Advance(defaultRefreshGrace + time.Second)
	wantOAuthError(t, e.refresh(c, refresh1, nil), http.StatusBadRequest, "invalid_grant")
	for _, tok := range []string{access1, access2} {
		if r := e.call("/a/mcp", tok); r.status != http.StatusUnauthorized {
			t.Fatalf("an access token of the revoked family still works: %d", r.status)
		}
	}
	wantOAuthError(t, e.refresh(c, refresh2, nil), http.StatusBadRequest, "invalid_grant")
	if !strings.Contains(e.logs.String(), "refresh token used twice") {
		t.Errorf("no warning about the reuse in the log:\n%s", e.logs.String())
	}

	// Sign in again; revoking the refresh token ends its access token too.
	access3, refresh3 := e.tokens(c)
	secrets = append(secrets, access3, refresh3)
	if r := e.call("/a/mcp", access3); r.status != http.StatusOK {
		t.Fatalf("call after signing in again: %d", r.status)
	}
	if r := e.revoke(c, refresh3, "refresh_token"); r.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
	if r := e.call("/a/mcp", access3); r.status != http.StatusUnauthorized {
		t.Fatalf("access token alive after its refresh token was revoked: %d", r.status)
	}
	wantOAuthError(t, e.refresh(c, refresh3, nil), http.StatusBadRequest, "invalid_grant")

	// The registration goes (expired or deleted): invalid_client, 401,
	// and a new registration works.
	if err := e.s.kv.Delete(context.Background(), bucketClients, c.id); err != nil {
		t.Fatal(err)
	}
	wantOAuthError(t, e.exchange(c, e.code(c, e.resA.URI, testVerifier), testVerifier, nil), http.StatusUnauthorized, "invalid_client")
	c2 := e.registerClaude()
	if a, _ := e.tokens(c2); a == "" {
		t.Fatal("no access token after registering again")
	}

	logs := e.logs.String()
	for _, s := range secrets {
		if strings.Contains(logs, s) || strings.Contains(logs, hashSecret(s)) {
			t.Errorf("the log holds a secret or its hash (%.8s…)", s)
		}
	}
}

// TestMetadata checks the RFC 8414 document, that the Go SDK's client
// accepts it, and that no OIDC discovery document stands in for it (issue
// 33: one without jwks_uri and the other fields OIDC requires is invalid).
func TestMetadata(t *testing.T) {
	e := newTestEnv(t, nil)
	iss := e.ts.URL
	t.Run("no openid-configuration", func(t *testing.T) {
		req, _ := http.NewRequest("GET", iss+"/.well-known/openid-configuration", nil)
		if r := e.do(req); r.status != http.StatusNotFound {
			t.Fatalf("/.well-known/openid-configuration: %d %s, want 404", r.status, r.raw)
		}
		if Paths("/.well-known/openid-configuration") {
			t.Error("Paths claims the OIDC discovery path")
		}
	})
	for _, path := range []string{"/.well-known/oauth-authorization-server"} {
		t.Run(path, func(t *testing.T) {
			req, _ := http.NewRequest("GET", iss+path, nil)
			r := e.do(req)
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			want := map[string]any{
				"issuer":                 iss,
				"authorization_endpoint": iss + "/oauth/authorize",
				"token_endpoint":         iss + "/oauth/token",
				"registration_endpoint":  iss + "/oauth/register",
				"revocation_endpoint":    iss + "/oauth/revoke",
				"authorization_response_iss_parameter_supported": true,
			}
			for k, v := range want {
				if r.body[k] != v {
					t.Errorf("%s = %v, want %v", k, r.body[k], v)
				}
			}
			lists := map[string]string{
				"response_types_supported":                   "code",
				"grant_types_supported":                      "authorization_code refresh_token",
				"code_challenge_methods_supported":           "S256",
				"token_endpoint_auth_methods_supported":      "none client_secret_post client_secret_basic",
				"revocation_endpoint_auth_methods_supported": "none client_secret_post client_secret_basic",
				"scopes_supported":                           "mcp offline_access",
			}
			for k, v := range lists {
				if got := joinList(r.body[k]); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if _, ok := r.body["jwks_uri"]; ok {
				t.Errorf("jwks_uri present (this server signs nothing): %s", r.raw)
			}
			if got, _ := r.body["client_id_metadata_document_supported"].(bool); got != (fetchCIMD != nil) {
				t.Errorf("client_id_metadata_document_supported = %v, while the CIMD fetcher is installed: %v", got, fetchCIMD != nil)
			}
			if !strings.Contains(r.header.Get("Cache-Control"), "max-age") || r.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("headers: %v", r.header)
			}
		})
	}
	t.Run("go-sdk", func(t *testing.T) {
		asm, err := oauthex.GetAuthServerMeta(context.Background(), iss+"/.well-known/oauth-authorization-server", iss, e.ts.Client())
		if err != nil || asm == nil {
			t.Fatalf("the SDK refuses the metadata: %v", err)
		}
	})
}

func joinList(v any) string {
	l, _ := v.([]any)
	var parts []string
	for _, x := range l {
		parts = append(parts, fmt.Sprint(x))
	}
	return strings.Join(parts, " ")
}

// TestNewIssuer: the issuer is an https origin (http on loopback).
func TestNewIssuer(t *testing.T) {
	res := func(string) (Resource, bool) { return Resource{}, false }
	for _, tc := range []struct {
		name, issuer, want, err string
	}{
		{"https", "https://mcp.example.com", "https://mcp.example.com", ""},
		{"trailing slash dropped", "https://mcp.example.com/", "https://mcp.example.com", ""},
		{"loopback http", "http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"localhost http", "http://localhost:8080/", "http://localhost:8080", ""},
		{"empty", "", "", "required"},
		{"plain http", "http://mcp.example.com", "", "https"},
		{"path", "https://mcp.example.com/auth", "", "path"},
		{"query", "https://mcp.example.com?x=1", "", "query"},
		{"fragment", "https://mcp.example.com#x", "", "fragment"},
		{"no host", "https:///x", "", "host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Issuer: tc.issuer, Resources: res, Identity: IdentityConfig{Password: testPassword}})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one about %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.cfg.Issuer != tc.want {
				t.Fatalf("issuer %q, want %q", s.cfg.Issuer, tc.want)
			}
		})
	}
}

// TestDefaults: zero values of Config become the documented defaults.
func TestDefaults(t *testing.T) {
	s, err := New(Config{Issuer: "https://mcp.example.com", Resources: func(string) (Resource, bool) { return Resource{}, false },
		Identity: IdentityConfig{Password: testPassword}})
	if err != nil {
		t.Fatal(err)
	}
	l := s.cfg.Limits
	got := []any{s.cfg.AccessTokenTTL, s.cfg.RefreshTokenTTL, s.cfg.CodeTTL, s.cfg.ClientIdleTTL, s.cfg.RefreshReuseGrace, l.MaxClients,
		l.UnusedClientTTL, l.RegistrationsPerMinute, l.MaxSignIns, l.MaxSignInsPerAddress, l.MaxPasswordChecks >= 1, l.PasswordCheckWait}
	want := []any{time.Hour, 30 * 24 * time.Hour, 2 * time.Minute, 30 * 24 * time.Hour, 10 * time.Second, 1000,
		time.Hour, 10, 1000, 16, true, 10 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("defaults %v, want %v", got, want)
	}
}

// basicHeader is an Authorization: Basic value, for the tests that build
// one by hand.
func basicHeader(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
}

// TestLimitsFrom: every key of the config's limits reaches its field.
func TestLimitsFrom(t *testing.T) {
	got := LimitsFrom(config.OAuthLimits{MaxClients: 5, UnusedClientTTL: "30m", RegistrationsPerMinute: 3,
		MaxPendingSignIns: 100, MaxPendingSignInsPerAddress: 4, MaxPasswordChecks: 2, PasswordCheckWait: "5s"})
	want := Limits{MaxClients: 5, UnusedClientTTL: 30 * time.Minute, RegistrationsPerMinute: 3,
		MaxSignIns: 100, MaxSignInsPerAddress: 4, MaxPasswordChecks: 2, PasswordCheckWait: 5 * time.Second}
	if got != want {
		t.Fatalf("LimitsFrom = %+v, want %+v", got, want)
	}
}

// TestLifetimes: configured lifetimes are what the tokens and codes live
// (issue 33, item 7), and a registration outlives refresh tokens that
// live longer than its default.
func TestLifetimes(t *testing.T) {
	var cfgSeen Config
	e := newTestEnv(t, func(c *Config) {
		c.SetLifetimes(config.Lifetimes{AccessToken: 10 * time.Minute, RefreshToken: 90 * 24 * time.Hour, Code: 30 * time.Second})
		cfgSeen = *c
	})
	if cfgSeen.RefreshReuseGrace != 0 || e.s.cfg.ClientIdleTTL != 90*24*time.Hour || e.s.cfg.RefreshReuseGrace != defaultRefreshGrace {
		t.Fatalf("client idle %v, grace %v: want the refresh tokens' 90 days and the default grace", e.s.cfg.ClientIdleTTL, e.s.cfg.RefreshReuseGrace)
	}
	c := e.registerClaude()
	r := e.exchange(c, e.code(c, e.resA.URI, testVerifier), testVerifier, nil)
	if r.status != http.StatusOK || r.body["expires_in"] != float64(600) {
		t.Fatalf("exchange: %d %s, want expires_in 600", r.status, r.raw)
	}
	access, refresh := r.str("access_token"), r.str("refresh_token")
	e.clock.Advance(10*time.Minute + time.Second)
	if r := e.call("/a/mcp", access); r.status != http.StatusUnauthorized {
		t.Fatalf("an access token past its 10 minutes: %d", r.status)
	}
	e.clock.Advance(60 * 24 * time.Hour) // past the default 30 days, within the 90
	if r := e.refresh(c, refresh, nil); r.status != http.StatusOK {
		t.Fatalf("refresh 60 days later with 90-day refresh tokens: %d %s", r.status, r.raw)
	}
	code := e.code(c, e.resA.URI, testVerifier)
	e.clock.Advance(31 * time.Second)
	wantOAuthError(t, e.exchange(c, code, testVerifier, nil), http.StatusBadRequest, "invalid_grant")

	off := newTestEnv(t, func(c *Config) { c.SetLifetimes(config.Lifetimes{RefreshReuseGrace: -1}) })
	if off.s.cfg.RefreshReuseGrace >= 0 {
		t.Fatalf("grace %v, want none", off.s.cfg.RefreshReuseGrace)
	}
}
