package authserver

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// kvMaker opens a store for one contract case.
type kvMaker struct {
	name string
	open func(t *testing.T, now func() time.Time) KV
}

var kvMakers = []kvMaker{
	{"memory", func(t *testing.T, now func() time.Time) KV { return NewMemoryKV(now) }},
	{"bolt", func(t *testing.T, now func() time.Time) KV {
		kv, err := OpenBoltKV(filepath.Join(t.TempDir(), "auth.db"), now)
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}},
}

// TestKVContract runs the KV's contract against every implementation.
func TestKVContract(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(t *testing.T, kv KV, clock *fakeClock)
	}{
		{"get missing", func(t *testing.T, kv KV, _ *fakeClock) {
			if _, _, err := kv.Get(ctx, "b", "k"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("err %v", err)
			}
		}},
		{"create, get, create again", func(t *testing.T, kv KV, _ *fakeClock) {
			rev := mustCreate(t, kv, "b", "k", "v1", 0)
			v, got, err := kv.Get(ctx, "b", "k")
			if err != nil || string(v) != "v1" || got != rev {
				t.Fatalf("get %q rev %d (created %d) %v", v, got, rev, err)
			}
			if _, err := kv.Create(ctx, "b", "k", []byte("v2"), 0); !errors.Is(err, ErrExists) {
				t.Fatalf("second create: %v", err)
			}
			if v, _, _ := kv.Get(ctx, "b", "k"); string(v) != "v1" {
				t.Fatalf("a refused create changed the value to %q", v)
			}
		}},
		{"update and conflict", func(t *testing.T, kv KV, _ *fakeClock) {
			rev := mustCreate(t, kv, "b", "k", "v1", 0)
			rev2, err := kv.Update(ctx, "b", "k", []byte("v2"), rev, 0)
			if err != nil || rev2 == rev {
				t.Fatalf("update: rev %d -> %d, %v", rev, rev2, err)
			}
			if _, err := kv.Update(ctx, "b", "k", []byte("v3"), rev, 0); !errors.Is(err, ErrConflict) {
				t.Fatalf("update at a stale revision: %v", err)
			}
			if v, got, _ := kv.Get(ctx, "b", "k"); string(v) != "v2" || got != rev2 {
				t.Fatalf("after the conflict: %q rev %d", v, got)
			}
			if _, err := kv.Update(ctx, "b", "missing", []byte("x"), 1, 0); !errors.Is(err, ErrNotFound) {
				t.Fatalf("update of a missing key: %v", err)
			}
		}},
		{"expiry", func(t *testing.T, kv KV, clock *fakeClock) {
			mustCreate(t, kv, "b", "short", "v", time.Minute)
			mustCreate(t, kv, "b", "forever", "v", 0)
			clock.Advance(59 * time.Second)
			if _, _, err := kv.Get(ctx, "b", "short"); err != nil {
				t.Fatalf("gone before its time: %v", err)
			}
			clock.Advance(time.Second)
			if _, _, err := kv.Get(ctx, "b", "short"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("expired entry reads as %v", err)
			}
			if _, err := kv.Update(ctx, "b", "short", []byte("x"), 1, 0); !errors.Is(err, ErrNotFound) {
				t.Fatalf("update of an expired entry: %v", err)
			}
			mustCreate(t, kv, "b", "short", "again", time.Minute) // an expired key is free
			clock.Advance(1000 * 24 * time.Hour)
			if _, _, err := kv.Get(ctx, "b", "forever"); err != nil {
				t.Fatalf("ttl 0 expired: %v", err)
			}
		}},
		{"update sets a new expiry", func(t *testing.T, kv KV, clock *fakeClock) {
			rev := mustCreate(t, kv, "b", "k", "v", time.Minute)
			clock.Advance(50 * time.Second)
			if _, err := kv.Update(ctx, "b", "k", []byte("v2"), rev, time.Minute); err != nil {
				t.Fatal(err)
			}
			clock.Advance(50 * time.Second)
			if _, _, err := kv.Get(ctx, "b", "k"); err != nil {
				t.Fatalf("expired on its first ttl: %v", err)
			}
		}},
		{"delete", func(t *testing.T, kv KV, _ *fakeClock) {
			rev := mustCreate(t, kv, "b", "k", "v", 0)
			if err := kv.Delete(ctx, "b", "k"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := kv.Get(ctx, "b", "k"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after delete: %v", err)
			}
			if err := kv.Delete(ctx, "b", "k"); err != nil {
				t.Fatalf("deleting a missing key: %v", err)
			}
			if err := kv.Delete(ctx, "never", "k"); err != nil {
				t.Fatalf("deleting in a missing bucket: %v", err)
			}
			if rev2 := mustCreate(t, kv, "b", "k", "v", 0); rev2 <= rev {
				t.Fatalf("revision went from %d back to %d", rev, rev2)
			}
		}},
		{"count", func(t *testing.T, kv KV, clock *fakeClock) {
			mustCreate(t, kv, "b", "1", "v", 0)
			mustCreate(t, kv, "b", "2", "v", time.Minute)
			mustCreate(t, kv, "b", "3", "v", 0)
			mustCreate(t, kv, "other", "1", "v", 0)
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
		{"values are copies", func(t *testing.T, kv KV, _ *fakeClock) {
			in := []byte("value")
			mustCreate(t, kv, "b", "k", string(in), 0)
			v, _, _ := kv.Get(ctx, "b", "k")
			v[0] = 'X'
			if v2, _, _ := kv.Get(ctx, "b", "k"); string(v2) != "value" {
				t.Fatalf("stored value changed to %q", v2)
			}
		}},
		{"buckets are separate", func(t *testing.T, kv KV, _ *fakeClock) {
			mustCreate(t, kv, "a", "k", "in a", 0)
			mustCreate(t, kv, "b", "k", "in b", 0)
			if v, _, _ := kv.Get(ctx, "a", "k"); string(v) != "in a" {
				t.Fatalf("bucket a holds %q", v)
			}
		}},
	}
	for _, m := range kvMakers {
		for _, tc := range cases {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				clock := newFakeClock()
				kv := m.open(t, clock.Now)
				defer kv.Close()
				tc.run(t, kv, clock)
			})
		}
	}
}

