package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkEcho measures server-everything's echo through the gateway with
// 1, 10 and 50 sessions in closed loops, over one keep-alive client as the
// Go SDK uses, in two eras: session (2025-11-25: Mcp-Session-Id) and
// stateless (2026-07-28: no session, the version in the headers and in
// params._meta, the request the Go SDK's client sends by default). The
// client is a few lines of net/http, so a -cpuprofile is mostly the
// gateway's. The full comparison with direct stdio and other gateways is
// `make bench-gateway` (bridge/internal/gwbench).
func BenchmarkEcho(b *testing.B) {
	tg := newTestGateway(b, map[string]stdio.ServerConfig{"everything": everything(b)}, Options{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	url := tg.srv.URL + "/servers/everything/mcp"
	post := func(h http.Header, body string) (string, []byte) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
		if h != nil {
			req.Header = h.Clone()
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Mcp-Session-Id"), out
	}
	for _, era := range []string{"session", "stateless"} {
		for _, sessions := range []int{1, 10, 50} {
			b.Run(fmt.Sprintf("%s/sessions=%d", era, sessions), func(b *testing.B) {
				headers := make([]http.Header, sessions)
				for i := range headers {
					if era == "stateless" {
						headers[i] = http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"}}
						continue
					}
					sid, _ := post(nil, initBody)
					headers[i] = http.Header{"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-06-18"}}
				}
				meta := ""
				if era == "stateless" {
					meta = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},`
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for i := range sessions {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
							msg := fmt.Sprintf("s%d-%d", i, n)
							_, out := post(headers[i], `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`"name":"echo","arguments":{"message":"`+msg+`"}}}`)
							if !bytes.Contains(out, []byte(`"Echo: `+msg+`"`)) {
								b.Errorf("sent %s, got %s", msg, out)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			})
		}
	}
}

// BenchmarkEchoSDK is BenchmarkEcho driven by the official Go SDK client, in
// both eras a client meets: the SDK's default (2026-07-28, stateless: every
// call a request of its own) and sessions (2025-11-25, as the SDK talks to a
// server that does not know the stateless era). direct is the same client
// on server-everything's stdio with as many calls in flight, the
// comparison `make bench-gateway` makes. Client and gateway share this
// process, so a -cpuprofile shows both sides: the client's frames are
// mcp.(*streamableClientConn), net/http.(*persistConn) and
// net/http.(*Transport); the gateway's, net/http.(*conn).serve below.
func BenchmarkEchoSDK(b *testing.B) {
	srv := everything(b)
	tg := newTestGateway(b, map[string]stdio.ServerConfig{"everything": srv}, Options{})
	for _, sessions := range []int{10, 50} {
		for _, mode := range []struct{ name, version string }{{"direct", "2025-11-25"}, {"stateless", ""}, {"session", "2025-11-25"}} {
			b.Run(fmt.Sprintf("%s/sessions=%d", mode.name, sessions), func(b *testing.B) {
				c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
				opts := &mcp.ClientSessionOptions{ProtocolVersion: mode.version}
				css := make([]*mcp.ClientSession, sessions)
				if mode.name == "direct" {
					cs, err := c.Connect(b.Context(), &mcp.CommandTransport{Command: exec.Command(srv.Command, srv.Args...)}, opts)
					if err != nil {
						b.Fatal(err)
					}
					for i := range css {
						css[i] = cs
					}
					b.Cleanup(func() { cs.Close() })
				} else {
					client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2*sessions + 16}}
					for i := range css {
						cs, err := c.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: tg.srv.URL + "/servers/everything/mcp", HTTPClient: client}, opts)
						if err != nil {
							b.Fatal(err)
						}
						css[i] = cs
						b.Cleanup(func() { cs.Close() })
					}
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for i := range sessions {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
							msg := fmt.Sprintf("s%d-%d", i, n)
							got, err := echo(b.Context(), css[i], msg)
							if err != nil || got != "Echo: "+msg {
								b.Errorf("sent %s, got %q, %v", msg, got, err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			})
		}
	}
}
