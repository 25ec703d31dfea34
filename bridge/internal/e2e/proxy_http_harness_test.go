//go:build linux

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// The proxy's public MCP endpoint (issue 17), end to end: the built
// `browserbridge-proxy serve --public-url`, the world's bridge relaying to
// it, and remote clients signing in with pairing codes.

// claudeCallback is the redirect URI claude.ai registers.
const claudeCallback = "https://claude.ai/api/mcp/auth_callback"

// relayWait bounds how long a bridge takes to register with the proxy.
const relayWait = 30 * time.Second

var (
	proxyBinOnce sync.Once
	proxyBin     string
	proxyBinErr  error
)

// proxyBinary builds bridge/cmd/browserbridge-proxy into this run's binDir
// once (testbrowser.Build builds the bridge and the host only).
func proxyBinary(t *testing.T) string {
	t.Helper()
	proxyBinOnce.Do(func() {
		out := filepath.Join(binDir, "browserbridge-proxy")
		cmd := exec.Command("go", "build", "-o", out, "../../cmd/browserbridge-proxy")
		if b, err := cmd.CombinedOutput(); err != nil {
			proxyBinErr = fmt.Errorf("go build browserbridge-proxy: %v\n%s", err, b)
			return
		}
		proxyBin = out
	})
	if proxyBinErr != nil {
		t.Fatal(proxyBinErr)
	}
	return proxyBin
}

// publicProxy is a running `browserbridge-proxy serve --public-url` on a
// free loopback port (http is allowed on loopback).
type publicProxy struct {
	t      *testing.T
	dir    string
	secret string // the token key file
	public string // http://127.0.0.1:PORT
	relay  string // ws://127.0.0.1:PORT, the bridges' relay.url
	// internal is http://127.0.0.1:PORT of --metrics-listen, where the
	// whole /health is (cluster nodes only).
	internal string
	cmd      *exec.Cmd
	args     []string // serve and its flags, for a restart
	out      *testbrowser.SyncBuffer
	exited   chan struct{}
}

