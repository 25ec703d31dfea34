package httpguard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
)

// fakeSleep stands for the guard's wait: it records each wait and moves the
// fake clock on by it, so a test of waiting takes no time.
type fakeSleep struct {
	clock *fakeClock
	mu    sync.Mutex
	waits []time.Duration
}

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) bool {
	f.mu.Lock()
	f.waits = append(f.waits, d)
	f.mu.Unlock()
	f.clock.Advance(d)
	return true
}

// newTestGuard returns the guard New makes of opts, with its waits faked.
func newTestGuard(t *testing.T, opts Options, next http.Handler) (*guard, *fakeClock, *fakeSleep) {
	t.Helper()
	clock := newFakeClock()
	opts.Now = clock.Now
	h, err := New(opts, next)
	if err != nil {
		t.Fatal(err)
	}
	g := h.(*guard)
	fs := &fakeSleep{clock: clock}
	g.sleep = fs.sleep
	return g, clock, fs
}

func serve(h http.Handler, remote string, header map[string]string, target string) *httptest.ResponseRecorder {
	r := request{method: http.MethodPost, target: target, body: "{}", headers: header}.build()
	r.RemoteAddr = remote
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// TestInventedSessionIDs is the finding: a client that invents a session id
// (or an address-like header) per request must stay within its address's limit.
func TestInventedSessionIDs(t *testing.T) {
	tests := []struct {
		name   string
		remote string
		header func(i int) map[string]string
		target func(i int) string
	}{
		{"Mcp-Session-Id", "192.0.2.9:4000",
			func(i int) map[string]string { return map[string]string{"Mcp-Session-Id": fmt.Sprint("invented-", i)} }, nil},
		{"?sessionId=", "192.0.2.9:4000", nil, func(i int) string { return fmt.Sprint("/message?sessionId=invented-", i) }},
		{"X-Forwarded-For", "192.0.2.9:4000",
			func(i int) map[string]string {
				return map[string]string{"X-Forwarded-For": fmt.Sprint("10.0.", i/250, ".", i%250)}
			}, nil},
		{"another port per request", "", nil, nil},
		{"loopback, Mcp-Session-Id", "127.0.0.1:4000",
			func(i int) map[string]string { return map[string]string{"Mcp-Session-Id": fmt.Sprint("invented-", i)} }, nil},
		{"loopback, another 127/8 address per request", "", nil, nil},
	}
	const rate, burst, requests = 100, 100, 10000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := baseOptions()
			opts.RatePerSecond, opts.Burst = rate, burst
			opts.LoopbackRatePerSecond, opts.LoopbackBurst = rate, burst
			next := &nextHandler{}
			g, _, _ := newTestGuard(t, opts, next) // the clock stands still: no refill
			refused := 0
			for i := range requests {
				remote, target := tc.remote, "/mcp"
				switch tc.name {
				case "another port per request":
					remote = fmt.Sprintf("192.0.2.9:%d", 1024+i)
				case "loopback, another 127/8 address per request":
					remote = fmt.Sprintf("127.%d.%d.%d:1", i>>16&0xff, i>>8&0xff, i&0xff)
				}
				var header map[string]string
				if tc.header != nil {
					header = tc.header(i)
				}
				if tc.target != nil {
					target = tc.target(i)
				}
				if rec := serve(g, remote, header, target); rec.Code == http.StatusTooManyRequests {
					refused++
				}
			}
			if n := next.count(); n != burst {
				t.Errorf("%d of %d requests served, want the burst, %d", n, requests, burst)
			}
			if refused != requests-burst {
				t.Errorf("%d refused, want %d", refused, requests-burst)
			}
		})
	}
}

