package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/natsembed"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// pairingNodes are n proxy nodes of one cluster on one NATS, pairing on,
// sharing a fake clock; the NATS URL is returned for a look into the store.
func pairingNodes(t *testing.T, n int, opts PairingOptions) ([]*testProxy, *fakeClock, string) {
	t.Helper()
	url := startNATS(t)
	clock := &fakeClock{now: time.Now().Add(time.Minute)} // as pairingProxy: tokens from the wall clock are not from the future
	nodes := make([]*testProxy, n)
	for i := range nodes {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		tp := newTestProxy(t, Options{Now: clock.Now, Cluster: &ClusterOptions{Keyring: testRing(), Conn: nc, Node: string(rune('a' + i))}})
		t.Cleanup(nc.Close) // after the proxy's shutdown
		tp.srv.ConfigurePairing(opts)
		nodes[i] = tp
	}
	return nodes, clock, url
}

// TestPairingAcrossNodes: a code asked for over a bridge's link on one node
// signs in on another node's page, once across all nodes; expired, unknown
// and replaced codes read the same on every node.
func TestPairingAcrossNodes(t *testing.T) {
	nodes, clock, _ := pairingNodes(t, 2, PairingOptions{MCPURL: "https://proxy.example.com/mcp"})
	a, b := nodes[0], nodes[1]
	alice := a.extension(t, "alice", "Chrome").ready(t)

	t.Run("issued on a, redeemed on b", func(t *testing.T) {
		res := newCode(t, alice, 1)
		if res.UserID != "alice" || res.MCPURL != "https://proxy.example.com/mcp" || res.TTLSeconds != 300 {
			t.Fatalf("result %+v", res)
		}
		user, err := b.srv.RedeemPairingCode(res.Code, "203.0.113.1")
		if err != nil || user != "alice" {
			t.Fatalf("on node b: %q %v, want alice", user, err)
		}
		for i, n := range nodes {
			if _, err := n.srv.RedeemPairingCode(res.Code, "203.0.113.1"); !errors.Is(err, ErrPairingUsed) {
				t.Fatalf("again on node %d: %v, want ErrPairingUsed", i, err)
			}
		}
	})

	t.Run("redeemed on both at once", func(t *testing.T) {
		for round := range 5 {
			code := newCode(t, alice, 10+round).Code
			var wg sync.WaitGroup
			results := make([]error, 8)
			users := make([]string, 8)
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					users[i], results[i] = nodes[i%2].srv.RedeemPairingCode(code, "198.51.100."+string(rune('1'+i)))
				}()
			}
			wg.Wait()
			won := 0
			for i, err := range results {
				switch {
				case err == nil && users[i] == "alice":
					won++
				case errors.Is(err, ErrPairingUsed):
				default:
					t.Fatalf("redemption %d: %q %v", i, users[i], err)
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d redemptions succeeded, want exactly 1", round, won)
			}
		}
	})

	t.Run("expired and forgotten", func(t *testing.T) {
		code := newCode(t, alice, 20).Code
		clock.advance(DefaultPairingTTL - time.Second)
		late := newCode(t, alice, 21).Code
		clock.advance(time.Second)
		if _, err := b.srv.RedeemPairingCode(code, "192.0.2.1"); !errors.Is(err, ErrPairingExpired) {
			t.Fatalf("at its expiry, on b: %v, want ErrPairingExpired", err)
		}
		if user, err := b.srv.RedeemPairingCode(late, "192.0.2.1"); err != nil || user != "alice" {
			t.Fatalf("a code one second younger, on b: %q %v", user, err)
		}
		clock.advance(3 * DefaultPairingTTL)
		if _, err := b.srv.RedeemPairingCode(code, "192.0.2.1"); !errors.Is(err, ErrPairingUnknown) {
			t.Fatalf("long expired: %v, want ErrPairingUnknown", err)
		}
		if _, err := b.srv.RedeemPairingCode(late, "192.0.2.1"); !errors.Is(err, ErrPairingUnknown) {
			t.Fatalf("long after its use: %v, want ErrPairingUnknown", err)
		}
	})

	t.Run("unknown and malformed", func(t *testing.T) {
		for _, tc := range []struct {
			code string
			want error
		}{
			{"ABCD-EFGH-JKMN-PQRS", ErrPairingUnknown},
			{"ABCD", relaywire.ErrPairingCodeFormat},
		} {
			if _, err := b.srv.RedeemPairingCode(tc.code, "192.0.2.2"); !errors.Is(err, tc.want) {
				t.Fatalf("%q: %v, want %v", tc.code, err, tc.want)
			}
		}
	})

	t.Run("replaced codes are unknown on every node", func(t *testing.T) {
		clock.advance(time.Minute) // a fresh issue window
		var codes []string
		for i := range DefaultPairingPerUser + 1 {
			codes = append(codes, newCode(t, alice, 30+i).Code)
		}
		if _, err := b.srv.RedeemPairingCode(codes[0], "192.0.2.3"); !errors.Is(err, ErrPairingUnknown) {
			t.Fatalf("the replaced code, on b: %v, want ErrPairingUnknown", err)
		}
		if user, err := b.srv.RedeemPairingCode(codes[len(codes)-1], "192.0.2.3"); err != nil || user != "alice" {
			t.Fatalf("the newest code, on b: %q %v", user, err)
		}
	})
}

