package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/benchload"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testproc"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// rawDial opens a WebSocket with small buffers and no goroutines.
func rawDial(tb testing.TB, url string) *websocket.Conn {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 512, WriteBufferSize: 512}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		tb.Fatalf("dial: %v", err)
	}
	return ws
}

// readUntilID reads frames until the reply with the id (raw JSON).
func readUntilID(ws *websocket.Conn, id string) (*relaywire.Message, error) {
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		var m relaywire.Message
		json.Unmarshal(data, &m)
		if string(m.ID) == id && m.Method == "" {
			return &m, nil
		}
	}
}

// rawExtension authenticates an extension synchronously and returns its id.
func rawExtension(tb testing.TB, tp *testProxy, user, name string) (*websocket.Conn, string) {
	ws, id, err := dialExtension(tp.url, tp.token(tb, user, token.KindExtension), name)
	if err != nil {
		tb.Fatal(err)
	}
	return ws, id
}

func dialExtension(url, tok, name string) (*websocket.Conn, string, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 512, WriteBufferSize: 512}
	ws, _, err := d.Dial(url+relaywire.PathExtension, nil)
	if err != nil {
		return nil, "", fmt.Errorf("dial: %w", err)
	}
	if _, _, err := ws.ReadMessage(); err != nil { // authenticate
		ws.Close()
		return nil, "", err
	}
	ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": "proxy:1", "result": relaywire.AuthenticateResult{Name: name, AccessToken: tok}})
	_, data, err := ws.ReadMessage()
	if err != nil {
		ws.Close()
		return nil, "", err
	}
	var m relaywire.Message
	var p relaywire.AuthenticatedParams
	json.Unmarshal(data, &m)
	json.Unmarshal(m.Params, &p)
	if p.ExtensionID == "" {
		ws.Close()
		return nil, "", fmt.Errorf("authenticated: %s", data)
	}
	return ws, p.ExtensionID, nil
}

// rawMCP handshakes and connects an MCP client synchronously.
func rawMCP(tb testing.TB, tp *testProxy, tok, extID string) *websocket.Conn {
	ws, err := dialMCP(tp.url, tok, extID)
	if err != nil {
		tb.Fatal(err)
	}
	return ws
}

func dialMCP(url, tok, extID string) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 512, WriteBufferSize: 512}
	ws, _, err := d.Dial(url+relaywire.PathMCP, nil)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": "h", "method": "mcp_handshake", "params": map[string]string{"accessToken": tok}})
	if _, err := readUntilID(ws, `"h"`); err != nil {
		ws.Close()
		return nil, err
	}
	ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": "c", "method": "connect", "params": map[string]string{"extension_id": extID}})
	m, err := readUntilID(ws, `"c"`)
	if err == nil && m.Error != nil {
		err = fmt.Errorf("connect: %s", m.Error)
	}
	if err != nil {
		ws.Close()
		return nil, err
	}
	return ws, nil
}

// echoExtension answers every request with an empty result, fast.
func echoExtension(ws *websocket.Conn) {
	var idOnly struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		idOnly.ID, idOnly.Method = nil, ""
		if json.Unmarshal(data, &idOnly) != nil || idOnly.ID == nil || idOnly.Method == "" {
			continue
		}
		if ws.WriteMessage(websocket.TextMessage, relaywire.AppendResult(nil, idOnly.ID, nil)) != nil {
			return
		}
	}
}

