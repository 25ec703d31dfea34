package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
)

// BenchmarkEcho measures server-everything's echo through the gateway with
// 1, 10 and 50 sessions in closed loops, over one keep-alive client as the
// Go SDK uses. The full comparison with direct stdio and other gateways is
// `make bench-gateway` (bridge/internal/gwbench).
func BenchmarkEcho(b *testing.B) {
	tg := newTestGateway(b, map[string]stdio.ServerConfig{"everything": everything(b)}, Options{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	url := tg.srv.URL + "/servers/everything/mcp"
	post := func(sid, body string) (string, []byte) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Mcp-Session-Id"), out
	}
	for _, sessions := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			sids := make([]string, sessions)
			for i := range sids {
				sids[i], _ = post("", initBody)
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
						_, out := post(sids[i], `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"`+msg+`"}}}`)
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
