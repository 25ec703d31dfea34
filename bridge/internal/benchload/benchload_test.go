package benchload

import (
	"testing"
	"time"
)

func TestScheduleWait(t *testing.T) {
	start := time.Now()
	tests := []struct {
		name     string
		sched    Schedule
		k        int64
		earliest time.Duration // from start, of the time returned
		latest   time.Duration
	}{
		{"closed loop: counts from now", Schedule{Start: start}, 5, 0, time.Hour},
		{"busy past due: counts from the due time", Schedule{Start: start.Add(-time.Second), Rate: 10}, 3, -700 * time.Millisecond, -700 * time.Millisecond},
		{"slept: counts from waking, at most the timer's granularity late", Schedule{Start: start, Rate: 100}, 2, 20 * time.Millisecond, 20*time.Millisecond + TimerGranularity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.sched.Wait(tt.k).Sub(start)
			if got < tt.earliest || got > tt.latest {
				t.Errorf("Wait(%d) = start%+v, want within [%v, %v]", tt.k, got, tt.earliest, tt.latest)
			}
		})
	}
}

func TestScheduleWaitSleepsUntilDue(t *testing.T) {
	s := Schedule{Start: time.Now(), Rate: 50}
	s.Wait(1) // due 20 ms after the start
	if waited := time.Since(s.Start); waited < 20*time.Millisecond {
		t.Errorf("Wait returned %v after the start, before call 1 was due", waited)
	}
}

func TestSummarize(t *testing.T) {
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Duration(1000-i) * time.Microsecond // 1000 µs down to 1 µs
	}
	s := Summarize(lat, time.Second)
	want := Summary{Calls: 1000, Elapsed: time.Second, P50: 500 * time.Microsecond, P99: 990 * time.Microsecond, P999: 999 * time.Microsecond}
	if s != want {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	if got := Summarize(nil, time.Second); got.Calls != 0 || got.P99 != 0 {
		t.Errorf("Summarize(nil) = %+v, want no figures", got)
	}
}
