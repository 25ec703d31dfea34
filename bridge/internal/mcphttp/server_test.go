package mcphttp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// echoTarget stands in for what an endpoint serves (a stdio server, a
// browser): tools/call answers its params, after one progress
// notification when asked for one; "refuse" as the client's name (or
// refuseAll) makes Open refuse. It records what the engine asked of it.
type echoTarget struct {
	refuseAll atomic.Bool // Open refuses every session: a backend down

	mu     sync.Mutex
	opened []*Session
	closed []*Session
	notes  []string
}

func (e *echoTarget) Name() string { return "echo" }

func (e *echoTarget) Open(_ context.Context, s *Session, params json.RawMessage) (json.RawMessage, error) {
	if strings.Contains(string(params), `"refuse"`) || e.refuseAll.Load() {
		return nil, &Refusal{Status: http.StatusServiceUnavailable, RetryAfter: 7 * time.Second, Code: rpccode.Unavailable, Message: "no room"}
	}
	e.mu.Lock()
	e.opened = append(e.opened, s)
	e.mu.Unlock()
	return json.RawMessage(`{"protocolVersion":"` + Negotiate("", Versions) + `","serverInfo":{"name":"echo"}}`), nil
}

func (e *echoTarget) Request(_ context.Context, _ *Session, m *Message, reply Sink) {
	if strings.Contains(string(m.Params), "progress") {
		reply.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`), false)
	}
	reply.Send(AppendResponse(nil, m.ID, m.Params, nil), true)
}

func (e *echoTarget) Notification(_ *Session, m *Message) {
	e.mu.Lock()
	e.notes = append(e.notes, m.Method)
	e.mu.Unlock()
}

func (e *echoTarget) Response(*Session, *Message) error { return nil }

func (e *echoTarget) Close(s *Session) {
	e.mu.Lock()
	e.closed = append(e.closed, s)
	e.mu.Unlock()
}

func (e *echoTarget) Discover(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`{"supportedVersions":["2026-07-28"]}`), nil
}

func (e *echoTarget) counts() (opened, closed int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.opened), len(e.closed)
}

type engineHarness struct {
	srv *Server
	t   *echoTarget
	url string
}

func newEngine(t *testing.T, opts ServerOptions) *engineHarness {
	h := &engineHarness{srv: NewServer(opts), t: &echoTarget{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.srv.ServeStreamable(w, r, h.t)
	}))
	t.Cleanup(func() { hs.Close(); h.srv.Close() })
	h.url = hs.URL
	return h
}

type reply struct {
	status int
	header http.Header
	body   string
}

func (h *engineHarness) do(t *testing.T, method, body string, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, h.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ContentTypeJSON)
	req.Header.Set("Accept", ContentTypeJSON+", "+ContentTypeSSE)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

const initRequest = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"%s"}}}`

func initBody(client string) string { return strings.Replace(initRequest, "%s", client, 1) }

func TestServerSessionLifetime(t *testing.T) {
	h := newEngine(t, ServerOptions{Sessions: sessionlimit.New(sessionlimit.Options{})})
	r := h.do(t, "POST", initBody("c"))
	sid := r.header.Get(HeaderSessionID)
	if r.status != 200 || sid == "" || !strings.Contains(r.body, `"name":"echo"`) {
		t.Fatalf("initialize: %d %q %s", r.status, sid, r.body)
	}
	if s := h.srv.Lookup(sid, "echo"); s == nil || string(s.Init) != `{"protocolVersion":"2025-06-18","clientInfo":{"name":"c"}}` {
		t.Fatalf("the session does not keep the client's initialize params: %+v", s)
	}
	if s := h.srv.Lookup(sid, "another route"); s != nil {
		t.Fatal("a session was found on a route it was not opened on")
	}

	for _, tc := range []struct {
		name, body  string
		status      int
		contentType string
		want        string
	}{
		{"request answered as JSON", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}`, 200, ContentTypeJSON, `{"jsonrpc":"2.0","id":2,"result":{"name":"x"}}`},
		{"notification first: an event stream", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"progress"}}`, 200, ContentTypeSSE, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\""},
		{"ping answered by the engine", `{"jsonrpc":"2.0","id":4,"method":"ping"}`, 200, ContentTypeJSON, `{"jsonrpc":"2.0","id":4,"result":{}}`},
		{"initialize again", `{"jsonrpc":"2.0","id":5,"method":"initialize","params":{}}`, 200, ContentTypeJSON, "already initialized"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, 202, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(t, "POST", tc.body, HeaderSessionID, sid)
			if r.status != tc.status || r.header.Get("Content-Type") != tc.contentType || !strings.Contains(r.body, tc.want) {
				t.Fatalf("got %d %q %s; want %d %q with %s", r.status, r.header.Get("Content-Type"), r.body, tc.status, tc.contentType, tc.want)
			}
		})
	}

	if r := h.do(t, "DELETE", "", HeaderSessionID, sid); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if opened, closed := h.t.counts(); opened != 1 || closed != 1 {
		t.Fatalf("the target saw %d opens and %d closes, want 1 and 1", opened, closed)
	}
	if r := h.do(t, "POST", `{"jsonrpc":"2.0","id":6,"method":"ping"}`, HeaderSessionID, sid); r.status != http.StatusNotFound || !strings.Contains(r.body, `"code":-32001`) {
		t.Fatalf("a request of the ended session: %d %s", r.status, r.body)
	}
}

