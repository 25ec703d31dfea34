//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// The public gateway (`browserbridge gateway --public-url`) signed in to
// by real OAuth clients, a person's part played in headless Chromium
// through DevTools on the gateway's own sign-in and consent pages:
//
//   - TestGatewayOAuthGoSDK: the official Go SDK's AuthorizationCodeHandler
//     (dynamic registration, PKCE, a loopback redirect URI), then a refresh;
//   - TestGatewayOAuthTypeScriptSDK: the official TypeScript SDK's
//     StreamableHTTPClientTransport with an OAuthClientProvider
//     (testutil.StartTSClient);
//   - TestGatewayOAuthExtension: the extension's own remote-MCP client in
//     the real extension, signed in from its options page, its tools then
//     called by a local client through the bridge.

// TestGatewayOAuthGoSDK signs the Go SDK client in to the gateway and uses
// server-everything through it: the SDK discovers the resource and
// authorization server metadata from the 401, registers, sends the person
// to the sign-in page (password, Approve), exchanges the code; tools/list
// and echo work. Then the access token is made to look expired on the
// client and the next call goes through with a refreshed, rotated token;
// the replaced refresh token is refused afterwards to another client and
// its reuse ends the sign-in (RFC 9700's refresh-token rotation); no
// secret is logged.
func TestGatewayOAuthGoSDK(t *testing.T) {
	gw := startPublicGateway(t, gatewayOptions{})
	browser := startSignInBrowser(t)
	catcher := testutil.StartRedirectCatcher(t)
	endpoint := gw.serverURL(gatewayServer)

	var (
		mu       sync.Mutex
		authURLs []string
		consent  string
		code     string
	)
	fetch := caughtCode(catcher, func(authURL string) error {
		mu.Lock()
		authURLs = append(authURLs, authURL)
		mu.Unlock()
		text, err := browser.signIn(authURL, gw.password)
		if err != nil {
			return fmt.Errorf("signing in at %s: %w", authURL, err)
		}
		mu.Lock()
		consent = text
		mu.Unlock()
		return nil
	}, func(q url.Values) {
		mu.Lock()
		code = q.Get("code")
		mu.Unlock()
	})
	tokens := &refreshingSource{}
	handler := sdkOAuthHandler(t, catcher.URL, "Browser Bridge e2e (Go SDK)", fetch, tokens)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-go-oauth", Version: "1.0"}, nil)
	ctx := testutil.Context(t, 2*time.Minute)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("the Go SDK client did not connect to %s: %v", endpoint, err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = cs.Close()
		}
	}()

	// What the SDK asked for, and what the person was asked.
	mu.Lock()
	asked, consentText, codeGot := slices.Clone(authURLs), consent, code
	mu.Unlock()
	if len(asked) != 1 {
		t.Fatalf("the SDK sent the person to %d authorization URLs; want 1: %q", len(asked), asked)
	}
	checkAuthorizationURL(t, gw, asked[0], endpoint, catcher.URL)
	if !strings.Contains(consentText, gatewayServer) {
		t.Errorf("the consent page does not name the server %q a person is approving: %q", gatewayServer, clip(consentText, 300))
	}

	// tools/list and echo through the gateway.
	at := &mcpAt{cs: cs, url: endpoint}
	if names := toolNames(t, at); !strings.Contains(" "+names+" ", " echo ") {
		t.Fatalf("tools/list at %s lacks echo: [%s]", endpoint, names)
	}
	if got := testutil.Text(callOK(t, at, "echo", map[string]any{"message": "héllo gateway"})); got != "Echo: héllo gateway" {
		t.Errorf("echo through the gateway answered %q", got)
	}

	// The access token expires (on the client's clock): the next call
	// refreshes first, with no second sign-in.
	tokens.expire(t)
	if got := testutil.Text(callOK(t, at, "echo", map[string]any{"message": "after refresh"})); got != "Echo: after refresh" {
		t.Errorf("echo after the refresh answered %q", got)
	}
	seen := tokens.all()
	switch {
	case len(seen) != 2:
		t.Fatalf("the client used %d tokens; want the first and one refreshed", len(seen))
	case seen[1].AccessToken == seen[0].AccessToken:
		t.Errorf("the refresh returned the same access token")
	case seen[0].RefreshToken == "" || seen[1].RefreshToken == seen[0].RefreshToken:
		t.Errorf("the refresh did not rotate the refresh token (had one: %v)", seen[0].RefreshToken != "")
	}
	mu.Lock()
	signIns := len(authURLs)
	mu.Unlock()
	if signIns != 1 {
		t.Errorf("the refresh sent the person to sign in again (%d authorization URLs)", signIns)
	}
	_ = cs.Close()
	closed = true

	// The replaced refresh token, from another client, is refused, and
	// using it revokes the sign-in: the newest access token stops working
	// too. (From its own client within seconds of the rotation it would
	// get the same new pair: the reuse grace, which the authserver and
	// gatewayserver tests hold on their own clocks.)
	status, body := gw.postToken(t, url.Values{
		"grant_type": {"refresh_token"}, "refresh_token": {seen[0].RefreshToken},
		"client_id": {gw.register(t)}, "resource": {endpoint},
	})
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("reusing a rotated refresh token answered %d %v; want 400 invalid_grant", status, body)
	}
	if status, challenge := bearerStatus(t, endpoint, seen[1].AccessToken); status != http.StatusUnauthorized || !strings.Contains(challenge, "invalid_token") {
		t.Errorf("after the refresh token's reuse the newest access token got %d (WWW-Authenticate %q); want 401 invalid_token", status, challenge)
	}

	secrets := map[string]string{"password": gw.password, "authorization code": codeGot}
	for i, tok := range seen {
		secrets[fmt.Sprintf("access token #%d", i+1)] = tok.AccessToken
		secrets[fmt.Sprintf("refresh token #%d", i+1)] = tok.RefreshToken
	}
	gw.noSecretsLogged(t, secrets)
}

