//go:build !unix && !windows

package stdio

import (
	"os"
	"syscall"
)

// On other systems (plan9, wasip1) there are no process groups to use: the
// child alone is stopped.
func sysProcAttr() *syscall.SysProcAttr  { return nil }
func terminateGroup(p *os.Process) error { return p.Kill() }
func killGroup(p *os.Process) error      { return p.Kill() }
func exitSignal(*os.ProcessState) string { return "" }
