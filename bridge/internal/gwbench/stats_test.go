package gwbench

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value p50", ms(7), 50, 7 * time.Millisecond},
		{"one value p99", ms(7), 99, 7 * time.Millisecond},
		{"two values p50 is the lower", ms(1, 2), 50, 1 * time.Millisecond},
		{"three values p50 is the middle", ms(1, 2, 3), 50, 2 * time.Millisecond},
		{"four values p50", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"hundred values p50", ms(hundred...), 50, 50 * time.Millisecond},
		{"hundred values p99 is the 99th, not the max", ms(hundred...), 99, 99 * time.Millisecond},
		{"hundred values p100 is the max", ms(hundred...), 100, 100 * time.Millisecond},
		{"ten values p99 is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummariseSorts(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3}
	got := summarise(d)
	if got.n != 5 || got.p50 != 3 || got.p99 != 5 {
		t.Errorf("summarise = %+v, want n 5, p50 3ns, p99 5ns", got)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{"none", 0, "-"},
		{"microseconds", 47 * time.Microsecond, "47µs"},
		{"a few milliseconds", 4410 * time.Microsecond, "4.41ms"},
		{"tens of milliseconds", 15900 * time.Microsecond, "15.9ms"},
		{"hundreds of milliseconds", 250 * time.Millisecond, "250ms"},
		{"seconds", 1500 * time.Millisecond, "1.50s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatDuration(tt.d); got != tt.want {
				t.Errorf("formatDuration(%v) = %q, want %q", tt.d, got, tt.want)
			}
		})
	}
}
