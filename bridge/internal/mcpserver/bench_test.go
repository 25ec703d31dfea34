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
)

// BenchmarkCalls measures tools/call of a no-op tool (echo) through the
// bridge against a fake extension on the native link, with 1, 10 and 100
// concurrent clients on each transport. Reported: calls/s and the p50 and
// p99 of each call as the client sees it. mcp-sdk is /mcp with the fast
// path off (every request through the SDK's server path).
func BenchmarkCalls(b *testing.B) {
	for _, tr := range []struct {
		name string
		era  era
	}{{"mcp", eras[3]}, {"mcp-sdk", eras[3]}, {"sse", eras[0]}} {
		for _, clients := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/clients=%d", tr.name, clients), func(b *testing.B) {
				br := newBridge(b, Options{}, HTTPOptions{})
				br.st.noFastPath.Store(tr.name == "mcp-sdk")
				br.attach("instance-bench-1")
				httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * clients, MaxConnsPerHost: 0}}
				sessions := make([]*mcp.ClientSession, clients)
				for i := range sessions {
					c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
					var t mcp.Transport
					if tr.name == "sse" {
						t = &mcp.SSEClientTransport{Endpoint: br.srv.URL + "/sse", HTTPClient: httpc}
					} else {
						t = &mcp.StreamableClientTransport{Endpoint: br.srv.URL + "/mcp", HTTPClient: httpc, MaxRetries: -1, DisableStandaloneSSE: true}
					}
					cs, err := c.Connect(context.Background(), t, &mcp.ClientSessionOptions{ProtocolVersion: tr.era.version})
					if err != nil {
						b.Fatal(err)
					}
					defer cs.Close()
					sessions[i] = cs
				}
				params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}
				for _, cs := range sessions { // warm up
					if _, err := cs.CallTool(context.Background(), params); err != nil {
						b.Fatal(err)
					}
				}
				closedLoop(b, clients, func(i int) error {
					res, err := sessions[i].CallTool(context.Background(), params)
					if err == nil && res.IsError {
						err = fmt.Errorf("tool error: %s", textOf(res))
					}
					return err
				})
			})
		}
	}
}

// closedLoop runs b.N calls spread over n clients, each client making its
// next call when its last one returns, and reports calls/s, p50 and p99,
// and the CPU time of the whole process (bridge, clients and fake
// extension) per call, which other load on a shared machine disturbs far
// less than calls/s.
func closedLoop(b *testing.B, n int, call func(client int) error) {
	work := make(chan struct{}, n)
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				t0 := time.Now()
				if err := call(i); err != nil {
					b.Errorf("call: %v", err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	for b.Loop() {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1e3, "p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/call")
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
				br := newBridge(b, Options{}, HTTPOptions{PingInterval: -1})
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
				benchRawClient(b, mode == "mcp-sdk", clients)
			})
		}
	}
}

func benchRawClient(b *testing.B, sdkOnly bool, clients int) {
	br := newBridge(b, Options{}, HTTPOptions{})
	br.st.noFastPath.Store(sdkOnly)
	br.attach("instance-bench-raw")
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * clients}}
	url := br.srv.URL + "/mcp"
	do := func(body string, hdr map[string]string) (http.Header, string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.Header, string(data)
	}
	hdrs := make([]map[string]string, clients)
	for i := range hdrs {
		h, _ := do(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
		hdrs[i] = map[string]string{"Mcp-Session-Id": h.Get("Mcp-Session-Id"), "MCP-Protocol-Version": "2025-06-18"}
		do(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdrs[i])
	}
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
	closedLoop(b, clients, func(i int) error {
		if _, body := do(call, hdrs[i]); !strings.Contains(body, `"text":"x"`) {
			return fmt.Errorf("reply: %s", body)
		}
		return nil
	})
}
