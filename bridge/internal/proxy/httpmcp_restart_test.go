package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// TestHTTPBrowserSessionSurvivesRestart (issue 33, item 4): with a session
// store (what --oauth-state gives), a session of the browser endpoint
// outlives the proxy: the call in flight at the stop ends with the
// sentence naming the restart, and the same session id, after the
// restart, reaches the user's browser again, under the same tab group key;
// another user's token finds no such session. The OAuth state is shared
// between the two lives, as the state file is.
func TestHTTPBrowserSessionSurvivesRestart(t *testing.T) {
	kv := authserver.NewMemoryKV(nil)
	file := filepath.Join(t.TempDir(), "oauth.db.sessions.json")
	openStore := func() *mcphttp.FileStore {
		st, err := mcphttp.OpenFileStore(file, mcphttp.FileStoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	store := openStore()
	tweak := func(st *mcphttp.FileStore) func(*HTTPOptions) {
		return func(o *HTTPOptions) {
			o.KV, o.Sessions = kv, st
		}
	}
	tp := newHTTPTestProxy(t, Options{ShutdownGrace: 100 * time.Millisecond}, tweak(store))
	b := startBrowser(t, tp, "alice", "Chrome")
	endpoint := tp.public() + "/mcp"
	tok := accessToken(t, passwordPerson(), endpoint)
	sid := rawSession(t, endpoint, tok)
	call := func(tp *testProxy, b *fakeBrowser, id int, tool string) (chan string, *relaywire.Message) {
		answer := make(chan string, 1)
		go func() {
			_, _, body := rawPost(t, endpoint, tok, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"message":"hi"}}}`,
				mcphttp.HeaderSessionID, sid, mcphttp.HeaderProtocolVersion, "2025-11-25")
			answer <- body
		}()
		return answer, b.call(t)
	}
	first, before := call(tp, b, 2, "echo")
	if body := <-first; !strings.Contains(body, "Chrome: hi") {
		t.Fatalf("echo before the restart answered %s", body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inflight, _ := call(tp, b, 3, "hang")
	if err := tp.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-inflight:
		if !strings.Contains(body, "restarting") || !strings.Contains(body, "session carries on") {
			t.Errorf("the call in flight at the stop was answered %s; want the sentence naming the restart", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight at the stop was not answered")
	}
	addr := tp.hs.Listener.Addr().String()
	tp.hs.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// The second life, on the same address.
	hs := httptest.NewUnstartedServer(nil)
	hs.Listener.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	hs.Listener = ln
	// Closed after the proxy's own cleanup (cleanups run last first): its
	// writer may still be writing the last use of the session when the
	// test ends, and the temporary directory must be left empty.
	store2 := openStore()
	t.Cleanup(func() { _ = store2.Close() })
	tp2 := newHTTPTestProxyOn(t, hs, Options{}, tweak(store2))
	b2 := startBrowser(t, tp2, "alice", "Chrome")
	bob := startBrowser(t, tp2, "bob", "Chrome")
	bobTok := accessToken(t, pairedPerson(t, bob.tclient), endpoint)
	if status, _, body := rawPost(t, endpoint, bobTok, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, mcphttp.HeaderSessionID, sid); status != http.StatusNotFound {
		t.Errorf("alice's session with another user's token after the restart: %d %s; want 404", status, body)
	}
	answer, after := call(tp2, b2, 4, "echo")
	if body := <-answer; !strings.Contains(body, "Chrome: hi") {
		t.Errorf("echo after the restart answered %s", body)
	}
	if string(after.Client) == "" || string(after.Client) != string(before.Client) {
		t.Errorf("the browser was told the client %s after the restart, %s before: the session's tab group key must stay", after.Client, before.Client)
	}
}
