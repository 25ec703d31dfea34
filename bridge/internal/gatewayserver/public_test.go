package gatewayserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// The public gateway as claude.ai meets it: the real gateway with real
// stdio servers (server-everything and server-memory from tools/npm),
// behind a TLS front that stands for Caddy (it passes the Host on and adds
// X-Forwarded-*), reached under the names mcp.example.test and
// *.mcp.example.test by a client whose dialer sends every name to the
// front. The OAuth steps are raw HTTP, as claude.ai's servers send them;
// the MCP calls use the official Go SDK client with the bearer token.

const (
	publicBase       = "https://mcp.example.test"
	claudeCallback   = "https://claude.ai/api/mcp/auth_callback"
	claudeCallback2  = "https://claude.com/api/mcp/auth_callback"
	testPassword     = "correct horse battery staple"
	everythingMCP    = publicBase + "/servers/everything/mcp"
	everythingSSE    = publicBase + "/servers/everything/sse"
	memoryMCP        = publicBase + "/servers/memory/mcp"
	everythingHost   = "https://everything.mcp.example.test"
	memoryHostMCP    = "https://memory.mcp.example.test/mcp"
	prmWellKnownPath = "/.well-known/oauth-protected-resource"
)

func TestPublicGatewayClaudeFlow(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(e.dir, "servers.json")
	testutil.ServersFile(t, file, "everything", "memory")
	hash, err := authserver.HashPassword(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(e.dir, "state", "oauth.db")
	front := newTLSFront(t)
	pg := &publicTestGateway{t: t, e: e, front: front, file: file, hash: hash, state: state}
	pg.start(t)

	claude := front.browser() // the person's browser, signing in for claude.ai
	server := front.client()  // claude.ai's servers: no cookies, no Origin
	var (
		reg      registration
		verifier = newVerifier()
		code     string
		first    tokens // from the code
		second   tokens // from the first refresh
		third    tokens // from a refresh after the restart
	)

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"401 and discovery", func(t *testing.T) {
			resp := httpPost(t, server, everythingMCP, nil, "application/json", initializeBody)
			if resp.status != http.StatusUnauthorized {
				t.Fatalf("initialize without a token: %d %s, want 401", resp.status, resp.body)
			}
			want := publicBase + prmWellKnownPath + "/servers/everything/mcp"
			if got := resourceMetadataOf(resp.header.Get("WWW-Authenticate")); got != want {
				t.Fatalf("WWW-Authenticate %q names %q, want %q", resp.header.Get("WWW-Authenticate"), got, want)
			}
			prm := getJSON(t, server, want, http.StatusOK)
			if prm["resource"] != everythingMCP || !slices.Equal(stringsOf(prm["authorization_servers"]), []string{publicBase}) {
				t.Fatalf("resource metadata: %v", prm)
			}
			// claude.ai probes the root too; on the public host no resource
			// lives there, and the answer says where each one's is.
			resp = httpGet(t, server, publicBase+prmWellKnownPath, nil)
			if resp.status != http.StatusNotFound || !strings.Contains(resp.body, "/servers/NAME/mcp") {
				t.Fatalf("root metadata on the public host: %d %s", resp.status, resp.body)
			}
			as := getJSON(t, server, publicBase+"/.well-known/oauth-authorization-server", http.StatusOK)
			for k, v := range map[string]string{
				"issuer":                 publicBase,
				"authorization_endpoint": publicBase + "/oauth/authorize",
				"token_endpoint":         publicBase + "/oauth/token",
				"registration_endpoint":  publicBase + "/oauth/register",
			} {
				if as[k] != v {
					t.Errorf("authorization server metadata %s = %v, want %s", k, as[k], v)
				}
			}
			if m := stringsOf(as["code_challenge_methods_supported"]); !slices.Contains(m, "S256") || slices.Contains(m, "plain") {
				t.Errorf("code_challenge_methods_supported = %v, want S256 and not plain", m)
			}
		}},
		{"registration with claude.ai's callback", func(t *testing.T) {
			reg = register(t, server, claudeRegistration)
			if reg.ClientID == "" {
				t.Fatalf("no client_id in %+v", reg)
			}
		}},
		{"authorize with PKCE and resource", func(t *testing.T) {
			page := claude.openAuthorize(t, authorizeURL(reg.ClientID, claudeCallback, everythingMCP, verifier, "S256", "st-1"))
			if page.status != http.StatusOK || page.form("password") == nil {
				t.Fatalf("authorize: %d, want the sign-in page with a password field:\n%s", page.status, page.body)
			}
			claude.page = page
		}},
		{"password sign-in", func(t *testing.T) {
			f := claude.page.form("password")
			f.values.Set("password", testPassword)
			page := claude.submit(t, f, "")
			if page.status != http.StatusOK || page.form("decision") == nil {
				t.Fatalf("sign-in: %d, want the consent page:\n%s", page.status, page.body)
			}
			claude.page = page
		}},
		{"consent", func(t *testing.T) {
			page := claude.submit(t, claude.page.form("decision"), "approve")
			code = callbackCode(t, page, claudeCallback, "st-1")
		}},
		{"code exchange", func(t *testing.T) {
			first = exchange(t, server, reg, code, claudeCallback, verifier, everythingMCP)
		}},
		{"MCP calls with the token", func(t *testing.T) {
			cs := front.sdkSession(t, everythingMCP, first.Access)
			callEcho(t, cs, "through the public gateway")
		}},
		{"refresh with rotation", func(t *testing.T) {
			second = refresh(t, server, reg, first.Refresh, everythingMCP)
			if second.Refresh == first.Refresh || second.Access == first.Access {
				t.Fatal("the refresh returned the same tokens: refresh tokens must rotate")
			}
			callEcho(t, front.sdkSession(t, everythingMCP, second.Access), "after the refresh")
		}},
		{"sign-ins survive a restart", func(t *testing.T) {
			pg.restart(t)
			callEcho(t, front.sdkSession(t, everythingMCP, second.Access), "after the restart")
			third = refresh(t, server, reg, second.Refresh, everythingMCP)
		}},
		{"an old refresh token refused and its family revoked", func(t *testing.T) {
			resp := httpPostForm(t, server, publicBase+"/oauth/token", reg.form(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.Refresh}}))
			if resp.status != http.StatusBadRequest || oauthError(resp) != "invalid_grant" {
				t.Fatalf("a used refresh token: %d %s, want 400 invalid_grant", resp.status, resp.body)
			}
			resp = httpPostForm(t, server, publicBase+"/oauth/token", reg.form(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {third.Refresh}}))
			if resp.status != http.StatusBadRequest || oauthError(resp) != "invalid_grant" {
				t.Fatalf("the family's newest refresh token after a reuse: %d %s, want 400 invalid_grant", resp.status, resp.body)
			}
			resp = httpPost(t, server, everythingMCP, bearer(third.Access), "application/json", initializeBody)
			if resp.status != http.StatusUnauthorized || !strings.Contains(resp.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
				t.Fatalf("the family's access token after a reuse: %d %s, want 401 invalid_token", resp.status, resp.header.Get("WWW-Authenticate"))
			}
		}},
		{"401 invalid_client for an unknown registration", func(t *testing.T) {
			for _, form := range []url.Values{
				{"grant_type": {"refresh_token"}, "refresh_token": {third.Refresh}, "client_id": {"never-registered"}},
				{"grant_type": {"authorization_code"}, "code": {"x"}, "redirect_uri": {claudeCallback}, "code_verifier": {verifier}, "client_id": {"never-registered"}},
			} {
				resp := httpPostForm(t, server, publicBase+"/oauth/token", form)
				if resp.status != http.StatusUnauthorized || oauthError(resp) != "invalid_client" {
					t.Fatalf("%s from an unknown client: %d %s, want 401 invalid_client", form.Get("grant_type"), resp.status, resp.body)
				}
			}
		}},
		{"401 invalid_client for a deleted registration, then claude.ai registers again", func(t *testing.T) {
			v := newVerifier()
			c := claude.authorizeAll(t, authorizeURL(reg.ClientID, claudeCallback, everythingMCP, v, "S256", "st-2"), claudeCallback, "st-2")
			live := exchange(t, server, reg, c, claudeCallback, v, everythingMCP)
			// The registration goes with the whole state, as when the state
			// file is lost or wiped.
			pg.stop()
			if err := os.Remove(state); err != nil {
				t.Fatal(err)
			}
			pg.start(t)
			resp := httpPostForm(t, server, publicBase+"/oauth/token", reg.form(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {live.Refresh}}))
			if resp.status != http.StatusUnauthorized || oauthError(resp) != "invalid_client" {
				t.Fatalf("a refresh by a registration that is gone: %d %s, want 401 invalid_client (claude.ai then registers again)", resp.status, resp.body)
			}
			reg = register(t, server, claudeRegistration)
			v = newVerifier()
			c = claude.authorizeAll(t, authorizeURL(reg.ClientID, claudeCallback, everythingMCP, v, "S256", "st-3"), claudeCallback, "st-3")
			first = exchange(t, server, reg, c, claudeCallback, v, everythingMCP)
			callEcho(t, front.sdkSession(t, everythingMCP, first.Access), "registered again")
		}},
		{"a token for another resource refused", func(t *testing.T) {
			for _, target := range []string{memoryHostMCP, memoryMCP, everythingHost + "/mcp", everythingSSE} {
				resp := httpPost(t, server, target, bearer(first.Access), "application/json", initializeBody)
				if resp.status != http.StatusUnauthorized || !strings.Contains(resp.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
					t.Errorf("%s with a token for %s: %d %s, want 401 invalid_token", target, everythingMCP, resp.status, resp.header.Get("WWW-Authenticate"))
				}
			}
			// And the token endpoint will not move a sign-in to another one.
			resp := httpPostForm(t, server, publicBase+"/oauth/token", reg.form(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.Refresh}, "resource": {memoryMCP}}))
			if resp.status != http.StatusBadRequest || oauthError(resp) != "invalid_target" {
				t.Errorf("a refresh for another resource: %d %s, want 400 invalid_target", resp.status, resp.body)
			}
		}},
		{"a subdomain route is its own resource", func(t *testing.T) {
			resp := httpPost(t, server, everythingHost+"/mcp", nil, "application/json", initializeBody)
			want := everythingHost + prmWellKnownPath + "/mcp"
			if resp.status != http.StatusUnauthorized || resourceMetadataOf(resp.header.Get("WWW-Authenticate")) != want {
				t.Fatalf("subdomain without a token: %d %q, want 401 naming %s", resp.status, resp.header.Get("WWW-Authenticate"), want)
			}
			for _, u := range []string{want, everythingHost + prmWellKnownPath} {
				prm := getJSON(t, server, u, http.StatusOK)
				if prm["resource"] != everythingHost+"/mcp" || !slices.Equal(stringsOf(prm["authorization_servers"]), []string{publicBase}) {
					t.Fatalf("%s: %v", u, prm)
				}
			}
			if r := httpGet(t, server, everythingHost+"/.well-known/oauth-authorization-server", nil); r.status != http.StatusNotFound {
				t.Fatalf("the authorization server on a subdomain: %d, want it only on the public host", r.status)
			}
			v := newVerifier()
			c := claude.authorizeAll(t, authorizeURL(reg.ClientID, claudeCallback2, everythingHost+"/mcp", v, "S256", "st-4"), claudeCallback2, "st-4")
			tok := exchange(t, server, reg, c, claudeCallback2, v, everythingHost+"/mcp")
			callEcho(t, front.sdkSession(t, everythingHost+"/mcp", tok.Access), "on its own host")
			if r := httpPost(t, server, everythingMCP, bearer(tok.Access), "application/json", initializeBody); r.status != http.StatusUnauthorized {
				t.Fatalf("the subdomain's token on the path route: %d, want 401", r.status)
			}
		}},
		{"legacy SSE with a token for its /sse", func(t *testing.T) {
			v := newVerifier()
			c := claude.authorizeAll(t, authorizeURL(reg.ClientID, claudeCallback, everythingSSE, v, "S256", "st-5"), claudeCallback, "st-5")
			tok := exchange(t, server, reg, c, claudeCallback, v, everythingSSE)
			ctx := testutil.Context(t, 2*time.Minute)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "Claude", Version: "1"}, nil).Connect(ctx,
				&mcp.SSEClientTransport{Endpoint: everythingSSE, HTTPClient: front.bearerClient(tok.Access)}, nil)
			if err != nil {
				t.Fatalf("SSE connect: %v", err)
			}
			defer cs.Close()
			callEcho(t, cs, "over HTTP+SSE")
			// Its POSTs need the token too.
			resp := httpPost(t, server, publicBase+"/servers/everything/message?sessionId=x", nil, "application/json", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			if resp.status != http.StatusUnauthorized || resourceMetadataOf(resp.header.Get("WWW-Authenticate")) != publicBase+prmWellKnownPath+"/servers/everything/sse" {
				t.Fatalf("/message without a token: %d %q", resp.status, resp.header.Get("WWW-Authenticate"))
			}
		}},
		{"an unregistered redirect URI refused without redirecting", func(t *testing.T) {
			page := claude.openAuthorize(t, authorizeURL(reg.ClientID, "https://attacker.example/cb", everythingMCP, newVerifier(), "S256", "st-6"))
			if page.status != http.StatusBadRequest || page.header.Get("Location") != "" {
				t.Fatalf("authorize with an unregistered redirect_uri: %d, Location %q; want 400 and no redirect", page.status, page.header.Get("Location"))
			}
		}},
		{"plain PKCE refused", func(t *testing.T) {
			page := claude.openAuthorize(t, authorizeURL(reg.ClientID, claudeCallback, everythingMCP, "plain-verifier-plain-verifier-plain-verifier", "plain", "st-7"))
			q := redirectQuery(page, claudeCallback)
			if q == nil {
				if page.status != http.StatusBadRequest {
					t.Fatalf("authorize with plain PKCE: %d, want an error", page.status)
				}
				return
			}
			if q.Get("code") != "" || q.Get("error") != "invalid_request" || q.Get("state") != "st-7" {
				t.Fatalf("authorize with plain PKCE redirected with %v, want error=invalid_request and no code", q)
			}
		}},
		{"a CIMD client whose document lives on a private address refused", func(t *testing.T) {
			var asked atomic.Int32
			doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"client_id":"https://%s/client.json","client_name":"Sneaky","redirect_uris":[%q],"token_endpoint_auth_method":"none"}`, r.Host, claudeCallback)
			}))
			defer doc.Close()
			clientID := doc.URL + "/client.json" // https://127.0.0.1:PORT/client.json
			page := claude.openAuthorize(t, authorizeURL(clientID, claudeCallback, everythingMCP, newVerifier(), "S256", "st-8"))
			if page.status < 400 || page.header.Get("Location") != "" {
				t.Fatalf("authorize by a CIMD client on 127.0.0.1: %d, Location %q; want a refusal without a redirect", page.status, page.header.Get("Location"))
			}
			if n := asked.Load(); n != 0 {
				t.Fatalf("the authorization server fetched a document from a private address (%d requests)", n)
			}
		}},
		{"operator views are not public", func(t *testing.T) {
			for _, p := range []string{"/metrics", "/servers/"} {
				if r := httpGet(t, server, publicBase+p, nil); r.status != http.StatusNotFound {
					t.Errorf("%s through the public URL: %d, want 404", p, r.status)
				}
			}
			h := httpGet(t, server, publicBase+"/health", nil)
			if h.status != http.StatusOK || strings.Contains(h.body, "everything") || !strings.Contains(h.body, `"status"`) {
				t.Errorf("/health through the public URL: %d %s; want the status without server names", h.status, h.body)
			}
			local := "http://" + pg.g.Addr()
			for p, want := range map[string]string{"/metrics": "browserbridge_", "/servers/": "everything", "/health": "everything"} {
				r := httpGet(t, http.DefaultClient, local+p, nil)
				if r.status != http.StatusOK || !strings.Contains(r.body, want) {
					t.Errorf("%s on the machine itself: %d, want 200 with %q:\n%.300s", p, r.status, want, r.body)
				}
			}
			// Locally, an MCP route still needs its token.
			if r := httpPost(t, http.DefaultClient, local+"/servers/everything/mcp", nil, "application/json", initializeBody); r.status != http.StatusUnauthorized {
				t.Errorf("an MCP route on the machine itself without a token: %d, want 401", r.status)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return // each step builds on the ones before
		}
	}
}

// publicTestGateway runs `browserbridge gateway --public-url` in the test,
// behind the front; stop and start again keep the state file.
type publicTestGateway struct {
	t                 *testing.T
	e                 *env
	front             *tlsFront
	file, hash, state string
	g                 *Gateway
	stopFn            func()
}

// start runs the gateway; t (the step's) fails if it cannot, and the
// whole test stops it at the end.
func (p *publicTestGateway) start(t *testing.T) {
	t.Helper()
	cfg := p.e.config()
	cfg.Gateway = config.Gateway{ServersFile: p.file, PublicURL: publicBase, HostDomain: "example.test", HostPrefix: "mcp"}
	watch := false
	cfg.Gateway.Watch = &watch
	cfg.OAuth.PasswordHash = p.hash
	cfg.OAuth.StateFile = &p.state
	g, err := Start(cfg, testutil.Logger(p.t, "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	p.g = g
	p.front.target.Store(&url.URL{Scheme: "http", Host: g.Addr()})
	stopped := false
	p.stopFn = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			p.t.Errorf("gateway Run: %v", err)
		}
	}
	p.t.Cleanup(p.stopFn)
}

func (p *publicTestGateway) stop() { p.stopFn() }

func (p *publicTestGateway) restart(t *testing.T) { p.stop(); p.start(t) }

// tlsFront stands for Caddy: TLS for mcp.example.test and
// *.mcp.example.test with a certificate made here, the Host passed on,
// X-Forwarded-For and -Proto added, streams flushed as they come.
type tlsFront struct {
	srv    *httptest.Server
	target atomic.Pointer[url.URL]
	roots  *x509.CertPool
}

func newTLSFront(t *testing.T) *tlsFront {
	t.Helper()
	cert, roots := testCertificate(t, []string{"mcp.example.test", "*.mcp.example.test"})
	f := &tlsFront{roots: roots}
	f.srv = httptest.NewUnstartedServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(f.target.Load())
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		FlushInterval: -1,
	})
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	f.srv.EnableHTTP2 = true
	f.srv.StartTLS()
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

// transport dials the front whatever the name, and trusts its certificate.
func (f *tlsFront) transport() *http.Transport {
	addr := f.srv.Listener.Addr().String()
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: f.roots},
		ForceAttemptHTTP2: true,
	}
}

// client is a server-side client (claude.ai's backend): no cookies, no
// redirects followed.
func (f *tlsFront) client() *http.Client {
	return &http.Client{Transport: f.transport(), Timeout: 2 * time.Minute, CheckRedirect: noRedirects}
}

func (f *tlsFront) bearerClient(token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token: token, next: f.transport()}}
}

// sdkSession connects the official Go SDK client to endpoint with token.
func (f *tlsFront) sdkSession(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	ctx := testutil.Context(t, 2*time.Minute)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "Claude", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: f.bearerClient(token), MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect %s: %v", endpoint, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// testCertificate makes a self-signed certificate for names and 127.0.0.1,
// and a pool that trusts it.
func testCertificate(t *testing.T, names []string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// browser is a person's browser: cookies, and the headers Chrome sends.
type browser struct {
	c    *http.Client
	page *page
}

func (f *tlsFront) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{c: &http.Client{Transport: f.transport(), Jar: jar, Timeout: 2 * time.Minute, CheckRedirect: noRedirects}}
}

// page is an answer to the browser: its status, headers, body and forms.
type page struct {
	url    *url.URL
	status int
	header http.Header
	body   string
}

// openAuthorize is the navigation claude.ai starts: a top-level GET from
// another site, without Origin.
func (b *browser) openAuthorize(t *testing.T, u string) *page {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	return b.do(t, req)
}

// submit posts form f (pressing the button value when f has one) with the
// Origin Chrome sends: "null" under Referrer-Policy no-referrer, else the
// page's origin (Fetch's "serializing a request origin").
func (b *browser) submit(t *testing.T, f *form, button string) *page {
	t.Helper()
	vals := url.Values{}
	for k, v := range f.values {
		vals[k] = slices.Clone(v)
	}
	if button != "" {
		vals.Set(f.button, button)
	}
	req, err := http.NewRequest(http.MethodPost, f.action, strings.NewReader(vals.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	origin := f.page.url.Scheme + "://" + f.page.url.Host
	if strings.EqualFold(strings.TrimSpace(f.page.header.Get("Referrer-Policy")), "no-referrer") {
		origin = "null"
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	return b.do(t, req)
}

func (b *browser) do(t *testing.T, req *http.Request) *page {
	t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return &page{url: req.URL, status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// authorizeAll runs a whole authorization in the browser: sign in if
// asked, approve, and return the code sent to callback.
func (b *browser) authorizeAll(t *testing.T, u, callback, state string) string {
	t.Helper()
	a, err := testutil.Person{Secret: testPassword, Client: b.c}.Approve(u)
	if err != nil {
		t.Fatal(err)
	}
	q := a.Redirect.Query()
	if !strings.HasPrefix(a.Redirect.String(), callback+"?") || q.Get("code") == "" || q.Get("state") != state || q.Get("iss") != publicBase {
		t.Fatalf("sent back to %s: want %s with a code, state %q and iss %q", a.Redirect, callback, state, publicBase)
	}
	return q.Get("code")
}

// form is an HTML form of a page: where it posts, its hidden and named
// inputs, and the name of its submit buttons.
type form struct {
	page   *page
	action string
	values url.Values
	button string
}

var (
	formRE   = regexp.MustCompile(`(?s)<form\b([^>]*)>(.*?)</form>`)
	inputRE  = regexp.MustCompile(`<(input|button)\b([^>]*)>`)
	attrRE   = regexp.MustCompile(`([a-zA-Z-]+)="([^"]*)"`)
	methodRE = regexp.MustCompile(`(?i)\bmethod="post"`)
)

