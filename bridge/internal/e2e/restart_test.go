//go:build linux

package e2e

// Issue 12 end to end: an MCP session outlives the bridge process (SIGKILL),
// and a new session never takes a dead one's tabs. The bridge comes back as
// it does for a user: the native host, finding nobody on the socket, starts
// `browserbridge serve` (BROWSERBRIDGE_BIN), which listens on the configured
// port again; the extension says hello to it and keeps the tab groups of the
// sessions it lists.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// Time limits of the restart tests.
const (
	// restartWait runs from the SIGKILL until a new bridge has the browser
	// again. The host starts at most one bridge per 10 s, so a second
	// restart soon after the first may take that long.
	restartWait = 60 * time.Second
	// respawnGap is how long after a host started a bridge it may start
	// another at once (host.respawnEvery is 10 s).
	respawnGap = 10*time.Second + 500*time.Millisecond
	// hangWait bounds each call that a restart interrupts.
	hangWait = 90 * time.Second
)

// restartSentence is how the bridge answers a call that its previous
// process took and never answered (mcpserver.restartSentence).
const restartSentence = "Browser Bridge restarted while this call was running"

// restartWorld is a world (harness_test.go) whose host may start the
// bridge, on a port that stays the same across bridge processes.
type restartWorld struct {
	*world
	rpages *restartPages
}

// startRestartWorld is a world whose host may start the real bridge, on a
// fixed free port, so a restarted bridge listens where the clients' URLs
// point. The first bridge is the test's.
func startRestartWorld(t *testing.T) *restartWorld {
	t.Helper()
	rw := &restartWorld{world: startWorld(t, worldOptions{listen: "127.0.0.1:" + strconv.Itoa(freePort(t)), hostStartsBridge: true})}
	// Cleanups run last first: this one stops Chromium (so that no host is
	// left to start yet another bridge), then the bridges the hosts
	// started, before w.stop checks that nothing outlived the test.
	t.Cleanup(rw.stopBridges)
	rw.rpages = startRestartPages(t)
	return rw
}

// freePort returns a TCP port on 127.0.0.1 that nobody listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// stopBridges closes the sessions, stops Chromium and waits for its hosts
// to exit, then ends the bridges the hosts started (they run in sessions
// of their own). w.stop, which runs next, shows the logs of a failure.
func (rw *restartWorld) stopBridges() {
	rw.mu.Lock()
	sessions := rw.sessions
	rw.sessions = nil
	rw.mu.Unlock()
	for _, cs := range sessions {
		_ = cs.Close()
	}
	stopGroup(rw.chrome)
	for deadline := time.Now().Add(stopWait); len(hostPIDs()) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	pids := pgrep("-f", "serve --socket "+rw.socket)
	// A bridge that `browserbridge restart` started (when it, not the
	// host, won the race to start one) runs as `serve` without --socket:
	// the CLI's socket comes from XDG_RUNTIME_DIR. It says its own pid.
	if st, err := rw.status(); err == nil && st.PID > 0 && !slices.Contains(pids, st.PID) {
		pids = append(pids, st.PID)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	alive := func() []int {
		var left []int
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				left = append(left, pid)
			}
		}
		return left
	}
	for deadline := time.Now().Add(stopWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if len(alive()) == 0 {
			return
		}
	}
	for _, pid := range alive() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// killBridge SIGKILLs the running bridge (the pid `browserbridge status`
// gives) and returns that pid and when it was killed.
func (rw *restartWorld) killBridge(t *testing.T) (int, time.Time) {
	t.Helper()
	st, err := rw.status()
	if err != nil || st.PID <= 0 {
		rw.fatalWithLogs("no bridge to kill: %v (pid %d)", err, st.PID)
	}
	at := time.Now()
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL bridge %d: %v", st.PID, err)
	}
	if rw.serve != nil && rw.serve.Process != nil && rw.serve.Process.Pid == st.PID && rw.serve.ProcessState == nil {
		_ = rw.serve.Wait() // the test's own bridge; a host reaps the ones it started
	}
	return st.PID, at
}

// restartBridge runs `browserbridge restart` as a person would and waits
// for the new bridge, with the browser connected to it again.
func (rw *restartWorld) restartBridge(t *testing.T) protocol.StatusResult {
	t.Helper()
	st, err := rw.status()
	if err != nil {
		t.Fatal(err)
	}
	if out, code := rw.cli("restart"); code != 0 {
		rw.fatalWithLogs("browserbridge restart: exit %d: %s", code, out)
	}
	return rw.waitBridge(t, st.PID)
}

