package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// persistedEngine is one life of a server with its records in file: the
// test makes two, as a process and its restart.
type persistedEngine struct {
	*engineHarness
	store  *FileStore
	atOpen *noteLog
}

// blockingTarget is echoTarget whose "block" calls wait for their session
// (or client) to end: a call still running when the server stops.
type blockingTarget struct {
	*echoTarget
	name string
	// atOpen is the note each session had at its Open (Remember's, kept
	// in its record), in order.
	atOpen *noteLog
}

type noteLog struct {
	mu    sync.Mutex
	notes []string
}

func (b blockingTarget) Name() string { return b.name }

func (b blockingTarget) Open(ctx context.Context, s *Session, params json.RawMessage) (json.RawMessage, error) {
	b.atOpen.mu.Lock()
	b.atOpen.notes = append(b.atOpen.notes, string(s.Note()))
	b.atOpen.mu.Unlock()
	return b.echoTarget.Open(ctx, s, params)
}

func (b blockingTarget) Request(ctx context.Context, s *Session, m *Message, reply Sink) {
	if strings.Contains(string(m.Params), `"block"`) {
		select {
		case <-ctx.Done():
		case <-s.Done():
		}
		return
	}
	b.echoTarget.Request(ctx, s, m, reply)
}

func startPersisted(t *testing.T, file, route string) *persistedEngine {
	t.Helper()
	store, err := OpenFileStore(file, FileStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &engineHarness{srv: NewServer(ServerOptions{Name: "this gateway"}), t: &echoTarget{}}
	h.srv.Persist(store, func(r *http.Request) string { return r.Header.Get("X-User") })
	target := blockingTarget{h.t, route, &noteLog{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.srv.ServeStreamable(w, r, target)
	}))
	h.url = hs.URL
	e := &persistedEngine{engineHarness: h, store: store, atOpen: target.atOpen}
	t.Cleanup(func() { e.stop(t); hs.Close() })
	return e
}