func attrs(s string) map[string]string {
	m := map[string]string{}
	for _, a := range attrRE.FindAllStringSubmatch(s, -1) {
		m[strings.ToLower(a[1])] = html.UnescapeString(a[2])
	}
	return m
}

// form returns the page's POST form with a field or button named field.
func (p *page) form(field string) *form {
	for _, fm := range formRE.FindAllStringSubmatch(p.body, -1) {
		if !methodRE.MatchString(fm[1]) {
			continue
		}
		f := &form{page: p, values: url.Values{}}
		action, _ := url.Parse(attrs(fm[1])["action"])
		f.action = p.url.ResolveReference(action).String()
		found := false
		for _, in := range inputRE.FindAllStringSubmatch(fm[2], -1) {
			a := attrs(in[2])
			if a["name"] == field {
				found = true
			}
			switch {
			case in[1] == "button" && a["name"] != "":
				f.button = a["name"]
			case in[1] == "input" && a["name"] != "":
				f.values.Set(a["name"], a["value"])
			}
		}
		if found {
			return f
		}
	}
	return nil
}

// redirectQuery is the query of a redirect to callback, or nil.
func redirectQuery(p *page, callback string) url.Values {
	loc := p.header.Get("Location")
	if p.status/100 != 3 || !strings.HasPrefix(loc, callback+"?") {
		return nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		return nil
	}
	return u.Query()
}