func TestServerRefusals(t *testing.T) {
	h := newEngine(t, ServerOptions{Versions: StreamableVersions, Sessions: sessionlimit.New(sessionlimit.Options{PerClient: 1})})
	if r := h.do(t, "POST", initBody("first")); r.status != 200 {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		name, body string
		header     []string
		status     int
		retryAfter string
		want       string
	}{
		{"the target refuses", initBody("refuse"), nil, 503, "7", "no room"},
		{"a version the endpoint does not speak", initBody("c"), []string{HeaderProtocolVersion, "2024-11-05"}, 400, "", "unsupported MCP-Protocol-Version"},
		{"no session", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil, 400, "", "missing Mcp-Session-Id"},
		{"stateless headers disagree", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, []string{HeaderProtocolVersion, VersionStateless, HeaderMethod, "tools/call"}, 400, "", "must name the body's method"},
		{"not JSON", `{"jsonrpc":`, nil, 400, "", `"code":-32700`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(t, "POST", tc.body, tc.header...)
			if r.status != tc.status || r.header.Get("Retry-After") != tc.retryAfter || !strings.Contains(r.body, tc.want) {
				t.Fatalf("got %d (Retry-After %q) %s; want %d (%q) with %s", r.status, r.header.Get("Retry-After"), r.body, tc.status, tc.retryAfter, tc.want)
			}
		})
	}
}

func TestServerStateless(t *testing.T) {
	h := newEngine(t, ServerOptions{})
	stateless := []string{HeaderProtocolVersion, VersionStateless, HeaderMethod, "tools/call", HeaderName, "x"}
	r := h.do(t, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, stateless...)
	if r.status != 200 || r.body != `{"jsonrpc":"2.0","id":1,"result":{"name":"x"}}` || r.header.Get(HeaderSessionID) != "" {
		t.Fatalf("stateless call: %d %s (session %q)", r.status, r.body, r.header.Get(HeaderSessionID))
	}
	if opened, closed := h.t.counts(); opened != 1 || closed != 1 {
		t.Fatalf("the target saw %d opens and %d closes, want a session for the one request", opened, closed)
	}
	h.t.mu.Lock()
	s := h.t.opened[0]
	h.t.mu.Unlock()
	if !s.Stateless || s.Version != VersionStateless || s.Init != nil {
		t.Fatalf("the stateless session: stateless %v, version %q, init %s", s.Stateless, s.Version, s.Init)
	}
	r = h.do(t, "POST", `{"jsonrpc":"2.0","id":2,"method":"server/discover"}`, HeaderProtocolVersion, VersionStateless, HeaderMethod, "server/discover")
	if r.status != 200 || !strings.Contains(r.body, "supportedVersions") {
		t.Fatalf("server/discover: %d %s", r.status, r.body)
	}
	if opened, _ := h.t.counts(); opened != 1 {
		t.Fatal("server/discover opened a session on the target")
	}
}

func TestServerReapsIdleSessions(t *testing.T) {
	h := newEngine(t, ServerOptions{SessionTimeout: 50 * time.Millisecond})
	sid := h.do(t, "POST", initBody("c")).header.Get(HeaderSessionID)
	testutil.WaitFor(t, "the idle session reaped", func() bool { return h.srv.Lookup(sid, "echo") == nil })
	if _, closed := h.t.counts(); closed != 1 {
		t.Fatalf("the reaped session was closed on its target %d times, want 1", closed)
	}
}