// waitBridge waits until a bridge other than old answers, on the same MCP
// URL, with the browser connected to it again.
func (rw *restartWorld) waitBridge(t *testing.T, old int) protocol.StatusResult {
	t.Helper()
	deadline := time.Now().Add(restartWait)
	var last string
	for time.Now().Before(deadline) {
		st, err := rw.status()
		switch {
		case err != nil:
			last = err.Error()
		case st.PID == old:
			last = fmt.Sprintf("bridge %d still answers", old)
		case !slices.Contains(st.MCPURLs, rw.mcpURL):
			rw.fatalWithLogs("the restarted bridge (pid %d) serves %v, not %s where the clients point", st.PID, st.MCPURLs, rw.mcpURL)
		case len(st.Browsers) == 0:
			last = fmt.Sprintf("bridge %d has %d hosts and no browser", st.PID, st.Hosts)
		default:
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
	rw.fatalWithLogs("no new bridge with the browser within %v of killing bridge %d (last: %s)", restartWait, old, last)
	return protocol.StatusResult{}
}

// recordDir is where the bridge keeps its session records.
func (rw *restartWorld) recordDir() string { return filepath.Join(rw.bbHome, "state", "sessions") }

// recordOf returns the record file of a session id (named by the id's
// SHA-256) and what it holds; it fails the test if there is none.
func (rw *restartWorld) recordOf(t *testing.T, sessionID string) (os.FileInfo, map[string]any) {
	t.Helper()
	sum := sha256.Sum256([]byte(sessionID))
	p := filepath.Join(rw.recordDir(), hex.EncodeToString(sum[:])+".json")
	fi, err := os.Lstat(p)
	if err != nil {
		entries, _ := os.ReadDir(rw.recordDir())
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("no record for session %s…: %v (the directory holds %v)", clip(sessionID, 6), err, names)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(sessionID)) {
		t.Errorf("the record %s holds the session id itself", p)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the record %s has mode %v, want 0600", p, fi.Mode().Perm())
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("record %s: %v\n%s", p, err, data)
	}
	return fi, rec
}

// connectGo opens a Streamable HTTP session (2025-11-25) with the Go SDK
// as an application does: the transport's defaults (a standalone GET
// stream, 5 reconnection retries), through rt when it is not nil.
func (rw *restartWorld) connectGo(t *testing.T, name string, rt http.RoundTripper) *client {
	t.Helper()
	if rt == nil {
		rt = http.DefaultTransport.(*http.Transport).Clone()
	}
	return rw.connectWith(t, name, &mcp.StreamableClientTransport{Endpoint: rw.mcpURL, HTTPClient: &http.Client{Transport: rt}})
}

// connectWith opens a Streamable HTTP session (2025-11-25) over tr.
func (rw *restartWorld) connectWith(t *testing.T, name string, tr *mcp.StreamableClientTransport) *client {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		rw.fatalWithLogs("MCP connect %s to %s: %v", name, rw.mcpURL, err)
	}
	rw.mu.Lock()
	rw.sessions = append(rw.sessions, cs)
	rw.mu.Unlock()
	return &client{w: rw.world, cs: cs, name: name}
}

// pageText is what get_page_text answered: the page's URL and its text.
type pageText struct {
	url, text string
}

// textOrigin is the first line of get_page_text's answer: "Origin: " the
// origin, then ", " and the rest of the address unless it is "/".
var textOrigin = regexp.MustCompile(`^Origin: ([^\s,]+)(?:, (\S+?))?(?:\. |\n|$)`)

func readPageText(res *mcp.CallToolResult) pageText { return pageTextOf(testutil.Text(res)) }

// pageTextOf is readPageText for a text from any client.
func pageTextOf(text string) pageText {
	var u string
	if m := textOrigin.FindStringSubmatch(text); m != nil {
		switch rest := m[2]; {
		case m[1] == "null":
			u = rest
		case rest == "":
			u = m[1] + "/"
		default:
			u = m[1] + rest
		}
	}
	return pageText{url: u, text: text}
}

// belongs is the sentence a restart page carries for its owner.
func belongs(owner string) string { return "This page belongs to " + owner + "." }

// onlyTab returns the one tab of a session's group (tabs_context_mcp) and
// checks that it shows url.
func onlyTab(t *testing.T, c *client, url string) tabInfo {
	t.Helper()
	tabs := c.tabs(t, "tabs_context_mcp")
	if len(tabs) != 1 || tabs[0].URL != url || tabs[0].GroupID < 0 {
		t.Fatalf("%s: tabs_context_mcp lists %+v, want one grouped tab at %s", c.name, tabs, url)
	}
	return tabs[0]
}

// TestRestartKeepsSessions (issue 12): a Go SDK session carries on, on the
// same tab, after the bridge is SIGKILLed and the host starts a new one;
// and after a second restart, a brand-new session created before the old
// one calls again gets a group of its own and never the old one's tab.
func TestRestartKeepsSessions(t *testing.T) {
	rw := startRestartWorld(t)
	gate := newGate()
	a := rw.connectGo(t, "e2e-restart-a", gate)
	pageA := rw.rpages.url("e2e-restart-a")
	a.call(t, "navigate", map[string]any{"url": pageA})
	tabA := onlyTab(t, a, pageA)
	if got := readPageText(a.call(t, "get_page_text", nil)); got.url != pageA || !strings.Contains(got.text, belongs("e2e-restart-a")) {
		t.Fatalf("before any restart, A's get_page_text read %s: %q", got.url, clip(got.text, 300))
	}
	fi, rec := rw.recordOf(t, a.cs.ID())
	if rec["client"] != "e2e-restart-a" {
		t.Errorf("A's record names client %v", rec["client"])
	}
	t.Logf("A's record: %d bytes", fi.Size())

	// Round 1: kill; the host starts a bridge; A's next call, with its old
	// Mcp-Session-Id, acts on the same tab.
	old, killed := rw.killBridge(t)
	st := rw.waitBridge(t, old)
	t.Logf("round 1: bridge %d killed; bridge %d has the browser %v later", old, st.PID, time.Since(killed).Round(time.Millisecond))
	sid := a.cs.ID()
	got := readPageText(a.call(t, "get_page_text", nil))
	if got.url != pageA || !strings.Contains(got.text, belongs("e2e-restart-a")) {
		t.Fatalf("after the restart, A's get_page_text read %s, not its page %s: %q", got.url, pageA, clip(got.text, 300))
	}
	if tab := onlyTab(t, a, pageA); tab.TabID != tabA.TabID || tab.GroupID != tabA.GroupID {
		t.Fatalf("after the restart A's tab is %+v; before it was %+v", tab, tabA)
	}
	if a.cs.ID() != sid {
		t.Fatalf("A's Mcp-Session-Id changed across the restart")
	}
	if n := rw.resumed(t, "e2e-restart-a"); n != 1 {
		t.Errorf("the bridge log says A's session was resumed %d times after one restart", n)
	}
	t.Logf("round 1: A carries on in tab %d, group %d, %v after the kill", tabA.TabID, tabA.GroupID, time.Since(killed).Round(time.Millisecond))

	// Round 2: A sends nothing (its requests wait at the gate, its GET
	// stream's reconnection included) while the bridge is killed again and
	// a brand-new session B arrives and works.
	gate.hold()
	old, killed = rw.killBridge(t)
	st = rw.waitBridge(t, old)
	t.Logf("round 2: bridge %d killed; bridge %d has the browser %v later", old, st.PID, time.Since(killed).Round(time.Millisecond))
	b := rw.connectGo(t, "e2e-restart-b", nil)
	// B has no tab yet: its first get_page_text {} is the error that says
	// so (issue 14: no tab is opened for it), and never A's page.
	res, err := b.try(bg(callWait), "get_page_text", nil)
	switch first := readPageText(res); {
	case strings.Contains(first.text, belongs("e2e-restart-a")) || first.url == pageA:
		t.Fatalf("B's first get_page_text {} read A's page: %s", describe(res))
	case err == nil || !strings.Contains(first.text, "no tab yet"):
		t.Fatalf("B's first get_page_text {} = %s (%v); want the error that B has no tab yet", describe(res), err)
	}
	if tabs := b.tabs(t, "tabs_context_mcp"); len(tabs) != 0 {
		t.Fatalf("B's failed get_page_text {} left B tabs: %+v", tabs)
	}
	b.call(t, "navigate", map[string]any{"url": rw.rpages.url("e2e-restart-b")})
	tabsB := b.tabs(t, "tabs_context_mcp")
	if len(tabsB) == 0 {
		t.Fatalf("B has no tab of its own after navigate")
	}
	groupB := tabsB[0].GroupID
	for _, tab := range tabsB {
		if tab.TabID == tabA.TabID || tab.GroupID == tabA.GroupID || tab.GroupID != groupB || groupB < 0 {
			t.Fatalf("B's tabs_context_mcp lists %+v; A's tab is %+v", tabsB, tabA)
		}
	}
	sawA := false
	for _, tab := range b.tabs(t, "tabs_context") {
		if tab.TabID == tabA.TabID {
			sawA = true
			if tab.InThisSession || tab.GroupID != tabA.GroupID || tab.Session != "e2e-restart-a" {
				t.Errorf("B's tabs_context shows A's tab as %+v: want it in A's group %d, not B's", tab, tabA.GroupID)
			}
		}
	}
	if !sawA {
		t.Errorf("B's tabs_context does not show A's tab %d at all", tabA.TabID)
	}
	if n := rw.resumed(t, "e2e-restart-a"); n != 1 {
		t.Fatalf("the bridge log says A's session was resumed %d times by the time B was checked, want once (round 1 only)", n)
	}

	// Now A calls again: its tab, its group, and never B's.
	t.Logf("round 2: releasing A's %d held requests", gate.open())
	got = readPageText(a.call(t, "get_page_text", nil))
	if got.url != pageA || !strings.Contains(got.text, belongs("e2e-restart-a")) {
		t.Fatalf("after the second restart, A's get_page_text read %s, not its page %s", got.url, pageA)
	}
	if tab := onlyTab(t, a, pageA); tab.TabID != tabA.TabID || tab.GroupID != tabA.GroupID {
		t.Fatalf("after the second restart A's tab is %+v; before it was %+v", tab, tabA)
	}
	for _, tab := range b.tabs(t, "tabs_context_mcp") {
		if tab.TabID == tabA.TabID || tab.GroupID != groupB {
			t.Fatalf("after A came back, B's tabs are %+v", tab)
		}
	}
	if a.cs.ID() != sid {
		t.Fatalf("A's Mcp-Session-Id changed across the second restart")
	}
	if n := rw.resumed(t, "e2e-restart-a"); n != 2 {
		t.Errorf("the bridge log says A's session was resumed %d times, want twice", n)
	}
}

// resumed counts the bridge log's lines saying that a session of client
// was resumed after a restart.
func (rw *restartWorld) resumed(t *testing.T, client string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rw.bbHome, "logs", "bridge.log"))
	if err != nil {
		t.Fatalf("reading the bridge log: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `msg="MCP session resumed after a bridge restart"`) && strings.Contains(line, "client="+client+" ") {
			n++
		}
	}
	return n
}

