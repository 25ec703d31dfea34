package daemon

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
)

// routes are the route label values of the HTTP metrics; any other path is
// "other".
var routes = map[string]bool{"/mcp": true, "/sse": true, "/message": true, "/health": true, "/tools": true, "/metrics": true}

// methods are the method label values; any other verb is "other". The verb
// is the client's choice (curl -X BREW), so using it as it comes would add
// a series per invented verb.
var methods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodDelete: true, http.MethodOptions: true,
	http.MethodHead: true, http.MethodPut: true, http.MethodPatch: true,
}

// label returns v if it is in set, else metrics.OtherValue.
func label(set map[string]bool, v string) string {
	if set[v] {
		return v
	}
	return metrics.OtherValue
}

// instrument counts requests, errors, bytes and latency per route, and
// exposes sessions, browsers and calls as gauges.
func (b *Bridge) instrument(next http.Handler) http.Handler {
	reg := b.metrics
	requests := reg.NewCounter("browserbridge_http_requests_total", "HTTP requests by route, method and status code.", "route", "method", "code")
	latency := reg.NewHistogram("browserbridge_http_request_duration_seconds", "Time to answer a request (POST only: GET streams stay open).", metrics.DefaultBuckets, "route")
	bytesIn := reg.NewCounter("browserbridge_http_received_bytes_total", "Request body bytes received.", "route")
	bytesOut := reg.NewCounter("browserbridge_http_sent_bytes_total", "Response bytes sent.", "route")
	st := b.mcp.Stats()
	for name, f := range map[string]func() float64{
		"browserbridge_tool_calls":          func() float64 { return float64(st.Calls.Load()) },
		"browserbridge_tool_call_errors":    func() float64 { return float64(st.CallErrors.Load()) },
		"browserbridge_tool_calls_waited":   func() float64 { return float64(st.WaitedCalls.Load()) },
		"browserbridge_tool_calls_timedout": func() float64 { return float64(st.TimedOut.Load()) },
		"browserbridge_tool_calls_cancelled": func() float64 {
			return float64(st.Cancelled.Load())
		},
		// Requests the Streamable HTTP fast path answered without the SDK.
		"browserbridge_fast_path_requests":  func() float64 { return float64(st.FastPath.Load()) },
		"browserbridge_browsers":            func() float64 { return float64(len(b.links.Browsers())) },
		"browserbridge_sse_sessions":        func() float64 { return float64(b.sse.Sessions()) },
		"browserbridge_replay_buffer_bytes": func() float64 { return float64(b.st.ReplayBytes()) },
		"browserbridge_mcp_sessions": func() float64 {
			n := 0
			for range b.mcp.MCP().Sessions() {
				n++
			}
			return float64(n)
		},
	} {
		reg.NewGaugeFunc(name, "See the README's /metrics section.", f)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := label(routes, r.URL.Path)
		start := time.Now()
		cw := &countingWriter{ResponseWriter: w, code: http.StatusOK}
		if r.Body != nil {
			r.Body = &countingBody{ReadCloser: r.Body, n: bytesIn.With(route)}
		}
		next.ServeHTTP(cw, r)
		requests.With(route, label(methods, r.Method), strconv.Itoa(cw.code)).Inc()
		bytesOut.With(route).Add(float64(cw.n))
		if r.Method == http.MethodPost {
			latency.With(route).Observe(time.Since(start).Seconds())
		}
	})
}

// countingWriter records the status and the bytes written, and keeps
// streaming working (Flush, and Unwrap for http.ResponseController).
type countingWriter struct {
	http.ResponseWriter
	code        int
	n           int64
	wroteHeader bool
}

func (c *countingWriter) WriteHeader(code int) {
	if !c.wroteHeader {
		c.code, c.wroteHeader = code, true
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.wroteHeader = true
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

type countingBody struct {
	io.ReadCloser
	n *metrics.CounterSeries
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		c.n.Add(float64(n))
	}
	return n, err
}
