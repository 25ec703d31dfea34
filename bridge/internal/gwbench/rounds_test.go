package gwbench

import (
	"testing"
	"time"
)

func TestMedianOf(t *testing.T) {
	tests := []struct {
		name string
		vals []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{3}, 3},
		{"odd count is the middle", []float64{5, 1, 3}, 3},
		{"even count averages the two middle", []float64{4, 1, 3, 2}, 2.5},
		{"unknown values are left out", []float64{-1, 2, 4, -1}, 3},
		{"absent ratios are left out", []float64{0, 0.5, 0}, 0.5},
		{"only unknown is unknown", []float64{-1, -1}, -1},
		{"only absent is absent", []float64{0, 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := make([]row, len(tt.vals))
			for i, v := range tt.vals {
				rows[i].xDirect = v
			}
			if got := medianOf(rows, func(r row) float64 { return r.xDirect }); got != tt.want {
				t.Errorf("medianOf(%v) = %v, want %v", tt.vals, got, tt.want)
			}
		})
	}
}

// measuredRow is a row that ran: calls in a 1s window, p99 in ms.
func measuredRow(target string, round, sessions, calls int, p99ms int) row {
	return row{target: target, round: round, sessions: sessions, calls: calls, duration: time.Second,
		lat: latencies{p50: time.Millisecond, p99: time.Duration(p99ms) * time.Millisecond}}
}

func TestPairRatios(t *testing.T) {
	rows := []row{
		measuredRow("direct-sdk", 1, 10, 1000, 10),
		measuredRow("browserbridge-sdk", 1, 10, 500, 20),
		measuredRow("tbxark-sdk", 1, 10, 400, 10),
		measuredRow("browserbridge", 1, 10, 2000, 5),
		measuredRow("tbxark", 1, 10, 1000, 5),
		// Round 2: the machine got busier; the ratios stay paired.
		measuredRow("direct-sdk", 2, 10, 500, 40),
		measuredRow("browserbridge-sdk", 2, 10, 400, 40),
		// 50 sessions has no direct-sdk row: no ratio to it.
		measuredRow("browserbridge-sdk", 1, 50, 300, 20),
	}
	pairRatios(rows)
	tests := []struct {
		name                      string
		i                         int
		xDirect, xTBX, p99xDirect float64
	}{
		{"direct-sdk is 1", 0, 1, 2.5, 1},
		{"sdk row against direct-sdk and tbxark-sdk", 1, 0.5, 1.25, 2},
		{"raw row against tbxark", 3, 2, 2, 0.5},
		{"the second round against its own direct-sdk", 6, 0.8, 0, 1},
		{"no peer at that session count", 7, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rows[tt.i]
			if r.xDirect != tt.xDirect || r.xTBX != tt.xTBX || r.p99xDirect != tt.p99xDirect {
				t.Errorf("%s round %d: ×direct %v, ×tbxark %v, p99 ×direct %v; want %v, %v, %v",
					r.target, r.round, r.xDirect, r.xTBX, r.p99xDirect, tt.xDirect, tt.xTBX, tt.p99xDirect)
			}
		})
	}
}

func TestCombineRounds(t *testing.T) {
	gw := func(round, calls, p99ms int, peak int64, errs int) row {
		r := measuredRow("browserbridge-sdk", round, 10, calls, p99ms)
		r.xDirect = float64(calls) / 1000
		r.peak.rss, r.errors = peak, errs
		r.cpuPerCall = [3]float64{float64(calls), -1, 100}
		return r
	}
	failed := measuredRow("browserbridge-sdk", 4, 10, 0, 0)
	failed.fail = "starting: boom"
	skipped := row{target: "tbxark-sdk", round: 1, sessions: 10, skip: "not built"}
	rows := []row{
		gw(1, 300, 30, 20, 0),
		skipped,
		gw(2, 100, 10, 22, 1),
		gw(3, 200, 50, 21, 2),
		failed,
	}
	got := combineRounds(rows)
	if len(got) != 2 {
		t.Fatalf("combined into %d rows, want 2 (one per target and session count)", len(got))
	}
	c, s := got[0], got[1]
	tests := []struct {
		name      string
		got, want any
	}{
		{"order: first seen first", c.target, "browserbridge-sdk"},
		{"rounds measured (the failed one left out)", c.rounds, 3},
		{"calls: the median", c.calls, 200},
		{"p99: the median", c.lat.p99, 30 * time.Millisecond},
		{"ratio: the median of the rounds' ratios", c.xDirect, 0.2},
		{"errors: summed", c.errors, 3},
		{"RSS peak: the highest", c.peak.rss, int64(22)},
		{"CPU per call: the median", c.cpuPerCall[0], 200.0},
		{"CPU per call unknown stays unknown", c.cpuPerCall[1], -1.0},
		{"a target never measured keeps its reason", s.skip, "not built"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}
