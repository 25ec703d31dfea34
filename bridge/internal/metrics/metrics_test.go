package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func writeString(t *testing.T, r *Registry) string {
	t.Helper()
	var b strings.Builder
	n, err := r.WriteTo(&b)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if int(n) != b.Len() {
		t.Errorf("WriteTo returned %d, wrote %d bytes", n, b.Len())
	}
	return b.String()
}

func TestExposition(t *testing.T) {
	r := NewRegistry()
	// Registered out of order, to check that output is sorted by name.
	reqs := r.NewCounter("browserbridge_http_requests_total", "HTTP requests served, by route and status.", "route", "code")
	up := r.NewGauge("browserbridge_browsers_connected", "Browsers connected now.")
	r.NewGaugeFunc("browserbridge_sessions", "Open MCP sessions.", func() float64 { return 3 })
	lat := r.NewHistogram("browserbridge_tool_call_seconds", "Tool call duration in seconds.", []float64{0.1, 0.5, 2}, "tool")
	r.NewCounter("browserbridge_empty_total", "A labelled counter never incremented.", "kind")
	r.NewCounter("browserbridge_frac_total", "A counter with a fractional value.").With().Add(1.5)

	reqs.With("/mcp", "200").Inc()
	reqs.With("/mcp", "200").Add(2)
	reqs.With("/health", "200").Inc()
	reqs.With("/mcp", "403").Inc()
	up.With().Set(2)
	up.With().Dec()
	lat.With("navigate").Observe(0.05)
	lat.With("navigate").Observe(0.1) // on a bound: counted in that bucket
	lat.With("navigate").Observe(1)
	lat.With("navigate").Observe(7)
	lat.With("click").Observe(0.25)

	want := `# HELP browserbridge_browsers_connected Browsers connected now.
# TYPE browserbridge_browsers_connected gauge
browserbridge_browsers_connected 1
# HELP browserbridge_empty_total A labelled counter never incremented.
# TYPE browserbridge_empty_total counter
# HELP browserbridge_frac_total A counter with a fractional value.
# TYPE browserbridge_frac_total counter
browserbridge_frac_total 1.5
# HELP browserbridge_http_requests_total HTTP requests served, by route and status.
# TYPE browserbridge_http_requests_total counter
browserbridge_http_requests_total{route="/health",code="200"} 1
browserbridge_http_requests_total{route="/mcp",code="200"} 3
browserbridge_http_requests_total{route="/mcp",code="403"} 1
# HELP browserbridge_sessions Open MCP sessions.
# TYPE browserbridge_sessions gauge
browserbridge_sessions 3
# HELP browserbridge_tool_call_seconds Tool call duration in seconds.
# TYPE browserbridge_tool_call_seconds histogram
browserbridge_tool_call_seconds_bucket{tool="click",le="0.1"} 0
browserbridge_tool_call_seconds_bucket{tool="click",le="0.5"} 1
browserbridge_tool_call_seconds_bucket{tool="click",le="2"} 1
browserbridge_tool_call_seconds_bucket{tool="click",le="+Inf"} 1
browserbridge_tool_call_seconds_sum{tool="click"} 0.25
browserbridge_tool_call_seconds_count{tool="click"} 1
browserbridge_tool_call_seconds_bucket{tool="navigate",le="0.1"} 2
browserbridge_tool_call_seconds_bucket{tool="navigate",le="0.5"} 2
browserbridge_tool_call_seconds_bucket{tool="navigate",le="2"} 3
browserbridge_tool_call_seconds_bucket{tool="navigate",le="+Inf"} 4
browserbridge_tool_call_seconds_sum{tool="navigate"} 8.15
browserbridge_tool_call_seconds_count{tool="navigate"} 4
`
	if got := writeString(t, r); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
	// Writing twice gives the same text.
	if got := writeString(t, r); got != want {
		t.Errorf("second exposition differs:\n%s", got)
	}
}

func TestUnlabelledHistogram(t *testing.T) {
	r := NewRegistry()
	h := r.NewHistogram("x_seconds", "X.", []float64{1, math.Inf(1)})
	h.With().Observe(0.5)
	h.With().Observe(math.NaN())
	want := `# HELP x_seconds X.
# TYPE x_seconds histogram
x_seconds_bucket{le="1"} 1
x_seconds_bucket{le="+Inf"} 2
x_seconds_sum NaN
x_seconds_count 2
`
	if got := writeString(t, r); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
}

