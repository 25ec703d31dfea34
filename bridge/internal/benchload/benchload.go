// Package benchload is what the load generators of the benchmarks share:
// when each call of an offered load is due, and the latency figures they
// report. It is imported by tests only.
package benchload

import (
	"slices"
	"testing"
	"time"
)

// TimerGranularity is how late a sleeping client may wake through no fault
// of the system it measures: when every P is idle, Go's runtime waits for
// the next timer in epoll_wait, whose timeout is whole milliseconds
// (runtime/netpoll_epoll.go), so a sleep of 0.2 ms can last 1 ms. On the
// reference machine this alone added 0.5 ms to the p50 of a bare TCP echo
// at 10,000 calls/s (0.58 ms against 0.10 ms).
const TimerGranularity = time.Millisecond

// Schedule offers calls at Rate per second over all clients from Start:
// call k is due at Start + k/Rate. Rate 0 is a closed loop: every call is
// due when a client is free to make it.
type Schedule struct {
	Start time.Time
	Rate  float64
}

// Wait waits until call k is due and returns the moment its latency counts
// from. A client still busy when the call fell due returns the due time:
// the system fell behind, and the wait is charged to it (no coordinated
// omission). A client that slept returns when it woke, but no later than
// TimerGranularity after the due time: the timer's rounding is the load
// generator's, and any lateness beyond it is charged as a stall.
func (s Schedule) Wait(k int64) time.Time {
	now := time.Now()
	if s.Rate <= 0 {
		return now
	}
	due := s.Start.Add(time.Duration(float64(k) / s.Rate * float64(time.Second)))
	if !now.Before(due) {
		return due
	}
	time.Sleep(due.Sub(now))
	woke, latest := time.Now(), due.Add(TimerGranularity)
	if woke.After(latest) {
		return latest
	}
	return woke
}

// Summary is what a run of calls measured.
type Summary struct {
	Calls          int
	Elapsed        time.Duration
	P50, P99, P999 time.Duration
}

// Summarize sorts the latencies of one run that took elapsed and returns
// their figures.
func Summarize(lat []time.Duration, elapsed time.Duration) Summary {
	slices.Sort(lat)
	s := Summary{Calls: len(lat), Elapsed: elapsed}
	if len(lat) == 0 {
		return s
	}
	q := func(f float64) time.Duration { return lat[int(float64(len(lat)-1)*f)] }
	s.P50, s.P99, s.P999 = q(0.50), q(0.99), q(0.999)
	return s
}

// Report reports calls/s, p50 and p99 (and p99.9 for an offered load,
// whose tail is the figure asked for), and cpu, the CPU time of the
// process measured, per call.
func (s Summary) Report(b *testing.B, cpu time.Duration, rated bool) {
	if s.Calls == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	b.ReportMetric(float64(s.Calls)/s.Elapsed.Seconds(), "calls/s")
	b.ReportMetric(ms(s.P50), "p50-ms")
	b.ReportMetric(ms(s.P99), "p99-ms")
	if rated {
		b.ReportMetric(ms(s.P999), "p99.9-ms")
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(s.Calls), "cpu-µs/call")
}

// Side is one side of a comparison in one run (CompareInRounds): Run makes n
// calls offered at rate calls/s (0: a closed loop) and returns their
// latencies and how long they took.
type Side struct {
	Name string
	Run  func(n int64, rate float64) (lat []time.Duration, elapsed time.Duration, err error)

	lat          []time.Duration
	elapsed, cpu time.Duration
}

// Figures is one side's summary and its process CPU time per call.
type Figures struct {
	Summary
	CPUPerCall time.Duration
}

// CompareInRounds runs base and other in alternating rounds (rounds of
// each, b.N calls in all, the side that goes first alternating), so that
// both see the same moments of the machine. It reports each side's
// calls/s, p50, p99 and CPU per call prefixed with its name, and other's
// cpu-ratio and p99-ratio to base, and returns both sides' figures. judge
// is false for the framework's first, tiny try, whose figures mean nothing.
func CompareInRounds(b *testing.B, rounds int, rate float64, base, other *Side) (baseF, otherF Figures, judge bool) {
	b.Helper()
	sides := [2]*Side{base, other}
	b.ResetTimer()
	per := max(int64(b.N)/int64(2*rounds), 1)
	for r := range rounds {
		for j := range sides {
			s := sides[(r+j)%2]
			cpu0 := ProcessCPU()
			lat, elapsed, err := s.Run(per, rate)
			s.cpu += ProcessCPU() - cpu0
			s.elapsed += elapsed
			s.lat = append(s.lat, lat...)
			if err != nil {
				b.Fatalf("%s: %v", s.Name, err)
			}
		}
	}
	b.StopTimer()
	baseF, otherF = base.report(b), other.report(b)
	b.ReportMetric(float64(otherF.CPUPerCall)/float64(baseF.CPUPerCall), "cpu-ratio")
	b.ReportMetric(float64(otherF.P99)/float64(baseF.P99), "p99-ratio")
	return baseF, otherF, b.N >= 1000
}

func (s *Side) report(b *testing.B) Figures {
	sum := Summarize(s.lat, s.elapsed)
	f := Figures{Summary: sum, CPUPerCall: s.cpu / time.Duration(max(sum.Calls, 1))}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	b.ReportMetric(float64(sum.Calls)/s.elapsed.Seconds(), s.Name+"-calls/s")
	b.ReportMetric(ms(sum.P50), s.Name+"-p50-ms")
	b.ReportMetric(ms(sum.P99), s.Name+"-p99-ms")
	b.ReportMetric(float64(f.CPUPerCall.Nanoseconds())/1e3, s.Name+"-cpu-µs/call")
	return f
}
