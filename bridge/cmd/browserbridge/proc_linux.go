package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// alive reports whether process pid exists and has not exited: a zombie,
// dead but not yet reaped by its parent, counts as gone.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return signalAlive(pid) && !os.IsNotExist(err)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	switch b[i+2] {
	case 'Z', 'X':
		return false
	}
	return true
}

// processesOf lists the live processes running the program at exe (one
// that was replaced or deleted since it started counts too).
func processesOf(exe string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	exe = filepath.Clean(exe)
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		target, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		if strings.TrimSuffix(target, " (deleted)") == exe && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
