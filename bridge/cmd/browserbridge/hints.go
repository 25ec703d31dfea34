package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Every hint that tells the user to run this program goes through here, so
// that it names a command that works on this machine: `browserbridge start`
// works with a service manager and without one, and the program is named by
// its full path when "browserbridge" on PATH is not this program.

// startHint is the command that starts the bridge, e.g. "browserbridge start".
func startHint() string { return cliName() + " start" }

// stopHint is the command that stops the bridge.
func stopHint() string { return cliName() + " stop" }

// restartHint is the command that restarts the bridge, so that it reads its
// config or runs a new binary.
func restartHint() string { return cliName() + " restart" }

// installedSelf is the installed copy of this program once `install
// --prefix` has made one: the hints name that copy, not the build being
// installed from.
var installedSelf string

// cliName is how the user runs this program: "browserbridge" when that name
// on PATH is this very file, its absolute path otherwise (run from a build
// folder, or ~/.local/bin not on PATH).
func cliName() string {
	self, err := selfPath()
	if err != nil {
		return "browserbridge"
	}
	if installedSelf != "" {
		self = installedSelf
	}
	if onPath, err := exec.LookPath("browserbridge"); err == nil && sameFile(onPath, self) {
		return "browserbridge"
	}
	if strings.ContainsAny(self, " '\"$&;|<>()") {
		return strconv.Quote(self)
	}
	return self
}

// sameFile reports whether a and b name one file, through links.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(fa, fb)
}
