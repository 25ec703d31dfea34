package stdioproxy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkEcho is what the stdio proxy adds to a call: the official Go SDK
// client calls the fake bridge's echo tool directly over Streamable HTTP,
// and through the proxy (in this process, its stdin and stdout a pair of
// pipes; `browserbridge stdio` adds a process's pipes to that), the two
// kinds of call in turn so that both see the same machine. It reports the
// median of each, and their difference: the proxy's own cost per call.
//
//	go test -run '^$' -bench Echo -benchtime 2000x ./bridge/internal/stdioproxy/
func BenchmarkEcho(b *testing.B) {
	br := startFakeBridge(b, "", false)
	ctx := context.Background()
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench-direct", Version: "1.0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: br.url()}, nil)
	if err != nil {
		b.Fatalf("connecting to the fake bridge: %v", err)
	}
	defer direct.Close()
	viaProxy := startProxy(b, Options{Endpoint: br.url()}).connect(b, "", nil)
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ping"}}
	call := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatalf("echo: %v", err)
		}
		return time.Since(start)
	}
	call(direct) // the connections' first use
	call(viaProxy)
	d, p := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		d = append(d, call(direct))
		p = append(p, call(viaProxy))
	}
	b.StopTimer()
	dm, pm := median(d), median(p)
	b.ReportMetric(float64(dm.Microseconds()), "direct-µs")
	b.ReportMetric(float64(pm.Microseconds()), "proxy-µs")
	b.ReportMetric(float64((pm - dm).Microseconds()), "added-µs")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	slices.Sort(s)
	return s[len(s)/2]
}