func TestServerLocalClient(t *testing.T) {
	srv := NewServer(ServerOptions{Sessions: sessionlimit.New(sessionlimit.Options{})})
	t.Cleanup(srv.Close)
	target := &echoTarget{}
	ctx := context.Background()
	s, answer := srv.OpenLocal(ctx, target, "conn-1", &Message{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: "initialize", Params: json.RawMessage(`{"clientInfo":{"name":"c"}}`)})
	if s == nil || !strings.Contains(string(answer), `"name":"echo"`) || srv.Lookup(s.ID, "echo") != s {
		t.Fatalf("OpenLocal: %v %s", s, answer)
	}
	var before []string
	got := srv.Call(ctx, s, target, &Message{JSONRPC: "2.0", ID: json.RawMessage("2"), Method: "tools/call", Params: json.RawMessage(`{"name":"progress"}`)},
		func(msg []byte) { before = append(before, string(msg)) })
	if string(got) != `{"jsonrpc":"2.0","id":2,"result":{"name":"progress"}}` || len(before) != 1 || !strings.Contains(before[0], "notifications/progress") {
		t.Fatalf("Call: %s, before it %q", got, before)
	}

	heard := make(chan string, 1)
	listenCtx, stop := context.WithCancel(ctx)
	ended := make(chan bool)
	go func() { ended <- s.Listen(listenCtx, func(msg []byte) { heard <- string(msg) }) }()
	s.Notify([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	select {
	case msg := <-heard:
		if !strings.Contains(msg, "list_changed") {
			t.Fatalf("Listen heard %s", msg)
		}
	case <-time.After(testutil.WaitLimit):
		t.Fatal("Listen never heard the session's notification")
	}
	stop()
	if !<-ended {
		t.Fatal("Listen found the stream taken")
	}

	s.Close()
	if got := srv.Call(ctx, s, target, &Message{JSONRPC: "2.0", ID: json.RawMessage("3"), Method: "ping"}, nil); !strings.Contains(string(got), `"code":-32001`) {
		t.Fatalf("a call on the ended session: %s", got)
	}
	if got := srv.Call(ctx, nil, target, &Message{JSONRPC: "2.0", ID: json.RawMessage("4"), Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)}, nil); string(got) != `{"jsonrpc":"2.0","id":4,"result":{"name":"x"}}` {
		t.Fatalf("a stateless call: %s", got)
	}
}

// busyTarget is echoTarget whose sessions are Busy (a call forwarded and
// unanswered, between requests) while busy is set.
type busyTarget struct {
	echoTarget
	busy atomic.Bool
}

func (b *busyTarget) Busy(*Session) bool { return b.busy.Load() }

// TestServerCapEvictsOnlyIdleSessions (issue 33, item 9): at a client's
// cap its least recently used idle session makes room, so abandoned
// sessions (never DELETEd) do not lock the client out; a session in use
// (its stream open, or Busy at its Target) is never ended for room, and
// with nothing idle the next is refused 429.
func TestServerCapEvictsOnlyIdleSessions(t *testing.T) {
	const perClient = 4
	bt := &busyTarget{}
	srv := NewServer(ServerOptions{Sessions: sessionlimit.New(sessionlimit.Options{PerClient: perClient})})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { srv.ServeStreamable(w, r, bt) }))
	t.Cleanup(func() { hs.Close(); srv.Close() })
	h := &engineHarness{srv: srv, url: hs.URL}
	open := func() string {
		t.Helper()
		r := h.do(t, "POST", initBody("abandoner"))
		if r.status != 200 {
			t.Fatalf("initialize: %d %s", r.status, r.body)
		}
		return r.header.Get(HeaderSessionID)
	}
	alive := func(sid string) bool {
		t.Helper()
		return h.do(t, "POST", `{"jsonrpc":"2.0","id":"p","method":"ping"}`, HeaderSessionID, sid).status == 200
	}

	// Abandoned: each new session beyond the cap ends the oldest.
	var sids []string
	for range 3 * perClient {
		sids = append(sids, open())
	}
	for i, sid := range sids {
		if want := i >= 2*perClient; alive(sid) != want {
			t.Errorf("session %d of %d opened one after the other: alive %v, want %v", i, len(sids), !want, want)
		}
	}

	// In use: the oldest has its stream open, the rest are Busy.
	req, _ := http.NewRequest(http.MethodGet, h.url, nil)
	req.Header.Set("Accept", ContentTypeSSE)
	req.Header.Set(HeaderSessionID, sids[2*perClient])
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", err, stream)
	}
	defer stream.Body.Close()
	bt.busy.Store(true)
	r := h.do(t, "POST", initBody("abandoner"))
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "each with a request in progress") {
		t.Fatalf("a session beyond a cap of sessions all in use: %d %s", r.status, r.body)
	}
	for _, sid := range sids[2*perClient:] {
		if !alive(sid) {
			t.Fatalf("session %s, in use, was ended", sid)
		}
	}

	// Out of use again: the least recently used idle one goes, not the
	// streaming one, however old.
	bt.busy.Store(false)
	open()
	if !alive(sids[2*perClient]) {
		t.Error("the session with its stream open was ended for room")
	}
	if alive(sids[2*perClient+1]) {
		t.Error("the least recently used idle session is still alive")
	}
}
