//go:build linux

package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/npmtools"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/extension"
)

// The custom server as the test adds it on the options page: its title
// gives the id, and the id the bridge-facing name (sw/remote.js, slug).
const (
	remoteTitle = "E2E OAuth"
	remoteName  = "e2e-oauth"
)

// Time limits of the remote-server test.
const (
	signInWait   = 20 * time.Second // from the Sign in click to "connected"
	remoteWait   = 10 * time.Second // for the bridge to serve what the extension reports
	devtoolsWait = 10 * time.Second // for Chromium to write DevToolsActivePort
	cdpWait      = 30 * time.Second // for one DevTools command: a guard against a hang, so as long as a tool call may take
)

// TestRemoteMCP signs the real extension in to a real OAuth-protected MCP
// server (testdata/oauth-server, built on the TypeScript SDK's auth router)
// and uses its tools from the extension and through the bridge.
//
// The person's part is played on the real options page, opened in a tab
// through the DevTools protocol: Runtime.evaluate clicks the developer-mode
// checkbox, fills and submits the "Add a server" form and clicks "Sign in"
// (a user gesture). The extension then signs in with
// chrome.identity.launchWebAuthFlow against the server, which approves at
// once. Then:
//  1. the server is connected with its tools, the extension calls one
//     (remote.appCall, the message the MCP Apps page sends) and /health
//     lists it;
//  2. a Go SDK client calls its tools at /servers/e2e-oauth/mcp and, as
//     mcp_e2e-oauth_{tool}, at /servers/all/mcp;
//  3. every access token is expired on the server (POST /test/expire): the
//     next call succeeds on the same session, carrying a new token got by
//     refresh, with no second authorization;
//  4. no token ever issued appears in the bridge's log or output.
func TestRemoteMCP(t *testing.T) {
	start := time.Now()
	mark := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }

	// Started before the world, so that it is stopped after Chromium.
	srv := startAuthMCP(t)
	w := startWorld(t, worldOptions{})
	mark("world up")
	devtools := w.restartForRemote()
	mark("bridge (debug log) and Chromium (DevTools) restarted")

	page := addRemoteServer(t, devtools, srv.mcp, remoteTitle) // developer mode allows http on loopback
	var added struct {
		Error  string `json:"error"`
		Listed bool   `json:"listed"`
	}
	testutil.WaitWithin(t, 5*time.Second, "", func() (bool, string) {
		page.evalInto(t, fmt.Sprintf(`({
			error: document.getElementById('remote-add-error').textContent,
			listed: [...document.querySelectorAll('#remote-list h3')].some((h) => h.textContent === %s),
		})`, jsString(remoteTitle)), &added)
		if added.Error != "" {
			t.Fatalf("adding %s on the options page failed: %s", srv.mcp, added.Error)
		}
		return added.Listed, "the options page does not list " + remoteTitle + " after Add server"
	})
	server := page.remoteStatus(t, srv.mcp)
	if server.Name != remoteName || !server.Enabled {
		t.Fatalf("the added server is %+v; want it enabled and named %q", server, remoteName)
	}
	mark("server added: " + server.State)

	// Sign in, as a click on the server's Sign in button.
	signIn := fmt.Sprintf(`[...document.querySelectorAll('#remote-list button')].find((b) => b.getAttribute('aria-label') === %s && !b.disabled)`,
		jsString("Sign in to "+remoteTitle))
	// Found and clicked in one evaluation: the list is drawn again as the
	// server's state changes, so a button found by one call may be gone by
	// the next.
	page.waitJS(t, "a Sign in button for "+remoteTitle, 10*time.Second, "((b) => !!b && (b.click(), true))("+signIn+")")
	testutil.WaitWithin(t, signInWait, "", func() (bool, string) {
		server = page.remoteStatus(t, srv.mcp)
		return server.State == "connected", fmt.Sprintf("after Sign in the extension has %s in state %q (%s); options page error: %q",
			remoteTitle, server.State, server.Message, page.js(t, `document.getElementById('remote-error').textContent`))
	})
	mark("signed in: " + server.Message)

	// 1. The extension lists and calls the tools; /health shows the server.
	if got := server.toolNames(); !strings.Contains(got, "echo") || !strings.Contains(got, "whoami") {
		t.Fatalf("the extension lists the tools [%s] of %s; want echo and whoami", got, remoteTitle)
	}
	var appCall struct {
		OK     bool                `json:"ok"`
		Error  string              `json:"error"`
		Result *mcp.CallToolResult `json:"result"`
	}
	page.evalInto(t, fmt.Sprintf(`chrome.runtime.sendMessage({type: 'remote.appCall', server: %s, name: 'echo', arguments: {text: 'from the extension'}})`,
		jsString(remoteName)), &appCall)
	if !appCall.OK || testutil.Text(appCall.Result) != "from the extension" {
		t.Fatalf("the extension's own call of echo (remote.appCall) answered ok=%v error=%q result %s", appCall.OK, appCall.Error, describe(appCall.Result))
	}
	clientID := page.js(t, `chrome.storage.local.get(null).then((all) => Object.entries(all)
		.find(([k]) => k.startsWith('remote.auth.') && k.endsWith('.client'))?.[1]?.client_id || '')`)
	if clientID == "" {
		t.Fatalf("the extension stored no client registration (remote.auth.*.client) after signing in")
	}
	testutil.WaitWithin(t, remoteWait, "", func() (bool, string) {
		h := w.remoteHealth(t)
		for _, s := range h {
			if s.Name == remoteName && s.State == "connected" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("/health remote_servers = %+v; want %s connected", h, remoteName)
	})
	mark("step 1: the extension lists and calls; /health shows it")

	// 2. A local MCP client, on the server's route and on the aggregate.
	base := strings.TrimSuffix(w.mcpURL, "/mcp")
	route := w.connectTo(t, base+"/servers/"+remoteName+"/mcp", "e2e-remote-route")
	all := w.connectTo(t, base+"/servers/all/mcp", "e2e-remote-all")
	aggEcho, aggWhoami := "mcp_"+remoteName+"_echo", "mcp_"+remoteName+"_whoami"
	for _, c := range []struct {
		at   *mcpAt
		want []string
	}{{route, []string{"echo", "whoami"}}, {all, []string{aggEcho, aggWhoami}}} {
		names := toolNames(t, c.at)
		for _, n := range c.want {
			if !strings.Contains(" "+names+" ", " "+n+" ") {
				t.Fatalf("tools/list at %s lacks %s: [%s]", c.at.url, n, names)
			}
		}
	}
	if got := testutil.Text(callOK(t, route, "echo", map[string]any{"text": "héllo route"})); got != "héllo route" {
		t.Errorf("echo at /servers/%s/mcp answered %q", remoteName, got)
	}
	if got := testutil.Text(callOK(t, all, aggEcho, map[string]any{"text": "héllo all"})); got != "héllo all" {
		t.Errorf("%s at /servers/all/mcp answered %q", aggEcho, got)
	}
	st := srv.stats(t)
	first := whoami(t, route, "whoami")
	if first.ClientID != clientID || first.Token != fingerprint(st.Issued.Access[len(st.Issued.Access)-1]) {
		t.Errorf("whoami at the route: client %q token %q; want the extension's client %q and the last token issued (%s)",
			first.ClientID, first.Token, clientID, fingerprint(st.Issued.Access[len(st.Issued.Access)-1]))
	}
	if got := whoami(t, all, aggWhoami); got != first {
		t.Errorf("%s = %+v, want what the route answered, %+v", aggWhoami, got, first)
	}
	if st.Authorizations != 1 || st.CodeExchanges != 1 || st.Refreshes != 0 || st.Registrations != 1 {
		t.Errorf("after signing in once the server counted %s; want 1 registration, authorization and code exchange, no refresh", st.counters())
	}
	mark("step 2: tools called at the route and the aggregate")

	// 3. The access token expires; the next call refreshes it unnoticed.
	before := srv.stats(t)
	if n := srv.expire(t); n < 1 {
		t.Fatalf("POST /test/expire expired %d tokens; the extension holds one", n)
	}
	after := whoami(t, route, "whoami")
	st = srv.stats(t)
	newest := st.Issued.Access[len(st.Issued.Access)-1]
	switch {
	case st.Refreshes != 1 || st.Authorizations != 1 || st.CodeExchanges != 1 || st.Registrations != 1:
		t.Fatalf("after the token expired the server counted %s; want exactly one refresh and still one authorization, code exchange and registration", st.counters())
	case st.Rejected <= before.Rejected:
		t.Errorf("the server rejected no request after the expiry (%s): the expired token was never presented", st.counters())
	case after.Token == first.Token || after.Token != fingerprint(newest):
		t.Errorf("after the refresh whoami saw token %s (before: %s); want the newest issued, %s", after.Token, first.Token, fingerprint(newest))
	case after.ClientID != clientID:
		t.Errorf("after the refresh whoami saw client %q, want %q", after.ClientID, clientID)
	}
	if got := testutil.Text(callOK(t, all, aggEcho, map[string]any{"text": "after refresh"})); got != "after refresh" {
		t.Errorf("%s after the refresh answered %q", aggEcho, got)
	}
	if st := srv.stats(t); st.Refreshes != 1 || st.Authorizations != 1 {
		t.Errorf("a call with the refreshed token changed the server's counters to %s", st.counters())
	}
	if s := page.remoteStatus(t, srv.mcp); s.State != "connected" {
		t.Errorf("after the refresh the extension has %s in state %q (%s)", remoteTitle, s.State, s.Message)
	}
	mark("step 3: token expired, refreshed without a new sign-in")

	// 4. No token in the bridge's log or output (nor in Chromium's
	// stderr, where the host writes).
	st = srv.stats(t)
	logFile := filepath.Join(w.bbHome, "logs", "bridge.log")
	bridgeLog, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("reading the bridge's log: %v", err)
	}
	outputs := []struct{ name, text string }{
		{logFile, string(bridgeLog)},
		{"browserbridge serve output", w.serveOut.String()},
		{"chromium stderr (and the host's)", w.chromeOut.String()},
	}
	secrets := map[string]string{}
	for i, tok := range st.Issued.Access {
		secrets[tok] = fmt.Sprintf("access token #%d", i+1)
	}
	for i, tok := range st.Issued.Refresh {
		secrets[tok] = fmt.Sprintf("refresh token #%d", i+1)
	}
	for _, o := range outputs {
		for tok, what := range secrets {
			if strings.Contains(o.text, tok) {
				t.Errorf("the %s appears in %s", what, o.name)
			}
		}
		if i := strings.Index(o.text, "Bearer"); i >= 0 {
			t.Errorf("%s mentions a Bearer credential: …%s…", o.name, clip(o.text[max(i-80, 0):], 200))
		}
	}
	mark(fmt.Sprintf("step 4: none of the %d tokens issued is in the logs", len(secrets)))
}

