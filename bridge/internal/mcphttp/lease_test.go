package mcphttp

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// TestLeaseIdleReaping holds a Lease to the session engine's idle rule:
// a request being served holds the session, the timeout counts from the
// end of the last one, and something in use (InUse) holds it too. Time is
// synctest's: the sleeps take no time.
func TestLeaseIdleReaping(t *testing.T) {
	const timeout = time.Minute
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, l *Lease, ended func() bool, inUse *atomic.Bool)
	}{
		{"an idle session ends a timeout after its opening request", func(t *testing.T, l *Lease, ended func() bool, _ *atomic.Bool) {
			l.End()
			aliveThenEnded(t, timeout, ended)
		}},
		{"a request in progress holds it, and the timeout restarts at its end", func(t *testing.T, l *Lease, ended func() bool, _ *atomic.Bool) {
			l.End()
			if !l.Begin() {
				t.Fatal("Begin on a live lease reported it ended")
			}
			time.Sleep(3 * timeout)
			if ended() {
				t.Fatal("reaped with a request in progress")
			}
			l.End()
			aliveThenEnded(t, timeout, ended)
		}},
		{"in use between requests holds it", func(t *testing.T, l *Lease, ended func() bool, inUse *atomic.Bool) {
			inUse.Store(true)
			l.End()
			time.Sleep(3 * timeout)
			if ended() {
				t.Fatal("reaped while in use")
			}
			inUse.Store(false)
			time.Sleep(2 * time.Second) // the reaper looks again within a second
			if !ended() {
				t.Fatal("not reaped once no longer in use")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				var inUse atomic.Bool
				l, err := AdmitLease(nil, "c", LeaseOptions{Timeout: timeout, End: func() { calls.Add(1) }, InUse: inUse.Load})
				if err != nil {
					t.Fatal(err)
				}
				ended := func() bool {
					synctest.Wait()
					return calls.Load() > 0
				}
				tc.run(t, l, ended, &inUse)
				if n := calls.Load(); n != 1 {
					t.Fatalf("end called %d times", n)
				}
				if l.Begin() {
					t.Fatal("Begin on a reaped lease reported it alive")
				}
				l.Release()
			})
		})
	}
}

// aliveThenEnded checks that the session is alive a second before the
// timeout from now and ended a second after.
func aliveThenEnded(t *testing.T, timeout time.Duration, ended func() bool) {
	t.Helper()
	time.Sleep(timeout - time.Second)
	if ended() {
		t.Fatal("ended within the timeout")
	}
	time.Sleep(2 * time.Second)
	if !ended() {
		t.Fatal("still alive a timeout later")
	}
}

// TestLeaseAdmission: a lease takes its place in the table, is not evicted
// while begun, is evicted (its End called) once idle when its client needs
// room, and gives the place back on Release.
func TestLeaseAdmission(t *testing.T) {
	table := sessionlimit.New(sessionlimit.Options{Max: 10, PerClient: 1})
	var evicted atomic.Int32
	first, err := AdmitLease(table, "c", LeaseOptions{End: func() { evicted.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	// Begun for its opening request: a second session of the client is refused.
	var refusal *sessionlimit.Refusal
	if _, err := AdmitLease(table, "c", LeaseOptions{}); !errors.As(err, &refusal) {
		t.Fatalf("a second session while the first is begun: %v, want a refusal", err)
	}
	first.End()
	second, err := AdmitLease(table, "c", LeaseOptions{})
	if err != nil {
		t.Fatalf("a second session once the first is idle: %v", err)
	}
	if evicted.Load() != 1 || first.Begin() {
		t.Fatal("the idle first session was not ended to make room")
	}
	first.Release() // its end path releases it: nothing to give back twice
	second.End()
	second.Release()
	second.Release()
	if st := table.Stats(); st.Sessions != 0 || st.Evicted != 1 {
		t.Fatalf("table after release: %+v", st)
	}
}

// TestLeaseEndIfIdle holds EndIfIdle (an endpoint making room for a new
// session of the same user) to the idle rule, with no timeout to wait.
func TestLeaseEndIfIdle(t *testing.T) {
	var ended atomic.Int32
	var inUse atomic.Bool
	l, err := AdmitLease(nil, "c", LeaseOptions{End: func() { ended.Add(1) }, InUse: inUse.Load})
	if err != nil {
		t.Fatal(err)
	}
	if l.EndIfIdle() {
		t.Fatal("ended with its opening request being served")
	}
	l.End()
	inUse.Store(true)
	if l.EndIfIdle() {
		t.Fatal("ended while in use")
	}
	inUse.Store(false)
	before := l.LastUsed()
	l.Touch()
	if l.LastUsed().Before(before) {
		t.Fatal("Touch moved the last use back")
	}
	if !l.EndIfIdle() || ended.Load() != 1 {
		t.Fatalf("an idle lease: EndIfIdle did not end it (end called %d times)", ended.Load())
	}
	if l.EndIfIdle() || l.Begin() || ended.Load() != 1 {
		t.Fatal("an ended lease was ended again or begun")
	}
	l.Release()
}

func TestSessionTable(t *testing.T) {
	var table SessionTable[*int]
	if _, ok := table.Get("a"); ok || table.Len() != 0 {
		t.Fatal("the zero table is not empty")
	}
	old, cur := new(int), new(int)
	table.Put("a", old)
	table.Put("a", cur) // a session resumed under the same id
	table.Delete("a", old)
	if got, ok := table.Get("a"); !ok || got != cur {
		t.Fatal("deleting the ended session took the newer one with it")
	}
	if all := table.All(); len(all) != 1 || all[0] != cur {
		t.Fatalf("All = %v", all)
	}
	table.Delete("a", cur)
	if table.Len() != 0 {
		t.Fatal("Delete left the session")
	}
}

func TestVersionRules(t *testing.T) {
	for _, tc := range []struct {
		header         string
		session, prime bool
	}{
		{"", true, false},
		{"2024-11-05", false, false}, // legacy SSE only: no Streamable HTTP session
		{"2025-03-26", true, false},
		{"2025-06-18", true, false},
		{"2025-11-25", true, true},
		{VersionStateless, false, true},
		{"2099-01-01", false, true},
	} {
		t.Run(tc.header, func(t *testing.T) {
			if got := IsSessionVersion(tc.header); got != tc.session {
				t.Errorf("IsSessionVersion(%q) = %v", tc.header, got)
			}
			h := map[string][]string{}
			if tc.header != "" {
				h[HeaderProtocolVersion] = []string{tc.header}
			}
			v := RequestVersion(h)
			if tc.header == "" && v != VersionDefault {
				t.Errorf("RequestVersion without a header = %q", v)
			}
			if got := PrimesStreams(v); got != tc.prime {
				t.Errorf("PrimesStreams(%q) = %v", v, got)
			}
		})
	}
}