// gate is an http.RoundTripper that can hold a client's requests: while
// held they wait (never fail) and go out when it opens.
type gate struct {
	base http.RoundTripper

	mu     sync.Mutex
	held   chan struct{} // closed when the gate opens; nil while open
	queued int           // requests that waited
}

func newGate() *gate { return &gate{base: http.DefaultTransport.(*http.Transport).Clone()} }

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	g.mu.Lock()
	ch := g.held
	if ch != nil {
		g.queued++
	}
	g.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return g.base.RoundTrip(r)
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held, g.queued = make(chan struct{}), 0
	}
}

// open lets the held requests go and returns how many there were.
func (g *gate) open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
	return g.queued
}

// TestRestartTypeScriptClient: the same with the official TypeScript SDK
// (StreamableHTTPClientTransport with its defaults): its session carries on
// on the same tab after a SIGKILL; a Go session created right after the
// restart does not get that tab.
func TestRestartTypeScriptClient(t *testing.T) {
	rw := startRestartWorld(t)
	ts := testutil.StartTSClient(t, rw.mcpURL, testutil.TSClientOptions{Name: "e2e-restart-ts"})
	sessionID := ts.Next(t, "connected").SessionID
	page := rw.rpages.url("e2e-restart-ts")
	ts.Call(t, testutil.TSCall{Tool: "navigate", Args: map[string]any{"url": page}})
	tabs := tsTabs(t, ts)
	if len(tabs) != 1 || tabs[0].URL != page {
		t.Fatalf("the TypeScript session's tabs: %+v, want one at %s", tabs, page)
	}
	tab := tabs[0]
	rw.recordOf(t, sessionID)

	old, killed := rw.killBridge(t)
	st := rw.waitBridge(t, old)
	t.Logf("bridge %d killed; bridge %d has the browser %v later", old, st.PID, time.Since(killed).Round(time.Millisecond))

	// A new Go session, before the TypeScript client calls again.
	b := rw.connectGo(t, "e2e-restart-ts-neighbour", nil)
	res, err := b.try(bg(callWait), "get_page_text", nil)
	if got := readPageText(res); got.url == page || strings.Contains(got.text, belongs("e2e-restart-ts")) {
		t.Fatalf("a new session's first get_page_text {} read the TypeScript session's page: %s", describe(res))
	} else if err != nil {
		t.Logf("the new session's first get_page_text {} failed, without the other page: %v", err)
	}
	for _, bt := range b.tabs(t, "tabs_context_mcp") {
		if bt.TabID == tab.TabID || bt.GroupID == tab.GroupID {
			t.Fatalf("the new session's tabs_context_mcp lists %+v; the TypeScript session's tab is %+v", bt, tab)
		}
	}

	r := ts.Call(t, testutil.TSCall{Tool: "get_page_text"})
	if got := pageTextOf(r.Text()).url; got != page || !strings.Contains(r.Text(), belongs("e2e-restart-ts")) {
		t.Fatalf("after the restart the TypeScript session read %s, not %s: %q", got, page, clip(r.Text(), 300))
	}
	if r.SessionID != sessionID {
		t.Fatalf("the TypeScript client's session id changed across the restart")
	}
	if after := tsTabs(t, ts); len(after) != 1 || after[0].TabID != tab.TabID || after[0].GroupID != tab.GroupID {
		t.Fatalf("after the restart the TypeScript session's tabs are %+v; before: %+v", after, tab)
	}
	t.Logf("the TypeScript session carries on in tab %d %v after the kill; what its SDK reported meanwhile: %q",
		tab.TabID, time.Since(killed).Round(time.Millisecond), r.Errors)
	ts.Close(t)
}

