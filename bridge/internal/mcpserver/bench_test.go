package mcpserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/benchload"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// BenchmarkCalls measures tools/call of a no-op tool (echo) through the
// bridge against a fake extension on the native link, with 1, 10 and 100
// concurrent clients on each transport. Reported: calls/s and the p50 and
// p99 of each call as the client sees it. mcp-sdk is /mcp with the fast
// path off (every request through the SDK's server path).
func BenchmarkCalls(b *testing.B) {
	for _, transport := range []string{"mcp", "mcp-sdk", "sse"} {
		for _, clients := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/clients=%d", transport, clients), func(b *testing.B) {
				closedLoop(b, clients, sdkClients(b, inProcessBridge(b, transport == "mcp-sdk"), transport, clients))
			})
		}
	}
}

// BenchmarkCallsAtRate offers 10,000 calls/s from 10 clients, the load the
// latency target names, and reports the p50, p99 and p99.9 of each call
// counted from the moment it was due (see pacedLoop). "sdk" clients are
// the official Go SDK client; "raw" ones are BenchmarkCallsRawClient's.
// Both share the process, and so the two cores, with the bridge: the SDK
// client's own CPU (some 100 µs a call) puts this load at the saturation
// point of the whole process, so its figure is mostly the client's queue.
// (/sse is left out: its closed-loop ceiling here is below 10,000.)
func BenchmarkCallsAtRate(b *testing.B) {
	const clients, rate = 10, 10_000
	for _, client := range []string{"sdk", "raw"} {
		b.Run(fmt.Sprintf("%s/mcp/clients=%d/rate=%d", client, clients, rate), func(b *testing.B) {
			url := inProcessBridge(b, false)
			var call func(int) error
			if client == "raw" {
				call = rawClients(b, url, clients)
			} else {
				call = sdkClients(b, url, "mcp", clients)
			}
			pacedLoop(b, clients, rate, call)
		})
	}
}

// inProcessBridge starts a bridge in this process with a fake extension
// attached, with the fast path off if asked, and returns its base URL.
func inProcessBridge(b *testing.B, noFastPath bool) string {
	br := newBridge(b, Options{}, HTTPOptions{Sessions: benchSessions()})
	br.st.noFastPath.Store(noFastPath)
	br.attach("instance-bench-1")
	return br.srv.URL
}

// benchSessions admits every session: a benchmark's clients all come from
// this machine (its 100 SSE clients, unnamed, are one client to the
// admission table), and the caps (64 a client, 512 in all) are not what it
// measures.
func benchSessions() *sessionlimit.Table {
	return sessionlimit.New(sessionlimit.Options{Max: -1, PerClient: -1})
}

// sdkClients opens n official SDK client sessions on the bridge at url
// over transport ("mcp", "mcp-sdk", which is /mcp too, or "sse"), and
// returns a call of the echo tool for client i.
func sdkClients(b *testing.B, url, transport string, n int) func(i int) error {
	e := eras[3]
	if transport == "sse" {
		e = eras[0]
	}
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * n, MaxConnsPerHost: 0}}
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		var t mcp.Transport
		if transport == "sse" {
			t = &mcp.SSEClientTransport{Endpoint: url + "/sse", HTTPClient: httpc}
		} else {
			t = &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: httpc, MaxRetries: -1, DisableStandaloneSSE: true}
		}
		cs, err := c.Connect(context.Background(), t, &mcp.ClientSessionOptions{ProtocolVersion: e.version})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		sessions[i] = cs
	}
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}
	call := func(i int) error {
		res, err := sessions[i].CallTool(context.Background(), params)
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %s", testutil.Text(res))
		}
		return err
	}
	for i := range sessions { // warm up
		if err := call(i); err != nil {
			b.Fatal(err)
		}
	}
	return call
}

// closedLoop runs the benchmark's calls spread over n clients, each
// client making its next call when its last one returns, and reports
// calls/s, p50 and p99, and the CPU time of the whole process (bridge,
// clients and fake extension) per call, which other load on a shared
// machine disturbs far less than calls/s.
func closedLoop(b *testing.B, n int, call func(client int) error) {
	pacedLoop(b, n, 0, call)
}

