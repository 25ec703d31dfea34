//go:build linux

package stdio

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A server's process family on Linux. Stopping the child's process group
// misses what it started in a session or group of its own (setsid, as
// daemons do). So:
//
//   - the bridge is a child subreaper (PR_SET_CHILD_SUBREAPER): a process
//     whose parent exits becomes the bridge's child, not init's;
//   - every child is started with familyVar=<random> in its environment,
//     which whatever it starts inherits;
//   - when the child stops (or dies), every process that descends from it
//     (by parent pid, the child checked by its start time so a reused pid
//     is never taken for it) or carries its marker is signalled too;
//   - the processes adopted this way are reaped by pid (wait4 on that pid,
//     WNOHANG), only once seen as members of a family and with the start
//     time then seen: never wait(-1), which would steal the exit status of
//     the children os/exec waits for.
//
// A sweeper records each running family's descendants every few seconds
// (and on SIGCHLD), so that a process that left its family and then died
// is still known when its zombie is to be reaped. A process that escapes,
// scrubs its environment and dies between two sweeps stays a zombie of
// the bridge until the bridge exits; nothing else is known to be missed.

// familyVar is the environment variable that marks a child's family.
const familyVar = "BROWSERBRIDGE_STDIO_FAMILY"

// sweepEvery is how often the sweeper records running families' members
// and reaps the adopted ones that died.
const sweepEvery = 5 * time.Second

// family is one child and everything it started.
type family struct {
	marker      string
	leader      int
	leaderStart uint64 // 0 if the leader was already gone when looked at

	mu    sync.Mutex
	known map[int]uint64 // members seen, by pid: their start time
}

// newFamilyMarker returns the environment entry of a new family, and
// makes the bridge a subreaper on first use.
func newFamilyMarker() (marker, env string) {
	enableSubreaper()
	marker = rand.Text()
	return marker, familyVar + "=" + marker
}

// newFamily starts following the family of the child leader, started with
// marker in its environment.
func newFamily(leader int, marker string) *family {
	f := &family{marker: marker, leader: leader, known: map[int]uint64{}}
	if p, ok := readStat(leader); ok {
		f.leaderStart = p.start
	}
	sweeper.add(f)
	return f
}

// terminate sends SIGTERM to every member of the family outside the
// leader's process group (which gets its own).
func (f *family) terminate() {
	if f == nil {
		return
	}
	for _, p := range f.members(scanProcs(), true) {
		_ = unix.Kill(p.pid, unix.SIGTERM)
	}
}

// stop kills every member of the family, the leader being gone, and hands
// the adopted ones to the sweeper to reap. It repeats while it finds
// members alive, for a process may fork while its family is killed.
func (f *family) stop() {
	if f == nil {
		return
	}
	sweeper.remove(f)
	for range 10 {
		live := 0
		for _, p := range f.members(scanProcs(), true) {
			if p.state != 'Z' {
				_ = unix.Kill(p.pid, unix.SIGKILL)
				live++
			}
		}
		if live == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.mu.Lock()
	known := f.known
	f.known = nil
	f.mu.Unlock()
	sweeper.reapLater(known)
}

// members returns the processes of the family in procs, the leader
// excepted (os/exec waits for it), and records them. withMarkers also
// looks for the marker in every process's environment (at a stop: costly,
// but it finds processes whose chain to the leader is broken).
func (f *family) members(procs []procInfo, withMarkers bool) []procInfo {
	self := os.Getpid()
	byPID := make(map[int]procInfo, len(procs))
	children := map[int][]int{}
	for _, p := range procs {
		byPID[p.pid] = p
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	f.mu.Lock()
	var roots []int
	if p, ok := byPID[f.leader]; ok && f.leaderStart != 0 && p.start == f.leaderStart {
		roots = append(roots, f.leader)
	}
	for pid, start := range f.known {
		if p, ok := byPID[pid]; ok && p.start == start {
			roots = append(roots, pid)
		}
	}
	f.mu.Unlock()
	if withMarkers {
		for _, p := range procs {
			if p.pid != self && p.pid != f.leader && p.state != 'Z' && hasMarker(p.pid, f.marker) {
				roots = append(roots, p.pid)
			}
		}
	}
	seen := map[int]bool{}
	var out []procInfo
	for len(roots) > 0 {
		pid := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if seen[pid] || pid == self {
			continue
		}
		seen[pid] = true
		roots = append(roots, children[pid]...)
		if pid != f.leader {
			out = append(out, byPID[pid])
		}
	}
	f.mu.Lock()
	if f.known != nil {
		for _, p := range out {
			f.known[p.pid] = p.start
		}
	}
	f.mu.Unlock()
	return out
}

// procInfo is what /proc/[pid]/stat tells of a process.
type procInfo struct {
	pid, ppid int
	state     byte
	start     uint64 // clock ticks after boot
}

// parseStat parses the text of /proc/[pid]/stat. The command name, in
// parentheses, may hold spaces and parentheses itself: the fields are
// counted from the last ')'.
func parseStat(pid int, data []byte) (procInfo, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22 (starttime).
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, state: f[0][0], start: start}, true
}

func readStat(pid int) (procInfo, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	return parseStat(pid, data)
}

// scanProcs reads the stat of every process.
func scanProcs() []procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]procInfo, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// hasMarker reports whether process pid carries the family marker (its
// environment is readable only for the bridge's own user's processes).
func hasMarker(pid int, marker string) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	entry := []byte(familyVar + "=" + marker)
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

