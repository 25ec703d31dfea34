package metrics

import "bytes"

// Gauge is a family of gauges sharing a name and label names: values that go
// up and down, such as connected browsers. Its methods are safe for
// concurrent use.
type Gauge struct {
	name, help string
	vec        *vec[GaugeSeries]
}

// GaugeSeries is the gauge of one label set.
type GaugeSeries struct {
	v atomicFloat
}

// NewGauge registers a gauge family with the given label names (none for a
// single gauge, which is then exposed as 0 until first set). It panics if a
// name is malformed or already registered.
func (r *Registry) NewGauge(name, help string, labels ...string) *Gauge {
	g := &Gauge{name: name, help: help, vec: newVec(name, labels, func() *GaugeSeries { return new(GaugeSeries) }, r.foldCounter(name))}
	r.register(g, labels, name)
	return g
}

// With returns the gauge of the given label values, one per label name, in
// order (past MaxSeries combinations, the all-OtherValue one). Keep the
// result to skip the lookup next time. It panics if the number of values is
// wrong.
func (g *Gauge) With(labelValues ...string) *GaugeSeries {
	return g.vec.get(labelValues)
}

// Set sets the gauge to v.
func (s *GaugeSeries) Set(v float64) { s.v.Store(v) }

// Add adds v, which may be negative.
func (s *GaugeSeries) Add(v float64) { s.v.Add(v) }

// Inc adds 1.
func (s *GaugeSeries) Inc() { s.v.Add(1) }

// Dec subtracts 1.
func (s *GaugeSeries) Dec() { s.v.Add(-1) }

// Value returns the gauge's current value.
func (s *GaugeSeries) Value() float64 { return s.v.Load() }

func (g *Gauge) familyName() string { return g.name }

func (g *Gauge) write(b *bytes.Buffer) {
	writeHeader(b, g.name, g.help, "gauge")
	for _, e := range g.vec.snapshot() {
		writeSample(b, g.name, g.vec.labels, e.values, "", "", formatFloat(e.s.Value()))
	}
}

// gaugeFunc is a gauge computed when the registry is written.
type gaugeFunc struct {
	name, help string
	f          func() float64
}

// NewGaugeFunc registers an unlabelled gauge whose value is f's result at
// each scrape, for values kept elsewhere (such as the number of sessions in
// a map). f is called from the goroutine writing the registry, possibly from
// several at once, so it must be safe for concurrent use; it should be quick.
// NewGaugeFunc panics if f is nil or the name is malformed or already
// registered.
func (r *Registry) NewGaugeFunc(name, help string, f func() float64) {
	if f == nil {
		panic("metrics: " + name + ": nil gauge function")
	}
	r.register(&gaugeFunc{name: name, help: help, f: f}, nil, name)
}

func (g *gaugeFunc) familyName() string { return g.name }

func (g *gaugeFunc) write(b *bytes.Buffer) {
	writeHeader(b, g.name, g.help, "gauge")
	writeSample(b, g.name, nil, nil, "", "", formatFloat(g.f()))
}