// ---------------------------------------------------------------------------
// The OAuth-protected MCP server (testdata/oauth-server).

// authMCP is a running testdata/oauth-server/server.mjs.
type authMCP struct {
	issuer, mcp string
	cmd         *exec.Cmd
	stderr      *testbrowser.SyncBuffer
}

// authStats is the body of GET /test/stats.
type authStats struct {
	Registrations  int `json:"registrations"`
	Authorizations int `json:"authorizations"`
	CodeExchanges  int `json:"codeExchanges"`
	Refreshes      int `json:"refreshes"`
	Rejected       int `json:"rejected"`
	MCPCalls       int `json:"mcpCalls"`
	Issued         struct {
		Access  []string `json:"access"`
		Refresh []string `json:"refresh"`
	} `json:"issued"`
}

// counters is the stats without the token values, for messages.
func (s authStats) counters() string {
	return fmt.Sprintf("registrations=%d authorizations=%d codeExchanges=%d refreshes=%d rejected=%d mcpCalls=%d",
		s.Registrations, s.Authorizations, s.CodeExchanges, s.Refreshes, s.Rejected, s.MCPCalls)
}

// startAuthMCP starts the server (auto-approving, hour-long access tokens:
// the test expires them itself) and stops it, and checks that it stopped,
// when the test ends.
func startAuthMCP(t *testing.T) *authMCP {
	t.Helper()
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	s := &authMCP{stderr: &testbrowser.SyncBuffer{}}
	s.cmd = exec.Command(tools.Node, filepath.Join("testdata", "oauth-server", "server.mjs"),
		"--modules", tools.Modules, "--port", "0", "--access-ttl", "3600")
	s.cmd.Stderr = s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting the OAuth MCP server: %v", err)
	}
	t.Cleanup(func() { s.stop(t) })
	type line struct {
		text string
		err  error
	}
	got := make(chan line, 1)
	go func() {
		l, err := bufio.NewReader(stdout).ReadString('\n')
		got <- line{l, err}
	}()
	select {
	case l := <-got:
		var addr struct{ Issuer, MCP string }
		if err := json.Unmarshal([]byte(l.text), &addr); err != nil || addr.MCP == "" {
			t.Fatalf("the OAuth MCP server printed %q (%v); stderr:\n%s", l.text, l.err, s.stderr.String())
		}
		s.issuer, s.mcp = addr.Issuer, addr.MCP
	case <-time.After(15 * time.Second):
		t.Fatalf("the OAuth MCP server printed no address within 15s; stderr:\n%s", s.stderr.String())
	}
	return s
}

