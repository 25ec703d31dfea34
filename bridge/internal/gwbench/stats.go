package gwbench

import (
	"fmt"
	"slices"
	"time"
)

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. It returns 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// rank = ceil(p/100 * n), computed in integers where p allows it so that
	// p99 of 100 values is the 99th, not the 100th after rounding error.
	n := len(sorted)
	rank := int(p * float64(n) / 100)
	if float64(rank)*100 < p*float64(n) {
		rank++
	}
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// latencies summarises call durations.
type latencies struct {
	n        int
	p50, p99 time.Duration
}

// summarise sorts d in place and returns its count and percentiles.
func summarise(d []time.Duration) latencies {
	slices.Sort(d)
	return latencies{n: len(d), p50: percentile(d, 50), p99: percentile(d, 99)}
}

// formatDuration prints a latency with three significant figures.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// formatBytes prints a memory size in MiB; negative means unknown.
func formatBytes(b int64) string {
	if b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