// stop is the shutdown of a process: sessions closed, records written.
func (e *persistedEngine) stop(t *testing.T) {
	e.srv.Close()
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsSurviveRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sessions.json")
	first := startPersisted(t, file, "echo")
	r := first.do(t, "POST", initBody("kept"), "X-User", "alice")
	sid := r.header.Get(HeaderSessionID)
	if r.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	// The target's own state, kept in the record (the proxy's
	// select_browser choice).
	first.srv.Lookup(sid, "echo").Remember(json.RawMessage(`{"browser":"b2"}`))
	// A call in flight when the server stops is told it was a restart.
	inflight := make(chan reply, 1)
	go func() {
		inflight <- first.do(t, "POST", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block"}}`, HeaderSessionID, sid, "X-User", "alice")
	}()
	testutil.WaitFor(t, "the blocking call to reach the target", func() bool {
		l := first.srv.Lookup(sid, "echo").lease
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.active > 0
	})
	first.stop(t)
	if got := <-inflight; got.status != 200 || !strings.Contains(got.body, "this gateway is restarting") || !strings.Contains(got.body, "the session carries on") {
		t.Fatalf("the call in flight at the shutdown: %d %s; want an error naming the restart", got.status, got.body)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(sid)) || !bytes.Contains(data, []byte(`"kept"`)) {
		t.Fatalf("the records file should hold the record but not the session id: %s", data)
	}
	if fi, _ := os.Stat(file); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Fatalf("the records file's mode is %v; want 0600", fi.Mode().Perm())
	}

	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}`
	other := startPersisted(t, file, "another route")
	if r := other.do(t, "POST", call, HeaderSessionID, sid, "X-User", "alice"); r.status != http.StatusNotFound {
		t.Fatalf("the session on another route: %d %s; want 404", r.status, r.body)
	}
	other.stop(t)

	second := startPersisted(t, file, "echo")
	for _, tc := range []struct{ name, user string }{{"another user", "mallory"}, {"no user", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			if r := second.do(t, "POST", call, HeaderSessionID, sid, "X-User", tc.user); r.status != http.StatusNotFound || !strings.Contains(r.body, `"code":-32001`) {
				t.Fatalf("%d %s; want 404 session not found", r.status, r.body)
			}
		})
	}
	if r := second.do(t, "POST", call, HeaderSessionID, sid, "X-User", "alice"); r.status != 200 || r.body != `{"jsonrpc":"2.0","id":3,"result":{"name":"x"}}` {
		t.Fatalf("the session after the restart: %d %s", r.status, r.body)
	}
	if r := second.do(t, "POST", call, HeaderSessionID, sid, "X-User", "mallory"); r.status != http.StatusNotFound {
		t.Fatalf("the re-opened session used by another user: %d %s; want 404", r.status, r.body)
	}
	second.t.mu.Lock()
	opened, notes := second.t.opened, strings.Join(second.t.notes, ",")
	second.t.mu.Unlock()
	if len(opened) != 1 || string(opened[0].Init) != `{"protocolVersion":"2025-06-18","clientInfo":{"name":"kept"}}` || notes != "notifications/initialized" {
		t.Fatalf("the target was opened %d times (init %s), told %q; want once, with the client's initialize, then notifications/initialized", len(opened), opened[0].Init, notes)
	}
	second.atOpen.mu.Lock()
	atOpen := strings.Join(second.atOpen.notes, ",")
	second.atOpen.mu.Unlock()
	if got := atOpen; got != `{"browser":"b2"}` {
		t.Fatalf("the re-opened session's note at its Open was %q; want the one remembered before the restart", got)
	}
	if r := second.do(t, "DELETE", "", HeaderSessionID, sid, "X-User", "alice"); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if _, ok := second.store.Get(sid); ok {
		t.Fatal("the record of a deleted session is kept")
	}
}

func TestFileStore(t *testing.T) {
	rec := func(route string, used time.Time) SessionRecord {
		return SessionRecord{Route: route, Init: json.RawMessage(`{}`), LastUsed: used}
	}
	t.Run("corrupt file ignored with a logged sentence", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "s.json")
		if err := os.WriteFile(file, []byte(`{"version":1,"sessions":{`), 0o600); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		st, err := OpenFileStore(file, FileStoreOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("a corrupt file should be ignored, not refused: %v", err)
		}
		if !strings.Contains(logs.String(), "the session records file is not readable as one") {
			t.Fatalf("log: %s", logs.String())
		}
		if err := st.Put(map[string]SessionRecord{"a": rec("r", time.Now())}); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st2, err := OpenFileStore(file, FileStoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := st2.Get("a"); !ok {
			t.Fatal("the rewritten file lost its record")
		}
	})
	t.Run("unreadable file refused", func(t *testing.T) {
		dir := t.TempDir() // a directory where the file should be
		if _, err := OpenFileStore(dir, FileStoreOptions{}); err == nil || !strings.Contains(err.Error(), "reading the session records") {
			t.Fatalf("got %v; want an error naming the file", err)
		}
	})
	t.Run("bounded, least recently used dropped, expired dropped, big init refused", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "s.json")
		st, err := OpenFileStore(file, FileStoreOptions{MaxRecords: 2, TTL: time.Hour, MaxInitBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := st.Put(map[string]SessionRecord{"old": rec("r", now.Add(-3*time.Minute)), "mid": rec("r", now.Add(-2*time.Minute)),
			"new": rec("r", now), "expired": rec("r", now.Add(-2*time.Hour))}); err != nil {
			t.Fatal(err)
		}
		big := rec("r", now)
		big.Init = json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)
		if err := st.Put(map[string]SessionRecord{"big": big}); err == nil {
			t.Fatal("a record with oversized initialize params was taken")
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st2, err := OpenFileStore(file, FileStoreOptions{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]bool{"old": false, "mid": true, "new": true, "expired": false, "big": false} {
			if _, ok := st2.Get(id); ok != want {
				t.Errorf("record %q kept %v; want %v", id, ok, want)
			}
		}
	})
}

// TestSessionReopenedOnce: a client's first requests after a restart often
// come together (its GET stream and a call): the session is re-opened once,
// and each request is served in it.
func TestSessionReopenedOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sessions.json")
	first := startPersisted(t, file, "echo")
	r := first.do(t, "POST", initBody("together"))
	sid := r.header.Get(HeaderSessionID)
	if r.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	first.stop(t)

	second := startPersisted(t, file, "echo")
	const n = 8
	answers := make(chan reply, n)
	for i := range n {
		go func() {
			answers <- second.do(t, "POST", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"x"}}`, i), HeaderSessionID, sid)
		}()
	}
	for range n {
		if r := <-answers; r.status != 200 || !strings.Contains(r.body, `"result":{"name":"x"}`) {
			t.Fatalf("a request after the restart: %d %s", r.status, r.body)
		}
	}
	if opened, _ := second.t.counts(); opened != 1 {
		t.Fatalf("the target was opened %d times for one session; want once", opened)
	}
}