// TestPairingSharedKey: nodes of one deployment hash codes with one key,
// derived from the secret they share, which is nowhere in the store; the
// store holds codes only as HMACs, and their records (with the user)
// sealed.
func TestPairingSharedKey(t *testing.T) {
	url := startNATS(t)
	const n = 4
	stores := make([]*pairingShared, n)
	for i := range stores {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		stores[i] = newPairingShared(&ClusterOptions{Keyring: testRing(), Conn: nc, Prefix: "keytest"}, "pairing")
	}
	ctx := context.Background()
	now := time.Now()
	code, h, err := stores[0].issue(ctx, "bob", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A look into the bucket: the code itself is nowhere in it.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "keytest_pairing")
	if err != nil {
		t.Fatal(err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if norm := strings.ReplaceAll(code, "-", ""); strings.Contains(string(e.Value())+k, norm) {
			t.Fatalf("the code is in the store under %s", k)
		}
		if strings.Contains(string(e.Value())+k, "bob") {
			t.Fatalf("the user's name is readable in the store under %s", k)
		}
		for _, key := range stores[0].ring.PairingKeys() {
			if strings.Contains(string(e.Value())+k, string(key)) || strings.Contains(k, fmt.Sprintf("%x", key)) {
				t.Fatalf("the HMAC key is in the store under %s", k)
			}
		}
	}
	user, h2, err := stores[3].redeem(ctx, code, now)
	if err != nil || user != "bob" || h2 != h {
		t.Fatalf("redeemed on another store: %q %v", user, err)
	}
}

// TestPairingStoreDown: with NATS gone, issuing and redeeming fail with a
// sentence saying so, not as a wrong code; the limits still count.
func TestPairingStoreDown(t *testing.T) {
	url := startNATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	ps := newPairingShared(&ClusterOptions{Keyring: testRing(), Conn: nc}, "pairing")
	nc.Close() // before first use: the bucket cannot be reached
	srv := newTestProxy(t, Options{}).srv
	srv.ConfigurePairing(PairingOptions{})
	p := srv.pairing
	p.mu.Lock()
	p.shared = ps // as ConfigurePairing sets it on a cluster node
	p.mu.Unlock()
	if _, err := srv.RedeemPairingCode("ABCD-EFGH-JKMN-PQRS", "192.0.2.9"); !errors.Is(err, ErrPairingUnavailable) {
		t.Fatalf("redeem with the store down: %v, want ErrPairingUnavailable", err)
	}
	if _, rerr := srv.issuePairingCode("alice"); rerr == nil || rerr.Code != relaywire.CodeInternalError {
		t.Fatalf("issue with the store down: %v, want an internal error", rerr)
	}
}

// TestPairingReplicated: on three clustered NATS servers with three
// replicas, where a failed compare-and-swap has another code (10164) than
// on one server, a code redeemed through three nodes at once still works
// exactly once and the losers hear "used", not a store failure.
func TestPairingReplicated(t *testing.T) {
	servers, err := natsembed.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
		}
	})
	ctx := context.Background()
	stores := make([]*pairingShared, len(servers))
	for i, s := range servers {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		stores[i] = newPairingShared(&ClusterOptions{Keyring: testRing(), Conn: nc, Prefix: "r3", Replicas: 3}, "pairing")
	}
	now := time.Now()
	for round := range 5 {
		code, _, err := stores[round%3].issue(ctx, "carol", now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, len(stores))
		var wg sync.WaitGroup
		for i, ps := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = ps.redeem(ctx, code, now)
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrPairingUsed):
				t.Fatalf("round %d, node %d: %v", round, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d redemptions succeeded, want 1", round, won)
		}
	}

	// The swap's own refusal on replicas is recognised as one.
	kv, err := stores[0].open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, "probe", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "probe", []byte("2")); err != nil {
		t.Fatal(err)
	}
	_, err = stores[0].js.PublishMsg(ctx, &nats.Msg{Subject: "$KV.r3_pairing.probe", Data: []byte("3")}, jetstream.WithExpectLastSequencePerSubject(rev))
	if !pairingCASFailed(err) {
		t.Fatalf("a stale swap on three replicas: %v, want a recognised refusal", err)
	}
}