var subreaper sync.Once

// enableSubreaper makes the bridge the reaper of its descendants' orphans
// and starts the sweeper. Without it (an old kernel) orphans go to init,
// where markers still find them; only their reaping is then init's.
func enableSubreaper() {
	subreaper.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err == nil {
			sweeper.adopting = true
		}
		go sweeper.run()
	})
}

// sweeper follows the running families and reaps adopted members.
var sweeper = &familySweeper{families: map[*family]bool{}, reap: map[int]uint64{}, kick: make(chan struct{}, 1)}

type familySweeper struct {
	adopting bool // the bridge is a subreaper: orphans are its to reap

	mu       sync.Mutex
	families map[*family]bool
	reap     map[int]uint64 // stopped families' members, by pid: start time
	kick     chan struct{}
}

func (s *familySweeper) add(f *family) {
	s.mu.Lock()
	s.families[f] = true
	s.mu.Unlock()
}

func (s *familySweeper) remove(f *family) {
	s.mu.Lock()
	delete(s.families, f)
	s.mu.Unlock()
}

// reapLater hands the members of a stopped family over for reaping.
func (s *familySweeper) reapLater(known map[int]uint64) {
	s.mu.Lock()
	for pid, start := range known {
		s.reap[pid] = start
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *familySweeper) run() {
	// An adopted process that exits sends SIGCHLD: reap it at once.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-chld:
		case <-s.kick:
		case <-t.C:
		}
		s.sweep()
	}
}

// sweep records the running families' members and reaps the adopted
// members that died.
func (s *familySweeper) sweep() {
	s.mu.Lock()
	families := make([]*family, 0, len(s.families))
	for f := range s.families {
		families = append(families, f)
	}
	idle := len(families) == 0 && len(s.reap) == 0
	s.mu.Unlock()
	if idle {
		return
	}
	procs := scanProcs()
	self := os.Getpid()
	for _, f := range families {
		f.members(procs, false)
	}
	// A process adopted by the bridge that no family holds yet: look for
	// its marker while it lives (its environment is gone once it died).
	for _, p := range procs {
		if p.ppid != self || p.state == 'Z' || s.isKnown(p, families) {
			continue
		}
		for _, f := range families {
			if p.pid != f.leader && hasMarker(p.pid, f.marker) {
				f.mu.Lock()
				if f.known != nil {
					f.known[p.pid] = p.start
				}
				f.mu.Unlock()
				break
			}
		}
	}
	if !s.adopting {
		return
	}
	alive := make(map[int]uint64, len(procs))
	for _, p := range procs {
		alive[p.pid] = p.start
		if p.ppid == self && p.state == 'Z' && s.isKnown(p, families) {
			var ws unix.WaitStatus
			// By pid, never -1: os/exec waits for its own children.
			_, _ = unix.Wait4(p.pid, &ws, unix.WNOHANG, nil)
		}
	}
	s.mu.Lock()
	for pid, start := range s.reap {
		if alive[pid] != start {
			delete(s.reap, pid) // reaped, by us or by its parent
		}
	}
	s.mu.Unlock()
}

// isKnown reports whether p is a member seen of a running or stopped
// family (the same process: same pid and start time).
func (s *familySweeper) isKnown(p procInfo, families []*family) bool {
	s.mu.Lock()
	start, ok := s.reap[p.pid]
	s.mu.Unlock()
	if ok && start == p.start {
		return true
	}
	for _, f := range families {
		f.mu.Lock()
		start, ok := f.known[p.pid]
		f.mu.Unlock()
		if ok && start == p.start {
			return true
		}
	}
	return false
}
