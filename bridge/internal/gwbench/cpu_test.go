package gwbench

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestReadCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/stat is Linux's")
	}
	before, err := readCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Some work, so that the later reading cannot be below the first.
	x := 0
	for i := range 10_000_000 {
		x += i % 7
	}
	after, err := readCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before < 0 || after < before {
		t.Errorf("CPU time went from %v to %v (x %d)", before, after, x)
	}
	if self := selfCPU(); self < 0 {
		t.Errorf("selfCPU() = %v, want a CPU time", self)
	}
	if _, err := readCPU(-1); err == nil {
		t.Error("readCPU(-1): no error for a process that cannot exist")
	}
}

func TestCPUPerCall(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		use    cpuUse
		calls  int
		direct bool
		want   [3]float64
	}{
		{"gateway row", cpuUse{client: 30 * ms, target: 20 * ms, kids: 10 * ms}, 100, false, [3]float64{300, 200, 100}},
		{"direct row: the server is the target and its children", cpuUse{client: 30 * ms, target: 20 * ms, kids: 10 * ms}, 100, true, [3]float64{300, -1, 300}},
		{"unknown stays unknown", cpuUse{client: -1, target: 20 * ms, kids: -1}, 100, false, [3]float64{-1, 200, -1}},
		{"direct with its children unknown", cpuUse{client: 30 * ms, target: 20 * ms, kids: -1}, 100, true, [3]float64{300, -1, -1}},
		{"no calls", cpuUse{client: 30 * ms, target: 20 * ms, kids: 10 * ms}, 0, false, [3]float64{-1, -1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.use.perCall(tt.calls, tt.direct); got != tt.want {
				t.Errorf("perCall = %v, want %v", got, tt.want)
			}
		})
	}
}