func mustCreate(t *testing.T, kv KV, bucket, key, value string, ttl time.Duration) uint64 {
	t.Helper()
	rev, err := kv.Create(context.Background(), bucket, key, []byte(value), ttl)
	if err != nil {
		t.Fatalf("create %s/%s: %v", bucket, key, err)
	}
	return rev
}

// TestBoltKVFile: what only the file store does: survive a reopen, keep
// its file private, sweep expired entries on open, close twice.
func TestBoltKVFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "auth.db")
	clock := newFakeClock()
	kv, err := OpenBoltKV(path, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	rev := mustCreate(t, kv, "b", "kept", "v", time.Hour)
	mustCreate(t, kv, "b", "short", "v", time.Minute)
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := kv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if runtime.GOOS != "windows" {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("file mode %v (%v), want 0600", fi.Mode().Perm(), err)
		}
	}

	clock.Advance(2 * time.Minute)
	kv, err = OpenBoltKV(path, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	v, got, err := kv.Get(ctx, "b", "kept")
	if err != nil || string(v) != "v" || got != rev {
		t.Fatalf("after reopening: %q rev %d (was %d) %v", v, got, rev, err)
	}
	if _, err := kv.Update(ctx, "b", "kept", []byte("v2"), rev, time.Hour); err != nil {
		t.Fatalf("update at the revision from before the reopen: %v", err)
	}
	clock.Advance(59 * time.Minute) // past the first hour, within the update's
	if _, _, err := kv.Get(ctx, "b", "kept"); err != nil {
		t.Fatalf("the update's expiry was not kept: %v", err)
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}

	// The open swept the expired entry out of the file itself.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("b")).Get([]byte("short")) != nil {
			t.Error("an expired entry is still in the file after an open")
		}
		return nil
	})
}

// TestServerOnBolt: sign-ins survive a restart on the file store.
func TestServerOnBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.db")
	e := newTestEnv(t, func(cfg *Config) {
		kv, err := OpenBoltKV(path, cfg.Now)
		if err != nil {
			t.Fatal(err)
		}
		cfg.KV = kv
	})
	c := e.registerClaude()
	access, refresh := e.tokens(c)
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}

	// The restarted server: same configuration, the file reopened.
	kv, err := OpenBoltKV(path, e.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.s.cfg
	cfg.KV = kv
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Verify(context.Background(), access, e.resA.URI); err != nil {
		t.Fatalf("access token after the restart: %v", err)
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {c.id}}
	for i, want := range []int{200, 400} { // the second use is a reuse
		req := httptest.NewRequest("POST", "/oauth/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code != want {
			t.Fatalf("refresh %d after the restart: %d %s", i, w.Code, w.Body)
		}
	}
}
