//go:build unix && !linux

package gwbench

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the process in a group of its own, so that the
// terminal's Ctrl-C reaches only us and we stop its group.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
