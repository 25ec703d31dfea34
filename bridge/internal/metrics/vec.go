package metrics

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
)

// vec holds the series of one family, one per label set. Looking up a label
// set already seen takes a read lock and does not allocate.
type vec[S any] struct {
	name   string
	labels []string
	newS   func() *S

	mu     sync.RWMutex
	series map[string]*entry[S] // by key(values)
}

type entry[S any] struct {
	values []string
	s      *S
}

func newVec[S any](name string, labels []string, newS func() *S) *vec[S] {
	v := &vec[S]{name: name, labels: slices.Clone(labels), newS: newS, series: make(map[string]*entry[S])}
	if len(labels) == 0 {
		// The one series of an unlabelled metric is exposed from the start.
		v.get(nil)
	}
	return v
}

// get returns the series for values, creating it on first use. It panics if
// the number of values is not the number of label names.
func (v *vec[S]) get(values []string) *S {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s has %d labels %q; got %d values", v.name, len(v.labels), v.labels, len(values)))
	}
	var buf [128]byte
	key := appendKey(buf[:0], values)
	v.mu.RLock()
	e := v.series[string(key)] // this conversion does not allocate
	v.mu.RUnlock()
	if e != nil {
		return e.s
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	if e := v.series[string(key)]; e != nil {
		return e.s
	}
	e = &entry[S]{values: slices.Clone(values), s: v.newS()}
	v.series[string(key)] = e
	return e.s
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
