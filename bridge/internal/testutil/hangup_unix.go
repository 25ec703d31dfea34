//go:build unix

package testutil

import (
	"os"
	"syscall"
	"testing"
)

// HangUp sends this process SIGHUP, as `kill -HUP` would the bridge or
// the gateway (a reload).
func HangUp(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