// TestPairingSharedSealed: a code's record that someone with NATS access
// tampers with, cuts, moves under another code's key, or writes back as
// it was before it was used (to use a code twice) does not redeem, and is
// counted; the codes themselves keep working.
func TestPairingSharedSealed(t *testing.T) {
	url := startNATS(t)
	ring := testRing()
	// A short window, so that the test can let it pass: a value written
	// back is refused once its seal is older than the window.
	ring.Window = 3 * time.Second
	var mu sync.Mutex
	counted := map[string]int{}
	ring.OnReject(func(what, reason string) { mu.Lock(); counted[what+"/"+reason]++; mu.Unlock() })
	ps := newPairingShared(&ClusterOptions{Keyring: ring, Conn: natsConn(t, url), Prefix: "sealtest"}, "pairing")
	ctx := context.Background()
	now := time.Now()
	kv, err := ps.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	issue := func() (string, string) {
		code, h, err := ps.issue(ctx, "bob", now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return code, fmt.Sprintf("%x", h)
	}
	raw := func(key string) []byte {
		e, err := kv.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return e.Value()
	}
	put := func(key string, v []byte) {
		if _, err := kv.Put(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	// Written back as it was before its use: the code works once.
	code, key := issue()
	before := raw(key)
	if user, _, err := ps.redeem(ctx, code, now); err != nil || user != "bob" {
		t.Fatalf("redeem: %q %v", user, err)
	}
	time.Sleep(ring.Window + 500*time.Millisecond) // the window passing, not synchronisation
	put(key, before)
	if _, _, err := ps.redeem(ctx, code, now); err == nil {
		t.Fatal("a code whose unused record was written back redeemed twice")
	}
	// Tampered, cut, and another code's record moved under this one's key.
	for _, tc := range []struct {
		name   string
		mangle func(v []byte, other []byte) []byte
		reason string
	}{
		{"tampered", func(v, _ []byte) []byte { v = bytes.Clone(v); v[len(v)-4] ^= 1; return v }, "forged"},
		{"cut", func(v, _ []byte) []byte { return v[:10] }, "malformed"},
		{"moved", func(_, other []byte) []byte { return other }, "forged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, key := issue()
			_, otherKey := issue()
			put(key, tc.mangle(raw(key), raw(otherKey)))
			if user, _, err := ps.redeem(ctx, code, now); err == nil {
				t.Fatalf("a %s record redeemed for %q", tc.name, user)
			}
			mu.Lock()
			defer mu.Unlock()
			if counted["pairing/"+tc.reason] == 0 {
				t.Fatalf("not counted as pairing/%s: %v", tc.reason, counted)
			}
		})
	}
	mu.Lock()
	if counted["pairing/replayed"] != 1 {
		t.Errorf("the record written back was not counted as a replay: %v", counted)
	}
	mu.Unlock()
	fresh, _ := issue()
	if user, _, err := ps.redeem(ctx, fresh, now); err != nil || user != "bob" {
		t.Fatalf("a fresh code after all this: %q %v", user, err)
	}
}
