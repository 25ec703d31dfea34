package gatewayserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// The public gateway's guard wiring: which web pages each route takes,
// and whose address each limit counts behind a proxy. The requests go to
// the gateway's whole handler in the process (guard, routes, the
// authorization server); the servers, /bin/false, never start, since no
// request here carries a token.

const (
	extensionOrigin = "chrome-extension://abcdefghijklmnopabcdefghijklmnop"
	inspectorPage   = "http://localhost:6274"
	publicHost      = "mcp.example.test"
)

// publicHandler starts a public gateway for cfg's extra settings and
// returns its HTTP handler.
func publicHandler(t *testing.T, edit func(*config.Config)) http.Handler {
	t.Helper()
	e := newEnv(t)
	cfg := e.config()
	cfg.MCPServers = json.RawMessage(`{"memory": {"command": "/bin/false"}, "everything": {"command": "/bin/false"}}`)
	watch := false
	cfg.Gateway = config.Gateway{PublicURL: publicBase, HostDomain: "example.test", HostPrefix: "mcp", Watch: &watch}
	cfg.OAuth.Password = testPassword
	memory := config.MemoryState
	cfg.OAuth.StateFile = &memory
	if edit != nil {
		edit(cfg)
	}
	g, err := Start(cfg, testutil.Logger(t, "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.ln.Close()
		g.pub.Close()
	})
	return g.http.Handler
}

type publicRequest struct {
	method, host, path string
	header             map[string]string
	body               string
	remote             string // "" = 127.0.0.1:40000, the proxy on this machine
}

func (q publicRequest) send(h http.Handler) *httptest.ResponseRecorder {
	method := q.method
	if method == "" {
		method = http.MethodPost
	}
	host := q.host
	if host == "" {
		host = publicHost
	}
	r := httptest.NewRequest(method, "https://"+host+q.path, strings.NewReader(q.body))
	r.RemoteAddr = q.remote
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:40000"
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func fromPage(origin string, more ...string) map[string]string {
	h := map[string]string{"Origin": origin, "Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = more[i+1]
	}
	return h
}

func TestPublicGatewayBrowsers(t *testing.T) {
	h := publicHandler(t, nil)
	preflight := func(origin string) map[string]string {
		return fromPage(origin, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type, mcp-protocol-version")
	}
	for _, tc := range []struct {
		name       string
		req        publicRequest
		wantStatus int
		wantCORS   string   // Access-Control-Allow-Origin; "" = none
		wantHeader []string // "Name: substring"
		wantBody   string
	}{
		// MCP routes: any page, and it can read the 401 that starts its sign-in.
		{name: "the extension on a path route", req: publicRequest{path: "/servers/memory/mcp", header: fromPage(extensionOrigin), body: initializeBody},
			wantStatus: 401, wantCORS: extensionOrigin,
			wantHeader: []string{"Access-Control-Expose-Headers: WWW-Authenticate", "WWW-Authenticate: resource_metadata="}},
		{name: "a browser-based client on the aggregate", req: publicRequest{path: "/servers/all/mcp", header: fromPage(inspectorPage), body: initializeBody},
			wantStatus: 401, wantCORS: inspectorPage},
		{name: "any web page (its token is its own)", req: publicRequest{path: "/servers/everything/mcp", header: fromPage("https://client.example"), body: initializeBody},
			wantStatus: 401, wantCORS: "https://client.example"},
		{name: "legacy SSE stream", req: publicRequest{method: http.MethodGet, path: "/servers/memory/sse", header: fromPage(inspectorPage)},
			wantStatus: 401, wantCORS: inspectorPage},
		{name: "legacy SSE message", req: publicRequest{path: "/servers/memory/message?sessionId=x", header: fromPage(inspectorPage), body: `{}`},
			wantStatus: 401, wantCORS: inspectorPage},
		{name: "subdomain route", req: publicRequest{host: "memory." + publicHost, path: "/mcp", header: fromPage(extensionOrigin), body: initializeBody},
			wantStatus: 401, wantCORS: extensionOrigin},
		{name: "preflight of an MCP route", req: publicRequest{method: http.MethodOptions, path: "/servers/memory/mcp", header: preflight(extensionOrigin)},
			wantStatus: 204, wantCORS: extensionOrigin,
			wantHeader: []string{"Access-Control-Allow-Headers: Authorization", "Access-Control-Allow-Headers: Mcp-Session-Id", "Access-Control-Allow-Methods: POST"}},

		// The authorization server's API: any page, with CORS.
		{name: "registration from a page", req: publicRequest{path: "/oauth/register", header: fromPage(inspectorPage),
			body: `{"client_name":"Inspector","redirect_uris":["http://localhost:6274/oauth/callback"],"token_endpoint_auth_method":"none"}`},
			wantStatus: 201, wantCORS: inspectorPage},
		{name: "token endpoint from a page", req: publicRequest{path: "/oauth/token", header: fromPage(extensionOrigin, "Content-Type", "application/x-www-form-urlencoded"),
			body: "grant_type=authorization_code&code=x&client_id=unknown"},
			wantStatus: 401, wantCORS: extensionOrigin, wantBody: "invalid_client"},
		{name: "preflight of registration", req: publicRequest{method: http.MethodOptions, path: "/oauth/register", header: preflight(inspectorPage)},
			wantStatus: 204, wantCORS: inspectorPage},

		// The sign-in pages and metadata: the authorization server decides.
		{name: "metadata read cross-origin", req: publicRequest{method: http.MethodGet, path: "/.well-known/oauth-authorization-server", header: fromPage(inspectorPage)},
			wantStatus: 200, wantCORS: "*"},
		{name: "resource metadata read cross-origin", req: publicRequest{method: http.MethodGet, path: "/.well-known/oauth-protected-resource/servers/memory/mcp", header: fromPage(extensionOrigin)},
			wantStatus: 200, wantCORS: "*"},
		{name: "a sign-in form posted by another site: refused by the authorization server", req: publicRequest{path: "/oauth/signin",
			header: fromPage("https://attacker.example", "Content-Type", "application/x-www-form-urlencoded"), body: "request=x&password=y"},
			wantStatus: 403, wantBody: "sent from another site"},

		// Everything else: as on the local bridge.
		{name: "health from another site: refused by the guard", req: publicRequest{method: http.MethodGet, path: "/health", header: fromPage("https://attacker.example")},
			wantStatus: 403, wantBody: "allowed_origins"},
		{name: "a host that is not the gateway's", req: publicRequest{host: "attacker.example", path: "/servers/memory/mcp", header: fromPage(extensionOrigin), body: initializeBody},
			wantStatus: 403, wantBody: "DNS rebinding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.req.send(h)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %.300s", rec.Code, tc.wantStatus, rec.Body)
			}
			if got := rec.Header().Get("Access-Control-Allow-Origin"); got != tc.wantCORS {
				t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, tc.wantCORS)
			}
			if got := rec.Header().Get("Access-Control-Allow-Credentials"); got != "" {
				t.Errorf("Access-Control-Allow-Credentials = %q; no route lends a page the browser's credentials", got)
			}
			for _, hv := range tc.wantHeader {
				name, sub, _ := strings.Cut(hv, ": ")
				if got := strings.Join(rec.Header().Values(name), ", "); !strings.Contains(got, sub) {
					t.Errorf("%s = %q, want it to contain %q", name, got, sub)
				}
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("body %.300q does not contain %q", rec.Body, tc.wantBody)
			}
		})
	}
}

