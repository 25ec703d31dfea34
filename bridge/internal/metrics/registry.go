// Package metrics is a small Prometheus registry: counters, gauges and
// histograms with fixed label names, written in the Prometheus text
// exposition format (version 0.0.4) for the bridge's /metrics endpoint.
//
// Updating a metric is cheap: an atomic operation, with no allocation once a
// label set has been seen. Everything is safe for concurrent use.
//
// A labelled metric holds at most MaxSeries series: label combinations past
// that are counted together in the series whose labels are all OtherValue,
// and each such fold in FoldedName, which every Registry exposes from the
// first fold on.
//
// Registering a metric with a malformed or duplicate name panics: metrics are
// registered at start-up, from constant names, so such a mistake is a
// programming error that every test run finds.
package metrics

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ContentType is the media type of the text WriteTo produces.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Registry holds metrics and writes them out. The zero value is not usable;
// call NewRegistry. All methods are safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	families []family        // in registration order; sorted when written
	names    map[string]bool // every sample name in use, such as x_bucket for histogram x
	folded   *Counter        // FoldedName
}

// family is one metric name with its HELP, TYPE and samples.
type family interface {
	familyName() string
	// write appends the family's exposition to b.
	write(b *bytes.Buffer)
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	r := &Registry{names: make(map[string]bool)}
	labels := []string{"metric"}
	// Its label values are the names of registered metrics, a fixed set, so
	// it has no fold counter of its own.
	r.folded = &Counter{name: FoldedName, vec: newVec(FoldedName, labels, newCounterSeries, nil),
		help: "Label combinations counted in a metric's series whose labels are all \"other\", because the metric already held its most series (1000)."}
	r.register(foldedFamily{r.folded}, labels, FoldedName)
	return r
}

// foldedFamily writes FoldedName only once something was folded, so that
// a registry whose metrics all stay within bounds shows nothing of it.
type foldedFamily struct{ *Counter }

func (f foldedFamily) write(b *bytes.Buffer) {
	f.vec.mu.RLock()
	empty := len(f.vec.series) == 0
	f.vec.mu.RUnlock()
	if !empty {
		f.Counter.write(b)
	}
}

// foldCounter returns the function that counts a fold of metric name.
func (r *Registry) foldCounter(name string) func() {
	return func() { r.folded.With(name).Inc() }
}

// register adds f, after checking its name and label names; sampleNames are
// the names its samples carry.
func (r *Registry) register(f family, labels []string, sampleNames ...string) {
	name := f.familyName()
	if !metricNameRE.MatchString(name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", name))
	}
	seen := make(map[string]bool, len(labels))
	for _, l := range labels {
		if !labelNameRE.MatchString(l) || strings.HasPrefix(l, "__") {
			panic(fmt.Sprintf("metrics: %s: invalid label name %q", name, l))
		}
		if seen[l] {
			panic(fmt.Sprintf("metrics: %s: label name %q given twice", name, l))
		}
		seen[l] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range sampleNames {
		if r.names[s] {
			panic(fmt.Sprintf("metrics: %s: the name %q is already registered", name, s))
		}
	}
	for _, s := range sampleNames {
		r.names[s] = true
	}
	r.families = append(r.families, f)
}

// WriteTo writes every metric in the Prometheus text format to w, ordered by
// metric name, then by label values. It implements io.WriterTo.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	fams := slices.Clone(r.families)
	r.mu.Unlock()
	slices.SortFunc(fams, func(a, b family) int { return strings.Compare(a.familyName(), b.familyName()) })

	var b bytes.Buffer
	for _, f := range fams {
		f.write(&b)
	}
	n, err := w.Write(b.Bytes())
	if err != nil {
		return int64(n), fmt.Errorf("writing metrics: %w", err)
	}
	return int64(n), nil
}

// Handler returns an http.Handler that answers GET and HEAD with the
// registry's metrics.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "metrics are read with GET", http.StatusMethodNotAllowed)
			return
		}
		var b bytes.Buffer
		_, _ = r.WriteTo(&b) // a bytes.Buffer does not fail
		h := w.Header()
		h.Set("Content-Type", ContentType)
		h.Set("Content-Length", strconv.Itoa(b.Len()))
		h.Set("Cache-Control", "no-store")
		if req.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b.Bytes())
	})
}

// writeHeader appends the # HELP and # TYPE lines of a family.
func writeHeader(b *bytes.Buffer, name, help, typ string) {
	b.WriteString("# HELP ")
	b.WriteString(name)
	b.WriteByte(' ')
	writeEscaped(b, help, false)
	b.WriteString("\n# TYPE ")
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(typ)
	b.WriteByte('\n')
}

// writeSample appends one sample line: name{labels="values",extra} value.
// extraName, when not "", is one more label (a histogram's le) after the
// others.
func writeSample(b *bytes.Buffer, name string, labels, values []string, extraName, extraValue, value string) {
	b.WriteString(name)
	if len(labels) > 0 || extraName != "" {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			writeLabel(b, l, values[i])
		}
		if extraName != "" {
			if len(labels) > 0 {
				b.WriteByte(',')
			}
			writeLabel(b, extraName, extraValue)
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(value)
	b.WriteByte('\n')
}

func writeLabel(b *bytes.Buffer, name, value string) {
	b.WriteString(name)
	b.WriteString(`="`)
	writeEscaped(b, value, true)
	b.WriteByte('"')
}

// writeEscaped appends s with backslash and line feed escaped, and the double
// quote too in a label value (HELP text leaves it as it is).
func writeEscaped(b *bytes.Buffer, s string, quote bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
}

// formatFloat writes a sample value or bucket bound as Prometheus reads it.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