func TestRateKeyHasNoToken(t *testing.T) {
	opts := baseOptions()
	opts.ListenAddr = "0.0.0.0:3456"
	opts.Token = testToken
	opts.RatePerSecond = 10
	g, _, _ := newTestGuard(t, opts, &nextHandler{})
	if rec := serve(g, "192.0.2.5:1", map[string]string{"Authorization": "Bearer " + testToken}, "/mcp"); rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	sum := sha256.Sum256([]byte(testToken))
	want := peerKey{addr: netip.MustParseAddr("192.0.2.5")}
	copy(want.tokenID[:], sum[:])
	g.remote.mu.Lock()
	defer g.remote.mu.Unlock()
	for k := range g.remote.index {
		if k != want {
			t.Errorf("key = %+v, want %+v", k, want)
		}
		if bytes.Contains(k.tokenID[:], []byte(testToken[:4])) {
			t.Error("the key holds the token's bytes")
		}
	}
	if len(g.remote.index) != 1 {
		t.Errorf("%d keys, want 1", len(g.remote.index))
	}
}

func TestKeyTableBounded(t *testing.T) {
	opts := baseOptions()
	opts.RatePerSecond = 1
	g, _, _ := newTestGuard(t, opts, &nextHandler{})
	for i := range 3 * maxClients {
		v := uint32(11<<24 + i)
		serve(g, fmt.Sprintf("%d.%d.%d.%d:1", v>>24, v>>16&0xff, v>>8&0xff, v&0xff), nil, "/mcp")
		if i%997 == 0 {
			if n := g.remote.size(); n > maxClients {
				t.Fatalf("%d keys after %d addresses, want at most %d", n, i+1, maxClients)
			}
		}
	}
	if n := g.remote.size(); n != maxClients {
		t.Errorf("%d keys, want %d", n, maxClients)
	}
	checkList(t, g.remote)
}

func TestWaitInsteadOfRefusing(t *testing.T) {
	t.Run("back to back requests are slowed, never refused", func(t *testing.T) {
		opts := baseOptions()
		opts.LoopbackRatePerSecond, opts.LoopbackBurst, opts.MaxWait = 100, 10, time.Second
		next := &nextHandler{}
		g, _, fs := newTestGuard(t, opts, next)
		const n = 20000
		for i := range n {
			if rec := serve(g, "127.0.0.1:5000", nil, "/message?sessionId=abc"); rec.Code != 200 {
				t.Fatalf("request %d: status %d: %s", i, rec.Code, rec.Body.String())
			}
		}
		if next.count() != n {
			t.Fatalf("%d served, want %d", next.count(), n)
		}
		// Past the burst, each request waits for the next token: 10 ms.
		if got := len(fs.waits); got != n-10 {
			t.Errorf("%d requests waited, want %d", got, n-10)
		}
		for _, w := range fs.waits {
			if w <= 0 || w > 10*time.Millisecond+time.Microsecond {
				t.Fatalf("a wait of %v; at 100/s a request waits at most 10 ms", w)
			}
		}
	})
	t.Run("a burst beyond rate x MaxWait is refused", func(t *testing.T) {
		opts := baseOptions()
		opts.RatePerSecond, opts.Burst, opts.MaxWait = 100, 10, 500*time.Millisecond
		g, _, _ := newTestGuard(t, opts, &nextHandler{})
		// Nothing sleeps for real here: the requests arrive at one instant.
		waited, refused := 0, 0
		for range 200 {
			key, lim, _ := g.peer(&http.Request{RemoteAddr: "192.0.2.1:1"})
			d, ok := lim.Reserve(key)
			switch {
			case !ok:
				refused++
			case d > 0:
				waited++
				if d > opts.MaxWait {
					t.Fatalf("admitted with a wait of %v, beyond MaxWait", d)
				}
			}
		}
		// 10 at once, 50 more within half a second, the rest refused.
		if waited != 50 || refused != 140 {
			t.Errorf("waited %d, refused %d; want 50 and 140", waited, refused)
		}
		rec := serve(g, "192.0.2.1:1", nil, "/mcp")
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 429", rec.Code)
		}
		if ra := rec.Header().Get("Retry-After"); ra != "1" {
			t.Errorf("Retry-After %q, want 1", ra)
		}
		checkRefusal(t, rec, "Too many requests from this address", `"rate_limit"`, "100 a second")
	})
	t.Run("a client that goes away while it waits is dropped", func(t *testing.T) {
		opts := baseOptions()
		opts.LoopbackRatePerSecond, opts.LoopbackBurst, opts.MaxWait = 1, 1, time.Minute
		next := &nextHandler{}
		h, err := New(opts, next)
		if err != nil {
			t.Fatal(err)
		}
		serve(h, "127.0.0.1:1", nil, "/mcp") // takes the only token
		ctx, cancel := context.WithCancel(context.Background())
		r := request{method: http.MethodPost, body: "{}"}.build().WithContext(ctx)
		r.RemoteAddr = "127.0.0.1:1"
		done := make(chan struct{})
		go func() { h.ServeHTTP(httptest.NewRecorder(), r); close(done) }()
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a request kept waiting after its client went away")
		}
		if n := next.count(); n != 1 {
			t.Errorf("next served %d requests, want 1: the abandoned one must not reach it", n)
		}
	})
}

