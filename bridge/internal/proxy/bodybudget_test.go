package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// rssBytes is this process's resident set size (Linux).
func rssBytes(tb testing.TB) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// discardingBrowser is a browser extension of user that reads each message
// from the proxy without keeping it (only its first bytes, for the id) and
// answers every request with a small result: what big bodies cost the
// proxy, not the fake, is what the process's memory then shows.
func discardingBrowser(t *testing.T, tp *testProxy, user string) {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(tp.url+relaywire.PathExtension, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	tok := tp.token(t, user, token.KindExtension)
	idRe := regexp.MustCompile(`"id":("(?:[^"\\]|\\.)*"|[0-9]+)`)
	go func() {
		head := make([]byte, 512)
		for {
			_, r, err := ws.NextReader()
			if err != nil {
				return
			}
			n, _ := io.ReadFull(r, head)
			io.Copy(io.Discard, r)
			m := idRe.FindSubmatch(head[:n])
			if m == nil || !bytes.Contains(head[:n], []byte(`"method"`)) {
				continue // a notification
			}
			var res string
			switch {
			case bytes.Contains(head[:n], []byte(`"authenticate"`)):
				res = fmt.Sprintf(`{"name":"Chrome","accessToken":%q}`, tok)
			case bytes.Contains(head[:n], []byte(`"tools/list"`)):
				res = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
			default:
				res = `{"content":[{"type":"text","text":"received"}]}`
			}
			ws.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":`+string(m[1])+`,"result":`+res+`}`))
		}
	}()
}

// bigCall is a tools/call whose body, of about size bytes, is made as it is
// sent: the client holds none of it.
func bigCall(id, size int) (io.Reader, int64) {
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"`, id)
	tail := `"}}}`
	n := size - len(head) - len(tail)
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeatByte('a'), int64(n)), strings.NewReader(tail)), int64(size)
}

type repeatByte byte

