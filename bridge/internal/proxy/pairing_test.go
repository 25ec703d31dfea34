package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// fakeClock stands in for the wall clock (Options.Now), so that a test can
// let five minutes pass at once.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// pairingProxy is a proxy with pairing on, on a fake clock.
func pairingProxy(t *testing.T, opts PairingOptions) (*testProxy, *fakeClock) {
	// A minute ahead: tokens minted now by the wall clock must not look
	// issued in the future to this one.
	clock := &fakeClock{now: time.Now().Add(time.Minute)}
	tp := newTestProxy(t, Options{Now: clock.Now})
	tp.srv.ConfigurePairing(opts)
	return tp, clock
}

// askCode sends pairing_code on an extension's link and returns the reply.
func askCode(t *testing.T, e *fakeExt, n int) *relaywire.Message {
	t.Helper()
	id := fmt.Sprintf("ext:pair-%d", n)
	e.sendRaw(relaywire.AppendRequest(nil, id, relaywire.MethodPairingCode, json.RawMessage(`{}`)))
	select {
	case m := <-e.replies:
		if s, _ := relaywire.IDString(m.ID); s != id {
			t.Fatalf("reply to %s, want %s", m.ID, id)
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to pairing_code")
	}
	return nil
}

func newCode(t *testing.T, e *fakeExt, n int) relaywire.PairingCodeResult {
	t.Helper()
	m := askCode(t, e, n)
	var res relaywire.PairingCodeResult
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		t.Fatalf("pairing_code: %s %s", m.Result, m.Error)
	}
	return res
}

// TestPairingCodes: a code asked for over an extension's link signs in as
// that extension's user, once, within its lifetime; typed in any case, with
// or without dashes.
func TestPairingCodes(t *testing.T) {
	tp, clock := pairingProxy(t, PairingOptions{MCPURL: "https://proxy.example.com/mcp"})
	alice := tp.extension(t, "alice", "Chrome").ready(t)
	bob := tp.serverExt(t, "bob", "everything (bob)", "everything")
	_ = bob

	res := newCode(t, alice, 1)
	if _, err := relaywire.NormalizePairingCode(res.Code); err != nil || len(res.Code) != 19 || res.Code != strings.ToUpper(res.Code) {
		t.Fatalf("code %q: %v", res.Code, err)
	}
	exp, err := time.Parse(time.RFC3339, res.ExpiresAt)
	if err != nil || !strings.HasSuffix(res.ExpiresAt, "Z") || exp.Sub(clock.Now()) > DefaultPairingTTL || clock.Now().Add(DefaultPairingTTL).Sub(exp) > time.Second {
		t.Fatalf("expires_at %q (now %s): %v", res.ExpiresAt, clock.Now().UTC(), err)
	}
	if res.TTLSeconds != 300 || res.UserID != "alice" || res.MCPURL != "https://proxy.example.com/mcp" {
		t.Fatalf("result %+v", res)
	}

	typed := []string{res.Code, strings.ToLower(res.Code), strings.ReplaceAll(res.Code, "-", ""), " " + strings.ReplaceAll(res.Code, "-", " ") + " "}
	for i, form := range typed {
		t.Run("typed as "+form, func(t *testing.T) {
			code := res.Code
			if i > 0 {
				code = newCode(t, alice, 10+i).Code
				switch i {
				case 1:
					code = strings.ToLower(code)
				case 2:
					code = strings.ReplaceAll(code, "-", "")
				case 3:
					code = " " + strings.ReplaceAll(code, "-", " ") + " "
				}
			}
			user, err := tp.srv.RedeemPairingCode(code, fmt.Sprintf("203.0.113.%d", i))
			if err != nil || user != "alice" {
				t.Fatalf("RedeemPairingCode(%q) = %q, %v", code, user, err)
			}
			if _, err := tp.srv.RedeemPairingCode(code, fmt.Sprintf("203.0.113.%d", i)); !errors.Is(err, ErrPairingUsed) {
				t.Fatalf("second use: %v, want ErrPairingUsed", err)
			}
		})
	}

	t.Run("expiry", func(t *testing.T) {
		code := newCode(t, alice, 20).Code
		clock.advance(DefaultPairingTTL - time.Second)
		late := newCode(t, alice, 21).Code
		clock.advance(time.Second)
		if _, err := tp.srv.RedeemPairingCode(code, "198.51.100.1"); !errors.Is(err, ErrPairingExpired) {
			t.Fatalf("at its expiry: %v, want ErrPairingExpired", err)
		}
		if user, err := tp.srv.RedeemPairingCode(late, "198.51.100.1"); err != nil || user != "alice" {
			t.Fatalf("a code one second younger: %q %v", user, err)
		}
		// Long after, it is forgotten.
		clock.advance(3 * DefaultPairingTTL)
		if _, err := tp.srv.RedeemPairingCode(code, "198.51.100.1"); !errors.Is(err, ErrPairingUnknown) {
			t.Fatalf("long expired: %v, want ErrPairingUnknown", err)
		}
	})

	t.Run("unknown and malformed", func(t *testing.T) {
		for _, tc := range []struct {
			code string
			want error
		}{
			{"ABCD-EFGH-JKMN-PQRS", ErrPairingUnknown},
			{"ABCD-EFGH-JKMN", relaywire.ErrPairingCodeOld},
			{"not a code", relaywire.ErrPairingCodeFormat},
			{"", relaywire.ErrPairingCodeFormat},
		} {
			if _, err := tp.srv.RedeemPairingCode(tc.code, "198.51.100.2"); !errors.Is(err, tc.want) {
				t.Errorf("RedeemPairingCode(%q) = %v, want %v", tc.code, err, tc.want)
			}
		}
	})

	t.Run("sentences", func(t *testing.T) {
		for _, err := range []error{ErrPairingUnknown, ErrPairingExpired, ErrPairingUsed, errPairingPerIP, errPairingGlobal, errPairingQueued, relaywire.ErrPairingCodeFormat, relaywire.ErrPairingCodeOld} {
			if msg := err.Error(); len(msg) < 30 || strings.Contains(msg, "%") {
				t.Errorf("%q is not a sentence", msg)
			}
		}
	})
}