// tsTabs is tabs_context_mcp's list through the TypeScript SDK.
func tsTabs(t *testing.T, c *testutil.TSClient) []tabInfo {
	t.Helper()
	a := c.Call(t, testutil.TSCall{Tool: "tabs_context_mcp"})
	if a.Result != nil && a.Result.StructuredContent != nil {
		t.Errorf("tabs_context_mcp through the TypeScript SDK has structuredContent %s; Claude Code would hand a model that in place of the text", a.Result.StructuredContent)
	}
	st := c.Call(t, testutil.TSCall{Tool: "dev_utils", Args: map[string]any{"action": "state"}})
	tabs, err := tabsFrom("tabs_context_mcp through the TypeScript SDK", a.Text(), st.Text())
	if err != nil {
		t.Fatal(err)
	}
	return tabs
}

// TestRestartLegacySSE: a legacy SSE session (2024-11-05) cannot outlive
// the bridge: the Go SDK reports its stream closed, a POST to its message
// URL gets the documented 404 naming the restart, its tab group is
// released, and a new SSE session works and never gets the old tab.
func TestRestartLegacySSE(t *testing.T) {
	rw := startRestartWorld(t)
	posts := &postRecorder{base: http.DefaultTransport.(*http.Transport).Clone()}
	old := rw.connectSSE(t, "e2e-restart-sse", posts)
	page := rw.rpages.url("e2e-restart-sse")
	old.call(t, "navigate", map[string]any{"url": page})
	tab := onlyTab(t, old, page)
	msgURL := posts.first()
	if !strings.Contains(msgURL, "sessionId=") {
		t.Fatalf("the SSE client posted to %q, which names no session", msgURL)
	}

	pid, killed := rw.killBridge(t)
	st := rw.waitBridge(t, pid)
	t.Logf("bridge %d killed; bridge %d has the browser %v later", pid, st.PID, time.Since(killed).Round(time.Millisecond))

	// What the SDK makes of it: the call fails at once (no hang).
	start := time.Now()
	_, err := old.cs.CallTool(bg(callWait), &mcp.CallToolParams{Name: "tabs_context_mcp", Arguments: map[string]any{}})
	if err == nil {
		t.Fatalf("the old SSE session's call succeeded after the restart: its session cannot have survived")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the old SSE session's call hung for %v: %v", callWait, err)
	}
	t.Logf("the Go SDK's next call on the old SSE session failed after %v: %v", time.Since(start).Round(time.Millisecond), err)

	// What the bridge answers the session's next POST.
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tabs_context_mcp","arguments":{}}}`
	resp, err := http.Post(msgURL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rpc struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(answer, &rpc)
	if resp.StatusCode != http.StatusNotFound || rpc.Error == nil || !strings.Contains(rpc.Error.Message, "Browser Bridge restarts") || !strings.Contains(rpc.Error.Message, "GET /sse") {
		t.Fatalf("POST to the old SSE session's %s after the restart: %s %s; want 404 with a JSON-RPC error naming the restart", msgURL, resp.Status, answer)
	}
	t.Logf("the old session's POST /message: %s %s", resp.Status, rpc.Error.Message)

	// A new SSE session works, in a group of its own.
	fresh := rw.connectSSE(t, "e2e-restart-sse-2", nil)
	res, err := fresh.try(bg(callWait), "get_page_text", nil)
	if got := readPageText(res); got.url == page || strings.Contains(got.text, belongs("e2e-restart-sse")) {
		t.Fatalf("the new SSE session's first get_page_text {} read the old session's page: %s", describe(res))
	} else if err != nil {
		t.Logf("the new SSE session's first get_page_text {} failed, without the old page: %v", err)
	}
	page2 := rw.rpages.url("e2e-restart-sse-2")
	fresh.call(t, "navigate", map[string]any{"url": page2})
	if got := readPageText(fresh.call(t, "get_page_text", nil)); got.url != page2 || !strings.Contains(got.text, belongs("e2e-restart-sse-2")) {
		t.Fatalf("the new SSE session read %s: %q", got.url, clip(got.text, 300))
	}
	for _, ft := range fresh.tabs(t, "tabs_context_mcp") {
		if ft.TabID == tab.TabID || ft.GroupID == tab.GroupID {
			t.Fatalf("the new SSE session's tabs_context_mcp lists %+v; the old session's tab was %+v", ft, tab)
		}
	}
	// The old session's group is released (the hello of the new bridge
	// does not list it): its tab is ungrouped or closed.
	testutil.WaitWithin(t, 20*time.Second, "", func() (bool, string) {
		for _, ot := range fresh.tabs(t, "tabs_context") {
			if ot.TabID == tab.TabID && (ot.GroupID == tab.GroupID || ot.Session != "") {
				return false, fmt.Sprintf("the dead SSE session's tab is still grouped: %+v", ot)
			}
		}
		return true, ""
	})
}

// connectSSE opens a legacy SSE session (2024-11-05) with the Go SDK.
func (rw *restartWorld) connectSSE(t *testing.T, name string, rt http.RoundTripper) *client {
	t.Helper()
	if rt == nil {
		rt = http.DefaultTransport.(*http.Transport).Clone()
	}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, nil)
	tr := &mcp.SSEClientTransport{Endpoint: strings.TrimSuffix(rw.mcpURL, "/mcp") + "/sse", HTTPClient: &http.Client{Transport: rt}}
	// The SDK's SSE stream lives as long as the context of Connect: this
	// one ends with the test, or when connecting takes too long.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	slow := time.AfterFunc(callWait, cancel)
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2024-11-05"})
	slow.Stop()
	if err != nil {
		rw.fatalWithLogs("SSE connect %s: %v", name, err)
	}
	rw.mu.Lock()
	rw.sessions = append(rw.sessions, cs)
	rw.mu.Unlock()
	return &client{w: rw.world, cs: cs, name: name}
}

