package testutil

import (
	"testing"
	"time"
)

// WaitLimit is how long WaitFor waits before it fails a test: a ceiling
// for a loaded machine, never a guess at how long the work takes.
const WaitLimit = time.Minute

// WaitFor waits for cond to hold, asking every 10 ms, and fails the test,
// saying what it waited for, when it does not within WaitLimit. Tests wait
// on a condition with it, never on a sleep.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(WaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %v for %s", WaitLimit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