// TestPublicBrowserPolicyOpensOnlyProtectedRoutes: every route the guard
// opens to any web page needs a bearer token (or is the authorization
// server's token API), so no page can use anything a browser holds.
func TestPublicBrowserPolicyOpensOnlyProtectedRoutes(t *testing.T) {
	p := routesForTest(t, "https://mcp.example.com")
	for _, tc := range []struct {
		host, path string
		want       httpguard.BrowserPolicy
	}{
		{"mcp.example.com", "/servers/memory/mcp", httpguard.AnyOrigin},
		{"mcp.example.com", "/servers/memory/sse", httpguard.AnyOrigin},
		{"mcp.example.com", "/servers/memory/message", httpguard.AnyOrigin},
		{"mcp.example.com", "/servers/all/mcp", httpguard.AnyOrigin},
		{"mcp.example.com", "/servers/nope/mcp", httpguard.AnyOrigin},
		{"memory.mcp.example.com", "/mcp", httpguard.AnyOrigin},
		{"memory.mcp.example.com", "/sse", httpguard.AnyOrigin},
		{"memory.mcp.example.com", "/message", httpguard.AnyOrigin},
		{"mcp.example.com", "/oauth/token", httpguard.AnyOrigin},
		{"mcp.example.com", "/oauth/register", httpguard.AnyOrigin},
		{"mcp.example.com", "/oauth/revoke", httpguard.AnyOrigin},
		{"mcp.example.com", "/oauth/authorize", httpguard.HandlerChecksBrowsers},
		{"mcp.example.com", "/oauth/signin", httpguard.HandlerChecksBrowsers},
		{"mcp.example.com", "/oauth/consent", httpguard.HandlerChecksBrowsers},
		{"mcp.example.com", "/oauth/oidc/callback", httpguard.HandlerChecksBrowsers},
		{"mcp.example.com", "/.well-known/oauth-authorization-server", httpguard.HandlerChecksBrowsers},
		{"memory.mcp.example.com", "/.well-known/oauth-protected-resource", httpguard.HandlerChecksBrowsers},
		{"mcp.example.com", "/servers/", httpguard.CheckBrowsers},
		{"mcp.example.com", "/health", httpguard.CheckBrowsers},
		{"mcp.example.com", "/metrics", httpguard.CheckBrowsers},
		{"mcp.example.com", "/mcp", httpguard.CheckBrowsers},
		{"mcp.example.com", "/servers/memory/mcp/x", httpguard.CheckBrowsers},
		{"memory.mcp.example.com", "/health", httpguard.CheckBrowsers},
		{"memory.mcp.example.com", "/servers/memory/mcp", httpguard.CheckBrowsers}, // a subdomain serves no path routes
	} {
		r := httptest.NewRequest(http.MethodPost, "https://"+tc.host+tc.path, nil)
		if got := p.browserPolicy(r); got != tc.want {
			t.Errorf("%s%s: policy %d, want %d", tc.host, tc.path, got, tc.want)
		}
	}

	// Through the real gateway: each MCP route the policy opens answers 401
	// without a token.
	h := publicHandler(t, nil)
	for _, q := range []publicRequest{
		{path: "/servers/memory/mcp"}, {path: "/servers/memory/sse", method: http.MethodGet}, {path: "/servers/memory/message?sessionId=x"},
		{path: "/servers/all/mcp"}, {path: "/servers/nope/mcp"}, {host: "memory." + publicHost, path: "/mcp"},
		{host: "memory." + publicHost, path: "/sse", method: http.MethodGet}, {host: "memory." + publicHost, path: "/message?sessionId=x"},
	} {
		q.header, q.body = fromPage("https://client.example"), initializeBody
		if rec := q.send(h); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s %s%s without a token from any page: %d, want 401", q.method, q.host, q.path, rec.Code)
		}
	}
}