// pacedLoop is closedLoop with the calls offered at a fixed rate (calls
// per second, over all n clients; 0 is closedLoop): the k-th call is due
// at start + k/rate and a client free by then makes it. Its latency counts
// from when it was due (benchload.Schedule.Wait says exactly), so a bridge
// that falls behind is charged for the wait (no coordinated omission), and
// p99.9 is reported too. This is how the latency target is stated: the p99
// while serving that many calls per second, not at the saturation point,
// where every closed-loop system queues.
func pacedLoop(b *testing.B, n int, rate float64, call func(client int) error) {
	work := make(chan int64, n) // call numbers
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := benchload.ProcessCPU()
	sched := benchload.Schedule{Start: time.Now(), Rate: rate}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				t0 := sched.Wait(k)
				if err := call(i); err != nil {
					b.Errorf("call: %v", err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	for k := int64(0); b.Loop(); k++ {
		work <- k
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(sched.Start)
	cpu := benchload.ProcessCPU() - cpu0
	b.StopTimer()
	benchload.Summarize(slices.Concat(lat...), elapsed).Report(b, cpu, rate > 0)
}

// BenchmarkIdleSessionMemory opens sessions the way a client that then goes
// quiet would, and reports the bridge's memory per idle session (heap and
// goroutine stacks, after GC). Streamable sessions are opened with raw
// initialize requests so no client-side objects are counted; an idle SSE
// session necessarily holds an open HTTP stream, whose connection the
// figure includes on both ends.
//
// Run it with a session count: -bench IdleSessionMemory -benchtime 500x.
func BenchmarkIdleSessionMemory(b *testing.B) {
	for _, kind := range []string{"mcp", "sse", "open-stream-baseline"} {
		b.Run(kind, func(b *testing.B) {
			n := b.N
			{
				br := newBridge(b, Options{}, HTTPOptions{PingInterval: -1, Sessions: benchSessions()})
				if kind == "open-stream-baseline" {
					// What any idle HTTP stream costs on both ends here: subtract
					// it from "sse" for the bridge's own share of a session.
					br.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						w.Header().Set("Content-Type", "text/event-stream")
						io.WriteString(w, "event: endpoint\ndata: /message\n\n")
						w.(http.Flusher).Flush()
						<-r.Context().Done()
					})
				}
				httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
				before := memInUse()
				var bodies []io.Closer
				b.ResetTimer()
				for i := 0; i < n; i++ {
					if kind != "mcp" {
						resp, err := httpc.Get(br.srv.URL + "/sse")
						if err != nil {
							b.Fatal(err)
						}
						buf := make([]byte, 256)
						resp.Body.Read(buf) // the endpoint event: the session is open
						bodies = append(bodies, resp.Body)
						continue
					}
					req, _ := http.NewRequest(http.MethodPost, br.srv.URL+"/mcp", strings.NewReader(
						`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"idle","version":"1"}}}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					resp, err := httpc.Do(req)
					if err != nil || resp.Header.Get("Mcp-Session-Id") == "" {
						b.Fatalf("initialize: %v", err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				after := memInUse()
				b.ReportMetric(float64(after-before)/float64(n)/1024, "KiB/session")
				for _, c := range bodies {
					c.Close()
				}
			}
		})
	}
}

func memInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// BenchmarkCallsRawClient is BenchmarkCalls for /mcp with the lightest
// client possible (keep-alive HTTP, a pre-encoded body, the reply read
// as one SSE event), so that the figure is the bridge's capacity rather
// than the SDK client's, which shares the same two cores in this run.
func BenchmarkCallsRawClient(b *testing.B) {
	for _, mode := range []string{"mcp", "mcp-sdk"} {
		for _, clients := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/clients=%d", mode, clients), func(b *testing.B) {
				closedLoop(b, clients, rawClients(b, inProcessBridge(b, mode == "mcp-sdk"), clients))
			})
		}
	}
}

// rawClients opens n sessions on the bridge at base with plain HTTP
// requests to /mcp, and returns a call of the echo tool for client i.
func rawClients(b *testing.B, base string, clients int) func(i int) error {
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * clients}}
	url := base + "/mcp"
	do := func(body string, hdr map[string]string) (http.Header, string, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return nil, "", err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.Header, string(data), err
	}
	hdrs := make([]map[string]string, clients)
	for i := range hdrs {
		h, _, err := do(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
		if err != nil {
			b.Fatal(err)
		}
		hdrs[i] = map[string]string{"Mcp-Session-Id": h.Get("Mcp-Session-Id"), "MCP-Protocol-Version": "2025-06-18"}
		if _, _, err := do(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdrs[i]); err != nil {
			b.Fatal(err)
		}
	}
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
	return func(i int) error {
		_, body, err := do(call, hdrs[i])
		if err == nil && !strings.Contains(body, `"text":"x"`) {
			err = fmt.Errorf("reply: %s", body)
		}
		return err
	}
}
