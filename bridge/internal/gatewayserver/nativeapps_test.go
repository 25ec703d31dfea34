//go:build unix

package gatewayserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// Native apps signing in to the public gateway with their own URI scheme
// (issue 33): the official TypeScript SDK client registering a Cursor-like
// cursor:// callback, and the official Go SDK client a VS Code-like
// vscode:// one. The gateway runs in the test on a loopback public URL
// (http is allowed there), with server-everything behind it; the person's
// part (the sign-in and consent pages) is played by an HTTP client that
// stops at the app's redirect, as a browser hands a custom scheme to the
// operating system.

const nativePassword = "correct horse battery staple"

// loopbackGateway is a public gateway at http://127.0.0.1:PORT.
type loopbackGateway struct {
	base string
	logs *lockedBuffer
}

// lockedBuffer collects the gateway's log for the test to read.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
	t  io.Writer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	return l.t.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startLoopbackGateway(t *testing.T, edit func(*config.Config)) *loopbackGateway {
	t.Helper()
	e := newEnv(t)
	file := filepath.Join(e.dir, "servers.json")
	testutil.ServersFile(t, file, "everything")
	// The public URL names the listening port, so the port is chosen first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := e.config()
	cfg.Listen = addr
	watch := false
	cfg.Gateway = config.Gateway{ServersFile: file, PublicURL: "http://" + addr, Watch: &watch}
	cfg.OAuth.Password = nativePassword
	memory := config.MemoryState
	cfg.OAuth.StateFile = &memory
	if edit != nil {
		edit(cfg)
	}
	lg := &loopbackGateway{base: "http://" + addr, logs: &lockedBuffer{t: testutil.LogWriter(t, "gateway")}}
	g, err := Start(cfg, slog.New(slog.NewTextHandler(lg.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway Run: %v", err)
		}
	})
	return lg
}

// approve plays the person on authURL: the sign-in page (password), the
// consent page (Approve), and returns where the gateway sent the browser
// back to, which for an app's own scheme a browser hands to the app.
func (lg *loopbackGateway) approve(authURL string) (*url.URL, error) {
	return testutil.Person{Secret: nativePassword}.Redirect(authURL)
}

// TestNativeSchemeTypeScriptSDK: the TypeScript SDK's client registers a
// cursor:// redirect URI, is sent back there with its code, signs in and
// calls echo; then two windows of it holding one refresh token refresh at
// once, and both carry on (the refresh token's reuse grace).
func TestNativeSchemeTypeScriptSDK(t *testing.T) {
	lg := startLoopbackGateway(t, nil)
	const redirect = "cursor://anysphere.cursor-retrieval/oauth/callback"
	c := testutil.StartTSClient(t, lg.base+"/servers/everything/mcp", testutil.TSClientOptions{Name: "cursor-test", OAuth: redirect})

	authorize := c.Next(t, "authorize")
	if !slices.Equal(authorize.Registered, []string{redirect}) {
		t.Fatalf("registered redirect_uris %q, want [%s]", authorize.Registered, redirect)
	}
	back, err := lg.approve(authorize.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back.String(), redirect+"?") || back.Query().Get("iss") != lg.base {
		t.Fatalf("sent back to %s; want %s with the code and iss %s", back, redirect, lg.base)
	}
	c.Redirect(t, back)
	if r := c.Next(t, "redirected"); !r.State {
		t.Fatalf("the redirect carries another state than the TypeScript client sent")
	}
	connected := c.Next(t, "connected")
	if got := c.Call(t, testutil.TSCall{Tool: "echo", Args: map[string]any{"message": "from window A"}}); !slices.Contains(connected.Tools, "echo") || got.Text() != "Echo: from window A" {
		t.Fatalf("after signing in: tools %q, echo %q", connected.Tools, got.Text())
	}
	if connected.Auth == nil || connected.Auth.Refresh == "" {
		t.Fatalf("the token response had no refresh_token: %+v", connected.Auth)
	}

	// A second window of the app starts with the same tokens; both access
	// tokens go bad (as expired ones would) and each window's next call
	// meets 401 and refreshes with the one refresh token, at once.
	c.Open(t, "b")
	before := []*testutil.TSAuth{c.Spoil(t, "a"), c.Spoil(t, "b")}
	race := []int{
		c.Start(t, testutil.TSCall{Window: "a", Tool: "echo", Args: map[string]any{"message": "race A"}}),
		c.Start(t, testutil.TSCall{Window: "b", Tool: "echo", Args: map[string]any{"message": "race B"}}),
	}
	var texts, refresh []string
	var saves []int
	for i, id := range race {
		a := c.Answer(t, id)
		if a.Error != "" {
			t.Fatalf("window %c's call after its token went bad: %s", 'a'+i, a.Error)
		}
		texts, saves, refresh = append(texts, a.Text()), append(saves, a.Auth.Saves-before[i].Saves), append(refresh, a.Auth.Refresh)
	}
	if !slices.Equal(texts, []string{"Echo: race A", "Echo: race B"}) || !slices.Equal(saves, []int{1, 1}) ||
		refresh[0] == "" || refresh[0] != refresh[1] {
		t.Fatalf("two windows refreshing at once: echo %q, token saves %v, refresh tokens equal %v; want both echoes, one refresh each, one pair",
			texts, saves, refresh[0] == refresh[1])
	}
	for _, w := range []string{"a", "b"} {
		if got := c.Call(t, testutil.TSCall{Window: w, Tool: "echo", Args: map[string]any{"message": "still " + w}}).Text(); got != "Echo: still "+w {
			t.Fatalf("window %s after the race: %q", w, got)
		}
	}
	done := c.Close(t)
	// The second refresh presented the token the first had just replaced:
	// the grace, not luck, kept the sign-in alive.
	if logs := lg.logs.String(); !strings.Contains(logs, "refresh token reused within its grace") || strings.Contains(logs, "revoking its family") {
		t.Fatalf("the gateway's log does not show the reuse answered within its grace:\n%s", logs)
	}
	for _, tok := range append(done.Access, done.Refresh...) {
		if strings.Contains(lg.logs.String(), tok) {
			t.Fatal("a token reached the gateway's log")
		}
	}
}

