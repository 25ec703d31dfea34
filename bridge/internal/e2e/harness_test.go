//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
)

// Time limits of the harness.
const (
	browserWait = 30 * time.Second // until `browserbridge status` lists the browser
	toolsWait   = 15 * time.Second // until the bridge offers the extension's tools
	stopWait    = 5 * time.Second  // for a process to exit after SIGTERM
	callWait    = 30 * time.Second // for one tool call
)

// echoHostName is the second native host the benchmark registers: a raw
// stdio echo, to time native messaging without the bridge.
const echoHostName = "com.browserbridge.echo"

// world is one running chain: a throwaway HOME and profile, the real bridge
// (`browserbridge serve`), headless Chromium with the unpacked extension
// (which starts the real host), and the test pages.
type world struct {
	tb        testing.TB
	policyDir string // worldOptions.policyDir
	extDir    string // the unpacked extension Chromium loads
	dir       string // everything of this world; short, for the socket's sun_path
	home      string
	bbHome    string // BROWSERBRIDGE_HOME: config, logs, state
	profile   string // Chromium's --user-data-dir
	socket    string
	env       []string // what the CLI, the bridge and Chromium (hence the host) run with

	serve     *exec.Cmd
	serveOut  *testbrowser.SyncBuffer
	chrome    *exec.Cmd
	chromeOut *testbrowser.SyncBuffer

	mcpURL string
	pages  *pageServer

	mu       sync.Mutex
	sessions []*mcp.ClientSession
	stopped  bool

	stateMu sync.Mutex
	state   *client // a local session that reads dev_utils state (w.readState)
}

type worldOptions struct {
	echoHost bool // register testdata/echohost as com.browserbridge.echo
	relay    *relayOptions
	// listen is the bridge's address; "" means a free port of the first
	// bridge's choosing (127.0.0.1:0).
	listen string
	// hostStartsBridge lets the host start the real bridge when none
	// answers, as in real life; otherwise it must reach the world's own.
	hostStartsBridge bool
	// policyDir, when set, is what Chromium sees as /etc/chromium, where
	// it reads enterprise policy (policies/managed/*.json): it runs in a
	// mount namespace of its own with policyDir bind-mounted there, so
	// that the machine's /etc, which other tests share, is never written.
	// managedPolicyDir makes one; startWorld fails the test if it cannot.
	policyDir string
	// installedExtension loads the extension as installed, without the
	// tests' overlay (native_echo_benchmark), for benchmarks that measure
	// what a person gets, such as tools/list's size.
	installedExtension bool
}

// relayOptions is the "relay" block of the bridge's config.json: the
// bridge registers its browser with the cloud proxy at url.
type relayOptions struct {
	url, token string
}

