package stdioproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/protocol"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// bridgeWaitFor bounds every wait on a real bridge process: building,
// starting and restarting one takes a while on a loaded machine.
const bridgeWaitFor = 60 * time.Second

// The real programs, built once per test binary by needBinaries.
var (
	binsOnce sync.Once
	bins     testbrowser.Binaries
	binsDir  string
	binsErr  error
)

// needBinaries builds `browserbridge` and `browserbridge-host` from this
// checkout, once.
func needBinaries(t *testing.T) testbrowser.Binaries {
	t.Helper()
	binsOnce.Do(func() {
		binsDir, binsErr = os.MkdirTemp("", "bb-stdioproxy-bin")
		if binsErr == nil {
			bins, binsErr = testbrowser.Build(binsDir)
		}
	})
	if binsErr != nil {
		t.Fatalf("building the bridge: %v", binsErr)
	}
	return bins
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binsDir != "" {
		os.RemoveAll(binsDir)
	}
	os.Exit(code)
}

// realBridge is `browserbridge serve` in a throwaway home: its config,
// logs and state directory (where the session records are) live under
// BROWSERBRIDGE_HOME, its socket in a short directory of its own (sun_path
// is 108 bytes), and every process of it listens on the same address.
type realBridge struct {
	t    *testing.T
	bins testbrowser.Binaries
	dir  string
	addr string
	env  []string

	mu    sync.Mutex
	procs []*bridgeProc // every process started, the last one current
}

// bridgeProc is one process of the bridge.
type bridgeProc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when it has exited
	stderr *testbrowser.SyncBuffer
}

func newRealBridge(t *testing.T) *realBridge {
	bins := needBinaries(t)
	dir, err := os.MkdirTemp("", "bbp")
	if err != nil {
		t.Fatal(err)
	}
	b := &realBridge{t: t, bins: bins, dir: dir, addr: testutil.ClosedAddr(t)}
	b.env = []string{
		"BROWSERBRIDGE_HOME=" + filepath.Join(dir, "home"),
		"BROWSERBRIDGE_SOCKET=" + filepath.Join(dir, "run", "bridge.sock"),
		// No bridge binary: the host must not start a bridge of its own
		// while the test has none running.
		"BROWSERBRIDGE_BIN=" + filepath.Join(dir, "no-bridge-here"),
		"BROWSERBRIDGE_TOKEN=",
	}
	t.Cleanup(func() {
		b.kill()
		if t.Failed() || os.Getenv("STDIOPROXY_LOG") != "" {
			for i := range b.processes() {
				t.Logf("bridge process %d log:\n%s", i+1, b.log(i+1))
			}
		}
		os.RemoveAll(dir)
	})
	return b
}

func (b *realBridge) url() string { return "http://" + b.addr + "/mcp" }

// sessionDir is where the bridge keeps its session records
// (paths.StateDir()/sessions).
func (b *realBridge) sessionDir() string { return filepath.Join(b.dir, "home", "state", "sessions") }

func (b *realBridge) processes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.procs)
}

