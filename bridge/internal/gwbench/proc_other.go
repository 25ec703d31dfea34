//go:build !unix

package gwbench

import (
	"os"
	"os/exec"
)

func setProcAttrs(*exec.Cmd) {}

// signalGroup kills the process: there are no process groups to signal here.
func signalGroup(cmd *exec.Cmd, _ bool) { _ = cmd.Process.Kill() }

func killPID(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