func TestKnownSessionLimit(t *testing.T) {
	known := map[string]bool{"alpha": true, "beta": true}
	lookup := func(r *http.Request) (string, bool) {
		id := r.Header.Get("Mcp-Session-Id")
		return id, known[id]
	}
	type step struct {
		session string
		remote  string // "192.0.2.1:1" if empty
		want    int
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"each known session has its own inner limit", []step{
			{session: "alpha", want: 200}, {session: "alpha", want: 200},
			{session: "alpha", want: 429}, // alpha's 2, not the address's 5
			{session: "beta", want: 200}, {session: "beta", want: 200},
			{session: "beta", want: 429},
			{want: 200}, // no session: only the address's limit
			{want: 429}, // the address's 5 are spent (refused ones gave theirs back)
		}},
		{"an unknown id is not a session: only the address's limit applies", []step{
			{session: "invented-1", want: 200}, {session: "invented-2", want: 200}, {session: "invented-3", want: 200},
			{session: "invented-4", want: 200}, {session: "invented-5", want: 200},
			{session: "invented-6", want: 429},
		}},
		{"a known session's limit follows it to another address", []step{
			{session: "alpha", remote: "192.0.2.1:1", want: 200},
			{session: "alpha", remote: "192.0.2.2:1", want: 200},
			{session: "alpha", remote: "192.0.2.3:1", want: 429},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := baseOptions()
			opts.RatePerSecond, opts.Burst = 1, 5
			opts.SessionRatePerSecond, opts.SessionBurst = 1, 2
			opts.KnownSession = lookup
			g, _, _ := newTestGuard(t, opts, &nextHandler{})
			for i, s := range tc.steps {
				remote := s.remote
				if remote == "" {
					remote = "192.0.2.1:1"
				}
				var h map[string]string
				if s.session != "" {
					h = map[string]string{"Mcp-Session-Id": s.session}
				}
				rec := serve(g, remote, h, "/mcp")
				if rec.Code != s.want {
					t.Fatalf("step %d: status %d, want %d: %s", i, rec.Code, s.want, rec.Body.String())
				}
				if rec.Code == 429 && s.session != "" && known[s.session] && !strings.Contains(rec.Body.String(), "in this session") {
					t.Errorf("step %d: refusal does not say the session is at fault: %s", i, rec.Body.String())
				}
			}
		})
	}
	t.Run("options", func(t *testing.T) {
		opts := baseOptions()
		opts.SessionRatePerSecond = 10
		if _, err := New(opts, &nextHandler{}); err == nil || !strings.Contains(err.Error(), "KnownSession") {
			t.Errorf("SessionRatePerSecond without KnownSession: %v", err)
		}
	})
}

