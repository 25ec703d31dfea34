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
	rp := newRestartableProxy(t)
	tp := rp.tp
	b := startBrowser(t, tp, "alice", "Chrome")
	endpoint := tp.public() + "/mcp"
	tok := accessToken(t, passwordPerson(), endpoint)
	sid := rawSession(t, endpoint, tok)
	call := func(b *fakeBrowser, id int, tool string) (chan string, *relaywire.Message) {
		answer := make(chan string, 1)
		go func() { answer <- postCall(t, endpoint, tok, sid, id, tool) }()
		return answer, b.call(t)
	}
	first, before := call(b, 2, "echo")
	if body := <-first; !strings.Contains(body, "Chrome: hi") {
		t.Fatalf("echo before the restart answered %s", body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inflight, _ := call(b, 3, "hang")
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

	tp2 := rp.restart(t)
	b2 := startBrowser(t, tp2, "alice", "Chrome")
	bob := startBrowser(t, tp2, "bob", "Chrome")
	bobTok := accessToken(t, pairedPerson(t, bob.tclient), endpoint)
	if status, _, body := rawPost(t, endpoint, bobTok, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, mcphttp.HeaderSessionID, sid); status != http.StatusNotFound {
		t.Errorf("alice's session with another user's token after the restart: %d %s; want 404", status, body)
	}
	answer, after := call(b2, 4, "echo")
	if body := <-answer; !strings.Contains(body, "Chrome: hi") {
		t.Errorf("echo after the restart answered %s", body)
	}
	if string(after.Client) == "" || string(after.Client) != string(before.Client) {
		t.Errorf("the browser was told the client %s after the restart, %s before: the session's tab group key must stay", after.Client, before.Client)
	}
}

// TestHTTPSelectedBrowserSurvivesRestart: the browser a session chose with
// select_browser is its browser after a restart of the proxy too. Until it
// is back, the session's calls are answered with an error naming it, never
// sent to the user's other browser (the default); once it is back, they
// reach it, though the other is still the default.
func TestHTTPSelectedBrowserSurvivesRestart(t *testing.T) {
	rp := newRestartableProxy(t)
	work := startBrowser(t, rp.tp, "alice", "Work")
	startBrowser(t, rp.tp, "alice", "Home") // the default: connected last
	endpoint := rp.tp.public() + "/mcp"
	tok := accessToken(t, passwordPerson(), endpoint)
	sid := rawSession(t, endpoint, tok)
	if body := postCall(t, endpoint, tok, sid, 2, "echo"); !strings.Contains(body, "Home: hi") {
		t.Fatalf("echo before select_browser answered %s; want the default, Home", body)
	}
	sel := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"select_browser","arguments":{"browser":"` + work.id + `"}}}`
	if _, _, body := rawPost(t, endpoint, tok, sel, mcphttp.HeaderSessionID, sid, mcphttp.HeaderProtocolVersion, "2025-11-25"); !strings.Contains(body, "now uses Work") {
		t.Fatalf("select_browser answered %s", body)
	}
	if body := postCall(t, endpoint, tok, sid, 4, "echo"); !strings.Contains(body, "Work: hi") {
		t.Fatalf("echo after select_browser answered %s", body)
	}

	tp2 := rp.restart(t)
	home2 := startBrowser(t, tp2, "alice", "Home") // back first: Work is not, yet
	body := postCall(t, endpoint, tok, sid, 5, "echo")
	if strings.Contains(body, "Home: hi") {
		t.Fatalf("after the restart, the session's call went to Home, the default, though Work was chosen: %s", body)
	}
	if !strings.Contains(body, "Work ("+work.id+")") || !strings.Contains(body, "not connected") {
		t.Errorf("a call while the chosen browser is not back answered %s; want an error naming Work", body)
	}
	work2 := startBrowser(t, tp2, "alice", "Work")
	// Home connects again after Work: the default again.
	home2.leave()
	startBrowser(t, tp2, "alice", "Home")
	if work2.id != work.id {
		t.Fatalf("Work came back as %s, was %s: a browser's id is stable across restarts", work2.id, work.id)
	}
	if body := postCall(t, endpoint, tok, sid, 6, "echo"); !strings.Contains(body, "Work: hi") {
		t.Errorf("after the restart, with Work back, echo answered %s; want Work, the session's choice", body)
	}
}

// restartableProxy is a proxy whose HTTP sessions are recorded in a file,
// as --oauth-state's are, started again on the same address with the same
// OAuth state and records, as a restarted proxy is.
type restartableProxy struct {
	tp    *testProxy
	kv    authserver.KV
	file  string
	store *mcphttp.FileStore
}

func newRestartableProxy(t *testing.T) *restartableProxy {
	rp := &restartableProxy{kv: authserver.NewMemoryKV(nil), file: filepath.Join(t.TempDir(), "oauth.db.sessions.json")}
	rp.store = rp.openStore(t)
	rp.tp = newHTTPTestProxy(t, Options{ShutdownGrace: 100 * time.Millisecond}, rp.tweak())
	return rp
}

func (rp *restartableProxy) openStore(t *testing.T) *mcphttp.FileStore {
	st, err := mcphttp.OpenFileStore(rp.file, mcphttp.FileStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (rp *restartableProxy) tweak() func(*HTTPOptions) {
	st := rp.store
	return func(o *HTTPOptions) { o.KV, o.Sessions = rp.kv, st }
}

// restart stops the proxy (if it was not stopped) and starts another on
// its address, with its state; the extensions must connect again.
func (rp *restartableProxy) restart(t *testing.T) *testProxy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rp.tp.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	addr := rp.tp.hs.Listener.Addr().String()
	rp.tp.hs.Close()
	if err := rp.store.Close(); err != nil {
		t.Fatal(err)
	}
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
	rp.store = rp.openStore(t)
	st := rp.store
	t.Cleanup(func() { _ = st.Close() })
	rp.tp = newHTTPTestProxyOn(t, hs, Options{}, rp.tweak())
	return rp.tp
}

// postCall posts a tools/call of tool (arguments {"message":"hi"}) in the
// session sid and returns the response's body.
func postCall(t *testing.T, endpoint, tok, sid string, id int, tool string) string {
	_, _, body := rawPost(t, endpoint, tok, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"message":"hi"}}}`,
		mcphttp.HeaderSessionID, sid, mcphttp.HeaderProtocolVersion, "2025-11-25")
	return body
}