func (s *authMCP) stop(t *testing.T) {
	if t.Failed() {
		t.Logf("--- OAuth MCP server stderr ---\n%s", tail(s.stderr.String(), 60))
	}
	pgid := s.cmd.Process.Pid
	stopGroup(s.cmd)
	if left := pgrep("-g", strconv.Itoa(pgid)); len(left) > 0 {
		t.Errorf("processes of the OAuth MCP server outlived it: %v", left)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

func (s *authMCP) base() string { return strings.TrimSuffix(s.issuer, "/") }

func (s *authMCP) stats(t *testing.T) authStats {
	t.Helper()
	var st authStats
	s.do(t, http.MethodGet, "/test/stats", &st)
	if len(st.Issued.Access) == 0 {
		t.Fatalf("the OAuth MCP server has issued no access token (%s)", st.counters())
	}
	return st
}

// expire makes every access token expire now and returns how many.
func (s *authMCP) expire(t *testing.T) int {
	t.Helper()
	var r struct{ Expired int }
	s.do(t, http.MethodPost, "/test/expire", &r)
	return r.Expired
}

func (s *authMCP) do(t *testing.T, method, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, s.base()+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
}

// fingerprint is how whoami names a token: 16 hex digits of its SHA-256.
func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])[:16]
}

// whoamiResult is the answer of the server's whoami tool.
type whoamiResult struct {
	ClientID  string `json:"clientId"`
	ExpiresAt int64  `json:"expiresAt"`
	Token     string `json:"token"`
}

