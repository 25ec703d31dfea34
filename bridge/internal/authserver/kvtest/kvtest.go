// Package kvtest holds the contract every authserver.KV keeps, as a test
// any store's package runs against its own implementation: the memory and
// bbolt stores in authserver, JetStream in authserver/jetstreamkv. It is
// imported by tests only (bridge/internal/archtest holds that line).
package kvtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
)

// Clock is a store's clock in tests: it moves only when a test moves it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// Now is the clock's time, to hand to a store as its clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// MustCreate creates bucket/key with value, failing the test if it cannot,
// and returns the entry's revision.
func MustCreate(t testing.TB, kv authserver.KV, bucket, key, value string, ttl time.Duration) uint64 {
	t.Helper()
	rev, err := kv.Create(context.Background(), bucket, key, []byte(value), ttl)
	if err != nil {
		t.Fatalf("create %s/%s: %v", bucket, key, err)
	}
	return rev
}

// Contract runs the KV contract, each case as a subtest on a fresh store
// from open, whose clock is now; the store is closed after the case.
func Contract(t *testing.T, open func(t *testing.T, now func() time.Time) authserver.KV) {
	for _, tc := range contractCases {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock()
			kv := open(t, clock.Now)
			defer kv.Close()
			tc.run(t, kv, clock)
		})
	}
}

