//go:build !windows

package main

import (
	"errors"
	"os/exec"
	"syscall"
)

// detach makes cmd start in a session of its own, with no controlling
// terminal, so that it outlives this command and the terminal it ran in.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

// terminate asks process pid to exit (SIGTERM).
func terminate(pid int) error { return signalPID(pid, syscall.SIGTERM) }

// kill ends process pid at once (SIGKILL).
func kill(pid int) error { return signalPID(pid, syscall.SIGKILL) }

// termName names what terminate sends, for messages.
const termName = "SIGTERM"

func signalPID(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return errors.New("no such process")
	}
	err := syscall.Kill(pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

// signalAlive reports whether pid exists, zombies included.
func signalAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