// start runs a bridge process and waits until it answers /health. A bridge
// just killed may hold its socket's lock a moment longer, so a process
// that exits at once is started again.
func (b *realBridge) start() {
	b.t.Helper()
	deadline := time.Now().Add(bridgeWaitFor)
	for {
		proc := &bridgeProc{
			cmd:    exec.Command(b.bins.Bridge, "serve", "--listen", b.addr),
			exited: make(chan struct{}),
			stderr: &testbrowser.SyncBuffer{},
		}
		proc.cmd.Env = append(os.Environ(), b.env...)
		proc.cmd.Stderr = proc.stderr
		if err := proc.cmd.Start(); err != nil {
			b.t.Fatal(err)
		}
		go func() {
			_ = proc.cmd.Wait()
			close(proc.exited)
		}()
		b.mu.Lock()
		b.procs = append(b.procs, proc)
		b.mu.Unlock()
		if proc.waitHealthy(b.addr, deadline) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the bridge did not answer /health within %v:\n%s", bridgeWaitFor, proc.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitHealthy polls /health until it answers (true), or the process exits
// or the deadline passes (false).
func (proc *bridgeProc) waitHealthy(addr string, deadline time.Time) bool {
	c := http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		if resp, err := c.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			return true
		}
		select {
		case <-proc.exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// kill SIGKILLs the current bridge process, as a crash or an OOM kill
// would (no cleanup: its records stay as they were), and waits for it to
// exit.
func (b *realBridge) kill() {
	b.mu.Lock()
	var proc *bridgeProc
	if n := len(b.procs); n > 0 {
		proc = b.procs[n-1]
	}
	b.mu.Unlock()
	if proc == nil {
		return
	}
	_ = proc.cmd.Process.Signal(syscall.SIGKILL)
	<-proc.exited
}

// log returns the stderr of bridge process n (1 for the first).
func (b *realBridge) log(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n < 1 || n > len(b.procs) {
		return ""
	}
	return b.procs[n-1].stderr.String()
}

// fakeExtension plays the extension behind the real native host: it offers
// two tools, "whoami", which answers with the browserbridge/session id the
// bridge put in the call's _meta (the key of the session's tab group),
// and "block", which answers only when the test ends. It says hello each
// time the host connects to a bridge.
type fakeExtension struct {
	started chan struct{} // a "block" call reached the extension
	release chan struct{}
}

const extensionTools = `{"tools":[` +
	`{"name":"whoami","description":"Name the session this call is in.","inputSchema":{"type":"object"}},` +
	`{"name":"block","description":"Answer when the test ends.","inputSchema":{"type":"object"}}]}`

func startExtension(t *testing.T, b *realBridge) *fakeExtension {
	t.Helper()
	ext := &fakeExtension{started: make(chan struct{}, 10), release: make(chan struct{})}
	stderr := &testbrowser.SyncBuffer{}
	br, err := testbrowser.Start(testbrowser.Options{HostBin: b.bins.Host, Env: b.env, Handler: ext.handle, Stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case st := <-br.States:
				if st.State == protocol.StateConnected {
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), bridgeWaitFor)
						defer cancel()
						_, _ = br.Hello(ctx, "instance-stdioproxy")
					}()
				}
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(ext.release)
		close(done)
		_ = br.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("host stderr:\n%s", stderr.String())
		}
	})
	return ext
}

func (ext *fakeExtension) handle(method string, params json.RawMessage) (any, map[string]any) {
	switch method {
	case "tools/list":
		return json.RawMessage(extensionTools), nil
	case "tools/call":
		var call struct {
			Name string `json:"name"`
			Meta struct {
				Session struct {
					ID string `json:"id"`
				} `json:"browserbridge/session"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(params, &call)
		text := call.Meta.Session.ID
		if call.Name == "block" {
			ext.started <- struct{}{}
			<-ext.release
			text = "released"
		}
		return map[string]any{"content": []map[string]any{{"type": "text", "text": text}}}, nil
	}
	return params, nil
}

// requestLog records every request the proxy makes to the bridge: its
// HTTP method, the JSON-RPC method of a POST, and its Mcp-Session-Id. It
// also tells when the proxy reads the first bytes of a tools/call's
// answer (a priming event, or the answer itself).
type requestLog struct {
	base     http.RoundTripper
	callRead chan struct{} // a value each time a tools/call's answer starts to be read
	mu       sync.Mutex
	seen     []requestSeen
}

func newRequestLog() *requestLog {
	return &requestLog{base: http.DefaultTransport, callRead: make(chan struct{}, 100)}
}

type requestSeen struct{ http, method, session string }

func (r *requestLog) RoundTrip(req *http.Request) (*http.Response, error) {
	seen := requestSeen{http: req.Method, session: req.Header.Get(mcphttp.HeaderSessionID)}
	if req.Method == http.MethodPost && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			data, _ := io.ReadAll(body)
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(data, &m)
			seen.method = m.Method
		}
	}
	r.mu.Lock()
	r.seen = append(r.seen, seen)
	r.mu.Unlock()
	resp, err := r.base.RoundTrip(req)
	if err == nil && seen.method == "tools/call" {
		resp.Body = &firstRead{ReadCloser: resp.Body, signal: r.callRead}
	}
	return resp, err
}

// firstRead signals when the first bytes of a body are read.
type firstRead struct {
	io.ReadCloser
	signal chan<- struct{}
	once   sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if n > 0 {
		f.once.Do(func() {
			select {
			case f.signal <- struct{}{}:
			default:
			}
		})
	}
	return n, err
}

// count returns how many POSTs carried method.
func (r *requestLog) count(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.seen {
		if s.http == http.MethodPost && s.method == method {
			n++
		}
	}
	return n
}

// sessions returns the distinct Mcp-Session-Id values sent, in order.
func (r *requestLog) sessions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.seen {
		if s.session != "" && !slices.Contains(out, s.session) {
			out = append(out, s.session)
		}
	}
	return out
}

func (r *requestLog) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b bytes.Buffer
	for _, s := range r.seen {
		fmt.Fprintf(&b, "%s %s session=%.8s\n", s.http, s.method, s.session)
	}
	return strings.TrimSpace(b.String())
}