// checkAuthorizationURL checks what a client's authorization request says
// about the gateway's metadata: the endpoint, the resource (RFC 8707, from
// the protected-resource metadata), PKCE S256 and the redirect URI.
func checkAuthorizationURL(t *testing.T, gw *publicGateway, raw, resource, redirect string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("the authorization URL %q: %v", raw, err)
	}
	q := u.Query()
	for _, c := range []struct{ what, got, want string }{
		{"endpoint", u.Scheme + "://" + u.Host + u.Path, gw.public + "/oauth/authorize"},
		{"resource", q.Get("resource"), resource},
		{"code_challenge_method", q.Get("code_challenge_method"), "S256"},
		{"redirect_uri", q.Get("redirect_uri"), redirect},
		{"response_type", q.Get("response_type"), "code"},
	} {
		if c.got != c.want {
			t.Errorf("the authorization URL's %s is %q; want %q (URL %s)", c.what, c.got, c.want, raw)
		}
	}
	if q.Get("client_id") == "" || q.Get("code_challenge") == "" || q.Get("state") == "" {
		t.Errorf("the authorization URL lacks client_id, code_challenge or state: %s", raw)
	}
	return u
}

// bearerStatus posts an initialize request with token to endpoint and
// returns the status and the WWW-Authenticate header.
func bearerStatus(t *testing.T, endpoint, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e-probe","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", endpoint, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// refreshingSource is the token source the Go SDK's handler uses
// (AuthorizationCodeHandlerConfig.NewTokenSource): the oauth2 package's own,
// which refreshes an expired token, plus a way to make the token look
// expired and a record of every distinct token handed out.
type refreshingSource struct {
	mu   sync.Mutex
	ctx  context.Context
	cfg  *oauth2.Config
	src  oauth2.TokenSource
	seen []*oauth2.Token
}

func (s *refreshingSource) start(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.cfg, s.src = ctx, cfg, cfg.TokenSource(ctx, tok)
	return s, nil
}

func (s *refreshingSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, err := s.src.Token()
	if err == nil && (len(s.seen) == 0 || s.seen[len(s.seen)-1].AccessToken != tok.AccessToken) {
		s.seen = append(s.seen, tok)
	}
	return tok, err
}

// expire replaces the source with one whose token expired a minute ago,
// so that the next Token refreshes it.
func (s *refreshingSource) expire(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		t.Fatal("the SDK has used no token yet")
	}
	old := *s.seen[len(s.seen)-1]
	old.Expiry = time.Now().Add(-time.Minute)
	s.src = s.cfg.TokenSource(s.ctx, &old)
}

func (s *refreshingSource) all() []*oauth2.Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// TestGatewayOAuthTypeScriptSDK signs the TypeScript SDK's client in to the
// gateway (its OAuthClientProvider sends the person to the URL it prints;
// Chromium plays the person; the browser comes back to the client's
// loopback listener) and uses echo; then a spoiled access token meets 401
// and the SDK refreshes by itself.
func TestGatewayOAuthTypeScriptSDK(t *testing.T) {
	gw := startPublicGateway(t, gatewayOptions{})
	browser := startSignInBrowser(t)
	endpoint := gw.serverURL(gatewayServer)
	done := tsSignInAndRefresh(t, endpoint, gw.public, func(authURL string) {
		consent, err := browser.signIn(authURL, gw.password)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(consent, gatewayServer) {
			t.Errorf("the consent page does not name the server %q a person is approving: %q", gatewayServer, clip(consent, 300))
		}
		u, err := url.Parse(authURL)
		if err != nil {
			t.Fatal(err)
		}
		checkAuthorizationURL(t, gw, authURL, endpoint, u.Query().Get("redirect_uri"))
	})
	secrets := map[string]string{"password": gw.password}
	for i, tok := range done.Access {
		secrets[fmt.Sprintf("access token #%d", i+1)] = tok
	}
	for i, tok := range done.Refresh {
		secrets[fmt.Sprintf("refresh token #%d", i+1)] = tok
	}
	gw.noSecretsLogged(t, secrets)
}

