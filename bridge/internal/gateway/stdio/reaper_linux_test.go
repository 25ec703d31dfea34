//go:build linux

package stdio

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// On Linux a grandchild that left the child's session and group (setsid,
// as daemons do) is found through the family, killed when the child exits,
// and reaped by the bridge, its subreaper.
func TestReaperStopsTheFamily(t *testing.T) {
	rp := startShell(t, `setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; read x; exit 0`, time.Hour, nil)
	grandchild, err := strconv.Atoi(rp.line(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	// setsid(1) execs sleep in the process it was started as (it is not a
	// group leader), once it has left the group: wait for that.
	testutil.WaitFor(t, "the grandchild left the child's session", func() bool {
		sid, err := unix.Getsid(grandchild)
		return err == nil && sid == grandchild
	})
	if pgid, _ := syscall.Getpgid(grandchild); pgid == rp.PID() {
		t.Fatalf("grandchild %d is still in the child's group", grandchild)
	}
	rp.Stdin().Close()
	if e := rp.wait(t); e.State.ExitCode() != 0 || e.Stopped {
		t.Fatalf("exit %+v (%s), want code 0", e, e.State)
	}
	testutil.WaitFor(t, "the setsid grandchild is killed and reaped", func() bool { return processGone(grandchild) })
}