// TestPairingCodeIsBoundToItsCreator: each code signs in as the user whose
// link asked for it, whoever types it; one user's link cannot get a code
// for another; a user's oldest unused code gives way to newer ones.
func TestPairingCodeIsBoundToItsCreator(t *testing.T) {
	tp, _ := pairingProxy(t, PairingOptions{})
	alice := tp.extension(t, "alice", "Chrome").ready(t)
	bob := tp.extension(t, "bob", "Firefox").ready(t)
	aliceCode, bobCode := newCode(t, alice, 1), newCode(t, bob, 1)
	if aliceCode.UserID != "alice" || bobCode.UserID != "bob" || aliceCode.Code == bobCode.Code {
		t.Fatalf("alice %+v, bob %+v", aliceCode, bobCode)
	}
	if user, err := tp.srv.RedeemPairingCode(bobCode.Code, "192.0.2.1"); err != nil || user != "bob" {
		t.Fatalf("bob's code = %q %v", user, err)
	}
	if user, err := tp.srv.RedeemPairingCode(aliceCode.Code, "192.0.2.1"); err != nil || user != "alice" {
		t.Fatalf("alice's code = %q %v", user, err)
	}
	// pairing_code takes no user: params naming one change nothing.
	alice.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:p","method":"pairing_code","params":{"user_id":"bob","user":"bob"}}`))
	m := <-alice.replies
	var res relaywire.PairingCodeResult
	json.Unmarshal(m.Result, &res)
	if user, err := tp.srv.RedeemPairingCode(res.Code, "192.0.2.1"); err != nil || user != "alice" {
		t.Fatalf("a code asked for with bob's name: %q %v", user, err)
	}

	var codes []string
	for i := range DefaultPairingPerUser + 1 {
		codes = append(codes, newCode(t, alice, 10+i).Code)
	}
	if _, err := tp.srv.RedeemPairingCode(codes[0], "192.0.2.2"); !errors.Is(err, ErrPairingUnknown) {
		t.Fatalf("the oldest of %d unused codes: %v, want replaced", len(codes), err)
	}
	for _, c := range codes[1:] {
		if user, err := tp.srv.RedeemPairingCode(c, "192.0.2.2"); err != nil || user != "alice" {
			t.Fatalf("%s: %q %v", c, user, err)
		}
	}
}