// tsSignInAndRefresh runs the TypeScript SDK's client with a loopback
// redirect URI against endpoint: signIn plays the person at the
// authorization URL; the client comes back from issuer, lists echo and
// calls it; then its access token is spoiled and the next call refreshes
// (one save, a new access token, the refresh token rotated) and goes
// through. It returns the client's last line: every token it saved.
func tsSignInAndRefresh(t *testing.T, endpoint, issuer string, signIn func(authURL string)) *testutil.TSMessage {
	t.Helper()
	const message = "héllo from TypeScript"
	c := testutil.StartTSClient(t, endpoint, testutil.TSClientOptions{Name: "e2e-ts-oauth", OAuth: "loopback"})
	signIn(c.Next(t, "authorize").URL)
	if r := c.Next(t, "redirected"); !r.State || r.Iss != issuer {
		t.Errorf("the redirect to the TypeScript client: state matched %v, iss %q; want the state sent and iss %s", r.State, r.Iss, issuer)
	}
	if got := c.Next(t, "connected"); !slices.Contains(got.Tools, "echo") {
		t.Fatalf("the TypeScript client lists the tools %q; want echo among them", got.Tools)
	}
	echo := testutil.TSCall{Tool: "echo", Args: map[string]any{"message": message}}
	if got := c.Call(t, echo).Text(); got != "Echo: "+message {
		t.Errorf("echo through the TypeScript SDK answered %q", got)
	}
	before := c.Spoil(t, "")
	if r := c.Call(t, echo); r.Auth.Saves-before.Saves != 1 || r.Auth.Access == before.Access || r.Text() != "Echo: "+message {
		t.Errorf("after the access token was spoiled: %d token saves, a new token %v, echo %q; want one refresh and the echo",
			r.Auth.Saves-before.Saves, r.Auth.Access != before.Access, r.Text())
	}
	done := c.Close(t)
	if len(done.Access) != 2 || len(done.Refresh) != 2 || done.Refresh[0] == done.Refresh[1] {
		t.Errorf("the TypeScript client saved %d access and %d refresh tokens (rotated: %v); want 2 of each, the refresh token rotated",
			len(done.Access), len(done.Refresh), len(done.Refresh) == 2 && done.Refresh[0] != done.Refresh[1])
	}
	return done
}

// The gateway's server as the extension test adds it on the options page
// (title -> id -> the bridge-facing name, as in TestRemoteMCP).
const (
	gatewayTitle = "E2E Gateway"
	gatewayName  = "e2e-gateway"
)

