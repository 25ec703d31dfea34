package gwbench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sampleEvery is the period of the RSS sampler.
const sampleEvery = 100 * time.Millisecond

// readRSS returns a process's resident set (VmRSS in /proc/PID/status) in
// bytes. Without /proc (not Linux) it fails.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := strings.Fields(string(rest)) // "12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10, nil
				}
			}
			return 0, fmt.Errorf("/proc/%d/status: odd VmRSS line %q", pid, line)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// A procID names a process in a way a reused pid does not match: its pid
// and its start time.
type procID struct {
	pid   int
	start uint64
}

// statOf reads a process's parent and start time from /proc/PID/stat.
func statOf(pid int) (ppid int, start uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) state ppid ... starttime ...": comm may hold anything, so
	// the fields are counted from its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 { // f[0] is field 3 (state); starttime is field 22
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, err
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return ppid, start, err
}

// descendants lists every process below pid.
func descendants(pid int) ([]procID, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := make(map[int][]procID)
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, start, err := statOf(p)
		if err != nil {
			continue // gone meanwhile
		}
		children[ppid] = append(children[ppid], procID{pid: p, start: start})
	}
	var out []procID
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out, nil
}

// kill kills the process if it still runs (the same process, not a reuse of
// its pid).
func (p procID) kill() {
	if _, start, err := statOf(p.pid); err == nil && start == p.start {
		killPID(p.pid)
	}
}

// memSample is one look at a measured process and the processes below it.
type memSample struct {
	rss      int64 // the process's own RSS; -1 unknown
	kids     int   // processes below it
	kidsRSS  int64 // their summed RSS
	kidsSeen bool  // whether descendants could be listed
}

func sampleMem(pid int) memSample {
	s := memSample{rss: -1}
	if pid <= 0 {
		return s
	}
	if rss, err := readRSS(pid); err == nil {
		s.rss = rss
	}
	if kids, err := descendants(pid); err == nil {
		s.kidsSeen = true
		for _, k := range kids {
			if rss, err := readRSS(k.pid); err == nil {
				s.kids++
				s.kidsRSS += rss
			}
		}
	}
	return s
}

// peakSampler samples a process every sampleEvery and keeps the peaks.
type peakSampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	peak memSample
}

func startSampler(pid int) *peakSampler {
	ps := &peakSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{}), peak: memSample{rss: -1}}
	go ps.run()
	return ps
}

func (ps *peakSampler) run() {
	defer close(ps.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		ps.take()
		select {
		case <-ps.stop:
			return
		case <-t.C:
		}
	}
}

func (ps *peakSampler) take() {
	s := sampleMem(ps.pid)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.peak.rss = max(ps.peak.rss, s.rss)
	ps.peak.kids = max(ps.peak.kids, s.kids)
	ps.peak.kidsRSS = max(ps.peak.kidsRSS, s.kidsRSS)
	ps.peak.kidsSeen = ps.peak.kidsSeen || s.kidsSeen
}

// finish takes a last sample, stops, and returns the peaks.
func (ps *peakSampler) finish() memSample {
	close(ps.stop)
	<-ps.done
	ps.take()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.peak
}
