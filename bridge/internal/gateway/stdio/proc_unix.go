//go:build unix

package stdio

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in a process group of its own (its pid is the
// group id), so that stopping the group also stops whatever the server
// spawned (npx starts a shell that starts node). On Linux the child also
// gets SIGKILL if the bridge dies (see setPdeathsig).
func sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(a)
	return a
}

// terminateGroup asks every process of the child's group to exit.
func terminateGroup(p *os.Process) error { return signalGroup(p, unix.SIGTERM) }

// killGroup kills every process left in the child's group. The group id
// cannot be reused while any member lives, so this is safe after the
// leader has been reaped.
func killGroup(p *os.Process) error { return signalGroup(p, unix.SIGKILL) }

func signalGroup(p *os.Process, sig syscall.Signal) error {
	err := unix.Kill(-p.Pid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// exitSignal names the signal that killed the process, or "".
func exitSignal(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return unix.SignalName(ws.Signal())
	}
	return ""
}