// TestPairingGuessesAreLimited: every code tried counts, per client
// address (an IPv6 /64 as one) and over the whole proxy; a valid code is
// refused too while its address is over, and accepted again a minute on.
func TestPairingGuessesAreLimited(t *testing.T) {
	t.Run("per address", func(t *testing.T) {
		tp, clock := pairingProxy(t, PairingOptions{AttemptsPerIP: 5, AttemptsGlobal: 1000})
		alice := tp.extension(t, "alice", "Chrome").ready(t)
		good := newCode(t, alice, 1).Code
		for i := range 5 {
			if _, err := tp.srv.RedeemPairingCode(fmt.Sprintf("AAAA-AAAA-AAAA-AAA%d", i), "2001:db8:1:2::1"); !errors.Is(err, ErrPairingUnknown) {
				t.Fatalf("guess %d: %v", i, err)
			}
		}
		// Same /64, another address: still over.
		if _, err := tp.srv.RedeemPairingCode(good, "[2001:db8:1:2::99]:4433"); !errors.Is(err, ErrPairingLimited) {
			t.Fatalf("the good code from the guesser's /64: %v, want limited", err)
		}
		// The authorization server hands on its key for the address, the
		// /64 itself: the same client, not a new one.
		if _, err := tp.srv.RedeemPairingCode(good, "2001:db8:1:2::/64"); !errors.Is(err, ErrPairingLimited) {
			t.Fatalf("the good code under the authorization server's key for the guesser's /64: %v, want limited", err)
		}
		// Another network is not held back by it.
		if _, err := tp.srv.RedeemPairingCode("AAAA-AAAA-AAAA-AAAZ", "2001:db8:1:3::1"); !errors.Is(err, ErrPairingUnknown) {
			t.Fatalf("another /64: %v", err)
		}
		clock.advance(pairingWindow)
		if user, err := tp.srv.RedeemPairingCode(good, "2001:db8:1:2::1"); err != nil || user != "alice" {
			t.Fatalf("a minute later: %q %v", user, err)
		}
		if n := refusedCount(t, tp, "pairing_ip_limit"); n != "2" {
			t.Fatalf("per-address refusals counted: %s, want 2", n)
		}
	})
	t.Run("over the whole proxy: failures only, then turns by fewest failures", func(t *testing.T) {
		tp, clock := pairingProxy(t, PairingOptions{AttemptsPerIP: 100, AttemptsGlobal: 8})
		alice := tp.extension(t, "alice", "Chrome").ready(t)
		good := newCode(t, alice, 1).Code
		// A code that works uses no turn: eight of them, then eight
		// failures, all checked at once.
		for i := range 8 {
			if user, err := tp.srv.RedeemPairingCode(newCode(t, alice, 10+i).Code, "203.0.113.1"); err != nil || user != "alice" {
				t.Fatalf("good code %d: %q %v", i, user, err)
			}
			clock.advance(pairingWindow / 9) // the issue rate is 10 a minute
		}
		for i := range 8 {
			if _, err := tp.srv.RedeemPairingCode("AAAA-AAAA-AAAA-AAAA", fmt.Sprintf("192.0.2.%d", i%2)); !errors.Is(err, ErrPairingUnknown) {
				t.Fatalf("guess %d within the bound: %v", i, err)
			}
		}
		// Past the bound, attempts wait: two guesses of the guessing
		// addresses, then the good code from a fresh one.
		results := make(chan string, 3)
		redeem := func(code, ip string) {
			user, err := tp.srv.RedeemPairingCode(code, ip)
			results <- fmt.Sprintf("%s %s %v", ip, user, err)
		}
		go redeem("AAAA-AAAA-AAAA-AAAA", "192.0.2.0")
		testutil.WaitFor(t, "1 waiting", func() bool { n, _ := gateState(tp); return n == 1 })
		go redeem("AAAA-AAAA-AAAA-AAAA", "192.0.2.1")
		testutil.WaitFor(t, "2 waiting", func() bool { n, _ := gateState(tp); return n == 2 })
		go redeem(good, "198.51.100.7")
		testutil.WaitFor(t, "3 waiting", func() bool { n, _ := gateState(tp); return n == 3 })
		// One turn comes back (a minute over eight turns): the good code
		// goes first, though it came last.
		clock.advance(pairingWindow / 8)
		wakeGate(tp)
		if got := <-results; got != "198.51.100.7 alice <nil>" {
			t.Fatalf("the first turn went to %q, want the good code", got)
		}
		clock.advance(pairingWindow)
		wakeGate(tp)
		for range 2 {
			if got := <-results; !strings.Contains(got, ErrPairingUnknown.Error()) {
				t.Fatalf("a waiting guess: %q, want checked (and unknown)", got)
			}
		}
	})
	t.Run("waiting is bounded", func(t *testing.T) {
		tp, _ := pairingProxy(t, PairingOptions{AttemptsPerIP: 100, AttemptsGlobal: 1, MaxWait: 50 * time.Millisecond, MaxWaiting: 2})
		if _, err := tp.srv.RedeemPairingCode("AAAA-AAAA-AAAA-AAAA", "192.0.2.1"); !errors.Is(err, ErrPairingUnknown) {
			t.Fatal(err)
		}
		// The fake clock stands still: no turn comes back, so waiting
		// ends in MaxWait, with a sentence.
		if _, err := tp.srv.RedeemPairingCode("AAAA-AAAA-AAAA-AAAA", "192.0.2.2"); !errors.Is(err, ErrPairingLimited) || !strings.Contains(err.Error(), "waited its turn") {
			t.Fatalf("after MaxWait: %v", err)
		}
	})
	t.Run("an address over its limit does not use up everyone's", func(t *testing.T) {
		tp, _ := pairingProxy(t, PairingOptions{AttemptsPerIP: 3, AttemptsGlobal: 10})
		alice := tp.extension(t, "alice", "Chrome").ready(t)
		good := newCode(t, alice, 1).Code
		for range 50 {
			tp.srv.RedeemPairingCode("AAAA-AAAA-AAAA-AAAA", "192.0.2.66")
		}
		if user, err := tp.srv.RedeemPairingCode(good, "198.51.100.8"); err != nil || user != "alice" {
			t.Fatalf("another address: %q %v", user, err)
		}
	})
	t.Run("codes asked for", func(t *testing.T) {
		tp, clock := pairingProxy(t, PairingOptions{IssuePerMinute: 3})
		alice := tp.extension(t, "alice", "Chrome").ready(t)
		bob := tp.extension(t, "bob", "Chrome").ready(t)
		for i := range 3 {
			newCode(t, alice, i)
		}
		if code, msg := errCode(t, askCode(t, alice, 9)); code != relaywire.CodeRateLimited || !strings.Contains(msg, "wait a minute") {
			t.Fatalf("the fourth code in a minute: %d %q", code, msg)
		}
		newCode(t, bob, 1) // another user is not held back
		clock.advance(pairingWindow)
		newCode(t, alice, 10)
	})
}

// TestPairingOff: until the operator configures pairing, pairing_code is
// refused with a sentence, and nothing redeems.
func TestPairingOff(t *testing.T) {
	tp := newTestProxy(t, Options{})
	alice := tp.extension(t, "alice", "Chrome").ready(t)
	code, msg := errCode(t, askCode(t, alice, 1))
	if code != relaywire.CodeMethodNotFound || !strings.Contains(msg, "--public-url") {
		t.Fatalf("pairing_code without pairing: %d %q", code, msg)
	}
	if _, err := tp.srv.RedeemPairingCode("ABCD-EFGH-JKMN-PQRS", "192.0.2.1"); !errors.Is(err, ErrPairingUnknown) {
		t.Fatalf("RedeemPairingCode without pairing: %v", err)
	}
}

// wakeGate gives the pairing gate the turns the (fake) clock has brought.
func wakeGate(tp *testProxy) {
	p := tp.srv.pairing
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate.dispatch(p.gate.now())
}

func refusedCount(tb testing.TB, tp *testProxy, reason string) string {
	tb.Helper()
	resp := tp.internal("/metrics")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, `browserbridge_proxy_refused_total{reason="`+reason+`"}`) {
			return strings.Fields(line)[1]
		}
	}
	return "0"
}