var contractCases = []struct {
	name string
	run  func(t *testing.T, kv authserver.KV, clock *Clock)
}{
	{"get missing", func(t *testing.T, kv authserver.KV, _ *Clock) {
		if _, _, err := kv.Get(context.Background(), "b", "k"); !errors.Is(err, authserver.ErrNotFound) {
			t.Fatalf("err %v", err)
		}
	}},
	{"create, get, create again", func(t *testing.T, kv authserver.KV, _ *Clock) {
		ctx := context.Background()
		rev := MustCreate(t, kv, "b", "k", "v1", 0)
		v, got, err := kv.Get(ctx, "b", "k")
		if err != nil || string(v) != "v1" || got != rev {
			t.Fatalf("get %q rev %d (created %d) %v", v, got, rev, err)
		}
		if _, err := kv.Create(ctx, "b", "k", []byte("v2"), 0); !errors.Is(err, authserver.ErrExists) {
			t.Fatalf("second create: %v", err)
		}
		if v, _, _ := kv.Get(ctx, "b", "k"); string(v) != "v1" {
			t.Fatalf("a refused create changed the value to %q", v)
		}
	}},
	{"update and conflict", func(t *testing.T, kv authserver.KV, _ *Clock) {
		ctx := context.Background()
		rev := MustCreate(t, kv, "b", "k", "v1", 0)
		rev2, err := kv.Update(ctx, "b", "k", []byte("v2"), rev, 0)
		if err != nil || rev2 == rev {
			t.Fatalf("update: rev %d -> %d, %v", rev, rev2, err)
		}
		if _, err := kv.Update(ctx, "b", "k", []byte("v3"), rev, 0); !errors.Is(err, authserver.ErrConflict) {
			t.Fatalf("update at a stale revision: %v", err)
		}
		if v, got, _ := kv.Get(ctx, "b", "k"); string(v) != "v2" || got != rev2 {
			t.Fatalf("after the conflict: %q rev %d", v, got)
		}
		if _, err := kv.Update(ctx, "b", "missing", []byte("x"), 1, 0); !errors.Is(err, authserver.ErrNotFound) {
			t.Fatalf("update of a missing key: %v", err)
		}
	}},
	{"expiry", func(t *testing.T, kv authserver.KV, clock *Clock) {
		ctx := context.Background()
		MustCreate(t, kv, "b", "short", "v", time.Minute)
		MustCreate(t, kv, "b", "forever", "v", 0)
		clock.Advance(59 * time.Second)
		if _, _, err := kv.Get(ctx, "b", "short"); err != nil {
			t.Fatalf("gone before its time: %v", err)
		}
		clock.Advance(time.Second)
		if _, _, err := kv.Get(ctx, "b", "short"); !errors.Is(err, authserver.ErrNotFound) {
			t.Fatalf("expired entry reads as %v", err)
		}
		if _, err := kv.Update(ctx, "b", "short", []byte("x"), 1, 0); !errors.Is(err, authserver.ErrNotFound) {
			t.Fatalf("update of an expired entry: %v", err)
		}
		MustCreate(t, kv, "b", "short", "again", time.Minute) // an expired key is free
		clock.Advance(1000 * 24 * time.Hour)
		if _, _, err := kv.Get(ctx, "b", "forever"); err != nil {
			t.Fatalf("ttl 0 expired: %v", err)
		}
	}},
	{"update sets a new expiry", func(t *testing.T, kv authserver.KV, clock *Clock) {
		rev := MustCreate(t, kv, "b", "k", "v", time.Minute)
		clock.Advance(50 * time.Second)
		if _, err := kv.Update(context.Background(), "b", "k", []byte("v2"), rev, time.Minute); err != nil {
			t.Fatal(err)
		}
		clock.Advance(50 * time.Second)
		if _, _, err := kv.Get(context.Background(), "b", "k"); err != nil {
			t.Fatalf("expired on its first ttl: %v", err)
		}
	}},
	{"delete", func(t *testing.T, kv authserver.KV, _ *Clock) {
		ctx := context.Background()
		rev := MustCreate(t, kv, "b", "k", "v", 0)
		if err := kv.Delete(ctx, "b", "k"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := kv.Get(ctx, "b", "k"); !errors.Is(err, authserver.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if err := kv.Delete(ctx, "b", "k"); err != nil {
			t.Fatalf("deleting a missing key: %v", err)
		}
		if err := kv.Delete(ctx, "never", "k"); err != nil {
			t.Fatalf("deleting in a missing bucket: %v", err)
		}
		if rev2 := MustCreate(t, kv, "b", "k", "v", 0); rev2 <= rev {
			t.Fatalf("revision went from %d back to %d", rev, rev2)
		}
	}},
	{"count", func(t *testing.T, kv authserver.KV, clock *Clock) {
		ctx := context.Background()
		MustCreate(t, kv, "b", "1", "v", 0)
		MustCreate(t, kv, "b", "2", "v", time.Minute)
		MustCreate(t, kv, "b", "3", "v", 0)
		MustCreate(t, kv, "other", "1", "v", 0)
		if err := kv.Delete(ctx, "b", "3"); err != nil {
			t.Fatal(err)
		}
		if n, err := kv.Count(ctx, "b"); n != 2 || err != nil {
			t.Fatalf("count %d %v, want 2", n, err)
		}
		clock.Advance(time.Minute)
		if n, err := kv.Count(ctx, "b"); n != 1 || err != nil {
			t.Fatalf("count %d %v after one expired, want 1", n, err)
		}
		if n, err := kv.Count(ctx, "empty"); n != 0 || err != nil {
			t.Fatalf("count of a missing bucket: %d %v", n, err)
		}
	}},
	{"list", func(t *testing.T, kv authserver.KV, clock *Clock) {
		ctx := context.Background()
		MustCreate(t, kv, "b", "1", "one", 0)
		MustCreate(t, kv, "b", "2", "two", time.Minute)
		rev := MustCreate(t, kv, "b", "3", "three", 0)
		MustCreate(t, kv, "b", "4", "four", 0)
		MustCreate(t, kv, "other", "1", "elsewhere", 0)
		if _, err := kv.Update(ctx, "b", "3", []byte("three again"), rev, 0); err != nil {
			t.Fatal(err)
		}
		if err := kv.Delete(ctx, "b", "4"); err != nil {
			t.Fatal(err)
		}
		want := func(vals ...string) {
			t.Helper()
			got, err := kv.List(ctx, "b")
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, v := range got {
				seen[string(v)]++
			}
			if len(got) != len(vals) {
				t.Fatalf("list %q, want %q", got, vals)
			}
			for _, v := range vals {
				if seen[v] != 1 {
					t.Fatalf("list %q, want %q", got, vals)
				}
			}
		}
		want("one", "two", "three again")
		clock.Advance(time.Minute)
		want("one", "three again")
		if got, err := kv.List(ctx, "empty"); len(got) != 0 || err != nil {
			t.Fatalf("list of a missing bucket: %q %v", got, err)
		}
		got, _ := kv.List(ctx, "b")
		got[0][0] = 'X'
		want("one", "three again") // values are copies
	}},
	{"values are copies", func(t *testing.T, kv authserver.KV, _ *Clock) {
		in := []byte("value")
		MustCreate(t, kv, "b", "k", string(in), 0)
		v, _, _ := kv.Get(context.Background(), "b", "k")
		v[0] = 'X'
		if v2, _, _ := kv.Get(context.Background(), "b", "k"); string(v2) != "value" {
			t.Fatalf("stored value changed to %q", v2)
		}
	}},
	{"buckets are separate", func(t *testing.T, kv authserver.KV, _ *Clock) {
		MustCreate(t, kv, "a", "k", "in a", 0)
		MustCreate(t, kv, "b", "k", "in b", 0)
		if v, _, _ := kv.Get(context.Background(), "a", "k"); string(v) != "in a" {
			t.Fatalf("bucket a holds %q", v)
		}
	}},
}
