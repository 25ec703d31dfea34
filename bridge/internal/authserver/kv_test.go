package authserver

import (
	"context"
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

// mustCreate is kvtest.MustCreate, which this package's own tests cannot
// import (kvtest imports authserver).
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
	for i, want := range []int{200, 400} { // the second use, past the grace, is a reuse
		if i == 1 {
			e.clock.Advance(defaultRefreshGrace + time.Second)
		}
		req := httptest.NewRequest("POST", "/oauth/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code != want {
			t.Fatalf("refresh %d after the restart: %d %s", i, w.Code, w.Body)
		}
	}
}
