package jetstreamkv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/authserver/kvtest"
	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
	"github.com/browserbridge/browserbridge/bridge/internal/natsembed"
	"github.com/browserbridge/browserbridge/bridge/internal/natsembed/natstest"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// authserver's bucket names, as the server writes them.
const (
	bucketClients  = "clients"
	bucketCodes    = "codes"
	bucketFamilies = "families"
	bucketAccess   = "access"
)

// TestContract runs authserver's KV contract (kvtest) against JetStream,
// each case on its own NATS server.
func TestContract(t *testing.T) {
	kvtest.Contract(t, func(t *testing.T, now func() time.Time) authserver.KV {
		kv, err := newStore(natstest.JetStream(t, natstest.Start(t)), testRing(t), "test", 1, now)
		if err != nil {
			t.Fatal(err)
		}
		return kv
	})
}

// TestShared: two nodes' KVs on one NATS are one store: each
// sees the other's writes, and compare-and-swap holds across them.
func TestShared(t *testing.T) {
	ctx := context.Background()
	url := natstest.Start(t)
	clock := kvtest.NewClock()
	a, err := newStore(natstest.JetStream(t, url), testRing(t), "shared", 1, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newStore(natstest.JetStream(t, url), testRing(t), "shared", 1, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	rev := kvtest.MustCreate(t, a, bucketCodes, "k", "from a", time.Minute)
	if v, got, err := b.Get(ctx, bucketCodes, "k"); err != nil || string(v) != "from a" || got != rev {
		t.Fatalf("b reads %q rev %d (%v), want a's write at rev %d", v, got, err, rev)
	}
	if _, err := b.Create(ctx, bucketCodes, "k", []byte("from b"), time.Minute); !errors.Is(err, authserver.ErrExists) {
		t.Fatalf("b created over a's live entry: %v", err)
	}
	rev2, err := b.Update(ctx, bucketCodes, "k", []byte("b's update"), rev, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Update(ctx, bucketCodes, "k", []byte("a's stale update"), rev, time.Minute); !errors.Is(err, authserver.ErrConflict) {
		t.Fatalf("a updated at a revision b had moved past: %v", err)
	}
	if v, got, _ := a.Get(ctx, bucketCodes, "k"); string(v) != "b's update" || got != rev2 {
		t.Fatalf("a reads %q rev %d, want b's update at %d", v, got, rev2)
	}
	kvtest.MustCreate(t, b, bucketCodes, "other", "v", time.Minute)
	if n, err := a.Count(ctx, bucketCodes); n != 2 || err != nil {
		t.Fatalf("a counts %d (%v), want 2", n, err)
	}
	if err := a.Delete(ctx, bucketCodes, "k"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, bucketCodes, "k"); !errors.Is(err, authserver.ErrNotFound) {
		t.Fatalf("b still reads an entry a deleted: %v", err)
	}

	// Both nodes update one entry at once, at the revision they read:
	// exactly one wins, as one code is redeemed once.
	rev = kvtest.MustCreate(t, a, bucketCodes, "race", "v", time.Minute)
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		kv := []authserver.KV{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := kv.Update(ctx, bucketCodes, "race", []byte(fmt.Sprint(i)), rev, time.Minute)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, authserver.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("update %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != 15 {
		t.Fatalf("%d updates won and %d conflicted, want 1 and 15", wins.Load(), conflicts.Load())
	}

	// Another prefix is another deployment: it sees none of it.
	c, err := newStore(natstest.JetStream(t, url), testRing(t), "elsewhere", 1, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx, bucketCodes, "other"); !errors.Is(err, authserver.ErrNotFound) {
		t.Fatalf("another prefix reads the entry: %v", err)
	}
}

// TestReplicated: on three clustered NATS servers with three
// replicas, where JetStream reports a failed compare-and-swap with another
// code (10164) than on one server: the contract's refusals still read as
// ErrExists and ErrConflict, each node on its own server.
func TestReplicated(t *testing.T) {
	ctx := context.Background()
	servers, err := natsembed.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
		}
	})
	var kvs []authserver.KV
	for _, s := range servers {
		kv, err := newStore(natstest.JetStream(t, s.ClientURL()), testRing(t), "r3", 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		kvs = append(kvs, kv)
	}
	rev := kvtest.MustCreate(t, kvs[0], bucketFamilies, "k", "v", time.Minute)
	if _, err := kvs[1].Create(ctx, bucketFamilies, "k", []byte("v"), time.Minute); !errors.Is(err, authserver.ErrExists) {
		t.Fatalf("create over a live entry: %v", err)
	}
	if _, err := kvs[2].Update(ctx, bucketFamilies, "k", []byte("v2"), rev, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := kvs[1].Update(ctx, bucketFamilies, "k", []byte("v3"), rev, time.Minute); !errors.Is(err, authserver.ErrConflict) {
		t.Fatalf("update at a stale revision: %v", err)
	}
	// The swap itself refused (10164), not the read before it: all three
	// update at the revision they read, at once.
	_, rev, err = kvs[0].Get(ctx, bucketFamilies, "k")
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(kvs))
	var wg sync.WaitGroup
	for i, kv := range kvs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = kv.Update(ctx, bucketFamilies, "k", []byte(fmt.Sprint(i)), rev, time.Minute)
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, authserver.ErrConflict):
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of 3 updates at one revision succeeded", won)
	}
	// And the swap's own refusal, without the read that usually catches a
	// stale revision first.
	k := kvs[1].(*store)
	b, err := k.bucket(ctx, bucketFamilies)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.swap(ctx, b, "k", k.seal(b, "k", []byte("x"), time.Minute), rev, time.Minute); !isWrongLastSeq(err) {
		t.Fatalf("a swap at a stale revision on three replicas: %v, want a wrong-last-sequence refusal", err)
	}
}

