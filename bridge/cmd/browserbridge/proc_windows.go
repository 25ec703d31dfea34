package main

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// detach makes cmd start with no console, in a process group of its own, so
// that it outlives this command and the console it ran in.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS,
		HideWindow:    true,
	}
}

// terminate ends process pid: Windows has no SIGTERM to send a process
// without a console, so this is kill.
func terminate(pid int) error { return kill(pid) }

// termName names what terminate does, for messages.
const termName = "TerminateProcess"

// kill ends process pid at once.
func kill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil // already gone
	}
	defer p.Release()
	if err := p.Kill(); err != nil && alive(pid) {
		return err
	}
	return nil
}

// alive reports whether process pid is still running.
func alive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return false
	}
	return code == 259 // STILL_ACTIVE
}

// processesOf finds no processes by program here; uninstall stops the hosts
// the bridge knows of instead.
func processesOf(exe string) []int { return nil }
