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

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
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
func readUntilID(tb testing.TB, ws *websocket.Conn, id string) *relaywire.Message {
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			tb.Fatalf("read: %v", err)
		}
		var m relaywire.Message
		json.Unmarshal(data, &m)
		if string(m.ID) == id && m.Method == "" {
			return &m
		}
	}
}

// rawExtension authenticates an extension synchronously and returns its id.
func rawExtension(tb testing.TB, tp *testProxy, user, name string) (*websocket.Conn, string) {
	ws := rawDial(tb, tp.url+relaywire.PathExtension)
	if _, _, err := ws.ReadMessage(); err != nil { // authenticate
		tb.Fatal(err)
	}
	ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": "proxy:1", "result": relaywire.AuthenticateResult{Name: name, AccessToken: tp.token(tb, user, token.KindExtension)}})
	_, data, err := ws.ReadMessage()
	if err != nil {
		tb.Fatal(err)
	}
	var m relaywire.Message
	var p relaywire.AuthenticatedParams
	json.Unmarshal(data, &m)
	json.Unmarshal(m.Params, &p)
	if p.ExtensionID == "" {
		tb.Fatalf("authenticated: %s", data)
	}
	return ws, p.ExtensionID
}

// rawMCP handshakes and connects an MCP client synchronously.
func rawMCP(tb testing.TB, tp *testProxy, tok, extID string) *websocket.Conn {
	ws := rawDial(tb, tp.url+relaywire.PathMCP)
	ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": "h", "method": "mcp_handshake", "params": map[string]string{"accessToken": tok}})
	readUntilID(tb, ws, `"h"`)
	ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": "c", "method": "connect", "params": map[string]string{"extension_id": extID}})
	if m := readUntilID(tb, ws, `"c"`); m.Error != nil {
		tb.Fatalf("connect: %s", m.Error)
	}
	return ws
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
// up to 10 extensions of one user. Clients, extensions and proxy share
// the machine.
func BenchmarkForward(b *testing.B) {
	for _, clients := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			tp := newTestProxy(b, Options{ConnRate: -1, UserRate: -1})
			nExt := min(clients, 10)
			var extIDs []string
			for i := range nExt {
				ws, id := rawExtension(b, tp, "alice", fmt.Sprint("Chrome ", i))
				go echoExtension(ws)
				b.Cleanup(func() { ws.Close() })
				extIDs = append(extIDs, id)
			}
			tok := tp.token(b, "alice", token.KindMCP)
			conns := make([]*websocket.Conn, clients)
			for i := range conns {
				conns[i] = rawMCP(b, tp, tok, extIDs[i%nExt])
				b.Cleanup(func() { conns[i].Close() })
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			lat := make([][]time.Duration, clients)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i, ws := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var m struct {
						ID json.RawMessage `json:"id"`
					}
					for n := 1; left.Add(-1) >= 0; n++ {
						id := fmt.Sprint(n)
						t0 := time.Now()
						if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"getTabs","params":{}}`)); err != nil {
							b.Error(err)
							return
						}
						for {
							_, data, err := ws.ReadMessage()
							if err != nil {
								b.Error(err)
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
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
				b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
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

func TestMain(m *testing.M) {
	if os.Getenv(echoEnv) != "" {
		os.Exit(serveEcho())
	}
	os.Exit(m.Run())
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
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), echoEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
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
		clients = append(clients, rawDial(b, echo))
	}
	time.Sleep(100 * time.Millisecond)
	baseline := inUse() - before
	for _, ws := range clients {
		ws.Close()
	}
	clients = nil

	tp := newTestProxy(b, Options{})
	before = inUse()
	closeAll := idlePairs(b, tp, n)
	time.Sleep(100 * time.Millisecond)
	total := inUse() - before
	for b.Loop() {
	}
	b.ReportMetric(float64(total)/n, "B/pair")
	b.ReportMetric(float64(baseline)/n, "client-B/pair")
	b.ReportMetric((float64(total)-float64(baseline))/n, "proxy-B/pair")
	closeAll()
}

// BenchmarkPairsHeld opens 10,000 idle pairs (40,000 sockets in this
// process) and reports how many it held; the soft and hard RLIMIT_NOFILE
// are raised where the OS lets us.
func BenchmarkPairsHeld(b *testing.B) {
	const want = 10000
	limit := raiseFileLimit(4*want + 1000)
	n := want
	if limit > 0 && limit < 4*want+1000 {
		n = int(limit-1000) / 4
		b.Logf("RLIMIT_NOFILE is %d: holding %d pairs instead of %d", limit, n, want)
	}
	tp := newTestProxy(b, Options{})
	before := inUse()
	start := time.Now()
	closeAll := idlePairs(b, tp, n)
	setup := time.Since(start)
	after := inUse()
	for b.Loop() {
	}
	b.ReportMetric(float64(tp.srv.nExt.Load()), "pairs")
	b.ReportMetric(float64(after-before)/float64(n), "B/pair")
	b.ReportMetric(setup.Seconds(), "setup-s")
	closeAll()
}
