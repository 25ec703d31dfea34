//go:build !unix

package gateway

import (
	"os"
	"syscall"
)

// setsidAttr: no sessions to leave outside unix.
func setsidAttr() *syscall.SysProcAttr { return nil }

// processGone reports whether no process has pid.
func processGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	p.Release()
	return false
}