// postRecorder remembers the URLs a client POSTs to.
type postRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	urls []string
}

func (p *postRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		p.mu.Lock()
		p.urls = append(p.urls, r.URL.String())
		p.mu.Unlock()
	}
	return p.base.RoundTrip(r)
}

func (p *postRecorder) first() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.urls) == 0 {
		return ""
	}
	return p.urls[0]
}

// TestRestartDuringCalls: 10 Go SDK sessions (2025-11-25) have 50 calls in
// the browser when the bridge is SIGKILLed. Every call completes, or fails
// with the restart sentence or a transport error, within 90 s; no answer
// reaches the wrong call or session; every session works afterwards on its
// own tab.
//
// Each call takes a while in its page (waitMS), as a slow navigate or a
// computer wait does, so the calls the dead bridge sent are still running
// in the browser when the sessions carry on with the new one.
func TestRestartDuringCalls(t *testing.T) {
	const nSessions, perSession, waitMS = 10, 5, 15000
	rw := startRestartWorld(t)
	type sess struct {
		c    *client
		page string
		tab  tabInfo
	}
	ss := make([]*sess, nSessions)
	var wg sync.WaitGroup
	errs := make(chan error, nSessions)
	for i := range ss {
		name := fmt.Sprintf("e2e-calls-%02d", i)
		ss[i] = &sess{c: rw.connectGo(t, name, nil), page: rw.rpages.url(name)}
		wg.Add(1)
		go func(s *sess) {
			defer wg.Done()
			if _, err := s.c.try(bg(callWait), "navigate", map[string]any{"url": s.page}); err != nil {
				errs <- err
			}
		}(ss[i])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var sizes []int64
	for _, s := range ss {
		s.tab = onlyTab(t, s.c, s.page)
		fi, _ := rw.recordOf(t, s.c.cs.ID())
		sizes = append(sizes, fi.Size())
	}
	if recs, _ := filepath.Glob(filepath.Join(rw.recordDir(), "*.json")); len(recs) != nSessions {
		t.Errorf("the record directory holds %d records for %d open sessions", len(recs), nSessions)
	}
	slices.Sort(sizes)
	t.Logf("figure: session record files: %d, %d to %d bytes (median %d)", len(sizes), sizes[0], sizes[len(sizes)-1], sizes[len(sizes)/2])

	// The 50 calls: each tells the page server it began, and gets its tag
	// back from it; it waits a while in the page, then answers its
	// session's page path and its tag.
	type outcome struct {
		tag, want string
		res       *mcp.CallToolResult
		err       error
		took      time.Duration
	}
	out := make(chan outcome, nSessions*perSession)
	for i, s := range ss {
		for k := range perSession {
			tag := fmt.Sprintf("%s-call%d", s.c.name, k)
			want := "/r/" + s.c.name + " " + tag
			code := fmt.Sprintf("const r = await fetch('/begin?tag=%s'); const j = await r.json(); await new Promise((ok) => setTimeout(ok, %d)); return location.pathname + ' ' + j.tag;", tag, waitMS)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), hangWait)
				defer cancel()
				start := time.Now()
				res, err := ss[i].c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "javascript_tool", Arguments: map[string]any{"code": code, "timeout_ms": 60000}})
				out <- outcome{tag: tag, want: want, res: res, err: err, took: time.Since(start)}
			}()
		}
	}
	// Kill once a call of every session is running in the browser.
	testutil.WaitWithin(t, 60*time.Second, "", func() (bool, string) {
		begun := rw.rpages.begunTags()
		for _, s := range ss {
			if !slices.ContainsFunc(begun, func(tag string) bool { return strings.HasPrefix(tag, s.c.name+"-") }) {
				return false, fmt.Sprintf("%d calls began in the browser, none of %s", len(begun), s.c.name)
			}
		}
		return true, ""
	})
	inBrowser := len(rw.rpages.begunTags())
	pid, killed := rw.killBridge(t)

	var ok, restarted, transport, hung, wrong, other []string
	for range nSessions * perSession {
		o := <-out
		switch {
		case o.err != nil && errors.Is(o.err, context.DeadlineExceeded):
			hung = append(hung, fmt.Sprintf("%s: no answer in %v: %v", o.tag, hangWait, o.err))
		case o.err != nil && (errors.Is(o.err, mcp.ErrSessionMissing) || strings.Contains(o.err.Error(), "session not found")):
			other = append(other, fmt.Sprintf("%s: the session was lost: %v", o.tag, o.err))
		case o.err != nil:
			transport = append(transport, fmt.Sprintf("%s after %v: %v", o.tag, o.took.Round(time.Millisecond), o.err))
		case o.res.IsError && strings.Contains(testutil.Text(o.res), restartSentence):
			restarted = append(restarted, o.tag)
		case o.res.IsError:
			other = append(other, fmt.Sprintf("%s: isError %q", o.tag, clip(testutil.Text(o.res), 300)))
		case jsValue(testutil.Text(o.res)) == o.want:
			ok = append(ok, o.tag)
		default:
			wrong = append(wrong, fmt.Sprintf("%s got %q, want %q", o.tag, clip(testutil.Text(o.res), 200), o.want))
		}
	}
	t.Logf("%d calls (%d had begun in the browser at the kill): %d answered, %d answered with the restart sentence, %d transport errors, %d hung, %d wrong, %d other",
		nSessions*perSession, inBrowser, len(ok), len(restarted), len(transport), len(hung), len(wrong), len(other))
	for _, s := range transport {
		t.Logf("transport error: %s", s)
	}
	if len(hung)+len(wrong)+len(other) > 0 {
		t.Errorf("calls that hung:\n%s\ncalls answered to the wrong call or session:\n%s\nother outcomes:\n%s",
			strings.Join(hung, "\n"), strings.Join(wrong, "\n"), strings.Join(other, "\n"))
	}

	// Every session works afterwards, on its own tab: it reads its page
	// first, as the restart sentence advises (the calls the dead bridge
	// took are still waiting in the pages), then moves on.
	st := rw.waitBridge(t, pid)
	t.Logf("bridge %d killed; bridge %d has the browser %v later", pid, st.PID, time.Since(killed).Round(time.Millisecond))
	errs = make(chan error, nSessions)
	for _, s := range ss {
		wg.Add(1)
		go func(s *sess) {
			defer wg.Done()
			fail := func(format string, args ...any) {
				errs <- fmt.Errorf("%s after the restart: %s", s.c.name, fmt.Sprintf(format, args...))
			}
			res, err := s.c.try(bg(callWait), "get_page_text", nil)
			if got := readPageText(res); err != nil || got.url != s.page || !strings.Contains(got.text, belongs(s.c.name)) {
				tabs, terr := tryTabs(s.c, "tabs_context_mcp")
				fail("its first get_page_text {} read %q (%v), not its page; its group now holds %+v (%v); before the restart: %+v",
					got.url, err, tabs, terr, s.tab)
				return
			}
			if tabs, err := tryTabs(s.c, "tabs_context_mcp"); err != nil || len(tabs) != 1 || tabs[0].TabID != s.tab.TabID || tabs[0].GroupID != s.tab.GroupID {
				fail("tabs_context_mcp (%v) lists %+v, want its tab %+v", err, tabs, s.tab)
				return
			}
			after := s.page + "/after"
			if _, err := s.c.try(bg(callWait), "navigate", map[string]any{"url": after}); err != nil {
				fail("%v", err)
				return
			}
			res, err = s.c.try(bg(callWait), "get_page_text", nil)
			if got := readPageText(res); err != nil || got.url != after || !strings.Contains(got.text, belongs(s.c.name+"/after")) {
				fail("get_page_text read %s (%v): %q", got.url, err, clip(got.text, 200))
			}
		}(s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// tryTabs is client.tabs returning its error instead of failing the test.
func tryTabs(c *client, tool string) ([]tabInfo, error) {
	res, err := c.try(bg(callWait), tool, nil)
	if err != nil {
		return nil, err
	}
	var st *mcp.CallToolResult
	if c.remote {
		st, err = c.w.readState() // dev_utils needs the full scope, which a remote client has not by default
	} else {
		st, err = c.try(bg(callWait), "dev_utils", map[string]any{"action": "state"})
	}
	if err != nil {
		return nil, err
	}
	return tabsFrom(tool, testutil.Text(res), testutil.Text(st))
}

// TestRestartFigures restarts the bridge several times (SIGKILL, the host
// starts a new one) under two Go SDK sessions, and times the interval from
// the SIGKILL to the first successful call of a surviving session. Each
// restart waits until the host may start a bridge at once (one per 10 s),
// so what is timed is a restart, not the host's limit.
//
// The timed session has no standalone GET stream (DisableStandaloneSSE),
// so that only the bridge's restart is timed: it polls with a call every
// 25 ms, each bounded. The other keeps the SDK's defaults, as most
// applications do, and must work after every restart too: its GET stream
// breaks at each one and the SDK reconnects it.
//
// BROWSERBRIDGE_E2E_RESTARTS sets how many restarts (default 6).
func TestRestartFigures(t *testing.T) {
	n := 6
	if s := os.Getenv("BROWSERBRIDGE_E2E_RESTARTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("BROWSERBRIDGE_E2E_RESTARTS=%q is not a positive number", s)
		}
		n = v
	}
	rw := startRestartWorld(t)
	timer := rw.connectWith(t, "e2e-restart-timer", &mcp.StreamableClientTransport{
		Endpoint: rw.mcpURL, HTTPClient: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}, DisableStandaloneSSE: true,
	})
	page := rw.rpages.url("e2e-restart-timer")
	timer.call(t, "navigate", map[string]any{"url": page})
	tab := onlyTab(t, timer, page)
	fi, _ := rw.recordOf(t, timer.cs.ID())
	t.Logf("figure: the session's record file is %d bytes", fi.Size())
	plain := rw.connectGo(t, "e2e-restart-defaults", nil)
	plainPage := rw.rpages.url("e2e-restart-defaults")
	plain.call(t, "navigate", map[string]any{"url": plainPage})
	plainTab := onlyTab(t, plain, plainPage)

	var samples []time.Duration
	plainLost := 0            // the restart after which the default session failed
	var hostStarted time.Time // zero: the running bridge is the test's, not a host's
	for i := 1; i <= n; i++ {
		if !hostStarted.IsZero() {
			time.Sleep(time.Until(hostStarted.Add(respawnGap)))
		}
		pid, killed := rw.killBridge(t)
		var last error
		took := time.Duration(-1)
		for time.Since(killed) < restartWait {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			res, err := timer.try(ctx, "javascript_tool", map[string]any{"code": "location.href", "tabId": tab.TabID})
			cancel()
			if err == nil && jsValue(testutil.Text(res)) == page {
				took = time.Since(killed)
				break
			}
			if err == nil {
				err = fmt.Errorf("the tab shows %q", testutil.Text(res))
			}
			last = err
			time.Sleep(25 * time.Millisecond)
		}
		// A host started the bridge that answered, no later than now.
		hostStarted = time.Now()
		if took < 0 {
			rw.fatalWithLogs("restart %d: no successful call within %v of killing bridge %d (last: %v)", i, restartWait, pid, last)
		}
		st := rw.waitBridge(t, pid)
		samples = append(samples, took)
		t.Logf("restart %d: bridge %d killed, bridge %d answered the session's call %v later", i, pid, st.PID, took.Round(time.Millisecond))

		if plainLost == 0 {
			res, err := plain.try(bg(callWait), "javascript_tool", map[string]any{"code": "location.href", "tabId": plainTab.TabID})
			if err != nil || jsValue(testutil.Text(res)) != plainPage {
				plainLost = i
				t.Errorf("restart %d: the Go SDK session with default settings no longer works: %v %s", i, err, describe(res))
			}
		}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	t.Logf("figure: SIGKILL to the first successful call of a surviving session, %d restarts: median %v, min %v, max %v",
		len(sorted), median(sorted).Round(time.Millisecond), sorted[0].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond))
	if tabs := timer.tabs(t, "tabs_context_mcp"); len(tabs) != 1 || tabs[0].TabID != tab.TabID {
		t.Errorf("after %d restarts the timed session's tabs are %+v, want its tab %d", n, tabs, tab.TabID)
	}
}

