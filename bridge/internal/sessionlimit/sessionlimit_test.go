package sessionlimit

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// admitted records which sessions the table ended to make room.
type admitted struct {
	mu    sync.Mutex
	ended []string
}

func (a *admitted) admit(t *testing.T, tab *Table, client, name string) (*Session, error) {
	t.Helper()
	var s *Session
	s, err := tab.Admit(client, func() {
		a.mu.Lock()
		a.ended = append(a.ended, name)
		a.mu.Unlock()
		s.Release() // as a real session's end path does
	})
	return s, err
}

func TestAdmit(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		run        func(t *testing.T, tab *Table, a *admitted) error
		wantStatus int // 0: the last Admit succeeds
		wantEnded  []string
		wantTotal  int
	}{
		{
			name: "under the caps nothing is ended",
			opts: Options{Max: 4, PerClient: 2},
			run: func(t *testing.T, tab *Table, a *admitted) error {
				a.admit(t, tab, "alice", "a1")
				_, err := a.admit(t, tab, "bob", "b1")
				return err
			},
			wantTotal: 2,
		},
		{
			name: "at the client's cap its least recently used session goes",
			opts: Options{Max: 10, PerClient: 2},
			run: func(t *testing.T, tab *Table, a *admitted) error {
				s1, _ := a.admit(t, tab, "alice", "a1")
				a.admit(t, tab, "alice", "a2")
				s1.Begin() // a1 is now the most recently used
				s1.End()
				_, err := a.admit(t, tab, "alice", "a3")
				return err
			},
			wantEnded: []string{"a2"},
			wantTotal: 2,
		},
		{
			name: "a session with a request in flight is never ended",
			opts: Options{Max: 10, PerClient: 2},
			run: func(t *testing.T, tab *Table, a *admitted) error {
				s1, _ := a.admit(t, tab, "alice", "a1")
				s2, _ := a.admit(t, tab, "alice", "a2")
				s1.Begin()
				s2.Begin()
				_, err := a.admit(t, tab, "alice", "a3")
				return err
			},
			wantStatus: http.StatusTooManyRequests,
			wantTotal:  2,
		},
		{
			name: "a session in use between requests is passed over for the next idle one",
			opts: Options{Max: 10, PerClient: 2},
			run: func(t *testing.T, tab *Table, a *admitted) error {
				var s1 *Session
				s1, _ = tab.AdmitInUse("alice", func() { s1.Release() }, func() bool { return true })
				a.admit(t, tab, "alice", "a2")
				_, err := a.admit(t, tab, "alice", "a3")
				return err
			},
			wantEnded: []string{"a2"},
			wantTotal: 2,
		},
		{
			name: "at the global cap the same client's sessions go first",
			opts: Options{Max: 3, PerClient: 10},
			run: func(t *testing.T, tab *Table, a *admitted) error {
				a.admit(t, tab, "bob", "b1")
				a.admit(t, tab, "alice", "a1")
				a.admit(t, tab, "alice", "a2")
				_, err := a.admit(t, tab, "alice", "a3")
				return err
			},
			wantEnded: []string{"a1"},
			wantTotal: 3,
		},
		{
			name: "at the global cap another client's sessions are left alone",
			opts: Options{Max: 2, PerClient: 10},
			run: func(t *testing.T, tab *Table, a *admitted) error {
				a.admit(t, tab, "bob", "b1")
				a.admit(t, tab, "bob", "b2")
				_, err := a.admit(t, tab, "mallory", "m1")
				return err
			},
			wantStatus: http.StatusServiceUnavailable,
			wantTotal:  2,
		},
		{
			name: "released sessions give their place back",
			opts: Options{Max: 1, PerClient: 1},
			run: func(t *testing.T, tab *Table, a *admitted) error {
				s, _ := a.admit(t, tab, "alice", "a1")
				s.Release()
				s.Release() // twice is fine
				_, err := a.admit(t, tab, "bob", "b1")
				return err
			},
			wantTotal: 1,
		},
		{
			name: "negative caps mean no cap",
			opts: Options{Max: -1, PerClient: -1},
			run: func(t *testing.T, tab *Table, a *admitted) error {
				var err error
				for range 2000 {
					_, err = a.admit(t, tab, "alice", "x")
				}
				return err
			},
			wantTotal: 2000,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab := New(tc.opts)
			a := &admitted{}
			err := tc.run(t, tab, a)
			var r *Refusal
			switch {
			case tc.wantStatus == 0 && err != nil:
				t.Fatalf("Admit: %v", err)
			case tc.wantStatus != 0 && !errors.As(err, &r):
				t.Fatalf("Admit = %v, want a Refusal with status %d", err, tc.wantStatus)
			case tc.wantStatus != 0 && r.Status != tc.wantStatus:
				t.Fatalf("refusal status %d (%s), want %d", r.Status, r.Message, tc.wantStatus)
			case r != nil && (r.RetryAfterSeconds() != "5" || r.Message == ""):
				t.Fatalf("refusal %+v: want Retry-After 5 and a sentence", r)
			}
			if got := a.ended; len(got) != len(tc.wantEnded) || (len(got) > 0 && got[0] != tc.wantEnded[0]) {
				t.Fatalf("ended %v, want %v", got, tc.wantEnded)
			}
			if st := tab.Stats(); st.Sessions != tc.wantTotal {
				t.Fatalf("sessions = %d, want %d", st.Sessions, tc.wantTotal)
			}
		})
	}
}

// A flood of sessions from one client never holds more than its cap, and
// another client's sessions survive it.
func TestFloodStaysBounded(t *testing.T) {
	tab := New(Options{Max: 100, PerClient: 10, RetryAfter: time.Second})
	a := &admitted{}
	keep, err := a.admit(t, tab, ClientKey("127.0.0.1", "", "claude-code"), "keep")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				name := string(rune('a'+w)) + string(rune('a'+i%26))
				if _, err := a.admit(t, tab, ClientKey("127.0.0.1", "", name), name); err != nil {
					var r *Refusal
					if !errors.As(err, &r) || r.Status != http.StatusServiceUnavailable {
						t.Errorf("Admit: %v", err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	st := tab.Stats()
	if st.Sessions > 100 {
		t.Fatalf("%d sessions held, cap 100", st.Sessions)
	}
	for _, e := range a.ended {
		if e == "keep" {
			t.Fatal("another client's session was ended by the flood")
		}
	}
	keep.Release()
}

func TestClientKeyCutsNames(t *testing.T) {
	long := string(make([]byte, 1<<20))
	if k := ClientKey("127.0.0.1", "", long); len(k) > 100 {
		t.Fatalf("key of %d bytes from a 1 MiB name", len(k))
	}
}

func BenchmarkAdmitRelease(b *testing.B) {
	tab := New(Options{})
	for b.Loop() {
		s, err := tab.Admit("127.0.0.1", nil)
		if err != nil {
			b.Fatal(err)
		}
		s.Begin()
		s.End()
		s.Release()
	}
}