// TestGatewayOAuthExtension adds the gateway's server on the real
// extension's options page (developer mode, for http on loopback), clicks
// Sign in, and plays the person in the window chrome.identity.
// launchWebAuthFlow opens (password, Approve); the extension then shows the
// server connected with its tools, and a local MCP client calls echo
// through the bridge at /servers/e2e-gateway/mcp. No token is in the
// gateway's or the bridge's log.
//
// The extension's requests carry Origin chrome-extension://<id>, and the
// gateway's config names no allowed_origins: its MCP routes and token
// endpoint take any origin, so a person needs no such setting.
func TestGatewayOAuthExtension(t *testing.T) {
	start := time.Now()
	mark := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }

	// Started after the world, so that it is stopped before: the world's
	// teardown takes any process of this run's binaries still alive as
	// its own leftover.
	w := startWorld(t, worldOptions{})
	gw := startPublicGateway(t, gatewayOptions{})
	endpoint := gw.serverURL(gatewayServer)
	devtools := w.restartForRemote()
	mark("gateway and world up")

	page := addRemoteServer(t, devtools, endpoint, gatewayTitle)
	testutil.WaitWithin(t, 5*time.Second, "", func() (bool, string) {
		var added struct {
			Error  string `json:"error"`
			Listed bool   `json:"listed"`
		}
		page.evalInto(t, fmt.Sprintf(`({
			error: document.getElementById('remote-add-error').textContent,
			listed: [...document.querySelectorAll('#remote-list h3')].some((h) => h.textContent === %s),
		})`, jsString(gatewayTitle)), &added)
		if added.Error != "" {
			t.Fatalf("adding %s on the options page failed: %s", endpoint, added.Error)
		}
		return added.Listed, "the options page does not list " + gatewayTitle + " after Add server"
	})
	if s := page.remoteStatus(t, endpoint); s.Name != gatewayName || !s.Enabled {
		t.Fatalf("the added server is %+v; want it enabled and named %q", s, gatewayName)
	}
	mark("server added")

	signIn := fmt.Sprintf(`[...document.querySelectorAll('#remote-list button')].find((b) => b.getAttribute('aria-label') === %s && !b.disabled)`,
		jsString("Sign in to "+gatewayTitle))
	// Found and clicked in one evaluation (the list is drawn again as the
	// server's state changes).
	page.waitJS(t, "a Sign in button for "+gatewayTitle, 10*time.Second, "((b) => !!b && (b.click(), true))("+signIn+")")

	// The sign-in window launchWebAuthFlow opened, as DevTools lists it.
	popup := findTarget(t, devtools, gw.public+"/oauth/authorize", signInWait)
	defer popup.close()
	consent, err := signInPage(popup, gw.password)
	if err != nil {
		t.Fatalf("in the extension's sign-in window: %v", err)
	}
	if !strings.Contains(consent, gatewayServer) {
		t.Errorf("the consent page does not name the server %q a person is approving: %q", gatewayServer, clip(consent, 300))
	}
	mark("signed in and approved in the sign-in window")

	var server remoteServer
	testutil.WaitWithin(t, signInWait, "", func() (bool, string) {
		server = page.remoteStatus(t, endpoint)
		return server.State == "connected", fmt.Sprintf("after Approve the extension has %s in state %q (%s); options page error: %q",
			gatewayTitle, server.State, server.Message, page.js(t, `document.getElementById('remote-error').textContent`))
	})
	if names := server.toolNames(); !strings.Contains(" "+names+" ", " echo ") {
		t.Fatalf("the extension lists the tools [%s] of %s; want echo", names, gatewayTitle)
	}
	mark("connected: " + server.Message)

	// A local client calls the gateway's tool through the bridge.
	route := w.connectTo(t, strings.TrimSuffix(w.mcpURL, "/mcp")+"/servers/"+gatewayName+"/mcp", "e2e-gateway-route")
	testutil.WaitWithin(t, remoteWait, "", func() (bool, string) {
		names := toolNames(t, route)
		return strings.Contains(" "+names+" ", " echo "), fmt.Sprintf("tools/list at %s: [%s]; want echo", route.url, names)
	})
	if got := testutil.Text(callOK(t, route, "echo", map[string]any{"message": "héllo through the bridge"})); got != "Echo: héllo through the bridge" {
		t.Errorf("echo through the bridge and the extension answered %q", got)
	}
	mark("echo called through the bridge")

	// The extension's tokens appear in no log.
	var stored struct {
		Access  []string `json:"access"`
		Refresh []string `json:"refresh"`
	}
	page.evalInto(t, `chrome.storage.local.get(null).then((all) => {
		const toks = Object.entries(all).filter(([k]) => k.startsWith('remote.auth.') && k.endsWith('.tokens')).map(([, v]) => v);
		return {access: toks.map((x) => x.access_token).filter(Boolean), refresh: toks.map((x) => x.refresh_token).filter(Boolean)};
	})`, &stored)
	if len(stored.Access) == 0 {
		t.Fatalf("the extension stored no tokens (remote.auth.*.tokens) after signing in")
	}
	secrets := map[string]string{"password": gw.password}
	for i, s := range stored.Access {
		secrets[fmt.Sprintf("access token #%d", i+1)] = s
	}
	for i, s := range stored.Refresh {
		secrets[fmt.Sprintf("refresh token #%d", i+1)] = s
	}
	gw.noSecretsLogged(t, secrets)
	bridgeLog, _ := os.ReadFile(filepath.Join(w.bbHome, "logs", "bridge.log"))
	for what, s := range secrets {
		for _, o := range []struct{ name, text string }{
			{"bridge's log", string(bridgeLog)}, {"bridge's output", w.serveOut.String()}, {"Chromium's stderr", w.chromeOut.String()},
		} {
			if strings.Contains(o.text, s) {
				t.Errorf("the %s appears in the %s", what, o.name)
			}
		}
	}
}

// findTarget waits until DevTools lists a page whose URL starts with
// prefix and connects to it.
func findTarget(t *testing.T, dt devtoolsAddr, prefix string, d time.Duration) *cdpConn {
	t.Helper()
	browser, err := dialCDP("ws://" + dt.host + dt.browserPath)
	if err != nil {
		t.Fatalf("DevTools: %v", err)
	}
	defer browser.close()
	id := waitTarget(t, browser, d, "page", prefix, func(u string) bool { return strings.HasPrefix(u, prefix) })
	conn, err := dialCDP("ws://" + dt.host + "/devtools/page/" + id)
	if err != nil {
		t.Fatalf("DevTools: connecting to the sign-in window: %v", err)
	}
	return conn
}
