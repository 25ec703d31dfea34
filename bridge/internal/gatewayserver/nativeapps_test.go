//go:build unix

package gatewayserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/npmtools"
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

var hiddenInput = regexp.MustCompile(`name="(request|csrf)" value="([^"]*)"`)

// approve plays the person on authURL: the sign-in page (password), the
// consent page (Approve), and returns where the gateway sent the browser
// back to, which for an app's own scheme a browser hands to the app.
func (lg *loopbackGateway) approve(authURL string) (*url.URL, error) {
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: time.Minute, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), lg.base+"/") {
			return nil
		}
		return http.ErrUseLastResponse // the app's redirect: the test reads it
	}}
	page := func(resp *http.Response, err error) (string, *http.Response, error) {
		if err != nil {
			return "", nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), resp, err
	}
	form := func(p string) url.Values {
		f := url.Values{}
		for _, m := range hiddenInput.FindAllStringSubmatch(p, -1) {
			f.Set(m[1], m[2])
		}
		return f
	}
	post := func(path string, f url.Values) (string, *http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, lg.base+path, strings.NewReader(f.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "null") // what a page under Referrer-Policy: no-referrer sends
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		return page(browser.Do(req))
	}
	signIn, resp, err := page(browser.Get(authURL))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the authorization page: %v %v %s", err, resp.StatusCode, signIn)
	}
	f := form(signIn)
	f.Set("password", nativePassword)
	consent, resp, err := post("/oauth/signin", f)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(consent, `value="approve"`) {
		return nil, fmt.Errorf("signing in: %v %s", err, consent)
	}
	f = form(consent)
	f.Set("decision", "approve")
	body, resp, err := post("/oauth/consent", f)
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("approving: %v %s", err, body)
	}
	return resp.Location()
}

// TestNativeSchemeTypeScriptSDK: the TypeScript SDK's client registers a
// cursor:// redirect URI, is sent back there with its code, signs in and
// calls echo; then two windows of it holding one refresh token refresh at
// once, and both carry on (the refresh token's reuse grace).
func TestNativeSchemeTypeScriptSDK(t *testing.T) {
	lg := startLoopbackGateway(t, nil)
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	const redirect = "cursor://anysphere.cursor-retrieval/oauth/callback"
	c := startNativeTSClient(t, tools, lg.base+"/servers/everything/mcp", redirect)

	authorize := c.next(t, "authorize")
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
	c.send(t, map[string]string{"redirect": back.String()})

	if got := c.next(t, "connected"); !slices.Contains(got.Tools, "echo") || got.Text != "Echo: from window A" {
		t.Fatalf("after signing in: tools %q, echo %q", got.Tools, got.Text)
	}
	raced := c.next(t, "raced")
	if !slices.Equal(raced.Texts, []string{"Echo: race A", "Echo: race B"}) || !slices.Equal(raced.Saves, []int{1, 1}) ||
		raced.Refresh[0] == "" || raced.Refresh[0] != raced.Refresh[1] {
		t.Fatalf("two windows refreshing at once: echo %q, token saves %v, refresh tokens equal %v; want both echoes, one refresh each, one pair",
			raced.Texts, raced.Saves, raced.Refresh[0] == raced.Refresh[1])
	}
	if after := c.next(t, "after"); !slices.Equal(after.Texts, []string{"Echo: still A", "Echo: still B"}) {
		t.Fatalf("after the race: %q", after.Texts)
	}
	done := c.next(t, "done")
	c.wait(t)
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
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			back, err := lg.approve(args.URL)
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(back.String(), redirect+"?") {
				return nil, fmt.Errorf("sent back to %s, not to %s", back, redirect)
			}
			q := back.Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
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

// nativeTSClient is a running testdata/tsnative/client.mjs.
type nativeTSClient struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lockedBuffer
	lines  chan string
	exited chan struct{}
}

type nativeTSEvent struct {
	Event      string   `json:"event"`
	Step       string   `json:"step"`
	Error      string   `json:"error"`
	URL        string   `json:"url"`
	Registered []string `json:"registered"`
	Tools      []string `json:"tools"`
	Text       string   `json:"text"`
	Texts      []string `json:"texts"`
	Saves      []int    `json:"saves"`
	Refresh    []string `json:"refresh"`
	Access     []string `json:"access"`
}

// tsWait bounds each step of the script: Node starting, a sign-in, a call.
const tsWait = 2 * time.Minute

func startNativeTSClient(t *testing.T, tools npmtools.Tools, endpoint, redirect string) *nativeTSClient {
	t.Helper()
	c := &nativeTSClient{stderr: &lockedBuffer{t: io.Discard}, lines: make(chan string, 16), exited: make(chan struct{})}
	c.cmd = exec.Command(tools.Node, filepath.Join("testdata", "tsnative", "client.mjs"),
		"--modules", tools.Modules, "--url", endpoint, "--redirect", redirect)
	c.cmd.Stderr = c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting the TypeScript client: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
		if t.Failed() {
			t.Logf("--- TypeScript client stderr ---\n%s", c.stderr.String())
		}
	})
	return c
}

// next reads the script's next line and fails the test unless it is event.
func (c *nativeTSClient) next(t *testing.T, event string) nativeTSEvent {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			t.Fatalf("the TypeScript client exited before %q: %s", event, c.stderr.String())
		}
		var e nativeTSEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("the TypeScript client printed %q: %v", line, err)
		}
		if e.Event == "failed" {
			t.Fatalf("the TypeScript client failed at %s: %s", e.Step, e.Error)
		}
		if e.Event != event {
			t.Fatalf("the TypeScript client said %q; want %q", line, event)
		}
		return e
	case <-time.After(tsWait):
		t.Fatalf("no %q from the TypeScript client within %v: %s", event, tsWait, c.stderr.String())
	}
	return nativeTSEvent{}
}

func (c *nativeTSClient) send(t *testing.T, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("writing to the TypeScript client: %v", err)
	}
}

// wait waits for the script to exit after "done", and fails unless it
// exited 0.
func (c *nativeTSClient) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.exited:
		if !c.cmd.ProcessState.Success() {
			t.Errorf("the TypeScript client exited with %v: %s", c.cmd.ProcessState, c.stderr.String())
		}
	case <-time.After(tsWait):
		t.Errorf("the TypeScript client did not exit within %v of done", tsWait)
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