func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// restartPages serves the restart tests' pages: /r/<owner> says whose page
// it is, and /begin?tag= notes that a call began and answers its tag.
type restartPages struct {
	*httptest.Server
	mu    sync.Mutex
	begun []string // tags of the /begin requests
}

var ownerName = regexp.MustCompile(`^[A-Za-z0-9/_-]{1,100}$`)

func startRestartPages(t *testing.T) *restartPages {
	p := &restartPages{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /r/{owner...}", func(w http.ResponseWriter, r *http.Request) {
		owner := r.PathValue("owner")
		if !ownerName.MatchString(owner) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, "<!doctype html><html><head><meta charset=\"utf-8\"><title>Page of %s</title></head>"+
			"<body><main><h1>Page of %s</h1><p>%s</p></main></body></html>", owner, owner, belongs(owner))
	})
	mux.HandleFunc("GET /begin", func(w http.ResponseWriter, r *http.Request) {
		tag := r.URL.Query().Get("tag")
		p.mu.Lock()
		p.begun = append(p.begun, tag)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]string{"tag": tag})
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

func (p *restartPages) url(owner string) string { return p.URL + "/r/" + owner }

func (p *restartPages) begunTags() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.begun)
}

// stoppingSentence is how a stopping bridge answers the calls its closed
// links cut short (mcpserver.stoppingSentence).
const stoppingSentence = "Browser Bridge is restarting (or was stopped) while this call was running"

