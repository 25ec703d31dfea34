package metrics_test

import (
	"os"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
)

func Example() {
	reg := metrics.NewRegistry()
	requests := reg.NewCounter("browserbridge_http_requests_total", "HTTP requests by route and status code.", "route", "code")
	calls := reg.NewHistogram("browserbridge_tool_call_seconds", "Tool call durations.", []float64{0.1, 1})
	sessions := map[string]bool{"a": true, "b": true}
	reg.NewGaugeFunc("browserbridge_sessions", "Open MCP sessions.", func() float64 { return float64(len(sessions)) })

	requests.With("/mcp", "200").Inc()
	calls.With().Observe((250 * time.Millisecond).Seconds())

	reg.WriteTo(os.Stdout)
	// Output:
	// # HELP browserbridge_http_requests_total HTTP requests by route and status code.
	// # TYPE browserbridge_http_requests_total counter
	// browserbridge_http_requests_total{route="/mcp",code="200"} 1
	// # HELP browserbridge_sessions Open MCP sessions.
	// # TYPE browserbridge_sessions gauge
	// browserbridge_sessions 2
	// # HELP browserbridge_tool_call_seconds Tool call durations.
	// # TYPE browserbridge_tool_call_seconds histogram
	// browserbridge_tool_call_seconds_bucket{le="0.1"} 0
	// browserbridge_tool_call_seconds_bucket{le="1"} 1
	// browserbridge_tool_call_seconds_bucket{le="+Inf"} 1
	// browserbridge_tool_call_seconds_sum 0.25
	// browserbridge_tool_call_seconds_count 1
}
