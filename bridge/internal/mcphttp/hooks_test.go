package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// hookedTarget is echoTarget with the optional parts an endpoint such as
// the cloud proxy fills in: a Gate refusing messages whose params say
// "over", Busy while busy is set, and server/discover passed on to
// Request (a backend that answers it itself).
type hookedTarget struct {
	*echoTarget
	busy atomic.Bool
}

func (h *hookedTarget) Admit(_ *Session, m *Message) error {
	if strings.Contains(string(m.Params), `"over"`) {
		return &Refusal{Status: http.StatusTooManyRequests, RetryAfter: time.Second, Code: -32004, Message: "rate limit exceeded"}
	}
	return nil
}

func (h *hookedTarget) Busy(*Session) bool { return h.busy.Load() }

func (h *hookedTarget) Discover(context.Context) (json.RawMessage, error) { return nil, ErrPassOn }

// newHookedEngine serves a hookedTarget with every ServerOptions hook set:
// the owner from X-User, ids prefixed "node1.", a body reader counting its
// releases, and a decoder refusing ids that begin with "proxy:".
func newHookedEngine(t *testing.T, released *atomic.Int64) (*engineHarness, *hookedTarget) {
	ht := &hookedTarget{echoTarget: &echoTarget{}}
	h := &engineHarness{t: ht.echoTarget}
	h.srv = NewServer(ServerOptions{
		IDPrefix: "node1.",
		Owner:    func(r *http.Request) string { return r.Header.Get("X-User") },
		ReadBody: func(w http.ResponseWriter, r *http.Request) ([]byte, func(), bool) {
			body, ok := ReadBody(w, r, 1<<20)
			return body, func() { released.Add(1) }, ok
		},
		Decode: func(body []byte) (*Message, int, error) {
			m, code, err := ParseMessage(body)
			if err == nil && strings.HasPrefix(string(m.ID), `"proxy:`) {
				return m, rpccode.InvalidRequest, errors.New("ids starting with proxy: are reserved")
			}
			return m, code, err
		},
	})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.srv.ServeStreamable(w, r, ht) }))
	t.Cleanup(func() { hs.Close(); h.srv.Close() })
	h.url = hs.URL
	return h, ht
}

func TestServerHooks(t *testing.T) {
	var released atomic.Int64
	h, ht := newHookedEngine(t, &released)
	open := h.do(t, http.MethodPost, initBody("c"), "X-User", "alice")
	sid := open.header.Get(HeaderSessionID)
	if open.status != http.StatusOK || !strings.HasPrefix(sid, "node1.") {
		t.Fatalf("initialize: %d %q %s; want 200 and an id beginning with the prefix", open.status, sid, open.body)
	}
	inSession := func(user string) []string {
		return []string{HeaderSessionID, sid, HeaderProtocolVersion, "2025-06-18", "X-User", user}
	}
	for _, tc := range []struct {
		name, user, body string
		status           int
		want             string
		retryAfter       string
	}{
		{"the owner's request", "alice", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"x":1}}`, 200, `"result":{"x":1}`, ""},
		{"another subject's: not found", "bob", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}`, 404, "session not found", ""},
		{"refused by the gate", "alice", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"over":1}}`, 429, "rate limit exceeded", "1"},
		{"refused by the decoder", "alice", `{"jsonrpc":"2.0","id":"proxy:1","method":"tools/call","params":{}}`, 400, "reserved", ""},
		{"server/discover passed on", "alice", `{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{"passed":true}}`, 200, `"result":{"passed":true}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(t, http.MethodPost, tc.body, inSession(tc.user)...)
			if r.status != tc.status || !strings.Contains(r.body, tc.want) || r.header.Get("Retry-After") != tc.retryAfter {
				t.Errorf("%d %s (Retry-After %q); want %d with %q (Retry-After %q)", r.status, r.body, r.header.Get("Retry-After"), tc.status, tc.want, tc.retryAfter)
			}
		})
	}
	// Every body read was given back: initialize, the five above (the
	// one of another subject's too).
	if n := released.Load(); n != 6 {
		t.Errorf("%d releases of the body reader; want 6", n)
	}
	// A stateless server/discover passed on is opened and served.
	r := h.do(t, http.MethodPost, `{"jsonrpc":"2.0","id":6,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		HeaderProtocolVersion, VersionStateless, "Mcp-Method", "server/discover")
	if r.status != http.StatusOK || !strings.Contains(r.body, `"result":{"_meta"`) {
		t.Errorf("stateless server/discover: %d %s; want the target's answer", r.status, r.body)
	}

	var s *Session
	h.srv.Sessions(func(x *Session) { s = x })
	ht.busy.Store(true)
	if s.EndIfIdle() {
		t.Fatal("EndIfIdle ended a busy session")
	}
	ht.busy.Store(false)
	if s.LastUsed().IsZero() || !s.EndIfIdle() || !s.Closed() {
		t.Fatalf("EndIfIdle did not end an idle session (last used %v)", s.LastUsed())
	}
}

// TestFailedReopenKeepsRecord: a session whose re-opening after a restart
// fails (its backend not back yet) keeps its record, and a later request
// re-opens it.
func TestFailedReopenKeepsRecord(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sessions.json")
	first := startPersisted(t, file, "r")
	sid := first.do(t, http.MethodPost, initBody("comes-back"), "X-User", "u").header.Get(HeaderSessionID)
	first.stop(t)

	down := startPersisted(t, file, "r")
	down.t.refuseAll.Store(true)
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if r := down.do(t, http.MethodPost, ping, HeaderSessionID, sid, "X-User", "u"); r.status != http.StatusServiceUnavailable {
		t.Fatalf("re-opening with the backend down: %d %s; want its refusal", r.status, r.body)
	}
	down.t.refuseAll.Store(false)
	if r := down.do(t, http.MethodPost, ping, HeaderSessionID, sid, "X-User", "u"); r.status != http.StatusOK {
		t.Fatalf("re-opening once the backend is back: %d %s; want the session", r.status, r.body)
	}
}
