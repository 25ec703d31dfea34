package stdio

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// sysProcAttr starts the child in a new process group.
//
// Missing on Windows: a job object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
// which would take the whole tree down if the bridge crashed. Until then
// shutdown kills the tree with taskkill /T, which finds descendants through
// their parent ids and so misses those whose parent already exited, and a
// crashed bridge leaves its children to notice their stdin closing.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// terminateGroup asks the child's process tree to exit. Console programs
// ignore taskkill without /F, so this is usually followed by killGroup
// after the grace period.
func terminateGroup(p *os.Process) error {
	return exec.Command("taskkill", "/T", "/PID", strconv.Itoa(p.Pid)).Run()
}

// killGroup kills the child's process tree.
func killGroup(p *os.Process) error {
	err := exec.Command("taskkill", "/T", "/F", "/PID", strconv.Itoa(p.Pid)).Run()
	if err != nil {
		// The tree may be gone already; make sure of the child at least.
		_ = p.Kill()
	}
	return nil
}

// exitSignal is always "": Windows has no signals.
func exitSignal(*os.ProcessState) string { return "" }