// callbackCode checks the redirect to claude.ai's callback after consent.
func callbackCode(t *testing.T, p *page, callback, state string) string {
	t.Helper()
	q := redirectQuery(p, callback)
	if q == nil {
		t.Fatalf("consent: %d Location %q, want a redirect to %s:\n%s", p.status, p.header.Get("Location"), callback, p.body)
	}
	if q.Get("code") == "" || q.Get("state") != state || q.Get("iss") != publicBase {
		t.Fatalf("callback query %v: want a code, state %q and iss %q", q, state, publicBase)
	}
	return q.Get("code")
}

// claudeRegistration is the RFC 7591 request claude.ai sends.
var claudeRegistration = map[string]any{
	"client_name":                "Claude",
	"redirect_uris":              []string{claudeCallback, claudeCallback2},
	"grant_types":                []string{"authorization_code", "refresh_token"},
	"response_types":             []string{"code"},
	"token_endpoint_auth_method": "client_secret_post",
}

type registration struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// form adds the client's credentials (client_secret_post) to v.
func (r registration) form(v url.Values) url.Values {
	v.Set("client_id", r.ClientID)
	if r.ClientSecret != "" {
		v.Set("client_secret", r.ClientSecret)
	}
	return v
}

func register(t *testing.T, c *http.Client, meta map[string]any) registration {
	t.Helper()
	b, _ := json.Marshal(meta)
	resp := httpPost(t, c, publicBase+"/oauth/register", nil, "application/json", string(b))
	if resp.status != http.StatusCreated {
		t.Fatalf("register: %d %s, want 201", resp.status, resp.body)
	}
	var reg registration
	if err := json.Unmarshal([]byte(resp.body), &reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

func newVerifier() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func authorizeURL(clientID, redirect, resource, verifier, method, state string) string {
	challenge := verifier
	if method == "S256" {
		sum := sha256.Sum256([]byte(verifier))
		challenge = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return publicBase + "/oauth/authorize?" + url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect}, "state": {state},
		"code_challenge": {challenge}, "code_challenge_method": {method}, "resource": {resource},
	}.Encode()
}

type tokens struct {
	Access    string `json:"access_token"`
	Refresh   string `json:"refresh_token"`
	TokenType string `json:"token_type"`
	ExpiresIn int    `json:"expires_in"`
}

func exchange(t *testing.T, c *http.Client, reg registration, code, redirect, verifier, resource string) tokens {
	t.Helper()
	return tokenRequest(t, c, reg.form(url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {redirect}, "code_verifier": {verifier}, "resource": {resource}}))
}