// BenchmarkForward measures forwarded calls through the proxy: each MCP
// client makes one call at a time (closed loop); clients are spread over
// up to 10 extensions of one user (which is why these benchmarks lift the
// per-user caps and rates: they measure the proxy, not its limits). Clients, extensions and proxy share
// the machine and this process; cpu-µs/call is this process's CPU time per
// call, theirs and the proxy's (BenchmarkForwardProc counts the proxy's
// alone). The rate=20000 case offers the throughput target from 100
// clients and times each call from the moment it was due (see load.run):
// the p99 while serving that load, where the closed loop's is the p99 at
// the saturation point.
func BenchmarkForward(b *testing.B) {
	for _, load := range forwardLoads {
		b.Run(load.name(), func(b *testing.B) {
			tp := newTestProxy(b, Options{ConnRate: -1, UserRate: -1, MaxMCPPerUser: -1, MaxExtensionsPerUser: -1})
			l, err := startLoad(tp.url, tp.token(b, "alice", token.KindExtension), tp.token(b, "alice", token.KindMCP), load.clients)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(l.close)
			b.ResetTimer()
			cpu0 := benchload.ProcessCPU()
			res, err := l.run(int64(b.N), load.rate)
			cpu := benchload.ProcessCPU() - cpu0
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			res.Report(b, cpu, load.rate > 0)
		})
	}
}

// forwardLoads are the loads the forwarding benchmarks offer.
var forwardLoads = []forwardLoad{{1, 0}, {100, 0}, {1000, 0}, {100, 20_000}}

type forwardLoad struct {
	clients int
	rate    float64 // calls/s offered; 0: closed loop
}

func (l forwardLoad) name() string {
	if l.rate > 0 {
		return fmt.Sprintf("clients=%d/rate=%.0f", l.clients, l.rate)
	}
	return fmt.Sprintf("clients=%d", l.clients)
}

// BenchmarkForwardProc is BenchmarkForward with the clients and the
// extensions in another process (loadEnv): cpu-µs/call is then the proxy's
// own CPU time per forwarded call, which other load on the machine moves
// much less than it moves calls/s and latencies.
func BenchmarkForwardProc(b *testing.B) {
	for _, load := range forwardLoads {
		// The proxy and the load outlive each run of the sub-benchmark
		// (one per b.N tried): the proxy is the parent's, to clean up.
		var lp *loadProc
		parent := b
		b.Run(load.name(), func(b *testing.B) {
			if lp == nil {
				tp := newTestProxy(parent, Options{ConnRate: -1, UserRate: -1, MaxMCPPerUser: -1, MaxExtensionsPerUser: -1})
				lp = startLoadProc(b, tp, load.clients)
			}
			b.ResetTimer()
			cpu0 := benchload.ProcessCPU()
			res := lp.run(b, b.N, load.rate)
			cpu := benchload.ProcessCPU() - cpu0
			b.StopTimer()
			res.Report(b, cpu, load.rate > 0)
		})
		if lp != nil {
			lp.close()
		}
	}
}

// load is the client side of the forwarding benchmarks: up to 10 echoing
// extensions and the MCP clients connected to them.
type load struct {
	exts, conns []*websocket.Conn
}

func startLoad(url, extTok, mcpTok string, clients int) (*load, error) {
	l := &load{}
	nExt := min(clients, 10)
	var extIDs []string
	for i := range nExt {
		ws, id, err := dialExtension(url, extTok, fmt.Sprint("Chrome ", i))
		if err != nil {
			l.close()
			return nil, err
		}
		go echoExtension(ws)
		l.exts = append(l.exts, ws)
		extIDs = append(extIDs, id)
	}
	for i := range clients {
		ws, err := dialMCP(url, mcpTok, extIDs[i%nExt])
		if err != nil {
			l.close()
			return nil, err
		}
		l.conns = append(l.conns, ws)
	}
	return l, nil
}

func (l *load) close() {
	for _, ws := range slices.Concat(l.exts, l.conns) {
		ws.Close()
	}
}

// run makes n calls, each client one at a time, and returns what they
// measured.
//
// With rate > 0 the calls are offered at rate calls/s over all clients:
// the k-th call is due at start + k/rate, and a client free by then makes
// it. Its latency counts from when it was due (benchload.Schedule.Wait
// says exactly), so a proxy that falls behind pays for the queue (no
// coordinated omission).
func (l *load) run(n int64, rate float64) (benchload.Summary, error) {
	lat, elapsed, err := l.runLatencies(n, rate)
	return benchload.Summarize(lat, elapsed), err
}

