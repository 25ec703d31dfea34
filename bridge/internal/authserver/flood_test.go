//go:build linux

package authserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// The floods of issue 27, each from many loopback addresses standing in for
// an attacker who has many: every connection is a real socket dialled from
// 127.0.0.n, and the server counts it under that address as it would a
// client on the internet. Linux only: it alone answers on all of
// 127.0.0.0/8 without configuration.

// floodWait bounds every wait in these tests: generous, so that a busy
// machine is slow, not failing.
const floodWait = 2 * time.Minute

// loopbackAddr is 127.0.0.n.
func loopbackAddr(n int) string { return fmt.Sprintf("127.0.0.%d", n) }

// fromAddr is an HTTP transport whose connections come from 127.0.0.n.
func fromAddr(t testing.TB, n int) *http.Transport {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(loopbackAddr(n))}, Timeout: floodWait}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 32}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// browserFrom is a person's browser on 127.0.0.n.
func (w *flowWorld) browserFrom(n int) *webBrowser {
	b := w.newBrowser()
	b.http.Transport = fromAddr(w.t, n)
	return b
}

// registerFrom posts a registration from 127.0.0.n (or on client c).
func registerFrom(t testing.TB, c *http.Client, issuer string, meta any) (int, http.Header, map[string]any) {
	body, _ := json.Marshal(meta)
	resp, err := c.Post(issuer+"/oauth/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Errorf("register: %v", err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, resp.Header, out
}

// claudeRegistration is what claude.ai sends to register.
var claudeRegistration = map[string]any{"redirect_uris": []string{claudeCallback}, "client_name": "Claude",
	"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}}

// TestFloodRegistrations: registrations from many addresses cannot fill
// the server. One address gets RegistrationsPerMinute a minute; beyond
// MaxClients the registrations that never obtained a token make room, the
// flooding addresses' first; claude.ai's registration, made in the middle
// of the flood, succeeds and outlives the rest of it; and a state file an
// older version filled is emptied of its never-used registrations.
func TestFloodRegistrations(t *testing.T) {
	// 200 slots and 121 addresses: whatever the floods do, some address
	// holds two, and loses one before claude.ai's address loses its only.
	const maxClients = 200
	e := newTestEnv(t, func(c *Config) { c.Limits.MaxClients = maxClients })
	perAddr := e.s.cfg.Limits.RegistrationsPerMinute
	flood := func(first, addrs, each int) (created, limited, other int64) {
		var wg sync.WaitGroup
		for a := range addrs {
			c := &http.Client{Transport: fromAddr(t, first+a), Timeout: floodWait}
			wg.Go(func() {
				for range each {
					status, h, _ := registerFrom(t, c, e.ts.URL, map[string]any{"redirect_uris": []string{"https://attacker.example/cb"}, "token_endpoint_auth_method": "none"})
					switch {
					case status == http.StatusCreated:
						atomic.AddInt64(&created, 1)
					case status == http.StatusTooManyRequests && h.Get("Retry-After") == "60":
						atomic.AddInt64(&limited, 1)
					default:
						atomic.AddInt64(&other, 1)
					}
				}
			})
		}
		wg.Wait()
		return
	}
	count := func() int {
		n, err := e.s.kv.Count(context.Background(), bucketClients)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	start := time.Now()
	created, limited, other := flood(2, 60, perAddr+2)
	t.Logf("first wave, 60 addresses × %d: %d registered, %d refused (429), %d other, in %v; %d kept (cap %d)",
		perAddr+2, created, limited, other, time.Since(start).Round(time.Millisecond), count(), maxClients)
	if created != int64(60*perAddr) || limited != 120 || other != 0 {
		t.Fatalf("first wave: %d registered, %d refused with 429, %d other; want %d, 120, 0", created, limited, other, 60*perAddr)
	}
	if n := count(); n > maxClients {
		t.Fatalf("%d registrations kept, above the cap of %d", n, maxClients)
	}

	claudeHTTP := &http.Client{Transport: fromAddr(t, 250), Timeout: floodWait}
	status, _, body := registerFrom(t, claudeHTTP, e.ts.URL, claudeRegistration)
	if status != http.StatusCreated {
		t.Fatalf("claude.ai's registration under the flood: %d %v", status, body)
	}
	claude := testClient{id: body["client_id"].(string)}

	created, limited, other = flood(62, 60, perAddr)
	t.Logf("second wave, 60 more addresses × %d: %d registered, %d refused, %d other; %d kept",
		perAddr, created, limited, other, count())
	if created != int64(60*perAddr) || other != 0 || count() > maxClients {
		t.Fatalf("second wave: %d registered, %d other, %d kept", created, other, count())
	}
	// claude.ai's registration held only one slot of its address, so the
	// floods' went first: the person can still connect.
	if _, refresh := e.tokens(claude); refresh == "" {
		t.Fatal("no refresh token for claude.ai")
	}

	t.Run("a state file an older version filled", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "oauth.db")
		clock := newFakeClock()
		kv, err := OpenBoltKV(path, clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		// 1,000 registrations as the flood left them: never used, kept
		// 30 days; half two hours old, half ten minutes; and one app that
		// signed in (its LastUsedAt moved).
		now := clock.Now()
		for i := range defaultMaxClients {
			at := now.Add(-2 * time.Hour)
			if i%2 == 1 {
				at = now.Add(-10 * time.Minute)
			}
			c := Client{ID: fmt.Sprintf("bbcl_old%04d", i), RedirectURIs: []string{"https://attacker.example/cb"}, TokenEndpointAuthMethod: "none", CreatedAt: at, LastUsedAt: at}
			raw, _ := json.Marshal(c)
			mustCreate(t, kv, bucketClients, c.ID, string(raw), 30*24*time.Hour)
		}
		used := Client{ID: "bbcl_used", RedirectURIs: []string{claudeCallback}, TokenEndpointAuthMethod: "none", CreatedAt: now.Add(-time.Hour), LastUsedAt: now}
		raw, _ := json.Marshal(used)
		mustCreate(t, kv, bucketClients, used.ID, string(raw), 30*24*time.Hour)

		e := newTestEnv(t, func(c *Config) { c.KV = kv; c.Now = clock.Now })
		r := e.register(claudeRegistration)
		if r.status != http.StatusCreated {
			t.Fatalf("claude.ai's registration on the old file: %d %s", r.status, r.raw)
		}
		n, _ := e.s.kv.Count(context.Background(), bucketClients)
		if _, _, err := e.s.kv.Get(context.Background(), bucketClients, used.ID); err != nil {
			t.Fatalf("the app that signed in was dropped: %v", err)
		}
		t.Logf("old file: 1,001 registrations → %d kept after one registration", n)
		if n > 502 {
			t.Fatalf("%d registrations kept: the two-hour-old unused ones should be gone", n)
		}
	})
}

// TestFloodPasswordSpray: 50 addresses guess the password, 20 guesses
// each, all at once, against a bcrypt hash. The checks run one at a time
// (MaxPasswordChecks), so the spray takes one CPU, not every CPU; the
// per-address limits hold; the owner, arriving in the middle of it from
// an address of their own, signs in, since their address has made fewer
// attempts than any of the spray's; and /health, on the same server,
// answers throughout.
func TestFloodPasswordSpray(t *testing.T) {
	const addrs, guesses = 50, 20
	hash, err := bcrypt.GenerateFromPassword([]byte(flowPassword), 6)
	if err != nil {
		t.Fatal(err)
	}
	health := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" {
				_, _ = io.WriteString(w, "ok")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	w := newFlowWorld(t, flowOptions{identity: &IdentityConfig{PasswordHash: string(hash)}, wrap: health,
		limits: &Limits{MaxPasswordChecks: 1, PasswordCheckWait: floodWait / 2}})

	// Each spraying address opens four sign-ins (five guesses each are
	// allowed on one) and sends every guess at once.
	var answers sync.Map // status -> *int64
	tally := func(status int) {
		v, _ := answers.LoadOrStore(status, new(int64))
		atomic.AddInt64(v.(*int64), 1)
	}
	cpu0, wall0 := cpuTime(), time.Now()
	var spray sync.WaitGroup
	for a := range addrs {
		b := w.browserFrom(2 + a)
		var pages []webPage
		for range guesses / attemptsPerRequest {
			p := b.authorize(w.authorizeParams())
			wantPage(t, p, http.StatusOK, `name="password"`)
			pages = append(pages, p)
		}
		for g := range guesses {
			p := pages[g/attemptsPerRequest]
			spray.Go(func() {
				tally(postSignIn(t, b, p, fmt.Sprintf("wrong guess %d!", g)))
			})
		}
	}

	// The owner arrives once the spray has filled half the queue: checks
	// take milliseconds, guesses arrive faster.
	testutil.WaitFor(t, "the spray to fill the check queue", func() bool {
		w.srv.checks.mu.Lock()
		defer w.srv.checks.mu.Unlock()
		return len(w.srv.checks.queue) >= maxCheckQueue/2
	})
	var probes []time.Duration
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		c := &http.Client{Transport: fromAddr(t, 252), Timeout: floodWait}
		for range 20 {
			start := time.Now()
			resp, err := c.Get(w.url + "/health")
			if err != nil {
				t.Errorf("/health: %v", err)
				return
			}
			resp.Body.Close()
			probes = append(probes, time.Since(start))
		}
	}()
	owner := w.browserFrom(251)
	p := owner.authorize(w.authorizeParams())
	start := time.Now()
	c := owner.post("/oauth/signin", formOf(p, "password", flowPassword))
	wantPage(t, c, http.StatusOK, `value="approve"`)
	t.Logf("the owner signed in %v after posting the password, in the middle of the spray", time.Since(start).Round(time.Millisecond))
	<-probeDone
	spray.Wait()
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)

	var counts []string
	var total int64
	answers.Range(func(k, v any) bool {
		n := atomic.LoadInt64(v.(*int64))
		counts = append(counts, fmt.Sprintf("%d: %d", k, n))
		total += n
		if s := k.(int); s != http.StatusUnauthorized && s != http.StatusServiceUnavailable && s != http.StatusTooManyRequests {
			t.Errorf("%d guesses answered %d", n, s)
		}
		return true
	})
	slices.Sort(counts)
	slices.Sort(probes)
	t.Logf("spray: %d guesses from %d addresses answered %v in %v, using %v of CPU (%.2f CPUs); /health median %v, slowest %v",
		total, addrs, counts, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), cpu.Seconds()/wall.Seconds(),
		probes[len(probes)/2].Round(time.Microsecond), probes[len(probes)-1].Round(time.Microsecond))
	if total != addrs*guesses {
		t.Fatalf("%d guesses answered, want %d", total, addrs*guesses)
	}
	if peak := w.srv.checks.peakRunning(); peak != 1 {
		t.Fatalf("%d password checks ran at once, want 1", peak)
	}
	if med := probes[len(probes)/2]; med > 2*time.Second {
		t.Fatalf("/health's median answer took %v during the spray", med)
	}
}