// TestPublicGatewayTrustedProxies: behind a trusted proxy each client has
// the sign-in's per-address limit to itself (authserver's ClientIP); from
// a peer that is not trusted, X-Forwarded-For changes nothing.
func TestPublicGatewayTrustedProxies(t *testing.T) {
	const opened = 60 // authserver's sign-ins opened per address and minute
	for _, tc := range []struct {
		name    string
		trusted []string
		// whether client B may still open a sign-in once A used up its own
		wantBSeparate bool
	}{
		{name: "trusted proxy", trusted: []string{"127.0.0.1/32"}, wantBSeparate: true},
		{name: "no trusted proxy", trusted: nil, wantBSeparate: false},
		{name: "another proxy trusted", trusted: []string{"172.16.0.0/12"}, wantBSeparate: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := publicHandler(t, func(c *config.Config) { c.TrustedProxies = tc.trusted })
			rec := publicRequest{path: "/oauth/register", header: map[string]string{"Content-Type": "application/json"},
				body: `{"client_name":"Claude","redirect_uris":["` + claudeCallback + `"],"token_endpoint_auth_method":"none"}`}.send(h)
			if rec.Code != http.StatusCreated {
				t.Fatalf("register: %d %s", rec.Code, rec.Body)
			}
			var reg registration
			if err := json.Unmarshal(rec.Body.Bytes(), &reg); err != nil {
				t.Fatal(err)
			}
			authorize := func(client string) int {
				u, _ := url.Parse(authorizeURL(reg.ClientID, claudeCallback, publicBase+"/servers/memory/mcp", newVerifier(), "S256", "s"))
				return publicRequest{method: http.MethodGet, path: u.RequestURI(),
					header: map[string]string{"X-Forwarded-For": client, "Sec-Fetch-Site": "cross-site"}}.send(h).Code
			}
			for i := range opened {
				if c := authorize("203.0.113.7"); c != http.StatusOK {
					t.Fatalf("client A's sign-in %d: %d, want 200", i+1, c)
				}
			}
			if c := authorize("203.0.113.7"); c != http.StatusTooManyRequests {
				t.Fatalf("client A's sign-in %d: %d, want 429", opened+1, c)
			}
			want := http.StatusTooManyRequests
			if tc.wantBSeparate {
				want = http.StatusOK
			}
			if c := authorize("198.51.100.20"); c != want {
				t.Fatalf("client B's first sign-in after A's %d: %d, want %d", opened, c, want)
			}
		})
	}
}
