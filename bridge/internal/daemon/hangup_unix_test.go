//go:build unix

package daemon

import (
	"os"
	"syscall"
	"testing"
)

// hangUp sends this process SIGHUP, as `kill -HUP` would the bridge.
func hangUp(t *testing.T) {
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
