//go:build !linux && !windows && !darwin

package service

import (
	"errors"
	"runtime"
)

// errUnsupported is returned on systems where kardianos has no per-user
// service: it would install a system-wide rc script instead.
var errUnsupported = errors.New("a per-user Browser Bridge service is supported only on Linux with systemd, macOS and Windows, not on " + runtime.GOOS + "; the native host starts the bridge on demand, and `browserbridge start` starts it without a service manager")

// checkPlatform refuses every action.
func checkPlatform() error { return errUnsupported }

// validateCommand is never reached because checkPlatform refuses first.
func validateCommand(path string, args []string) error { return errUnsupported }

// explain returns err unchanged.
func explain(action string, err error) error { return err }

// unitDir is "": no unit file goes into the user's folders here.
func unitDir() (string, error) { return "", nil }