// TestLoopbackClientNeverRefused sends 20,000 requests back to back over a
// real socket, as fast as it can, through the guard with the bridge's
// default limits, and then 300 with a limit so low that even a slow machine
// outruns it, so that the client must wait for its turn.
func TestLoopbackClientNeverRefused(t *testing.T) {
	defaults, err := config.Decode(strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	rate, burst := defaults.LoopbackRate()
	tests := []struct {
		name   string
		rate   float64
		burst  int
		n      int
		waited bool
	}{
		{"bridge defaults", rate, burst, 20000, false},
		{"a limit the client outruns", 100, 1, 300, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(nil)
			opts := baseOptions()
			opts.ListenAddr = srv.Listener.Addr().String()
			opts.RatePerSecond, opts.Burst = 1000, 2000
			opts.LoopbackRatePerSecond, opts.LoopbackBurst, opts.MaxWait = tc.rate, tc.burst, defaults.RateWaitDuration()
			next := &nextHandler{}
			h, err := New(opts, next)
			if err != nil {
				t.Fatal(err)
			}
			g := h.(*guard)
			var waits sync.Map
			g.sleep = func(ctx context.Context, d time.Duration) bool {
				waits.Store(d, true)
				return sleep(ctx, d)
			}
			srv.Config.Handler = h
			srv.Start()
			t.Cleanup(srv.Close)
			client := srv.Client()
			body := []byte(`{"jsonrpc":"2.0","method":"notifications/message"}`)
			for i := range tc.n {
				resp, err := client.Post(srv.URL+"/message?sessionId=s", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("request %d of %d: status %d", i+1, tc.n, resp.StatusCode)
				}
			}
			waited := false
			waits.Range(func(any, any) bool { waited = true; return false })
			if tc.waited && !waited {
				t.Error("no request waited: the client never outran the limit, so the test proved nothing")
			}
			t.Logf("%d requests served; some waited: %v", next.count(), waited)
		})
	}
}

// TestPerPeriod: NewPerPeriod's limiter, the one for guesses: n a period
// per key, Spent counting what a key used, Refund giving one back, and a
// full table that forgets a key only once its bucket has refilled, so
// more keys than it holds share one bucket instead of each getting a
// fresh one.
func TestPerPeriod(t *testing.T) {
	t.Run("n a period", func(t *testing.T) {
		clock := newFakeClock()
		l := NewPerPeriod[string](5, time.Minute, 100, clock.Now)
		for i := range 5 {
			if !l.Allow("a") {
				t.Fatalf("attempt %d of 5 refused", i+1)
			}
		}
		if l.Allow("a") || l.Spent("a") != 5 || l.Spent("b") != 0 {
			t.Fatalf("a sixth attempt passed, or spent a=%d b=%d; want 5 and 0", l.Spent("a"), l.Spent("b"))
		}
		l.Refund("a")
		if l.Spent("a") != 4 || !l.Allow("a") {
			t.Fatalf("after a refund: spent %d, want 4 and one more attempt", l.Spent("a"))
		}
		clock.Advance(time.Minute)
		if l.Spent("a") != 0 {
			t.Fatalf("a period later: spent %d, want 0", l.Spent("a"))
		}
	})
	t.Run("a full table shares one bucket among newcomers", func(t *testing.T) {
		clock := newFakeClock()
		l := NewPerPeriod[string](2, time.Minute, 3, clock.Now)
		for _, k := range []string{"a", "b", "c"} {
			l.Allow(k)
		}
		// The table is full of keys whose buckets are not full: every new
		// key draws on the one shared bucket, 2 in all, not 2 each.
		allowed := 0
		for i := range 10 {
			if l.Allow(fmt.Sprint("spray-", i)) {
				allowed++
			}
		}
		if allowed != 2 || l.size() != 3 || l.Spent("spray-99") != 2 {
			t.Fatalf("%d of 10 new keys allowed (table %d, shared spent %d); want 2, 3 and 2", allowed, l.size(), l.Spent("spray-99"))
		}
		if !l.Allow("a") {
			t.Fatal("a key in the table lost its own bucket to the spray")
		}
		// Once the oldest key's bucket has refilled, forgetting it costs
		// nothing: a newcomer takes its place with a bucket of its own.
		clock.Advance(time.Minute)
		if !l.Allow("new") || !l.Allow("new") || l.Spent("new") != 2 {
			t.Fatalf("after the buckets refilled, a newcomer did not get a bucket of its own (spent %d)", l.Spent("new"))
		}
		checkList(t, l)
	})
}
