package proxy

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// gateState reads the pairing gate: attempts waiting, and addresses with
// failures on record.
func gateState(tp *testProxy) (waiting, failing int) {
	p := tp.srv.pairing
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gate.queue.Len(), len(p.gate.scores)
}

// randomGuess is a well-formed code nobody was given.
func randomGuess() string { return relaywire.FormatPairingCode(newPairingCode()) }

// TestPairingOwnerSignsInDuringGuessFlood is issue 27's first finding: 249
// addresses (127.0.0.2 … 127.0.0.250) guess pairing codes through the
// sign-in page, each as fast as its own limit lets it, far past the
// proxy-wide bound; the owner of a fresh code, at another address, still
// signs in at once, and the failed checks stay within the bound.
func TestPairingOwnerSignsInDuringGuessFlood(t *testing.T) {
	const (
		budget    = 300 // failed checks a minute
		attackers = 249
		perAddr   = 10 // the default per-address limit a minute
	)
	tp := runHTTPProxy(t, Options{}, func(o *HTTPOptions) {
		o.Pairing = PairingOptions{AttemptsGlobal: budget, MaxWait: 5 * time.Second}
	})
	alice := tp.extension(t, "alice", "Chrome").ready(t)
	query := authorizeQuery(t, tp)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sent, limited, wrong, signedIn atomic.Int64
	start := time.Now()
	for i := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := httpClientFrom(loopback(2 + i))
			for range perAddr / 5 {
				fields, err := signInPage(tp, client, nil, query)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("attacker %d: the sign-in page: %v", i, err)
					}
					return
				}
				for range 5 { // a sign-in request takes 5 attempts
					if ctx.Err() != nil {
						return
					}
					fields["code"] = []string{randomGuess()}
					status, page, err := postSignIn(tp, client, nil, fields)
					sent.Add(1)
					switch {
					case err != nil:
						return
					case status == http.StatusTooManyRequests:
						limited.Add(1)
					case strings.Contains(page, "not known here"):
						wrong.Add(1)
					case strings.Contains(page, `value="approve"`):
						signedIn.Add(1)
					}
				}
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	// The flood is past the bound: attempts wait their turn, and every
	// attacking address has failed.
	testutil.WaitFor(t, "the flood reaching the bound", func() bool {
		waiting, failing := gateState(tp)
		return waiting > 0 && failing >= attackers
	})
	waiting, failing := gateState(tp)
	t.Logf("flood under way after %v: %d attempts sent, %d waiting, %d addresses failing", time.Since(start).Round(time.Millisecond), sent.Load(), waiting, failing)

	// The owner's sign-in a step at a time too (not testutil.Person): the
	// sign-in step alone, from an address of its own, is what must not
	// wait behind the flood.
	owner := httpClientFrom(loopback(251))
	code := pairingCode(t, alice.tclient)
	fields, err := signInPage(tp, owner, nil, query)
	if err != nil {
		t.Fatalf("the owner's sign-in page: %v", err)
	}
	fields["code"] = []string{code}
	began := time.Now()
	status, page, err := postSignIn(tp, owner, nil, fields)
	took := time.Since(began)
	if err != nil || status != http.StatusOK || !strings.Contains(page, `value="approve"`) {
		t.Fatalf("the owner's valid code during the flood: %d %v %.300s", status, err, page)
	}
	waiting, _ = gateState(tp)
	t.Logf("the owner signed in in %v with %d attempts waiting; so far %d guesses sent, %d answered 'not known', %d 'too many'",
		took.Round(time.Millisecond), waiting, sent.Load(), wrong.Load(), limited.Load())
	if took > ceiling {
		t.Errorf("the owner waited %v", took)
	}
	if signedIn.Load() != 0 {
		t.Fatalf("%d guesses signed in", signedIn.Load())
	}
	// Guessing stayed bounded: failed checks are at most the bucket and
	// what refilled since.
	failed, _ := strconv.Atoi(refusedCount(t, tp, "pairing_unknown"))
	bound := budget + int(time.Since(start).Seconds()*budget/60) + 1
	t.Logf("failed checks: %d in %v, bound %d", failed, time.Since(start).Round(time.Millisecond), bound)
	if failed > bound || failed < budget {
		t.Fatalf("%d failed checks in %v; the bound is %d (and the flood exceeds %d)", failed, time.Since(start), bound, budget)
	}
}
