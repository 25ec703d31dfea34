//go:build !windows && !linux

package main

// alive reports whether process pid exists.
func alive(pid int) bool { return signalAlive(pid) }

// processesOf finds no processes by program here; uninstall stops the hosts
// the bridge knows of instead.
func processesOf(exe string) []int { return nil }
