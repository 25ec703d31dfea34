//go:build linux

package stdio

import (
	"context"
	"errors"
	"os/exec"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, stat string
		ok         bool
		want       procInfo
	}{
		{"plain", "42 (sleep) S 7 42 42 0 -1 4194560 96 0 0 0 0 0 0 0 20 0 1 0 123456 2400000 200", true, procInfo{pid: 42, ppid: 7, state: 'S', start: 123456}},
		{"name with spaces and parentheses", "43 (a ) b (c)) Z 1 43 43 0 -1 4194560 96 0 0 0 0 0 0 0 20 0 1 0 99 0 0", true, procInfo{pid: 43, ppid: 1, state: 'Z', start: 99}},
		{"cut short", "44 (x) S 1 44", false, procInfo{}},
		{"no name", "45 S 1", false, procInfo{}},
		{"bad ppid", "46 (x) S p 46 46 0 -1 4194560 96 0 0 0 0 0 0 0 20 0 1 0 99 0 0", false, procInfo{}},
	}
	pids := map[string]int{"plain": 42, "name with spaces and parentheses": 43, "cut short": 44, "no name": 45, "bad ppid": 46}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseStat(pids[tc.name], []byte(tc.stat))
			if ok != tc.ok || got != tc.want {
				t.Fatalf("parseStat = %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// The bridge is a subreaper and reaps the orphans of its servers, by pid:
// the exit status of a child that os/exec waits for is never taken, however
// often the sweeper runs meanwhile.
func TestSweeperLeavesOtherChildrenAlone(t *testing.T) {
	s, _ := newSupervisor(t, map[string]ServerConfig{"echo": echoChild(t, "echo")}, Options{})
	if _, err := s.Conn(context.Background(), "echo"); err != nil { // a running family
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				sweeper.sweep()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for i := range 30 {
		err := exec.Command("sh", "-c", "exit 3").Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("run %d: %v, want exit status 3", i, err)
		}
	}
}
