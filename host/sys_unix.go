//go:build !windows

package main

import (
	"errors"
	"os/exec"
	"os/signal"
	"syscall"
)

// ignoreSIGPIPE keeps a write to a pipe Chrome already closed from killing
// the host; the write returns EPIPE instead and the host exits cleanly.
func ignoreSIGPIPE() { signal.Ignore(syscall.SIGPIPE) }

func isConnRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// detach makes cmd start in its own session, with no terminal, so it
// outlives the host and the browser.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}
