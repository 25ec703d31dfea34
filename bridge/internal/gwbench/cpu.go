package gwbench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture Go runs on.
const userHZ = 100

// readCPU returns the CPU time (user and system) a process has used, from
// /proc/PID/stat. Without /proc (not Linux) it fails.
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')') // comm may hold anything
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 { // f[0] is field 3 (state); utime and stime are 14 and 15
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: odd utime or stime", pid)
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// cpuSample is the CPU time used so far by each side of a row: the client
// (this process, every goroutine of it), the measured process (a gateway,
// or for direct the server) and the processes below it (the servers a
// gateway runs). -1 is unknown.
type cpuSample struct {
	client, target, kids time.Duration
}

func sampleCPU(pid int) cpuSample {
	s := cpuSample{client: selfCPU(), target: -1, kids: -1}
	if pid <= 0 {
		return s
	}
	if d, err := readCPU(pid); err == nil {
		s.target = d
	}
	if kids, err := descendants(pid); err == nil {
		s.kids = 0
		for _, k := range kids {
			if d, err := readCPU(k.pid); err == nil {
				s.kids += d
			}
		}
	}
	return s
}

// cpuUse is the CPU time each side spent in the measured window.
type cpuUse struct{ client, target, kids time.Duration }

func (a cpuSample) to(b cpuSample) cpuUse {
	sub := func(x, y time.Duration) time.Duration {
		if x < 0 || y < 0 {
			return -1
		}
		return y - x
	}
	return cpuUse{client: sub(a.client, b.client), target: sub(a.target, b.target), kids: sub(a.kids, b.kids)}
}

// perCall spreads the CPU times over calls, in µs: client, gateway and
// servers; for direct (the measured process is the server) the gateway is
// -1 and the servers are that process and those below it. -1 is unknown.
func (u cpuUse) perCall(calls int, direct bool) [3]float64 {
	per := func(d time.Duration) float64 {
		if d < 0 || calls == 0 {
			return -1
		}
		return float64(d) / float64(time.Microsecond) / float64(calls)
	}
	if direct {
		servers := time.Duration(-1)
		if u.target >= 0 && u.kids >= 0 {
			servers = u.target + u.kids
		}
		return [3]float64{per(u.client), -1, per(servers)}
	}
	return [3]float64{per(u.client), per(u.target), per(u.kids)}
}