// startWorld brings the whole chain up and registers its teardown, which
// also checks that no process of this world outlives it.
func startWorld(tb testing.TB, opts worldOptions) *world {
	tb.Helper()
	dir, err := os.MkdirTemp("", "bbe")
	if err != nil {
		tb.Fatal(err)
	}
	w := &world{
		tb:        tb,
		policyDir: opts.policyDir,
		extDir:    extDir,
		dir:       dir,
		home:      filepath.Join(dir, "home"),
		bbHome:    filepath.Join(dir, "bb"),
		profile:   filepath.Join(dir, "profile"),
		socket:    filepath.Join(dir, "run", "bridge.sock"),
	}
	if opts.installedExtension && installedExtDir != "" {
		w.extDir = installedExtDir
	}
	tb.Cleanup(w.stop)
	for _, d := range []string{w.home, filepath.Join(w.bbHome, "config"), w.profile, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	config := map[string]any{"listen": "127.0.0.1:0"}
	if opts.listen != "" {
		config["listen"] = opts.listen
	}
	if opts.relay != nil {
		config["relay"] = map[string]string{"url": opts.relay.url, "token": opts.relay.token}
	}
	configJSON, _ := json.Marshal(config)
	if err := os.WriteFile(filepath.Join(w.bbHome, "config", "config.json"), configJSON, 0o600); err != nil {
		tb.Fatal(err)
	}
	w.env = append(os.Environ(),
		"HOME="+w.home,
		"XDG_CONFIG_HOME="+filepath.Join(w.home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(w.home, ".cache"),
		"XDG_RUNTIME_DIR=",
		"CHROME_CONFIG_HOME="+filepath.Join(w.home, ".config"), // empty, Chromium writes "chromium/Crash Reports" into the working directory
		"BROWSERBRIDGE_HOME="+w.bbHome,
		"BROWSERBRIDGE_SOCKET="+w.socket,
		// Chromium's process-singleton directory (org.chromium.Chromium.*)
		// goes in TMPDIR and outlives a browser stopped by signal: inside
		// the world's directory it goes with it, not one per test in /tmp.
		"TMPDIR="+filepath.Join(dir, "tmp"),
	)
	if opts.hostStartsBridge {
		w.env = append(w.env, "BROWSERBRIDGE_BIN="+bins.Bridge)
	} else {
		// The host must reach this world's bridge and never start another.
		w.env = append(w.env, "BROWSERBRIDGE_BIN="+filepath.Join(dir, "no-bridge-here"))
	}
	w.pages = startPages(tb)

	// The real installer writes the host manifest into the profile.
	if out, code := w.cli("install", "--browser", "chromium", "--user-data-dir", w.profile, "--no-service"); code != 0 {
		tb.Fatalf("browserbridge install: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(w.profile, "NativeMessagingHosts", protocol.HostName+".json")); err != nil {
		tb.Fatalf("browserbridge install wrote no host manifest into the profile: %v", err)
	}
	if opts.echoHost {
		m, _ := json.MarshalIndent(map[string]any{
			"name": echoHostName, "description": "Browser Bridge e2e raw echo", "path": echoBin,
			"type": "stdio", "allowed_origins": []string{extension.Origin()},
		}, "", "  ")
		if err := os.WriteFile(filepath.Join(w.profile, "NativeMessagingHosts", echoHostName+".json"), m, 0o644); err != nil {
			tb.Fatal(err)
		}
	}

	w.startBridge()
	w.startChromium()
	w.waitBrowser()
	w.waitTools()
	return w
}

// cli runs the built browserbridge in this world and returns its combined
// output and exit code.
func (w *world) cli(args ...string) (string, int) {
	w.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Bridge, args...)
	cmd.Env = w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	case err != nil:
		w.tb.Fatalf("browserbridge %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), 0
}

func (w *world) status() (protocol.StatusResult, error) {
	var st protocol.StatusResult
	out, code := w.cli("status", "--json")
	if code != 0 {
		return st, fmt.Errorf("browserbridge status --json: exit %d: %s", code, strings.TrimSpace(out))
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return st, fmt.Errorf("browserbridge status --json: %v\n%s", err, out)
	}
	return st, nil
}

func (w *world) startBridge() {
	w.tb.Helper()
	w.serveOut = &testbrowser.SyncBuffer{}
	w.serve = exec.Command(bins.Bridge, "serve")
	w.serve.Env = w.env
	w.serve.Stdout, w.serve.Stderr = w.serveOut, w.serveOut
	w.serve.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.serve.Start(); err != nil {
		w.tb.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := w.status()
		if err == nil && len(st.MCPURLs) > 0 {
			for _, u := range st.MCPURLs {
				if strings.HasSuffix(u, "/mcp") {
					w.mcpURL = u
				}
			}
			if w.mcpURL == "" {
				w.tb.Fatalf("the bridge offers no /mcp URL: %v", st.MCPURLs)
			}
			return
		}
		if time.Now().After(deadline) {
			w.fatalWithLogs("browserbridge serve never answered status: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chromiumArgs are chromiumFlags for the world's profile and the
// extension under test, plus extra.
func (w *world) chromiumArgs(extra ...string) []string {
	return chromiumFlags(w.profile, []string{w.extDir}, extra...)
}

// chromiumFlags is the recipe of ../shared/reference/chrome.md for a
// profile and a list of unpacked extensions, plus extra flags; Chromium
// opens about:blank.
func chromiumFlags(profile string, exts []string, extra ...string) []string {
	list := strings.Join(exts, ",")
	args := []string{
		"--headless=new",
		"--no-sandbox", // the tests run as root in CI
		"--disable-gpu",
		"--disable-quic",
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-dev-shm-usage",
		"--password-store=basic",
		"--window-size=1280,900",
		// A screen larger than 1568 px, so that resize_window can make a
		// viewport that screenshots must scale down.
		"--screen-info={0,0 2560x1600}",
		"--user-data-dir=" + profile,
		"--load-extension=" + list,
		"--disable-extensions-except=" + list,
	}
	return append(append(args, extra...), "about:blank")
}

func (w *world) startChromium() {
	w.tb.Helper()
	w.runChromium(w.chromiumArgs()...)
}

// runChromium starts the world's Chromium with args, in its own process
// group, its output in chromeOut. With a policyDir it runs in a private
// mount namespace where policyDir is /etc/chromium: unshare(1) execs sh,
// which mounts and execs Chromium, so the process started is Chromium's.
func (w *world) runChromium(args ...string) {
	w.tb.Helper()
	w.chromeOut = &testbrowser.SyncBuffer{}
	if w.policyDir == "" {
		w.chrome = exec.Command(chromiumBin, args...)
	} else {
		w.chrome = exec.Command("unshare", append([]string{"--mount", "--propagation", "private",
			"sh", "-c", `mount --bind "$0" /etc/chromium && exec "$@"`, w.policyDir, chromiumBin}, args...)...)
	}
	// Chrome passes its environment on to the native hosts it starts, so
	// the host finds this world's socket.
	w.chrome.Env = w.env
	w.chrome.Stdout, w.chrome.Stderr = w.chromeOut, w.chromeOut
	w.chrome.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.chrome.Start(); err != nil {
		w.tb.Fatal(err)
	}
}

// waitBrowser waits until the bridge lists the browser: the extension ran,
// Chrome started the host, the host attached and the extension said hello.
func (w *world) waitBrowser() {
	w.tb.Helper()
	deadline := time.Now().Add(browserWait)
	var last string
	for time.Now().Before(deadline) {
		st, err := w.status()
		if err == nil && len(st.Browsers) > 0 {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d hosts attached, no browser said hello", st.Hosts)
		}
		if w.chrome.ProcessState != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.fatalWithLogs("no browser connected to the bridge within %v (last status: %s)", browserWait, last)
}

// waitTools waits until the bridge offers a tool of the extension (beyond
// its own list_browsers and select_browser). It does not fail: the tool
// tests say precisely what is missing.
func (w *world) waitTools() {
	w.tb.Helper()
	cs := w.connect("e2e-harness")
	defer w.closeSession(cs)
	deadline := time.Now().Add(toolsWait)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := cs.ListTools(ctx, nil)
		cancel()
		if err == nil {
			for _, t := range res.Tools {
				if t.Name != "list_browsers" && t.Name != "select_browser" {
					return
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.tb.Logf("the bridge offers no tool of the extension after %v", toolsWait)
}

// connect opens an MCP session (Streamable HTTP, a stateful protocol
// version so that each client is its own session and tab group).
func (w *world) connect(name string) *mcp.ClientSession {
	w.tb.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: w.mcpURL, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		w.fatalWithLogs("MCP connect to %s: %v", w.mcpURL, err)
	}
	w.mu.Lock()
	w.sessions = append(w.sessions, cs)
	w.mu.Unlock()
	return cs
}

func (w *world) closeSession(cs *mcp.ClientSession) {
	_ = cs.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, s := range w.sessions {
		if s == cs {
			w.sessions = append(w.sessions[:i], w.sessions[i+1:]...)
			break
		}
	}
}

// hostPIDs are the running browserbridge-host processes of this run.
func hostPIDs() []int { return pgrep("-f", filepath.Join(binDir, "browserbridge-host")) }

// stop ends Chromium (whose host then exits), the bridge and the pages,
// and fails the test if any process of this world is still alive.
func (w *world) stop() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	sessions := w.sessions
	w.sessions = nil
	w.mu.Unlock()
	if w.tb.Failed() {
		w.dumpLogs()
	}
	for _, cs := range sessions {
		_ = cs.Close()
	}
	stopGroup(w.chrome)
	stopGroup(w.serve)
	if w.pages != nil {
		w.pages.Close()
	}
	// Chrome's helpers and the host it started may take a moment to follow.
	var left []int
	for deadline := time.Now().Add(stopWait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		left = w.leftovers()
		if len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		out, _ := exec.Command("ps", "-o", "pid,pgid,args", "-p", joinPIDs(left)).CombinedOutput()
		w.tb.Errorf("processes of the test outlived it (killed now):\n%s", out)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = os.RemoveAll(w.dir)
}

// leftovers are the live processes of this world: anything whose command
// line names its directory or one of this run's binaries, and anything in
// Chromium's or the bridge's process group.
func (w *world) leftovers() []int {
	seen := map[int]bool{}
	var pids []int
	add := func(ps []int) {
		for _, p := range ps {
			if !seen[p] && p != os.Getpid() {
				seen[p] = true
				pids = append(pids, p)
			}
		}
	}
	add(pgrep("-f", w.dir))
	add(pgrep("-f", binDir+"/"))
	for _, c := range []*exec.Cmd{w.chrome, w.serve} {
		if c != nil && c.Process != nil {
			add(pgrep("-g", strconv.Itoa(c.Process.Pid)))
		}
	}
	return pids
}

// stopGroup sends SIGTERM to the process group of cmd, waits a while, then
// SIGKILLs the group, and reaps cmd.
func stopGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopWait):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-done
}

// pgrep returns the pids pgrep finds (none when it finds none).
func pgrep(args ...string) []int {
	out, _ := exec.Command("pgrep", args...).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

func joinPIDs(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

func (w *world) fatalWithLogs(format string, args ...any) {
	w.tb.Helper()
	w.dumpLogs()
	w.tb.Fatalf(format, args...)
}

// dumpLogs shows the bridge's log (which holds the host's log lines, sent
// as host.log), the bridge's own output and Chromium's (where the host's
// stderr goes).
func (w *world) dumpLogs() {
	w.tb.Helper()
	logFile := filepath.Join(w.bbHome, "logs", "bridge.log")
	if b, err := os.ReadFile(logFile); err == nil {
		w.tb.Logf("--- bridge log %s (host lines included) ---\n%s", logFile, tail(string(b), 200))
	} else {
		w.tb.Logf("--- bridge log: %v", err)
	}
	if w.serveOut != nil {
		w.tb.Logf("--- browserbridge serve output ---\n%s", tail(w.serveOut.String(), 80))
	}
	if w.chromeOut != nil {
		// Without a D-Bus, Chromium complains on every start; that is noise here.
		var keep []string
		for _, l := range strings.Split(w.chromeOut.String(), "\n") {
			if !strings.Contains(l, "dbus/") {
				keep = append(keep, l)
			}
		}
		w.tb.Logf("--- chromium stderr (and the host's) ---\n%s", tail(strings.Join(keep, "\n"), 120))
	}
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = append([]string{fmt.Sprintf("[… %d lines before]", len(ls)-lines)}, ls[len(ls)-lines:]...)
	}
	return strings.Join(ls, "\n")
}

var _ io.Writer = (*testbrowser.SyncBuffer)(nil)

// pageServer serves testdata/*.html and a small API the console page
// fetches, and records the API requests it saw.
type pageServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "METHOD /path?query" of every /api request
	// outcomes are what the page set's pages told the server (issue 32):
	// "GET /visit/…" for a search result opened, "POST /api/pageset/…
	// <body>" for a form saved or a dialog confirmed.
	outcomes []string
	// outcomeAdded is closed (and replaced) when an outcome is added.
	outcomeAdded chan struct{}
}

func startPages(tb testing.TB) *pageServer {
	ps := &pageServer{outcomeAdded: make(chan struct{})}
	mux := http.NewServeMux()
	// The pages, served as they are (http.FileServer would redirect
	// /index.html to /, and the tests compare URLs).
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		name := path.Clean(r.URL.Path)
		if name == "/" {
			name = "/index.html"
		}
		b, err := os.ReadFile(filepath.Join("testdata", filepath.FromSlash(name)))
		if err != nil || path.Ext(name) != ".html" {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		rw.Header().Set("Cache-Control", "no-store")
		_, _ = rw.Write(b)
	})
	record := func(r *http.Request) {
		ps.mu.Lock()
		ps.seen = append(ps.seen, r.Method+" "+r.URL.RequestURI())
		ps.mu.Unlock()
	}
	mux.HandleFunc("/api/data", func(rw http.ResponseWriter, r *http.Request) {
		record(r)
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"item":%q}`, r.URL.Query().Get("item"))
	})
	mux.HandleFunc("/api/echo", func(rw http.ResponseWriter, r *http.Request) {
		record(r)
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(rw, io.LimitReader(r.Body, 1<<20))
	})
	mux.HandleFunc("/api/missing", func(rw http.ResponseWriter, r *http.Request) {
		record(r)
		http.NotFound(rw, r)
	})
	// The page set's outcomes: a search result's address, and what a page
	// saves by fetch (testdata/pageset).
	mux.HandleFunc("GET /visit/", func(rw http.ResponseWriter, r *http.Request) {
		ps.addOutcome("GET " + r.URL.RequestURI())
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(rw, "<!doctype html><title>Visited</title><p>You opened %s.</p>", html.EscapeString(r.URL.Path))
	})
	mux.HandleFunc("POST /api/pageset/", func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(rw, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		ps.addOutcome("POST " + r.URL.Path + " " + string(body))
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"ok":true}`))
	})
	ps.Server = httptest.NewServer(mux)
	return ps
}

func (ps *pageServer) addOutcome(s string) {
	ps.mu.Lock()
	ps.outcomes = append(ps.outcomes, s)
	close(ps.outcomeAdded)
	ps.outcomeAdded = make(chan struct{})
	ps.mu.Unlock()
}

// takeOutcomes returns the page set's outcomes since the last call and
// forgets them, and a channel closed when the next one is added.
func (ps *pageServer) takeOutcomes() ([]string, <-chan struct{}) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := ps.outcomes
	ps.outcomes = nil
	return out, ps.outcomeAdded
}

func (ps *pageServer) url(page string) string { return ps.URL + "/" + strings.TrimPrefix(page, "/") }

func (ps *pageServer) requests() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]string(nil), ps.seen...)
}

// startChromiumWithDevTools starts Chromium on the world's profile with
// --remote-debugging-port=0 (the world's Chromium stopped first) and returns
// DevTools' address once the bridge lists the browser again.
func (w *world) startChromiumWithDevTools() devtoolsAddr {
	w.tb.Helper()
	portFile := filepath.Join(w.profile, "DevToolsActivePort")
	_ = os.Remove(portFile)
	w.runChromium(w.chromiumArgs("--remote-debugging-port=0")...)
	var addr devtoolsAddr
	testutil.WaitWithin(w.tb, devtoolsWait, "", func() (bool, string) {
		b, err := os.ReadFile(portFile)
		lines := strings.Fields(string(b))
		if err != nil || len(lines) < 2 {
			return false, fmt.Sprintf("Chromium wrote no DevToolsActivePort (%v)", err)
		}
		addr = devtoolsAddr{host: "127.0.0.1:" + lines[0], browserPath: lines[1]}
		return true, ""
	})
	w.waitBrowser()
	return addr
}