// TestKeys: keys JetStream would refuse (dots, wildcards,
// spaces, a client's long URL) work, each as itself and apart from the
// others and from plain keys.
func TestKeys(t *testing.T) {
	ctx := context.Background()
	kv, err := newStore(natstest.JetStream(t, natstest.Start(t)), testRing(t), "keys", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{
		"plain_key-1", "a.b", "a..b", ".", "*", ">", "a b", "", "=", "==x",
		"https://app.example.com/oauth/client.json", strings.Repeat("x", 129), strings.Repeat("x", 128), "ключ",
	}
	for i, k := range keys {
		if _, err := kv.Create(ctx, bucketClients, k, []byte(fmt.Sprint(i)), time.Hour); err != nil {
			t.Fatalf("create %q: %v", k, err)
		}
	}
	for i, k := range keys {
		v, _, err := kv.Get(ctx, bucketClients, k)
		if err != nil || string(v) != fmt.Sprint(i) {
			t.Fatalf("get %q: %q %v, want %d", k, v, err, i)
		}
	}
	if n, err := kv.Count(ctx, bucketClients); n != len(keys) || err != nil {
		t.Fatalf("count %d %v, want %d", n, err, len(keys))
	}
}

// TestServerTTL: what only the server can do: every write with
// a lifetime carries one to the server (Update too, which nats.go's own
// Update cannot), so entries nobody reads again do not stay in the
// bucket; and the server does remove them.
func TestServerTTL(t *testing.T) {
	ctx := context.Background()
	js := natstest.JetStream(t, natstest.Start(t))
	kv, err := newStore(js, testRing(t), "ttl", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "KV_ttl_oauth_"+bucketAccess) // what the first write makes
	if err == nil {
		t.Fatalf("the bucket exists before any write: %v", stream)
	}
	ttlOf := func(key string) string {
		t.Helper()
		st, err := js.Stream(ctx, "KV_ttl_oauth_"+bucketAccess)
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(ctx, "$KV.ttl_oauth_"+bucketAccess+"."+key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return m.Header.Get(jetstream.MsgTTLHeader)
	}

	rev := kvtest.MustCreate(t, kv, bucketAccess, "hour", "v", time.Hour)
	if got := ttlOf("hour"); got != (time.Hour + time.Second).String() {
		t.Fatalf("created with server TTL %q, want an hour and a second", got)
	}
	if _, err := kv.Update(ctx, bucketAccess, "hour", []byte("v2"), rev, 90*time.Minute+time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := ttlOf("hour"); got != (90*time.Minute + 2*time.Second).String() {
		t.Fatalf("updated with server TTL %q, want 90m2s (rounded up, one to spare)", got)
	}
	kvtest.MustCreate(t, kv, bucketAccess, "forever", "v", 0)
	if got := ttlOf("forever"); got != "" {
		t.Fatalf("an entry without a lifetime has server TTL %q", got)
	}

	// A real second: the server drops the updated entry on its own.
	rev = kvtest.MustCreate(t, kv, bucketAccess, "short", "v", time.Hour)
	if _, err := kv.Update(ctx, bucketAccess, "short", []byte("v2"), rev, time.Second); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_ttl_oauth_"+bucketAccess)
	if err != nil {
		t.Fatal(err)
	}
	// Polling the server's state, which no event announces here.
	testutil.WaitFor(t, "the server to drop the entry past its one-second lifetime", func() bool {
		m, err := st.GetLastMsgForSubject(ctx, "$KV.ttl_oauth_"+bucketAccess+".short")
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatal(err)
		}
		// Gone, or only its expiring marker left.
		return err != nil || m.Header.Get("Nats-Marker-Reason") != ""
	})
	if _, _, err := kv.Get(ctx, bucketAccess, "short"); !errors.Is(err, authserver.ErrNotFound) {
		t.Fatalf("after the server dropped it: %v", err)
	}
	if _, _, err := kv.Get(ctx, bucketAccess, "forever"); err != nil {
		t.Fatalf("the entry without a lifetime went too: %v", err)
	}
	if _, err := kv.Create(ctx, bucketAccess, "short", []byte("again"), time.Hour); err != nil {
		t.Fatalf("create over the server's expiry marker: %v", err)
	}
}

// TestRefusals: what New and the calls refuse, with a sentence; and a
// context that ended ends the call.
func TestRefusals(t *testing.T) {
	url := natstest.Start(t)
	js := natstest.JetStream(t, url)
	for _, tc := range []struct {
		name   string
		js     jetstream.JetStream
		prefix string
		want   string
	}{
		{"no JetStream", nil, "p", "needs a JetStream context"},
		{"no keyring", js, "p", "needs the cluster's keyring"},
		{"empty prefix", js, "", "may hold only letters"},
		{"dotted prefix", js, "a.b", "may hold only letters"},
		{"wildcard prefix", js, "a*", "may hold only letters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ring := testRing(t)
			if tc.name == "no keyring" {
				ring = nil
			}
			if _, err := New(tc.js, ring, tc.prefix, 1, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
	t.Run("domain", func(t *testing.T) {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		jsd, err := jetstream.NewWithDomain(nc, "hub")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(jsd, testRing(t), "p", 1, nil); err == nil || !strings.Contains(err.Error(), "default JetStream API") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("bad bucket", func(t *testing.T) {
		kv, err := New(js, testRing(t), "p", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := kv.Get(context.Background(), "a.b", "k"); err == nil || errors.Is(err, authserver.ErrNotFound) {
			t.Fatalf("a dotted bucket: %v", err)
		}
	})
	t.Run("context ended", func(t *testing.T) {
		kv, err := New(js, testRing(t), "ctx", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := kv.Create(ctx, "b", "k", []byte("v"), time.Minute); !errors.Is(err, context.Canceled) {
			t.Fatalf("create on an ended context: %v", err)
		}
		if _, err := kv.Create(context.Background(), "b", "k", []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
		for name, call := range map[string]func() error{
			"get":    func() error { _, _, err := kv.Get(ctx, "b", "k"); return err },
			"update": func() error { _, err := kv.Update(ctx, "b", "k", []byte("v"), 1, time.Minute); return err },
			"delete": func() error { return kv.Delete(ctx, "b", "k") },
			"count":  func() error { _, err := kv.Count(ctx, "b"); return err },
		} {
			if err := call(); !errors.Is(err, context.Canceled) {
				t.Errorf("%s on an ended context: %v", name, err)
			}
		}
	})
}

// testRing is a keyring of one test secret: each store of a test gets its
// own, as each node of a deployment derives its own from the shared secret.
func testRing(t testing.TB) *clusterseal.Keyring {
	t.Helper()
	ring, err := clusterseal.New([][]byte{[]byte("a test deployment's secret, 32 bytes or more")})
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// TestSealed: what the store writes is unreadable on the bus, and a value
// someone with NATS access writes (its own, another deployment's, a real
// one moved under another key, tampered, or cut) reads as missing, with
// the keyring told why: nobody can mint a token by writing the store.
func TestSealed(t *testing.T) {
	ctx := context.Background()
	url := natstest.Start(t)
	ring := testRing(t)
	var mu sync.Mutex
	counted := map[string]int{}
	ring.OnReject(func(what, reason string) { mu.Lock(); counted[what+"/"+reason]++; mu.Unlock() })
	k, err := newStore(natstest.JetStream(t, url), ring, "sealed", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Create(ctx, bucketAccess, "real", []byte(`{"subject":{"id":"password:owner"}}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	b, err := k.bucket(ctx, bucketAccess)
	if err != nil {
		t.Fatal(err)
	}
	e, err := b.Get(ctx, "real")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(e.Value()), "owner") {
		t.Fatalf("the value is readable in JetStream: %q", e.Value())
	}
	foreign, err := clusterseal.New([][]byte{[]byte("another deployment's secret, 32+ bytes long")})
	if err != nil {
		t.Fatal(err)
	}
	plain := append([]byte{kvEnvelopeV1, 0, 0, 0, 0, 0, 0, 0, 0}, `{"subject":{"id":"password:owner"}}`...)
	// An entry of this deployment's from long ago (a token since revoked),
	// written back now.
	past := testRing(t)
	past.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	tampered := append([]byte(nil), e.Value()...)
	tampered[len(tampered)-1] ^= 1
	for _, tc := range []struct {
		name   string
		value  []byte
		reason string
	}{
		{"unsealed", plain, "malformed"},
		{"another deployment's", foreign.SealValue(b.Bucket()+"/forged", plain), "unknown_key"},
		{"moved", e.Value(), "forged"},
		{"tampered", tampered, "forged"},
		{"cut", e.Value()[:12], "malformed"},
		{"written back", past.SealValue(b.Bucket()+"/forged", plain), "replayed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Put(ctx, "forged", tc.value); err != nil {
				t.Fatal(err)
			}
			if v, _, err := k.Get(ctx, bucketAccess, "forged"); !errors.Is(err, authserver.ErrNotFound) {
				t.Fatalf("read %q, %v; want not found", v, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if counted["oauth/"+tc.reason] == 0 {
				t.Fatalf("not counted as oauth/%s: %v", tc.reason, counted)
			}
		})
	}
	if v, _, err := k.Get(ctx, bucketAccess, "real"); err != nil || !strings.Contains(string(v), "owner") {
		t.Fatalf("the real entry: %q %v", v, err)
	}
}

// BenchmarkGetAcrossNodes is the store's part of a bearer check on a node
// other than the one that issued the token: a Get, through another
// connection to the NATS, of an access token's entry (about 250 bytes)
// that the first node wrote and sealed. Its figure is what sealing adds to
// a cross-node bearer check (docs/proxy-cluster.md, "Trust").
func BenchmarkGetAcrossNodes(b *testing.B) {
	ctx := context.Background()
	url := natstest.Start(b)
	writer, err := newStore(natstest.JetStream(b, url), testRing(b), "bench", 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	reader, err := newStore(natstest.JetStream(b, url), testRing(b), "bench", 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	entry := []byte(`{"family_id":"fam-0123456789abcdef","client_id":"client-0123456789abcdef0123456789","subject":{"id":"password:owner","display":"owner","method":"password"},"resource":"https://proxy.example.com/mcp","scope":"mcp","expires_at":"2026-11-29T08:00:00Z"}`)
	if _, err := writer.Create(ctx, bucketAccess, "k", entry, time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := reader.Get(ctx, bucketAccess, "k"); err != nil {
			b.Fatal(err)
		}
	}
}
