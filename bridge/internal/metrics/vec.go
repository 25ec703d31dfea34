package metrics

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
)

// MaxSeries is the most series one labelled metric holds. Label values
// should come from fixed sets, but a value that slips through from a
// client (an invented HTTP method, a JSON-RPC method name) would otherwise
// add a series per request, growing memory and every scrape without bound.
// Once a metric holds MaxSeries series, each new label combination is
// counted in the one series whose label values are all OtherValue (which
// counts towards MaxSeries), and the fold is counted in FoldedName.
const MaxSeries = 1000

// OtherValue is the label value of the series that absorbs the label
// combinations past MaxSeries. Callers mapping values to a fixed set use it
// too for "anything else", so both land in the same series.
const OtherValue = "other"

// FoldedName is the counter, labelled by metric name, of the label
// combinations folded into the all-OtherValue series because the metric
// already held MaxSeries series. Every Registry exposes it once it counted
// something.
const FoldedName = "browserbridge_metric_series_folded_total"

// vec holds the series of one family, one per label set. Looking up a label
// set already seen takes a read lock and does not allocate.
type vec[S any] struct {
	name   string
	labels []string
	newS   func() *S
	folded func() // counts a fold; nil for FoldedName itself
	max    int    // MaxSeries, smaller in tests

	mu     sync.RWMutex
	series map[string]*entry[S] // by key(values)
	other  *entry[S]            // the all-OtherValue series, once it exists
}

type entry[S any] struct {
	values []string
	s      *S
}

func newVec[S any](name string, labels []string, newS func() *S, folded func()) *vec[S] {
	v := &vec[S]{name: name, labels: slices.Clone(labels), newS: newS, folded: folded, max: MaxSeries,
		series: make(map[string]*entry[S])}
	if len(labels) == 0 {
		// The one series of an unlabelled metric is exposed from the start.
		v.get(nil)
	}
	return v
}

// get returns the series for values, creating it on first use, or the
// all-OtherValue series once the vec is full. It panics if the number of
// values is not the number of label names.
func (v *vec[S]) get(values []string) *S {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s has %d labels %q; got %d values", v.name, len(v.labels), v.labels, len(values)))
	}
	var buf [128]byte
	key := appendKey(buf[:0], values)
	v.mu.RLock()
	e := v.series[string(key)] // this conversion does not allocate
	full, other := len(v.series) >= v.max, v.other
	v.mu.RUnlock()
	if e != nil {
		return e.s
	}
	if full && other != nil {
		// A flood of new combinations costs a read lock each, not a write lock.
		v.fold()
		return other.s
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	if e := v.series[string(key)]; e != nil {
		return e.s
	}
	// One place is kept for the all-OtherValue series, so that the total
	// never exceeds max.
	room := v.max - len(v.series)
	if v.other == nil {
		room--
	}
	if room < 0 || (room == 0 && !allOther(values)) {
		v.fold()
		return v.otherLocked().s
	}
	e = &entry[S]{values: slices.Clone(values), s: v.newS()}
	v.series[string(key)] = e
	if allOther(values) {
		v.other = e
	}
	return e.s
}

// otherLocked returns the all-OtherValue series, creating it if need be.
// v.mu must be held for writing.
func (v *vec[S]) otherLocked() *entry[S] {
	if v.other == nil {
		values := make([]string, len(v.labels))
		for i := range values {
			values[i] = OtherValue
		}
		v.other = &entry[S]{values: values, s: v.newS()}
		v.series[string(appendKey(nil, values))] = v.other
	}
	return v.other
}

func (v *vec[S]) fold() {
	if v.folded != nil {
		v.folded()
	}
}

func allOther(values []string) bool {
	for _, s := range values {
		if s != OtherValue {
			return false
		}
	}
	return len(values) > 0
}

// snapshot returns the series sorted by label values.
func (v *vec[S]) snapshot() []*entry[S] {
	v.mu.RLock()
	out := make([]*entry[S], 0, len(v.series))
	for _, e := range v.series {
		out = append(out, e)
	}
	v.mu.RUnlock()
	slices.SortFunc(out, func(a, b *entry[S]) int { return slices.Compare(a.values, b.values) })
	return out
}

// appendKey encodes values unambiguously: each one's length, then its bytes.
func appendKey(b []byte, values []string) []byte {
	for _, s := range values {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}