// startPublicProxy starts the proxy and waits for its authorization
// server's metadata. Call it before startWorld: its teardown then runs
// after the worlds', and checks that the proxy left nothing behind.
func startPublicProxy(t *testing.T) *publicProxy {
	t.Helper()
	bin := proxyBinary(t)
	p := &publicProxy{t: t, dir: t.TempDir(), out: &testbrowser.SyncBuffer{}}
	p.secret = filepath.Join(p.dir, "secret")
	if err := os.WriteFile(p.secret, []byte(randomHex(t, 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p.public, p.relay = "http://"+listen, "ws://"+listen
	p.launch(bin, "serve", "--listen", listen, "--secret-file", p.secret, "-v",
		"--public-url", p.public, "--oauth-state", filepath.Join(p.dir, "oauth.db"))
	return p
}

// launch runs the proxy binary bin with args (serve and its flags) and
// waits for its authorization server's metadata at p.public.
func (p *publicProxy) launch(bin string, args ...string) {
	t := p.t
	t.Helper()
	// Run through a link in the proxy's own directory: the worlds' leftover
	// checks kill whatever names binDir, and the proxy outlives the worlds.
	link := filepath.Join(p.dir, "browserbridge-proxy")
	first := p.cmd == nil
	if err := os.Symlink(bin, link); err != nil && (first || !os.IsExist(err)) {
		t.Fatal(err)
	}
	p.args = args
	p.exited = make(chan struct{})
	p.cmd = exec.Command(link, args...)
	p.cmd.Dir = p.dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, exited := p.cmd, p.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	if first {
		t.Cleanup(p.stop)
	}
	testutil.WaitWithin(t, gatewayUpWait, "", func() (bool, string) {
		select {
		case <-p.exited:
			t.Fatalf("browserbridge-proxy exited (%v):\n%s", p.cmd.ProcessState, tail(p.out.String(), 40))
		default:
		}
		resp, err := http.Get(p.public + "/.well-known/oauth-authorization-server")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

func (p *publicProxy) stop() { p.stopWith(syscall.SIGTERM) }

// restart stops the proxy with sig (SIGTERM, as a service manager does;
// SIGKILL, a crash) and starts it again with the same flags, port and
// state file.
func (p *publicProxy) restart(sig syscall.Signal) {
	p.t.Helper()
	p.stopWith(sig)
	if p.t.Failed() {
		p.t.FailNow()
	}
	p.launch(proxyBinary(p.t), p.args...)
}

// stopWith ends the proxy's process group with sig (then SIGKILL) and
// fails the test if any process of it is left.
func (p *publicProxy) stopWith(sig syscall.Signal) {
	if p.t.Failed() {
		p.t.Logf("--- browserbridge-proxy output ---\n%s", tail(p.out.String(), 150))
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.exited:
	case <-time.After(gatewayStopWait):
		p.t.Errorf("browserbridge-proxy did not exit within %v of SIGTERM", gatewayStopWait)
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	if left := append(pgrep("-g", strconv.Itoa(p.cmd.Process.Pid)), pgrep("-f", p.dir+"/")...); len(left) > 0 {
		p.t.Errorf("processes of the proxy outlived it: %v", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// mint is `browserbridge-proxy token` for user and kind.
func (p *publicProxy) mint(user, kind string) string {
	p.t.Helper()
	out, err := exec.Command(proxyBinary(p.t), "token", "--secret-file", p.secret, "--user", user, "--kind", kind).Output()
	if err != nil {
		p.t.Fatalf("browserbridge-proxy token: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func (p *publicProxy) url(path string) string { return p.public + path }

// waitRelayConnected waits until the world's bridge says its relay to the
// proxy is connected as user.
func waitRelayConnected(t testing.TB, w *world, user string) {
	t.Helper()
	testutil.WaitWithin(t, relayWait, "", func() (bool, string) {
		st, err := w.status()
		if err != nil {
			return false, err.Error()
		}
		for _, r := range st.Relay {
			if r.State == relay.StateConnected && r.UserID == user {
				return true, ""
			}
		}
		return false, "relay status: " + relayJSON(st.Relay)
	})
}

// startRestartableRelayedWorld is startRelayedWorld for tests that restart
// the bridge: on a fixed port, the host starting a new bridge as in real
// life, every bridge stopped at the end.
func startRestartableRelayedWorld(t *testing.T, p *publicProxy, user string) *restartWorld {
	t.Helper()
	rw := &restartWorld{world: startWorld(t, worldOptions{
		relay:            &relayOptions{url: p.relay, token: p.mint(user, "extension")},
		listen:           "127.0.0.1:" + strconv.Itoa(freePort(t)),
		hostStartsBridge: true,
	})}
	t.Cleanup(rw.stopBridges)
	waitRelayConnected(t, rw.world, user)
	return rw
}

// startRelayedWorld starts a world whose bridge relays to relayURL with an
// extension token of user, and waits until the proxy has its browser.
func startRelayedWorld(t *testing.T, p *publicProxy, relayURL, user string) *world {
	t.Helper()
	w := startWorld(t, worldOptions{relay: &relayOptions{url: relayURL, token: p.mint(user, "extension")}})
	waitRelayConnected(t, w, user)
	return w
}

// addEverything adds server-everything to the world's gateway (its config
// file's mcpServers, then SIGHUP, which reloads it) and waits until its
// server extension is registered with the proxy. Node runs through a link
// in the world's directory, so that the world's leftover check finds it.
func addEverything(t *testing.T, w *world) {
	t.Helper()
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	everything, err := tools.Module("@modelcontextprotocol", "server-everything", "dist", "index.js")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(w.dir, "node")
	if err := os.Symlink(tools.Node, node); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	file := filepath.Join(w.bbHome, "config", "config.json")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var config map[string]any
	if err := json.Unmarshal(raw, &config); err != nil {
		t.Fatal(err)
	}
	config["mcpServers"] = map[string]any{gatewayServer: map[string]any{"command": node, "args": []string{everything, "stdio"}}}
	writeJSON(t, file, config)
	if err := w.serve.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitServerRelayed(t, w, "")
}

// waitServerRelayed waits until the world's relay has server-everything
// registered with the proxy by a connection made since prev (its Since; ""
// for any), and returns when that connection was made.
func waitServerRelayed(t *testing.T, w *world, prev string) string {
	t.Helper()
	var since string
	testutil.WaitWithin(t, relayWait, "", func() (bool, string) {
		st, err := w.status()
		if err != nil {
			return false, err.Error()
		}
		for _, r := range st.RelayServers {
			if r.Server == gatewayServer && r.State == relay.StateConnected && r.Since != prev {
				since = r.Since
				return true, ""
			}
		}
		return false, "relay servers: " + relayJSON(st.RelayServers)
	})
	return since
}

var pairLine = regexp.MustCompile(`^Code: ([0-9A-Z]{4}(?:-[0-9A-Z]{4}){3}) \(valid until [^)]*single use\)$`)

// pair runs the built `browserbridge pair` in the world and returns the
// code of its last line.
func pair(t *testing.T, w *world) string {
	t.Helper()
	out, code := w.cli("pair")
	if code != 0 {
		t.Fatalf("browserbridge pair: exit %d\n%s", code, out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	m := pairLine.FindStringSubmatch(strings.TrimSpace(lines[len(lines)-1]))
	if m == nil {
		t.Fatalf("the last line of browserbridge pair is no code:\n%s", out)
	}
	return m[1]
}

// ---------------------------------------------------------------------------
// claude.ai's OAuth flow, scripted as raw HTTP: its servers (no cookies)
// register, exchange and refresh; the person's browser (cookies, no
// redirects followed) authorizes, signs in and approves.

type oauthReg struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

type oauthTokens struct {
	Access  string `json:"access_token"`
	Refresh string `json:"refresh_token"`
	Type    string `json:"token_type"`
}

// httpAnswer is a response read whole.
type httpAnswer struct {
	status int
	header http.Header
	body   string
}

func doHTTP(t *testing.T, c *http.Client, req *http.Request) httpAnswer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return httpAnswer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func postForm(t *testing.T, c *http.Client, u string, form url.Values, hdr map[string]string) httpAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return doHTTP(t, c, req)
}

func registerClaude(t *testing.T, p *publicProxy) oauthReg {
	t.Helper()
	b, _ := json.Marshal(map[string]any{
		"client_name": "Claude", "redirect_uris": []string{claudeCallback},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "client_secret_post",
	})
	req, _ := http.NewRequest(http.MethodPost, p.url("/oauth/register"), strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	a := doHTTP(t, http.DefaultClient, req)
	if a.status != http.StatusCreated {
		t.Fatalf("registration: %d %s, want 201", a.status, a.body)
	}
	var reg oauthReg
	if err := json.Unmarshal([]byte(a.body), &reg); err != nil || reg.ClientID == "" {
		t.Fatalf("registration answer %s: %v", a.body, err)
	}
	return reg
}

// signInFlow is one authorization request in the person's browser.
type signInFlow struct {
	p        *publicProxy
	reg      oauthReg
	browser  *http.Client
	verifier string
	resource string
	state    string
	page     httpAnswer // the page the browser shows now
}

// startSignIn opens the authorization URL (PKCE S256, resource) in a
// fresh browser and expects the sign-in page.
func startSignIn(t *testing.T, p *publicProxy, reg oauthReg, resource string) *signInFlow {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	f := &signInFlow{p: p, reg: reg, resource: resource, state: randomHex(t, 8), verifier: randomHex(t, 32),
		browser: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	sum := sha256.Sum256([]byte(f.verifier))
	u := p.url("/oauth/authorize?" + url.Values{
		"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {claudeCallback}, "state": {f.state},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {resource},
	}.Encode())
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	f.page = doHTTP(t, f.browser, req)
	if f.page.status != http.StatusOK || !strings.Contains(f.page.body, `name="code"`) {
		t.Fatalf("authorize: %d, want the sign-in page with a code field:\n%s", f.page.status, clip(f.page.body, 800))
	}
	return f
}

var (
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="(request|csrf)" value="([^"]*)">`)
	alertRE  = regexp.MustCompile(`(?s)<p[^>]*role="alert"[^>]*>(.*?)</p>`)
	tagRE    = regexp.MustCompile(`<[^>]+>`)
)

// submit posts the current page's form with the hidden fields and extra,
// as Chrome does from the page.
func (f *signInFlow) submit(t *testing.T, path string, extra url.Values) httpAnswer {
	t.Helper()
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(f.page.body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if form.Get("request") == "" || form.Get("csrf") == "" {
		t.Fatalf("the page has no request/csrf fields:\n%s", clip(f.page.body, 800))
	}
	for k, v := range extra {
		form[k] = v
	}
	f.page = postForm(t, f.browser, f.p.url(path), form, map[string]string{
		"Origin": f.p.public, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate"})
	return f.page
}

// typeCode submits code in the sign-in form's code field.
func (f *signInFlow) typeCode(t *testing.T, code string) httpAnswer {
	t.Helper()
	return f.submit(t, "/oauth/signin", url.Values{"code": {code}})
}

// alertOf is the sentence a page shows about what went wrong ("" if none).
func alertOf(body string) string {
	if m := alertRE.FindStringSubmatch(body); m != nil {
		return htmlText(m[1])
	}
	return ""
}

// htmlText is the visible text of a page, roughly.
func htmlText(body string) string {
	return strings.Join(strings.Fields(html.UnescapeString(tagRE.ReplaceAllString(body, " "))), " ")
}

// approve presses Approve on the consent page and returns the
// authorization code from the redirect to claude.ai.
func (f *signInFlow) approve(t *testing.T) string {
	t.Helper()
	if !strings.Contains(f.page.body, `name="decision" value="approve"`) {
		t.Fatalf("no consent page: %d %s", f.page.status, clip(htmlText(f.page.body), 500))
	}
	a := f.submit(t, "/oauth/consent", url.Values{"decision": {"approve"}})
	if a.status != http.StatusFound && a.status != http.StatusSeeOther {
		t.Fatalf("approve: %d %s, want a redirect", a.status, clip(htmlText(a.body), 500))
	}
	loc, err := url.Parse(a.header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), claudeCallback+"?") {
		t.Fatalf("approve redirected to %q, want %s", a.header.Get("Location"), claudeCallback)
	}
	q := loc.Query()
	if q.Get("state") != f.state || q.Get("code") == "" {
		t.Fatalf("the redirect's query %v lacks the code or the state", q)
	}
	if iss := q.Get("iss"); iss != "" && iss != f.p.public {
		t.Errorf("the redirect names issuer %q, want %s", iss, f.p.public)
	}
	return q.Get("code")
}

// tokenRequest posts to the token endpoint as claude.ai's servers do
// (client_secret_post) and returns the status and the body.
func (f *signInFlow) tokenRequest(t *testing.T, form url.Values) (int, map[string]any) {
	t.Helper()
	form.Set("client_id", f.reg.ClientID)
	if f.reg.ClientSecret != "" {
		form.Set("client_secret", f.reg.ClientSecret)
	}
	a := postForm(t, http.DefaultClient, f.p.url("/oauth/token"), form, nil)
	var body map[string]any
	_ = json.Unmarshal([]byte(a.body), &body)
	return a.status, body
}

func (f *signInFlow) tokens(t *testing.T, form url.Values) oauthTokens {
	t.Helper()
	status, body := f.tokenRequest(t, form)
	if status != http.StatusOK {
		t.Fatalf("token endpoint (%s): %d %v", form.Get("grant_type"), status, body)
	}
	b, _ := json.Marshal(body)
	var tok oauthTokens
	_ = json.Unmarshal(b, &tok)
	if tok.Access == "" || !strings.EqualFold(tok.Type, "bearer") {
		t.Fatalf("token endpoint gave %v", body)
	}
	return tok
}

// exchange trades the authorization code for tokens.
func (f *signInFlow) exchange(t *testing.T, code string) oauthTokens {
	t.Helper()
	return f.tokens(t, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {claudeCallback}, "code_verifier": {f.verifier}, "resource": {f.resource}})
}

func (f *signInFlow) refresh(t *testing.T, rt string) oauthTokens {
	t.Helper()
	return f.tokens(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "resource": {f.resource}})
}

// signInWithCode is the whole flow for resource with a pairing code.
func signInWithCode(t *testing.T, p *publicProxy, resource, code string) (*signInFlow, oauthTokens) {
	t.Helper()
	f := startSignIn(t, p, registerClaude(t, p), resource)
	if a := f.typeCode(t, code); a.status != http.StatusOK {
		t.Fatalf("signing in with the pairing code: %d %s", a.status, clip(htmlText(a.body), 500))
	}
	return f, f.exchange(t, f.approve(t))
}

// ---------------------------------------------------------------------------
// MCP with a bearer token.

type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// bearerClient is an HTTP client that sends token with every request.
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: &bearerTransport{token: token, base: http.DefaultTransport}}
}

// connectBearer opens a Go SDK session (2025-11-25, a session of its own)
// at endpoint with token; the world closes it before its leftover check.
func connectBearer(t *testing.T, w *world, endpoint, token, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: bearerClient(token), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("MCP connect to %s with a bearer token: %v", endpoint, err)
	}
	w.mu.Lock()
	w.sessions = append(w.sessions, cs)
	w.mu.Unlock()
	return cs
}

// rawMCP posts one JSON-RPC message to endpoint with token (none if "")
// and returns the answer.
func rawMCP(t *testing.T, endpoint, token, body string) httpAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return doHTTP(t, http.DefaultClient, req)
}

const initializeJSON = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// ---------------------------------------------------------------------------
// A TCP forwarder between a bridge and the proxy that can cut every
// connection through it: it stands for the network between the laptop and
// the cloud, which is what drops in real life.

type cutter struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startCutter(t *testing.T, to string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, to: to}
	c.wg.Add(1)
	go c.accept()
	t.Cleanup(func() { _ = ln.Close(); c.cut(); c.wg.Wait() })
	return c
}

func (c *cutter) addr() string { return c.ln.Addr().String() }

func (c *cutter) accept() {
	defer c.wg.Done()
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", c.to)
		if err != nil {
			_ = in.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		c.wg.Add(2)
		go func() { defer c.wg.Done(); _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { defer c.wg.Done(); _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

// cut closes every connection through the forwarder; new ones may come.
func (c *cutter) cut() {
	c.mu.Lock()
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	for _, conn := range conns {
		_ = conn.Close()
	}
}

// stopTogether makes worlds that run at the same time stop together: each
// world's leftover check counts every process of this run's binaries, so a
// world stopping first would take the other's bridge and host for its own
// leftovers. Registered after the worlds, it runs before their teardowns:
// it ends every world's Chromium and bridge first, then lets each world's
// own stop check that nothing is left.
func stopTogether(t *testing.T, worlds ...*world) {
	t.Cleanup(func() {
		for _, w := range worlds {
			w.mu.Lock()
			sessions := w.sessions
			w.sessions = nil
			w.mu.Unlock()
			for _, cs := range sessions {
				_ = cs.Close()
			}
		}
		for _, w := range worlds {
			stopGroup(w.chrome)
			stopGroup(w.serve)
		}
		for _, w := range worlds {
			w.stop()
		}
	})
}

// signInWithPairing opens authURL in a new tab of b and plays the person
// on the proxy's sign-in page: the pairing code typed into the code field
// (the page has no password here), then Approve. It returns errors rather
// than failing the test, since SDKs call it from their own goroutines.
func signInWithPairing(b *signInBrowser, authURL, code string) error {
	_, err := b.signInWith(authURL, "code", code)
	return err
}
