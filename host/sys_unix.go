//go:build !windows

package main

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// ignoreSIGPIPE keeps a write to a pipe Chrome already closed from killing
// the host; the write returns EPIPE instead and the host exits cleanly.
func ignoreSIGPIPE() { signal.Ignore(syscall.SIGPIPE) }

func isConnRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// startDetached starts a process in its own session, with no terminal and
// /dev/null for stdio, and reaps it if it exits while the host lives.
func startDetached(bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