func whoami(t *testing.T, c *mcpAt, tool string) whoamiResult {
	t.Helper()
	res := callOK(t, c, tool, nil)
	var r whoamiResult
	if err := json.Unmarshal([]byte(testutil.Text(res)), &r); err != nil || r.Token == "" {
		t.Fatalf("%s at %s answered %s (%v)", tool, c.url, describe(res), err)
	}
	return r
}

// ---------------------------------------------------------------------------
// The bridge's side.

// remoteHealthEntry is one of /health's remote_servers.
type remoteHealthEntry struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Message string `json:"message"`
}

func (w *world) remoteHealth(t *testing.T) []remoteHealthEntry {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(w.mcpURL, "/mcp") + "/health")
	if err != nil {
		t.Fatalf("GET /health: %v", err)
	}
	defer resp.Body.Close()
	var h struct {
		RemoteServers []remoteHealthEntry `json:"remote_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("GET /health: %v", err)
	}
	return h.RemoteServers
}

// connectTo opens an MCP session at endpoint (Streamable HTTP), closed by
// the world's teardown.
func (w *world) connectTo(t *testing.T, endpoint, name string) *mcpAt {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("MCP connect to %s: %v", endpoint, err)
	}
	w.mu.Lock()
	w.sessions = append(w.sessions, cs)
	w.mu.Unlock()
	return &mcpAt{cs: cs, url: endpoint}
}

// mcpAt is an MCP session and the endpoint it went to (for messages).
type mcpAt struct {
	cs  *mcp.ClientSession
	url string
}

func toolNames(t *testing.T, c *mcpAt) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	res, err := c.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list at %s: %v", c.url, err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return strings.Join(names, " ")
}

// callOK calls a tool and fails the test unless it succeeds.
func callOK(t *testing.T, c *mcpAt, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %s at %s: %v", tool, argsJSON(args), c.url, err)
	}
	if res.IsError {
		t.Fatalf("%s %s at %s answered isError: %s", tool, argsJSON(args), c.url, testutil.Text(res))
	}
	return res
}

// ---------------------------------------------------------------------------
// Chromium with DevTools, and the extension's pages through it.

// restartForRemote restarts the world's bridge with debug logging (so
// that the test can look for tokens in the most its log ever says) and its
// Chromium, on the same profile, with --remote-debugging-port=0; it waits
// until the bridge lists the browser again and returns DevTools' address.
// (startWorld takes neither a log level nor Chromium flags; the restart
// costs about two seconds.)
func (w *world) restartForRemote() devtoolsAddr {
	w.tb.Helper()
	stopGroup(w.chrome)
	stopGroup(w.serve)
	configFile := filepath.Join(w.bbHome, "config", "config.json")
	b, err := os.ReadFile(configFile)
	if err != nil {
		w.tb.Fatal(err)
	}
	var config map[string]any
	if err := json.Unmarshal(b, &config); err != nil {
		w.tb.Fatal(err)
	}
	config["log"] = map[string]any{"level": "debug"}
	b, _ = json.Marshal(config)
	if err := os.WriteFile(configFile, b, 0o600); err != nil {
		w.tb.Fatal(err)
	}
	w.startBridge()
	return w.startChromiumWithDevTools()
}

type devtoolsAddr struct{ host, browserPath string }

// extPage is an extension page open in a tab, driven through DevTools.
type extPage struct {
	conn *cdpConn
}

// openExtensionPage opens the extension's page file (e.g. "options.html")
// in a new tab and connects to it.
func openExtensionPage(t *testing.T, dt devtoolsAddr, file string) *extPage {
	t.Helper()
	return openTab(t, dt, extension.Origin()+file)
}

// openTab opens url in a new tab and connects to it.
func openTab(tb testing.TB, dt devtoolsAddr, url string) *extPage {
	tb.Helper()
	browser, err := dialCDP("ws://" + dt.host + dt.browserPath)
	if err != nil {
		tb.Fatalf("DevTools: %v", err)
	}
	defer browser.close()
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := browser.call("Target.createTarget", map[string]any{"url": url}, &target); err != nil {
		tb.Fatalf("DevTools: opening %s: %v", url, err)
	}
	conn, err := dialCDP("ws://" + dt.host + "/devtools/page/" + target.TargetID)
	if err != nil {
		tb.Fatalf("DevTools: connecting to the %s tab: %v", url, err)
	}
	tb.Cleanup(conn.close)
	p := &extPage{conn: conn}
	// createTarget answers before the page loads: until then scripts run in
	// the tab's first, blank document (where an extension page's chrome.*
	// is missing), which a busy machine makes long enough to hit.
	want, _ := json.Marshal(url)
	testutil.WaitWithin(tb, 30*time.Second, "", func() (bool, string) {
		var loaded bool
		p.evalInto(tb, "location.href.split('#')[0] === "+string(want)+".split('#')[0] && document.readyState !== 'loading'", &loaded)
		return loaded, "the tab has not loaded " + url
	})
	return p
}

// evalInto evaluates a JavaScript expression in the page (awaiting a
// promise, as a user gesture) and decodes its JSON value into out.
func (p *extPage) evalInto(t testing.TB, expr string, out any) {
	t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.conn.call("Runtime.evaluate", map[string]any{
		"expression": expr, "awaitPromise": true, "returnByValue": true, "userGesture": true,
	}, &r)
	if err != nil {
		t.Fatalf("DevTools Runtime.evaluate: %v\nof: %s", err, clip(expr, 300))
	}
	if e := r.ExceptionDetails; e != nil {
		t.Fatalf("the page threw %s %s\nrunning: %s", e.Text, e.Exception.Description, clip(expr, 300))
	}
	if len(r.Result.Value) == 0 {
		r.Result.Value = json.RawMessage("null")
	}
	if err := json.Unmarshal(r.Result.Value, out); err != nil {
		t.Fatalf("the page answered %s: %v\nrunning: %s", clip(string(r.Result.Value), 300), err, clip(expr, 300))
	}
}

// js evaluates expr and returns its value as text (strings as they are,
// other values as JSON).
func (p *extPage) js(t testing.TB, expr string) string {
	t.Helper()
	var v json.RawMessage
	p.evalInto(t, expr, &v)
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// waitJS waits until expr is true in the page.
func (p *extPage) waitJS(t *testing.T, what string, d time.Duration, expr string) {
	t.Helper()
	testutil.WaitWithin(t, d, "", func() (bool, string) {
		var ok bool
		p.evalInto(t, "Promise.resolve("+expr+").then((v) => v === true)", &ok)
		return ok, "waiting for " + what
	})
}

// remoteServer is one server of the options page's remote.status.
type remoteServer struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	URL     string `json:"url"`
	Enabled bool   `json:"enabled"`
	State   string `json:"state"`
	Message string `json:"message"`
	Tools   []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func (s remoteServer) toolNames() string {
	var names []string
	for _, tool := range s.Tools {
		names = append(names, tool.Name)
	}
	return strings.Join(names, " ")
}

// remoteStatus asks the service worker what the options page asks
// (remote.status) and returns the server at url.
func (p *extPage) remoteStatus(t *testing.T, url string) remoteServer {
	t.Helper()
	var res struct {
		OK     bool   `json:"ok"`
		Error  string `json:"error"`
		Result struct {
			Servers []remoteServer `json:"servers"`
		} `json:"result"`
	}
	p.evalInto(t, `chrome.runtime.sendMessage({type: 'remote.status'})`, &res)
	if !res.OK {
		t.Fatalf("remote.status from the options page failed: %s", res.Error)
	}
	for _, s := range res.Result.Servers {
		if s.URL == url {
			return s
		}
	}
	t.Fatalf("remote.status lists no server at %s (%d servers)", url, len(res.Result.Servers))
	return remoteServer{}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// cdpConn is one DevTools WebSocket; calls are made one at a time and
// events are skipped.
type cdpConn struct {
	ws   *websocket.Conn
	next int
}

func dialCDP(url string) (*cdpConn, error) {
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", url, err)
	}
	return &cdpConn{ws: ws}, nil
}

func (c *cdpConn) close() { _ = c.ws.Close() }

// call sends a command and decodes its result into out.
func (c *cdpConn) call(method string, params, out any) error {
	c.next++
	id := c.next
	_ = c.ws.SetWriteDeadline(time.Now().Add(cdpWait))
	if err := c.ws.WriteJSON(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(cdpWait))
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := c.ws.ReadJSON(&msg); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if msg.ID != id {
			continue // an event, or the answer of a command given up on
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %d %s", method, msg.Error.Code, msg.Error.Message)
		}
		return json.Unmarshal(msg.Result, out)
	}
}