// TestRestartAnswersCallsInFlight (issue 31, item 10): `browserbridge
// restart` while calls run in the browser ("computer wait", a script that
// waits) ends each with a tool error that names the restart, not "the
// browser disconnected", and the session carries on, on its tab.
func TestRestartAnswersCallsInFlight(t *testing.T) {
	rw := startRestartWorld(t)
	c := rw.connectGo(t, "e2e-restart-inflight", nil)
	page := rw.rpages.url("e2e-restart-inflight")
	if _, err := c.try(bg(callWait), "navigate", map[string]any{"url": page}); err != nil {
		t.Fatal(err)
	}
	tab := onlyTab(t, c, page)
	before, err := rw.status()
	if err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		name string
		res  *mcp.CallToolResult
		err  error
	}
	out := make(chan outcome, 2)
	call := func(name, tool string, args map[string]any) {
		res, err := c.cs.CallTool(bg(hangWait), &mcp.CallToolParams{Name: tool, Arguments: args})
		out <- outcome{name, res, err}
	}
	go call("computer wait", "computer", map[string]any{"action": "wait", "duration": 30})
	// The script tells the page server when it runs: by then the wait,
	// sent first, is in the browser too.
	go call("javascript_tool", "javascript_tool", map[string]any{
		"code":       "await fetch('/begin?tag=inflight'); await new Promise((ok) => setTimeout(ok, 30000)); return 'too late';",
		"timeout_ms": 60000,
	})
	testutil.WaitWithin(t, 60*time.Second, "", func() (bool, string) {
		return slices.Contains(rw.rpages.begunTags(), "inflight"), "the script has not begun"
	})
	if out, code := rw.cli("restart"); code != 0 {
		rw.fatalWithLogs("browserbridge restart: exit %d: %s", code, out)
	}
	for range 2 {
		o := <-out
		switch {
		case o.err != nil:
			t.Errorf("%s: %v, want a tool error naming the restart", o.name, o.err)
		case !o.res.IsError || !strings.Contains(testutil.Text(o.res), stoppingSentence):
			t.Errorf("%s: isError %v, %q; want the restart named", o.name, o.res.IsError, clip(testutil.Text(o.res), 300))
		}
	}
	rw.waitBridge(t, before.PID)
	if tabs, err := tryTabs(c, "tabs_context_mcp"); err != nil || len(tabs) != 1 || tabs[0].TabID != tab.TabID {
		t.Fatalf("after the restart tabs_context_mcp (%v) lists %+v, want its tab %+v", err, tabs, tab)
	}
}