func TestEscaping(t *testing.T) {
	tests := []struct {
		name, help, value string
		wantHelp, wantVal string
	}{
		{name: "plain", help: "Plain.", value: "v", wantHelp: "Plain.", wantVal: `"v"`},
		{name: "backslash", help: `C:\dir`, value: `C:\dir`, wantHelp: `C:\\dir`, wantVal: `"C:\\dir"`},
		{name: "quote", help: `say "hi"`, value: `say "hi"`, wantHelp: `say "hi"`, wantVal: `"say \"hi\""`},
		{name: "newline", help: "two\nlines", value: "two\nlines", wantHelp: `two\nlines`, wantVal: `"two\nlines"`},
		{name: "all", help: "a\\\"\n", value: "a\\\"\n", wantHelp: `a\\"\n`, wantVal: `"a\\\"\n"`},
		{name: "unicode", help: "é ✓", value: "é ✓", wantHelp: "é ✓", wantVal: `"é ✓"`},
		{name: "empty", help: "", value: "", wantHelp: "", wantVal: `""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			r.NewCounter("c_total", tc.help, "l").With(tc.value).Inc()
			want := "# HELP c_total " + tc.wantHelp + "\n# TYPE c_total counter\nc_total{l=" + tc.wantVal + "} 1\n"
			if got := writeString(t, r); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestLabelValuesAreDistinct(t *testing.T) {
	// Label sets that would collide under a naive joined key.
	r := NewRegistry()
	c := r.NewCounter("c_total", "C.", "a", "b")
	c.With("x,y", "z").Inc()
	c.With("x", "y,z").Add(2)
	c.With("", "").Add(3)
	if got, want := c.With("x,y", "z").Value(), 1.0; got != want {
		t.Errorf("c{x,y|z} = %v, want %v", got, want)
	}
	if got, want := c.With("x", "y,z").Value(), 2.0; got != want {
		t.Errorf("c{x|y,z} = %v, want %v", got, want)
	}
	long := strings.Repeat("v", 500) // beyond the lookup's stack buffer
	c.With(long, long).Inc()
	c.With(long, long).Inc()
	if got := c.With(long, long).Value(); got != 2 {
		t.Errorf("long label values: %v, want 2", got)
	}
}

func TestFormatFloat(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"}, {1, "1"}, {0.005, "0.005"}, {2.5, "2.5"}, {-3, "-3"}, {1e21, "1e+21"},
		{math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "NaN"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := formatFloat(tc.v); got != tc.want {
				t.Errorf("formatFloat(%v) = %q, want %q", tc.v, got, tc.want)
			}
		})
	}
}

func TestRegistrationPanics(t *testing.T) {
	tests := []struct {
		name    string
		reg     func(r *Registry)
		wantMsg string
	}{
		{"bad metric name", func(r *Registry) { r.NewCounter("1abc", "") }, "invalid metric name"},
		{"metric name with dash", func(r *Registry) { r.NewGauge("a-b", "") }, "invalid metric name"},
		{"bad label name", func(r *Registry) { r.NewCounter("a_total", "", "a:b") }, "invalid label name"},
		{"reserved label name", func(r *Registry) { r.NewCounter("a_total", "", "__name") }, "invalid label name"},
		{"label given twice", func(r *Registry) { r.NewCounter("a_total", "", "x", "x") }, "given twice"},
		{"duplicate name", func(r *Registry) { r.NewCounter("a", ""); r.NewGauge("a", "") }, "already registered"},
		{"name taken by a histogram's samples", func(r *Registry) {
			r.NewHistogram("h", "", nil)
			r.NewCounter("h_count", "")
		}, "already registered"},
		{"le label on a histogram", func(r *Registry) { r.NewHistogram("h", "", nil, "le") }, `"le" is reserved`},
		{"buckets not increasing", func(r *Registry) { r.NewHistogram("h", "", []float64{1, 1}) }, "increase strictly"},
		{"NaN bucket", func(r *Registry) { r.NewHistogram("h", "", []float64{math.NaN()}) }, "increase strictly"},
		{"nil gauge func", func(r *Registry) { r.NewGaugeFunc("g", "", nil) }, "nil gauge function"},
		{"wrong number of label values", func(r *Registry) { r.NewCounter("a_total", "", "x").With("1", "2") }, "got 2 values"},
		{"negative counter add", func(r *Registry) { r.NewCounter("a_total", "").With().Add(-1) }, "decreased"},
		{"NaN counter add", func(r *Registry) { r.NewCounter("a_total", "").With().Add(math.NaN()) }, "decreased"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if p == nil {
					t.Fatal("no panic")
				}
				if msg := fmt.Sprint(p); !strings.Contains(msg, tc.wantMsg) {
					t.Errorf("panic %q does not contain %q", msg, tc.wantMsg)
				}
			}()
			tc.reg(NewRegistry())
		})
	}
}

func TestCounterAndGaugeValues(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounter("c_total", "").With()
	c.Inc()
	c.Add(0.25)
	c.Add(10)
	if got := c.Value(); got != 11.25 {
		t.Errorf("counter = %v, want 11.25", got)
	}
	g := r.NewGauge("g", "").With()
	g.Set(5)
	g.Add(-7.5)
	g.Inc()
	if got := g.Value(); got != -1.5 {
		t.Errorf("gauge = %v, want -1.5", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounter("c_total", "", "worker")
	g := r.NewGauge("g", "")
	h := r.NewHistogram("h_seconds", "", []float64{0.5, 1}, "worker")
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		label := fmt.Sprint(w % 3)
		wg.Go(func() {
			for i := range each {
				c.With(label).Inc()
				g.With().Add(1)
				h.With(label).Observe(float64(i%3) * 0.5)
			}
		})
	}
	// Scrape and register while the workers run.
	wg.Go(func() {
		for i := range 50 {
			if _, err := r.WriteTo(io.Discard); err != nil {
				t.Error(err)
			}
			r.NewGaugeFunc(fmt.Sprint("late_", i), "", func() float64 { return float64(i) })
		}
	})
	wg.Wait()

	var total float64
	for _, l := range []string{"0", "1", "2"} {
		total += c.With(l).Value()
	}
	if total != workers*each {
		t.Errorf("counter total = %v, want %d", total, workers*each)
	}
	if got := g.With().Value(); got != workers*each {
		t.Errorf("gauge = %v, want %d", got, workers*each)
	}
	out := writeString(t, r)
	if !strings.Contains(out, fmt.Sprintf(`h_seconds_count{worker="0"} %d`, 3*each)) {
		t.Errorf("histogram count missing from:\n%s", out)
	}
}

func TestAllocs(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounter("c_total", "", "route", "code")
	g := r.NewGauge("g", "", "kind")
	h := r.NewHistogram("h_seconds", "", DefaultBuckets, "tool")
	one := r.NewCounter("one_total", "")
	route, code, tool := "/mcp", "200", "navigate"
	c.With(route, code).Inc()
	g.With("x").Set(1)
	h.With(tool).Observe(1)
	series := h.With(tool)

	tests := []struct {
		name string
		f    func()
	}{
		{"counter With+Inc", func() { c.With(route, code).Inc() }},
		{"counter With+Add", func() { c.With(route, code).Add(0.5) }},
		{"unlabelled counter Inc", func() { one.With().Inc() }},
		{"gauge With+Set", func() { g.With("x").Set(2) }},
		{"histogram With+Observe", func() { h.With(tool).Observe(0.3) }},
		{"histogram series Observe", func() { series.Observe(42) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(1000, tc.f); n != 0 {
				t.Errorf("%v allocations per call, want 0", n)
			}
		})
	}
}

func TestHandler(t *testing.T) {
	r := NewRegistry()
	r.NewCounter("c_total", "C.").With().Inc()
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(srv.Close)

	tests := []struct {
		method     string
		wantStatus int
		wantBody   string
	}{
		{http.MethodGet, 200, "# HELP c_total C.\n# TYPE c_total counter\nc_total 1\n"},
		{http.MethodHead, 200, ""},
		{http.MethodPost, 405, "metrics are read with GET\n"},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL, nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus || string(body) != tc.wantBody {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			if tc.wantStatus == 200 && resp.Header.Get("Content-Type") != ContentType {
				t.Errorf("Content-Type = %q", resp.Header.Get("Content-Type"))
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteToError(t *testing.T) {
	r := NewRegistry()
	r.NewGauge("g", "")
	_, err := r.WriteTo(failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "writing metrics: disk full") {
		t.Errorf("WriteTo error = %v, want it wrapped", err)
	}
}

// Check that the package's output stays within what a simple parser of the
// text format accepts: every line a comment or "name{labels} value".
func TestLinesParse(t *testing.T) {
	r := NewRegistry()
	r.NewCounter("a_total", "with \"quotes\" and \\ and\nnewline", "l").With("x\"y\\z\nw").Inc()
	r.NewHistogram("b_seconds", "B.", nil, "m").With("GET").Observe(0.2)
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		if !metricNameRE.MatchString(name) {
			t.Errorf("line %q: bad name %q", line, name)
			continue
		}
		i := strings.LastIndex(rest, "} ")
		if i < 0 {
			t.Errorf("line %q: no closing brace before the value", line)
		}
	}
}
