package metrics

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// seriesLines counts the sample lines of metric name (any suffix) in out.
func seriesLines(out, name string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			n++
		}
	}
	return n
}

func TestSeriesCap(t *testing.T) {
	const flood = 10000
	values := make([]string, flood)
	for i := range values {
		values[i] = fmt.Sprintf("invented-%05d", i)
	}

	t.Run("counter", func(t *testing.T) {
		r := NewRegistry()
		c := r.NewCounter("c_total", "", "method")
		for _, v := range values {
			c.With(v).Inc()
		}
		out := writeString(t, r)
		if n := seriesLines(out, "c_total"); n != MaxSeries {
			t.Errorf("%d series after %d distinct values, want %d", n, flood, MaxSeries)
		}
		// MaxSeries-1 values got a series of their own; the rest were folded.
		wantFolded := flood - (MaxSeries - 1)
		if got := c.With(OtherValue).Value(); got != float64(wantFolded) {
			t.Errorf(`c_total{method="other"} = %v, want %d`, got, wantFolded)
		}
		if want := fmt.Sprintf(`%s{metric="c_total"} %d`, FoldedName, wantFolded); !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
		if got := c.With(values[0]).Value(); got != 1 {
			t.Errorf("a series made before the cap = %v, want 1: it must keep counting", got)
		}
		if len(out) > 100<<10 {
			t.Errorf("output is %d bytes after the flood, want under 100 KiB", len(out))
		}
	})

	t.Run("several labels fold into one all-other series", func(t *testing.T) {
		r := NewRegistry()
		c := r.NewCounter("c_total", "", "route", "method", "code")
		for _, v := range values {
			c.With("/mcp", v, "200").Inc()
		}
		out := writeString(t, r)
		if n := seriesLines(out, "c_total"); n != MaxSeries {
			t.Errorf("%d series, want %d", n, MaxSeries)
		}
		if !strings.Contains(out, fmt.Sprintf(`c_total{route="other",method="other",code="other"} %d`, flood-(MaxSeries-1))) {
			t.Error("the all-other series is missing or miscounted")
		}
	})

	t.Run("a caller's own other is the fold's series", func(t *testing.T) {
		r := NewRegistry()
		c := r.NewCounter("c_total", "", "route")
		c.With(OtherValue).Inc() // before the cap: an ordinary series
		for _, v := range values {
			c.With(v).Inc()
		}
		out := writeString(t, r)
		if n := strings.Count(out, `c_total{route="other"}`); n != 1 {
			t.Fatalf(`c_total{route="other"} appears %d times; a series must appear once`, n)
		}
		if n := seriesLines(out, "c_total"); n != MaxSeries {
			t.Errorf("%d series, want %d", n, MaxSeries)
		}
		if got, want := c.With(OtherValue).Value(), float64(1+flood-(MaxSeries-1)); got != want {
			t.Errorf("other = %v, want %v", got, want)
		}
	})

	t.Run("gauge and histogram", func(t *testing.T) {
		r := NewRegistry()
		g := r.NewGauge("g", "", "k")
		h := r.NewHistogram("h_seconds", "", []float64{1}, "k")
		for _, v := range values {
			g.With(v).Inc()
			h.With(v).Observe(0.5)
		}
		out := writeString(t, r)
		if n := seriesLines(out, "g"); n != MaxSeries {
			t.Errorf("gauge: %d series, want %d", n, MaxSeries)
		}
		if n := seriesLines(out, "h_seconds_count"); n != MaxSeries {
			t.Errorf("histogram: %d series, want %d", n, MaxSeries)
		}
		for _, name := range []string{"g", "h_seconds"} {
			if !strings.Contains(out, fmt.Sprintf(`%s{metric=%q} %d`, FoldedName, name, flood-(MaxSeries-1))) {
				t.Errorf("no fold count for %s", name)
			}
		}
	})

	t.Run("within bounds, no fold counter is shown", func(t *testing.T) {
		r := NewRegistry()
		r.NewCounter("c_total", "", "k").With("a").Inc()
		if out := writeString(t, r); strings.Contains(out, FoldedName) {
			t.Errorf("output shows %s with nothing folded:\n%s", FoldedName, out)
		}
	})

	t.Run("concurrent floods stay within the cap", func(t *testing.T) {
		r := NewRegistry()
		c := r.NewCounter("c_total", "", "k")
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < flood; i += 8 {
					c.With(values[i]).Inc()
				}
			})
		}
		wg.Go(func() {
			for range 20 {
				writeString(t, r)
			}
		})
		wg.Wait()
		out := writeString(t, r)
		if n := seriesLines(out, "c_total"); n != MaxSeries {
			t.Errorf("%d series, want %d", n, MaxSeries)
		}
		var total float64
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "c_total{") {
				var v float64
				fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
				total += v
			}
		}
		if total != flood {
			t.Errorf("the series add up to %v, want %d: no increment may be lost", total, flood)
		}
	})

	t.Run("a folded lookup does not allocate", func(t *testing.T) {
		r := NewRegistry()
		c := r.NewCounter("c_total", "", "k")
		for _, v := range values[:MaxSeries] {
			c.With(v).Inc()
		}
		i := MaxSeries
		if n := testing.AllocsPerRun(1000, func() {
			c.With(values[i%flood]).Inc()
			i++
		}); n != 0 {
			t.Errorf("%v allocations per folded lookup, want 0", n)
		}
	})
}
