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
	WaitWithin(tb, WaitLimit, what, func() (bool, string) { return cond(), "" })
}

// WaitWithin is WaitFor with its own ceiling (work that takes longer
// than WaitLimit on a loaded machine: a cluster converging) and a
// condition that says why it does not hold yet, which the failure
// reports. what may be "" when the condition's why says it all (the
// e2e tests' conditions describe the state they saw).
func WaitWithin(tb testing.TB, limit time.Duration, what string, cond func() (ok bool, why string)) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			switch {
			case what == "":
				tb.Fatalf("after %v: %s", limit, why)
			case why != "":
				tb.Fatalf("waited %v for %s: %s", limit, what, why)
			default:
				tb.Fatalf("waited %v for %s", limit, what)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