// TestNativeSchemeGoSDK: the Go SDK's client with a vscode:// redirect
// URI (dynamic registration, PKCE, its own discovery) signs in and calls
// echo; in its default, stateless era it knows the server's name from
// server/discover.
func TestNativeSchemeGoSDK(t *testing.T) {
	lg := startLoopbackGateway(t, nil)
	const redirect = "vscode://vscode.mcp-auth/callback"
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{redirect}, ClientName: "VS Code (Browser Bridge test)", TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		AuthorizationCodeFetcher: testutil.CodeFetcher(func(_ context.Context, authURL string) (url.Values, error) {
			back, err := lg.approve(authURL)
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(back.String(), redirect+"?") {
				return nil, fmt.Errorf("sent back to %s, not to %s", back, redirect)
			}
			return back.Query(), nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t, 2*time.Minute)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "vscode-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: lg.base + "/servers/everything/mcp", OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("connecting the Go SDK client: %v", err)
	}
	defer cs.Close()
	if ir := cs.InitializeResult(); ir == nil || ir.ServerInfo == nil || ir.ServerInfo.Name == "" {
		t.Fatalf("the Go SDK client does not know the server: %+v", ir)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "from vscode://"}})
	if err != nil || testutil.Text(res) != "Echo: from vscode://" {
		t.Fatalf("echo: %v %q", err, testutil.Text(res))
	}
}

// TestPublicGatewayLifetimes: the oauth section's lifetimes reach the
// gateway's authorization server (issue 33, item 7): a token response
// says the configured access token life.
func TestPublicGatewayLifetimes(t *testing.T) {
	lg := startLoopbackGateway(t, func(c *config.Config) { c.OAuth.AccessTokenTTL = "7m" })
	const redirect = "http://127.0.0.1:9/callback"
	reg, err := http.Post(lg.base+"/oauth/register", "application/json",
		strings.NewReader(`{"redirect_uris":["`+redirect+`"],"token_endpoint_auth_method":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	var client struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(reg.Body).Decode(&client); err != nil || client.ClientID == "" {
		t.Fatalf("registering: %d %v", reg.StatusCode, err)
	}
	reg.Body.Close()
	verifier := newVerifier()
	resource := lg.base + "/servers/everything/mcp"
	authURL := strings.Replace(authorizeURL(client.ClientID, redirect, resource, verifier, "S256", "st"), publicBase, lg.base, 1)
	back, err := lg.approve(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.PostForm(lg.base+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
		"code_verifier": {verifier}, "redirect_uri": {redirect}, "client_id": {client.ClientID}, "resource": {resource}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		ExpiresIn int    `json:"expires_in"`
		Scope     string `json:"scope"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK || tok.ExpiresIn != 420 || tok.Scope != "mcp" {
		t.Fatalf("token response %d %+v %v: want expires_in 420 (access_token_ttl 7m) and scope mcp", resp.StatusCode, tok, err)
	}
}

// TestMCPRemoteGateway: mcp-remote (npm), the stdio bridge many clients
// use to reach remote servers, signs in to the public gateway (discovery
// from the 401, registration, its own loopback callback, PKCE), and a tool
// call goes through it.
func TestMCPRemoteGateway(t *testing.T) {
	lg := startLoopbackGateway(t, nil)
	cs := testutil.MCPRemote(t, lg.base+"/servers/everything/mcp", lg.approve)
	ctx := testutil.Context(t, 2*time.Minute)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "through mcp-remote"}})
	if err != nil || testutil.Text(res) != "Echo: through mcp-remote" {
		t.Fatalf("echo through mcp-remote: %v %q", err, testutil.Text(res))
	}
}
