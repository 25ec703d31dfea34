//go:build unix

package stdio

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// reaped is a child under a reaper, as the tests see it: its output line
// by line, and whether its readers have returned.
type reaped struct {
	*reaper
	stdout, stderr         chan string
	stdoutEnded, errsEnded atomic.Bool
}

// startShell starts sh -c script under a reaper. readErr, if not nil, is
// what the stdout reader returns at once, without reading.
func startShell(t *testing.T, script string, grace time.Duration, readErr error) *reaped {
	t.Helper()
	rp := &reaped{stdout: make(chan string, 100), stderr: make(chan string, 100)}
	lines := func(r io.Reader, out chan<- string, abandon <-chan struct{}) error {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case out <- sc.Text():
			case <-abandon:
				return nil
			}
		}
		return sc.Err()
	}
	rio := reaperIO{
		Stdout: func(r io.Reader, abandon <-chan struct{}) error {
			defer rp.stdoutEnded.Store(true)
			if readErr != nil {
				return readErr
			}
			return lines(r, rp.stdout, abandon)
		},
		Stderr: func(r io.Reader) {
			defer rp.errsEnded.Store(true)
			_ = lines(r, rp.stderr, nil)
		},
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = os.Environ()
	r, err := startReaper(cmd, rio, grace, nil)
	if err != nil {
		t.Fatal(err)
	}
	rp.reaper = r
	t.Cleanup(func() { // a failed test leaves nothing running
		r.Stop()
		<-r.Done()
	})
	return rp
}

// line returns the child's next stdout line.
func (rp *reaped) line(t *testing.T) string {
	t.Helper()
	select {
	case l := <-rp.stdout:
		return l
	case <-rp.Done():
		select {
		case l := <-rp.stdout:
			return l
		default:
		}
		t.Fatalf("the child ended without the line expected: %+v", rp.Exit())
	}
	return ""
}

// wait returns how the child ended, once the reaper is done, and checks
// that the readers returned before that.
func (rp *reaped) wait(t *testing.T) reaperExit {
	t.Helper()
	select {
	case <-rp.Done():
	case <-time.After(30 * time.Second): // a hang, not a measure
		t.Fatal("the reaper never finished")
	}
	if !rp.stdoutEnded.Load() || !rp.errsEnded.Load() {
		t.Fatalf("Done before the readers returned (stdout %v, stderr %v)", rp.stdoutEnded.Load(), rp.errsEnded.Load())
	}
	return rp.Exit()
}

// signalOf names the signal that ended the child, or "".
func signalOf(e reaperExit) string { return exitSignal(e.State) }
func TestReaperChildExits(t *testing.T) {
	rp := startShell(t, `read in; echo "got $in"; echo "to stderr" >&2; exit 3`, time.Hour, nil)
	if _, err := io.WriteString(rp.Stdin(), "hello\n"); err != nil {
		t.Fatal(err)
	}
	if got := rp.line(t); got != "got hello" {
		t.Fatalf("stdout %q", got)
	}
	e := rp.wait(t)
	if e.State.ExitCode() != 3 || signalOf(e) != "" || e.Stopped || e.Cause != nil {
		t.Fatalf("exit %+v (%s), want code 3, not stopped, no cause", e, e.State)
	}
	select { // the stderr reader returned: what it read is there
	case got := <-rp.stderr:
		if got != "to stderr" {
			t.Fatalf("stderr %q", got)
		}
	default:
		t.Fatal("nothing read from stderr")
	}
	rp.Stop() // after the end: does nothing, returns
	if got := rp.Exit(); got != e {
		t.Fatalf("Exit changed after Stop: %+v", got)
	}
}

func TestReaperStop(t *testing.T) {
	tests := []struct {
		name   string
		script string
		grace  time.Duration // what the test waits for, never what it checks
		signal string
	}{
		{"exits on SIGTERM", `echo ready; exec sleep 1000`, time.Hour, "SIGTERM"},
		{"ignores SIGTERM, killed after the grace period", `trap "" TERM; echo ready; while :; do sleep 1; done`, 100 * time.Millisecond, "SIGKILL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rp := startShell(t, tc.script, tc.grace, nil)
			if got := rp.line(t); got != "ready" {
				t.Fatalf("stdout %q", got)
			}
			pgid := rp.PID()
			stopped := make(chan struct{})
			go func() { rp.Stop(); close(stopped) }()
			rp.Stop() // twice, concurrently
			<-stopped
			e := rp.wait(t)
			if !e.Stopped || signalOf(e) != tc.signal || e.Cause != nil {
				t.Fatalf("exit %+v (%s), want stopped by %s", e, e.State, tc.signal)
			}
			testutil.WaitFor(t, "the group is gone", func() bool { return len(groupMembers(t, pgid)) == 0 })
		})
	}
}

func TestReaperKilledFromOutside(t *testing.T) {
	rp := startShell(t, `echo ready; exec sleep 1000`, time.Hour, nil)
	rp.line(t)
	if err := syscall.Kill(rp.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if e := rp.wait(t); e.Stopped || signalOf(e) != "SIGKILL" || e.Cause != nil {
		t.Fatalf("exit %+v (%s), want killed by SIGKILL, not stopped", e, e.State)
	}
}

// When stdout ends first, the child is not waited for forever: it has the
// grace period after a clean end, and none after a read error.
func TestReaperStdoutEndsFirst(t *testing.T) {
	t.Run("child closes stdout", func(t *testing.T) {
		rp := startShell(t, `exec >&-; exec sleep 1000`, 100*time.Millisecond, nil)
		e := rp.wait(t)
		if e.Stopped || signalOf(e) != "SIGKILL" || e.Cause != nil {
			t.Fatalf("exit %+v (%s), want killed after the grace period, no cause", e, e.State)
		}
	})
	t.Run("read error", func(t *testing.T) {
		tooLarge := errors.New("message too large")
		rp := startShell(t, `exec sleep 1000`, time.Hour, tooLarge) // an hour: only the kill at once ends it
		e := rp.wait(t)
		if e.Stopped || signalOf(e) != "SIGKILL" || !errors.Is(e.Cause, tooLarge) {
			t.Fatalf("exit %+v (%s), want killed at once with the read error as cause", e, e.State)
		}
	})
}

// A grandchild in the child's process group is killed with it, whether
// the child exits by itself or is stopped, and reaped (once the child is
// gone it is the bridge's on Linux, its subreaper); it does not hold up
// Done with the pipes it inherited.
func TestReaperKillsTheGroup(t *testing.T) {
	tests := []struct {
		name string
		end  func(rp *reaped)
		stop bool
	}{
		{"child exits", func(rp *reaped) { rp.Stdin().Close() }, false}, // read gets EOF: exit 0
		{"child stopped", func(rp *reaped) { rp.Stop() }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rp := startShell(t, `sleep 1000 & echo $!; read x; exit 0`, time.Hour, nil)
			grandchild, err := strconv.Atoi(rp.line(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
			if pgid, err := syscall.Getpgid(grandchild); err != nil || pgid != rp.PID() {
				t.Fatalf("grandchild %d in group %d (%v), want the child's %d", grandchild, pgid, err, rp.PID())
			}
			tc.end(rp)
			if e := rp.wait(t); e.Stopped != tc.stop || (!tc.stop && e.State.ExitCode() != 0) {
				t.Fatalf("exit %+v (%s)", e, e.State)
			}
			testutil.WaitFor(t, "the grandchild is killed and reaped", func() bool { return processGone(grandchild) })
		})
	}
}
