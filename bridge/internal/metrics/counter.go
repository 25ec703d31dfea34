package metrics

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
)

// Counter is a family of counters sharing a name and label names: values
// that only go up, such as requests served. Its methods are safe for
// concurrent use.
type Counter struct {
	name, help string
	vec        *vec[CounterSeries]
}

// CounterSeries is the counter of one label set.
type CounterSeries struct {
	whole atomic.Uint64 // increments by whole numbers, kept exact
	frac  atomicFloat   // the rest
}

// NewCounter registers a counter family with the given label names (none
// for a single counter, which is then exposed as 0 until first incremented).
// By Prometheus convention the name ends in _total. It panics if a name is
// malformed or already registered.
func (r *Registry) NewCounter(name, help string, labels ...string) *Counter {
	c := &Counter{name: name, help: help, vec: newVec(name, labels, newCounterSeries, r.foldCounter(name))}
	r.register(c, labels, name)
	return c
}

// With returns the counter of the given label values, one per label name,
// in order (past MaxSeries combinations, the all-OtherValue one). Keep the
// result to skip the lookup next time. It panics if the number of values is
// wrong.
func (c *Counter) With(labelValues ...string) *CounterSeries {
	return c.vec.get(labelValues)
}

func newCounterSeries() *CounterSeries { return new(CounterSeries) }

// Inc adds 1.
func (s *CounterSeries) Inc() { s.whole.Add(1) }

// Add adds v, which must not be negative: Add panics otherwise, as a counter
// that goes down is a programming error.
func (s *CounterSeries) Add(v float64) {
	switch {
	case !(v >= 0):
		panic(fmt.Sprintf("metrics: counter decreased by %v", v))
	case v == math.Trunc(v) && v < 1<<53:
		s.whole.Add(uint64(v))
	default:
		s.frac.Add(v)
	}
}

// Value returns the counter's current value.
func (s *CounterSeries) Value() float64 {
	return float64(s.whole.Load()) + s.frac.Load()
}

func (c *Counter) familyName() string { return c.name }

func (c *Counter) write(b *bytes.Buffer) {
	writeHeader(b, c.name, c.help, "counter")
	for _, e := range c.vec.snapshot() {
		var v string
		if f := e.s.frac.Load(); f == 0 {
			v = strconv.FormatUint(e.s.whole.Load(), 10)
		} else {
			v = formatFloat(float64(e.s.whole.Load()) + f)
		}
		writeSample(b, c.name, c.vec.labels, e.values, "", "", v)
	}
}

// atomicFloat is a float64 updated atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) Load() float64 { return math.Float64frombits(f.bits.Load()) }

func (f *atomicFloat) Store(v float64) { f.bits.Store(math.Float64bits(v)) }

func (f *atomicFloat) Add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}