// postSignIn posts a password on page p and returns the status.
func postSignIn(t *testing.T, b *webBrowser, p webPage, password string) int {
	req, err := http.NewRequest(http.MethodPost, b.w.url+"/oauth/signin", strings.NewReader(formOf(p, "password", password).Encode()))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.http.Do(req)
	if err != nil {
		t.Errorf("sign-in: %v", err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// cpuTime is the CPU this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestFloodSignInRequests: 100 addresses open 12 sign-ins each (1,200
// requests, each a stored entry, no password needed) against the bbolt
// store, which keeps at most MaxSignIns of them (300 here) and
// MaxSignInsPerAddress of any address (8), so the file and the heap stay
// bounded; and a person who opened a sign-in before the flood, from their
// own address, still finishes it, since the addresses holding the most
// lose theirs first.
func TestFloodSignInRequests(t *testing.T) {
	const addrs, each, maxSignIns, perAddr = 100, 12, 300, 8
	path := filepath.Join(t.TempDir(), "oauth.db")
	kv, err := OpenBoltKV(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newFlowWorld(t, flowOptions{kv: kv, limits: &Limits{MaxSignIns: maxSignIns, MaxSignInsPerAddress: perAddr}})
	owner := w.browserFrom(250)
	p := owner.authorize(w.authorizeParams())
	wantPage(t, p, http.StatusOK, `name="password"`)
	size0, heap0 := fileSize(t, path), heapInUse()

	start := time.Now()
	var opened, other int64
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for a := range addrs {
		tr := fromAddr(t, 2+a)
		tr.DisableKeepAlives = true // the heap then holds what the server keeps, not idle connections
		c := &http.Client{Transport: tr, Timeout: floodWait}
		for range each {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				resp, err := c.Get(w.url + "/oauth/authorize?" + w.authorizeParams().Encode())
				if err != nil {
					t.Errorf("authorize: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					atomic.AddInt64(&opened, 1)
				} else {
					atomic.AddInt64(&other, 1)
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	stored, err := w.srv.kv.Count(context.Background(), bucketRequests)
	if err != nil {
		t.Fatal(err)
	}
	size1, heap1 := fileSize(t, path), heapInUse()
	t.Logf("%d sign-ins opened from %d addresses in %v (%d refused): %d kept; oauth.db %d → %d KiB, heap in use %d → %d KiB",
		opened, addrs, elapsed.Round(time.Millisecond), other, stored, size0>>10, size1>>10, heap0>>10, heap1>>10)
	if opened != addrs*each {
		t.Fatalf("%d of %d sign-ins opened", opened, addrs*each)
	}
	if stored > maxSignIns || w.srv.requests.len() > maxSignIns {
		t.Fatalf("%d sign-ins stored, %d indexed: above the bound of %d", stored, w.srv.requests.len(), maxSignIns)
	}
	// A stored request is under 1 KiB; bbolt adds its pages and free
	// pages around them.
	if size1 > 2<<20 {
		t.Fatalf("oauth.db grew to %d KiB", size1>>10)
	}
	if heap1 > heap0+8<<20 {
		t.Fatalf("the heap grew from %d to %d KiB", heap0>>10, heap1>>10)
	}
	w.srv.requests.mu.Lock()
	for addr, list := range w.srv.requests.byAddr {
		if len(list) > perAddr {
			t.Errorf("%s holds %d sign-ins, above the bound of %d", addr, len(list), perAddr)
		}
	}
	w.srv.requests.mu.Unlock()

	c := owner.post("/oauth/signin", formOf(p, "password", flowPassword))
	wantPage(t, c, http.StatusOK, `value="approve"`)
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
