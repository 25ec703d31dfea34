//go:build !unix

package testutil

import "testing"

// HangUp skips the test: there is no SIGHUP on this OS.
func HangUp(t testing.TB) { t.Skip("no SIGHUP on this OS") }