// runLatencies is run, returning each call's latency and the time the
// calls took.
func (l *load) runLatencies(n int64, rate float64) ([]time.Duration, time.Duration, error) {
	var next atomic.Int64
	lat := make([][]time.Duration, len(l.conns))
	errs := make(chan error, len(l.conns))
	var wg sync.WaitGroup
	sched := benchload.Schedule{Start: time.Now(), Rate: rate}
	for i, ws := range l.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			for seq := 1; ; seq++ {
				k := next.Add(1) - 1
				if k >= n {
					return
				}
				id := fmt.Sprint(seq)
				t0 := sched.Wait(k)
				if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"getTabs","params":{}}`)); err != nil {
					errs <- err
					return
				}
				for {
					_, data, err := ws.ReadMessage()
					if err != nil {
						errs <- err
						return
					}
					m.ID = nil
					json.Unmarshal(data, &m)
					if string(m.ID) == id {
						break
					}
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(sched.Start)
	close(errs)
	return slices.Concat(lat...), elapsed, <-errs
}

// loadEnv, when set, makes the test binary the load of
// BenchmarkForwardProc (see TestMain).
const loadEnv = "BROWSERBRIDGE_PROXY_BENCH_LOAD"

// driveLoad is the load process: it reads "URL EXT-TOKEN MCP-TOKEN
// CLIENTS", connects, prints "ready"; then for each line "run N" makes N
// calls and prints "done CALLS ELAPSED P50 P99 P99.9" (durations in
// nanoseconds), until its stdin
// closes.
func driveLoad() int {
	raiseFileLimit(1 << 20)
	in := bufio.NewScanner(os.Stdin)
	var url, extTok, mcpTok string
	var clients int
	if !in.Scan() {
		return 1
	}
	if _, err := fmt.Sscan(in.Text(), &url, &extTok, &mcpTok, &clients); err != nil {
		fmt.Println("bad request:", err)
		return 1
	}
	l, err := startLoad(url, extTok, mcpTok, clients)
	if err != nil {
		fmt.Println("setup failed:", err)
		return 1
	}
	defer l.close()
	fmt.Println("ready")
	for in.Scan() {
		var n int64
		var rate float64
		if _, err := fmt.Sscanf(in.Text(), "run %d %g", &n, &rate); err != nil {
			fmt.Println("bad request:", err)
			return 1
		}
		res, err := l.run(n, rate)
		if err != nil {
			fmt.Println("failed:", err)
			return 1
		}
		fmt.Println("done", res.Calls, int64(res.Elapsed), int64(res.P50), int64(res.P99), int64(res.P999))
	}
	return 0
}

// loadProc is a running load process.
type loadProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startLoadProc(b *testing.B, tp *testProxy, clients int) *loadProc {
	cmd, stdin, stdout := testproc.Start(b, loadEnv)
	lp := &loadProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	fmt.Fprintln(stdin, tp.url, tp.token(b, "alice", token.KindExtension), tp.token(b, "alice", token.KindMCP), clients)
	if line, err := lp.out.ReadString('\n'); err != nil || line != "ready\n" {
		lp.close()
		b.Fatalf("load process: %q %v", line, err)
	}
	return lp
}

// run makes n calls, offered at rate calls/s if rate > 0 (see load.run).
func (lp *loadProc) run(b *testing.B, n int, rate float64) benchload.Summary {
	fmt.Fprintln(lp.stdin, "run", n, rate)
	line, err := lp.out.ReadString('\n')
	var r benchload.Summary
	if err == nil {
		_, err = fmt.Sscanf(line, "done %d %d %d %d %d", &r.Calls, &r.Elapsed, &r.P50, &r.P99, &r.P999)
	}
	if err != nil {
		b.Fatalf("load process: %q %v", line, err)
	}
	return r
}

func (lp *loadProc) close() {
	lp.stdin.Close()
	lp.cmd.Wait()
}

// idlePairs opens n extension+MCP client pairs, each client connected to
// its extension, and returns a function closing them.
func idlePairs(b *testing.B, tp *testProxy, n int) func() {
	tok := tp.token(b, "alice", token.KindMCP)
	var all []*websocket.Conn
	for i := range n {
		ext, id := rawExtension(b, tp, "alice", fmt.Sprint("Browser ", i))
		mcp := rawMCP(b, tp, tok, id)
		all = append(all, ext, mcp)
	}
	return func() {
		for _, ws := range all {
			ws.Close()
		}
	}
}

func inUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// echoEnv, when set, makes the test binary a trivial WebSocket echo server
// (see TestMain): the baseline of BenchmarkIdlePair, in its own process so
// that its memory is not counted.
const echoEnv = "BROWSERBRIDGE_PROXY_BENCH_ECHO"

// pairsEnv, when set, makes the test binary the client side of
// BenchmarkPairsHeld (see TestMain), so that the proxy's process holds only
// its own two sockets per pair.
const pairsEnv = "BROWSERBRIDGE_PROXY_BENCH_PAIRS"

func TestMain(m *testing.M) {
	if os.Getenv(echoEnv) != "" {
		os.Exit(serveEcho())
	}
	if os.Getenv(pairsEnv) != "" {
		os.Exit(holdPairs())
	}
	if os.Getenv(loadEnv) != "" {
		os.Exit(driveLoad())
	}
	os.Exit(m.Run())
}

// holdPairs reads "URL EXT-TOKEN MCP-TOKEN N" from stdin, opens N idle
// pairs (an extension, an MCP client connected to it), prints "held K",
// keeps them (answering pings) and returns when its stdin closes.
func holdPairs() int {
	raiseFileLimit(1 << 20)
	in := bufio.NewReader(os.Stdin)
	var url, extTok, mcpTok string
	var n int
	if _, err := fmt.Fscanln(in, &url, &extTok, &mcpTok, &n); err != nil {
		fmt.Println("bad request:", err)
		return 1
	}
	var conns []*websocket.Conn
	for i := range n {
		ext, id, err := dialExtension(url, extTok, fmt.Sprint("Browser ", i))
		if err != nil {
			fmt.Fprintf(os.Stderr, "pair %d: %v\n", i, err)
			break
		}
		mcp, err := dialMCP(url, mcpTok, id)
		if err != nil {
			ext.Close()
			fmt.Fprintf(os.Stderr, "pair %d: %v\n", i, err)
			break
		}
		conns = append(conns, ext, mcp)
	}
	for _, ws := range conns {
		go func() { // answers pings
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					return
				}
			}
		}()
	}
	fmt.Println("held", len(conns)/2)
	io.Copy(io.Discard, in)
	return 0
}

// serveEcho echoes messages on any path, prints its address, and returns
// when its stdin closes.
func serveEcho() int {
	raiseFileLimit(20000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	up := websocket.Upgrader{ReadBufferSize: 512, WriteBufferSize: 512}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			t, data, err := ws.ReadMessage()
			if err != nil || ws.WriteMessage(t, data) != nil {
				return
			}
		}
	}))
	fmt.Println(ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startEcho runs serveEcho in a child process and returns its ws:// URL.
func startEcho(b *testing.B) string {
	cmd, stdin, stdout := testproc.Start(b, echoEnv)
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("echo server: %v", err)
	}
	return "ws://" + strings.TrimSpace(addr) + "/"
}

// BenchmarkIdlePair measures the memory of idle connected pairs (an
// extension and an MCP client connected to it). B/pair is this process's
// growth per pair: the proxy's two connections and their goroutines plus
// the two goroutine-less client ends. client-B/pair is the baseline, the
// same two client ends (same dialer and buffers) holding idle connections
// to an echo server in another process; proxy-B/pair, the difference, is
// what the proxy itself holds per pair.
func BenchmarkIdlePair(b *testing.B) {
	const n = 1000
	raiseFileLimit(8*n + 1000)
	// Measured once, whatever -benchtime says: the loop is empty.
	echo := startEcho(b)
	before := inUse()
	clients := make([]*websocket.Conn, 0, 2*n)
	for range 2 * n {
		clients = append(clients, rawDial(b, echo)) // goroutine-less: nothing left to settle once it returns
	}
	baseline := inUse() - before
	for _, ws := range clients {
		ws.Close()
	}
	clients = nil

	tp := newTestProxy(b, Options{MaxMCPPerUser: -1, MaxExtensionsPerUser: -1})
	before = inUse()
	closeAll := idlePairs(b, tp, n)
	testutil.WaitFor(b, fmt.Sprintf("the proxy to hold %d pairs", n), func() bool { return tp.srv.nExt.Load() == n && tp.srv.nMCP.Load() == n })
	total := inUse() - before
	for b.Loop() {
	}
	b.ReportMetric(float64(total)/n, "B/pair")
	b.ReportMetric(float64(baseline)/n, "client-B/pair")
	b.ReportMetric((float64(total)-float64(baseline))/n, "proxy-B/pair")
	closeAll()
}

// BenchmarkPairsHeld opens up to 10,000 idle pairs, their client ends in
// another process (pairsEnv), and reports how many the proxy held and its
// memory per pair: B/pair is the growth of the Go heap and stacks in use
// (after GC), rss-B/pair of the resident set. The proxy's process needs two
// file descriptors per pair, the clients' process two: where RLIMIT_NOFILE
// is below 20,000 plus a margin (the listener, stdio, the poller, pipes),
// fewer pairs are opened, and the log says so. With a hard limit of 20,000
// that is 9,985 pairs.
func BenchmarkPairsHeld(b *testing.B) {
	const want, margin = 10000, 30
	limit := raiseFileLimit(2*want + margin)
	n := want
	if limit > 0 && limit < 2*want+margin {
		n = int(limit-margin) / 2
		b.Logf("RLIMIT_NOFILE is %d: holding %d pairs instead of %d", limit, n, want)
	}
	tp := newTestProxy(b, Options{UserRate: -1, MaxMCPPerUser: -1, MaxExtensionsPerUser: -1})
	before, rssBefore := inUse(), residentSet()
	start := time.Now()

	cmd, stdin, stdout := testproc.Start(b, pairsEnv)
	defer func() { stdin.Close(); cmd.Wait() }()
	fmt.Fprintln(stdin, tp.url, tp.token(b, "alice", token.KindExtension), tp.token(b, "alice", token.KindMCP), n)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "held ") {
		b.Fatalf("pairs process: %q %v", line, err)
	}
	setup := time.Since(start)
	var opened int64
	if _, err := fmt.Sscanf(line, "held %d", &opened); err != nil {
		b.Fatalf("pairs process: %q %v", line, err)
	}
	// The pairs process closes the extension of a pair that failed; the
	// proxy's count follows a moment later.
	testutil.WaitFor(b, fmt.Sprintf("the proxy to hold the %d pairs opened", opened), func() bool {
		return tp.srv.nExt.Load() == opened && tp.srv.nMCP.Load() == opened
	})
	held := tp.srv.nExt.Load()
	after, rssAfter := inUse(), residentSet()
	for b.Loop() {
	}
	if held < int64(n) {
		b.Logf("the proxy holds %d extensions; %s", held, strings.TrimSpace(line))
	}
	b.ReportMetric(float64(held), "pairs")
	b.ReportMetric(float64(after-before)/float64(held), "B/pair")
	b.ReportMetric(float64(rssAfter-rssBefore)/float64(held), "rss-B/pair")
	b.ReportMetric(setup.Seconds(), "setup-s")
}

// residentSet is this process's resident set size in bytes (Linux), or 0.
func residentSet() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return kb << 10
		}
	}
	return 0
}