func refresh(t *testing.T, c *http.Client, reg registration, rt, resource string) tokens {
	t.Helper()
	return tokenRequest(t, c, reg.form(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "resource": {resource}}))
}

func tokenRequest(t *testing.T, c *http.Client, form url.Values) tokens {
	t.Helper()
	resp := httpPostForm(t, c, publicBase+"/oauth/token", form)
	if resp.status != http.StatusOK {
		t.Fatalf("token (%s): %d %s", form.Get("grant_type"), resp.status, resp.body)
	}
	var tok tokens
	if err := json.Unmarshal([]byte(resp.body), &tok); err != nil {
		t.Fatal(err)
	}
	if tok.Access == "" || tok.Refresh == "" || !strings.EqualFold(tok.TokenType, "Bearer") || tok.ExpiresIn <= 0 {
		t.Fatalf("token response %s: want access and refresh tokens, Bearer, expires_in", resp.body)
	}
	return tok
}

func callEcho(t *testing.T, cs *mcp.ClientSession, msg string) {
	t.Helper()
	ctx := testutil.Context(t, 2*time.Minute)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	if err != nil || res.IsError || !strings.Contains(testutil.Text(res), msg) {
		t.Fatalf("echo %q: %v %+v", msg, err, res)
	}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"Claude","version":"1"}}}`

type answer struct {
	status int
	header http.Header
	body   string
}

func httpSend(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return answer{resp.StatusCode, resp.Header, string(body)}
}

func httpGet(t *testing.T, c *http.Client, u string, h http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	copyHeader(req.Header, h)
	return httpSend(t, c, req)
}

func httpPost(t *testing.T, c *http.Client, u string, h http.Header, ctype, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Accept", "application/json, text/event-stream")
	copyHeader(req.Header, h)
	return httpSend(t, c, req)
}

func httpPostForm(t *testing.T, c *http.Client, u string, form url.Values) answer {
	t.Helper()
	return httpPost(t, c, u, nil, "application/x-www-form-urlencoded", form.Encode())
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

func getJSON(t *testing.T, c *http.Client, u string, status int) map[string]any {
	t.Helper()
	r := httpGet(t, c, u, nil)
	if r.status != status {
		t.Fatalf("GET %s: %d %s, want %d", u, r.status, r.body, status)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("GET %s: %v in %s", u, err, r.body)
	}
	return m
}

func stringsOf(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func oauthError(a answer) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(a.body), &e)
	return e.Error
}

var resourceMetadataRE = regexp.MustCompile(`resource_metadata="([^"]*)"`)

