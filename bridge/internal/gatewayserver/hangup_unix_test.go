//go:build unix

package gatewayserver

import (
	"os"
	"syscall"
	"testing"
)

// hangUp sends this process SIGHUP, as `kill -HUP` would the gateway.
func hangUp(t *testing.T) {
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