func (b repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestBigBodiesBounded is issue 27's second finding: ten concurrent 15 MiB
// POSTs took the proxy from 47 to 357 MB, still 230 MB minutes later. Now
// the bodies in flight are bounded per user and in all, each is read into
// a buffer of its length, and is given up once handed on; the process's
// RSS (the proxy, and clients and a browser that keep nothing) is measured
// before, at its peak during, and after the burst.
func TestBigBodiesBounded(t *testing.T) {
	const size = 15 << 20
	posts := 30 // twice what the old proxy took to 357 MB, and more than the budget holds many times over
	if raceBuild {
		posts = 10 // the race detector makes each body slow to scan
	}
	// A wait long enough for the whole burst on a busy machine: the test
	// measures memory, and that the budget slows a burst rather than
	// refusing it; how long a body may wait is TestBodyBudgetWaits'.
	// The read timeout likewise: a body's read deadline runs from its
	// request's start, its wait for room included, and under the race
	// detector with the machine busy a 15 MiB body trickles.
	tp := runHTTPProxy(t, Options{BodyWait: 5 * time.Minute, ReadTimeout: 5 * time.Minute}, nil)
	discardingBrowser(t, tp, "alice")
	tok := accessToken(t, passwordPerson(), tp.public()+"/mcp")
	status, h, body := rawPost(t, tp.public()+"/mcp", tok, initBody)
	sid := h.Get(mcphttp.HeaderSessionID)
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	testutil.WaitFor(t, "the browser registered", func() bool { return len(tp.srv.extensionsOf("alice", relaywire.ExtensionKindBrowser)) == 1 })

	runtime.GC()
	before := rssBytes(t)
	var peak atomic.Int64
	peak.Store(before)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // a measurement, not a synchronisation
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				if r := rssBytes(t); r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()

	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	start := time.Now()
	for i := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := httpClientFrom(loopback(10 + i))
			client.Timeout = 5 * time.Minute // the burst's bodies wait their turn
			defer client.CloseIdleConnections()
			r, n := bigCall(100+i, size)
			req, _ := http.NewRequest(http.MethodPost, tp.public()+"/mcp", r)
			req.ContentLength = n
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set(mcphttp.HeaderSessionID, sid)
			req.Header.Set(mcphttp.HeaderProtocolVersion, "2025-11-25")
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("POST %d: %v", i, err)
				return
			}
			text, _ := io.ReadAll(bufio.NewReader(resp.Body))
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK && bytes.Contains(text, []byte("received")):
				ok.Add(1)
			case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
				refused.Add(1)
				if !bytes.Contains(text, []byte("request bytes of yours in flight")) {
					t.Errorf("POST %d refused without the budget's sentence: %d %s", i, resp.StatusCode, text)
				}
			default:
				t.Errorf("POST %d: %d %.300s", i, resp.StatusCode, text)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stopSampling)
	<-sampled

	// The test asks for a collection instead of waiting for Go's forced one
	// (every 2 minutes); the runtime's scavenger then returns the pages.
	runtime.GC()
	mb := func(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }
	t.Logf("%d POSTs of %d MiB in %v: %d answered, %d refused; RSS before %s, peak %s (+%s)",
		posts, size>>20, took.Round(time.Millisecond), ok.Load(), refused.Load(), mb(before), mb(peak.Load()), mb(peak.Load()-before))
	if raceBuild {
		// The race detector's shadow memory multiplies RSS: the figures
		// are logged; the bounds are checked without -race.
		if ok.Load() != int64(posts) {
			t.Errorf("%d of %d answered", ok.Load(), posts)
		}
		return
	}
	if ok.Load() != int64(posts) {
		t.Errorf("%d of %d answered; the budget slows a burst, it does not refuse one that fits in its wait", ok.Load(), posts)
	}
	// Two bodies of one user in flight (32 MiB) while they are read and
	// handed on, the forwarded copies on their way out, and the garbage
	// collector's headroom: five to seven times the budget, whatever the
	// number of bodies (the old proxy held all of them at once).
	if grew := peak.Load() - before; grew > 10*DefaultMaxBodyBytesPerUser {
		t.Errorf("RSS grew by %s during the burst; the budget of one user is %s", mb(grew), mb(DefaultMaxBodyBytesPerUser))
	}
	var after int64
	testutil.WaitFor(t, fmt.Sprintf("RSS to come back within 96 MB of the %s before the burst", mb(before)), func() bool {
		after = rssBytes(t)
		return after <= before+96<<20
	})
	t.Logf("RSS after the burst: %s", mb(after))
}

// TestBodyBudgetWaits: a body that finds no room waits for a release, and
// past the wait is refused with the user's or the proxy's reason; a
// release wakes a waiting body at once.
func TestBodyBudgetWaits(t *testing.T) {
	ctx := context.Background()
	b := newBodyBudget(10, 15, 20*time.Millisecond)
	relA, err := b.acquire(ctx, "alice", 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(ctx, "alice", 1); !errors.Is(err, errBodyUser) {
		t.Fatalf("alice over her budget: %v, want errBodyUser", err)
	}
	if _, err := b.acquire(ctx, "bob", 6); !errors.Is(err, errBodyGlobal) {
		t.Fatalf("bob over the proxy's budget: %v, want errBodyGlobal", err)
	}
	relB, err := b.acquire(ctx, "bob", 5)
	if err != nil {
		t.Fatal(err)
	}
	relB()
	relB() // twice is harmless
	// A body waiting (with a wait far longer than the test) gets its room
	// when alice's first is released.
	long := newBodyBudget(10, 15, time.Hour)
	held, _ := long.acquire(ctx, "alice", 10)
	got := make(chan error, 1)
	go func() {
		rel, err := long.acquire(ctx, "alice", 4)
		if rel != nil {
			rel()
		}
		got <- err
	}()
	held()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiting body after a release: %v", err)
		}
	case <-time.After(ceiling):
		t.Fatal("a release did not wake the waiting body")
	}
	relA()
}
