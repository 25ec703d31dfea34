//go:build unix

package gwbench

import (
	"os/exec"
	"syscall"
)

// signalGroup sends SIGTERM, or SIGKILL when kill is set, to the process
// group cmd leads.
func signalGroup(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

func killPID(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
