//go:build unix

package gateway

import "syscall"

// setsidAttr starts a process in a session of its own, out of its
// parent's process group, as a daemon does.
func setsidAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// processGone reports whether no process has pid (a zombie still counts
// as there: nobody reaped it).
func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}
