package metrics

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
)

// DefaultBuckets are upper bounds in seconds suited to request latencies,
// from 5 ms to 10 s.
var DefaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Histogram is a family of histograms sharing a name, label names and bucket
// bounds: it counts observations, such as request durations in seconds, by
// bucket. Its methods are safe for concurrent use.
type Histogram struct {
	name, help string
	upper      []float64 // bucket upper bounds, increasing, without +Inf
	les        []string  // upper formatted for the le label, then "+Inf"
	vec        *vec[HistogramSeries]
}

// HistogramSeries is the histogram of one label set.
type HistogramSeries struct {
	upper  []float64       // shared with the Histogram
	counts []atomic.Uint64 // per bucket, not cumulative; the last is for +Inf
	sum    atomicFloat
}

// NewHistogram registers a histogram family with the given bucket upper
// bounds, which must increase strictly (a final +Inf may be given or left
// out: it is always there), and label names ("le" is reserved). Nil buckets
// mean DefaultBuckets. It exposes name_bucket, name_sum and name_count, and
// panics if the buckets are malformed or a name is malformed or already
// registered.
func (r *Registry) NewHistogram(name, help string, buckets []float64, labels ...string) *Histogram {
	if buckets == nil {
		buckets = DefaultBuckets
	}
	upper := slices.Clone(buckets)
	if n := len(upper); n > 0 && math.IsInf(upper[n-1], 1) {
		upper = upper[:n-1]
	}
	for i, u := range upper {
		if math.IsNaN(u) || math.IsInf(u, 0) || (i > 0 && u <= upper[i-1]) {
			panic(fmt.Sprintf("metrics: %s: buckets %v do not increase strictly through finite numbers", name, buckets))
		}
	}
	if slices.Contains(labels, "le") {
		panic(fmt.Sprintf("metrics: %s: the label name \"le\" is reserved for histogram buckets", name))
	}
	les := make([]string, 0, len(upper)+1)
	for _, u := range upper {
		les = append(les, formatFloat(u))
	}
	les = append(les, "+Inf")

	h := &Histogram{name: name, help: help, upper: upper, les: les,
		vec: newVec(name, labels, func() *HistogramSeries {
			return &HistogramSeries{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
		}, r.foldCounter(name))}
	r.register(h, labels, name, name+"_bucket", name+"_sum", name+"_count")
	return h
}

// With returns the histogram of the given label values, one per label name,
// in order (past MaxSeries combinations, the all-OtherValue one). Keep the
// result to skip the lookup next time. It panics if the number of values is
// wrong.
func (h *Histogram) With(labelValues ...string) *HistogramSeries {
	return h.vec.get(labelValues)
}

// Observe counts v in the first bucket whose upper bound is at least v, and
// adds it to the sum.
func (s *HistogramSeries) Observe(v float64) {
	// Binary search for the first bound >= v; NaN lands in +Inf.
	lo, hi := 0, len(s.upper)
	if math.IsNaN(v) {
		lo = hi
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.upper[mid] < v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	s.counts[lo].Add(1)
	s.sum.Add(v)
}

func (h *Histogram) familyName() string { return h.name }

func (h *Histogram) write(b *bytes.Buffer) {
	writeHeader(b, h.name, h.help, "histogram")
	labels := h.vec.labels
	for _, e := range h.vec.snapshot() {
		// The count is the sum of the buckets read here, so that it always
		// equals the +Inf bucket even while observations arrive.
		var cum uint64
		for i := range e.s.counts {
			cum += e.s.counts[i].Load()
			writeSample(b, h.name+"_bucket", labels, e.values, "le", h.les[i], strconv.FormatUint(cum, 10))
		}
		writeSample(b, h.name+"_sum", labels, e.values, "", "", formatFloat(e.s.sum.Load()))
		writeSample(b, h.name+"_count", labels, e.values, "", "", strconv.FormatUint(cum, 10))
	}
}
