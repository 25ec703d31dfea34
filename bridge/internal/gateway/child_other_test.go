//go:build !unix

package gateway

import "syscall"

// setsidAttr: no sessions to leave outside unix.
func setsidAttr() *syscall.SysProcAttr { return nil }
