//go:build linux

package gwbench

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the process in a group of its own (so that the
// terminal's Ctrl-C reaches only us, and we stop its group), and has the
// kernel kill it if gwbench dies without stopping it.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