func resourceMetadataOf(challenge string) string {
	m := resourceMetadataRE.FindStringSubmatch(challenge)
	if m == nil {
		return ""
	}
	return m[1]
}

// routesForTest is a public gateway's routing for two servers that never
// start (no process runs before a request reaches one).
func routesForTest(t *testing.T, base string) *publicGateway {
	t.Helper()
	gw, err := gateway.New(gateway.Options{
		Servers:    map[string]stdio.ServerConfig{"memory": {Command: "/bin/false"}, "everything": {Command: "/bin/false"}},
		HostPrefix: "mcp", HostDomain: "example.com",
	})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := authserver.NewPublicOrigin(base)
	if err != nil {
		t.Fatal(err)
	}
	return &publicGateway{pub: pub, gw: gw}
}

func TestPublicResources(t *testing.T) {
	for _, tc := range []struct {
		name, base, uri, want string // want "" = not a resource
	}{
		{"path route", "https://mcp.example.com", "https://mcp.example.com/servers/memory/mcp", "https://mcp.example.com/servers/memory/mcp"},
		{"legacy SSE", "https://mcp.example.com", "https://mcp.example.com/servers/memory/sse", "https://mcp.example.com/servers/memory/sse"},
		{"aggregate", "https://mcp.example.com", "https://mcp.example.com/servers/all/mcp", "https://mcp.example.com/servers/all/mcp"},
		{"host in capitals, default port", "https://mcp.example.com", "HTTPS://MCP.Example.com:443/servers/memory/mcp", "https://mcp.example.com/servers/memory/mcp"},
		{"subdomain", "https://mcp.example.com", "https://memory.mcp.example.com/mcp", "https://memory.mcp.example.com/mcp"},
		{"subdomain SSE", "https://mcp.example.com", "https://everything.mcp.example.com/sse", "https://everything.mcp.example.com/sse"},
		{"subdomain on the public URL's port", "https://mcp.example.com:8443", "https://memory.mcp.example.com:8443/mcp", "https://memory.mcp.example.com:8443/mcp"},
		{"subdomain on another port", "https://mcp.example.com:8443", "https://memory.mcp.example.com/mcp", ""},
		{"unknown server", "https://mcp.example.com", "https://mcp.example.com/servers/nope/mcp", ""},
		{"unknown subdomain", "https://mcp.example.com", "https://nope.mcp.example.com/mcp", ""},
		{"the aggregate has no SSE", "https://mcp.example.com", "https://mcp.example.com/servers/all/sse", ""},
		{"no aggregate subdomain", "https://mcp.example.com", "https://all.mcp.example.com/mcp", ""},
		{"message is not a resource", "https://mcp.example.com", "https://mcp.example.com/servers/memory/message", ""},
		{"http for an https gateway", "https://mcp.example.com", "http://mcp.example.com/servers/memory/mcp", ""},
		{"another host", "https://mcp.example.com", "https://evil.example.com/servers/memory/mcp", ""},
		{"a query", "https://mcp.example.com", "https://mcp.example.com/servers/memory/mcp?x=1", ""},
		{"a fragment", "https://mcp.example.com", "https://mcp.example.com/servers/memory/mcp#x", ""},
		{"a trailing slash", "https://mcp.example.com", "https://mcp.example.com/servers/memory/mcp/", ""},
		{"the root", "https://mcp.example.com", "https://mcp.example.com", ""},
		{"an IPv6 host", "https://[2001:db8::1]:8443", "https://[2001:DB8::1]:8443/servers/memory/mcp", "https://[2001:db8::1]:8443/servers/memory/mcp"},
		{"an IPv6 host, default port", "https://[2001:db8::1]", "https://[2001:db8::1]:443/servers/memory/mcp", "https://[2001:db8::1]/servers/memory/mcp"},
		{"an IPv6 host on another port", "https://[2001:db8::1]", "https://[2001:db8::1]:8443/servers/memory/mcp", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, ok := routesForTest(t, tc.base).lookupResource(tc.uri)
			if got := map[bool]string{true: res.URI}[ok]; got != tc.want {
				t.Fatalf("lookupResource(%q) = %q, %v; want %q", tc.uri, res.URI, ok, tc.want)
			}
			if ok && res.Name == "" {
				t.Fatal("a resource without a name for the consent page")
			}
		})
	}
}

func TestIsLocal(t *testing.T) {
	for _, tc := range []struct {
		name, remote, host string
		header             http.Header
		want               bool
	}{
		{"loopback to a loopback name", "127.0.0.1:50000", "127.0.0.1:3456", nil, true},
		{"localhost", "[::1]:50000", "localhost:3456", nil, true},
		{"through a proxy on the same machine", "127.0.0.1:50000", "mcp.example.com", nil, false},
		{"a proxy that keeps the loopback Host", "127.0.0.1:50000", "127.0.0.1:3456", http.Header{"X-Forwarded-For": {"203.0.113.9"}}, false},
		{"Forwarded", "127.0.0.1:50000", "127.0.0.1:3456", http.Header{"Forwarded": {"for=203.0.113.9"}}, false},
		{"another machine", "192.0.2.7:50000", "127.0.0.1:3456", nil, false},
		{"a container network", "172.18.0.3:50000", "gateway:3456", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			r.RemoteAddr, r.Host = tc.remote, tc.host
			copyHeader(r.Header, tc.header)
			if got := isLocal(r); got != tc.want {
				t.Fatalf("isLocal = %v, want %v", got, tc.want)
			}
		})
	}
}
