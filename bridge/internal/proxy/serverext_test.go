package proxy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// srvExt is a fake server extension (what a bridge's relay registers for
// one gateway server): it authenticates with a kind and a server name, then
// leaves every forwarded request unanswered until the test answers it, and
// sorts what it receives: forwarded requests, replies (the clients'
// answers to its own requests, or the proxy's refusals of them) and
// notifications.
type srvExt struct {
	*tclient
	id, user string
	requests chan *relaywire.Message
	replies  chan *relaywire.Message
	notes    chan *relaywire.Message
}

func (tp *testProxy) authExtension(tb testing.TB, user string, res relaywire.AuthenticateResult) *tclient {
	tb.Helper()
	c := dial(tb, tp.url+relaywire.PathExtension, true)
	auth := <-c.raw
	var m relaywire.Message
	json.Unmarshal(auth, &m)
	if m.Method != relaywire.MethodAuthenticate {
		tb.Fatalf("first message to the extension: %s", auth)
	}
	if res.AccessToken == "" {
		res.AccessToken = tp.token(tb, user, token.KindExtension)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res})
	return c
}

// serverExt registers a server extension of user for the gateway server
// named server and waits for it to be authenticated.
func (tp *testProxy) serverExt(tb testing.TB, user, name, server string) *srvExt {
	tb.Helper()
	return tp.serverExtWith(tb, user, relaywire.AuthenticateResult{Name: name, Server: server})
}

// serverExtWith is serverExt with res (its kind set to server).
func (tp *testProxy) serverExtWith(tb testing.TB, user string, res relaywire.AuthenticateResult) *srvExt {
	tb.Helper()
	res.Kind = relaywire.ExtensionKindServer
	c := tp.authExtension(tb, user, res)
	e := &srvExt{tclient: c, user: user, requests: make(chan *relaywire.Message, 256), replies: make(chan *relaywire.Message, 256), notes: make(chan *relaywire.Message, 256)}
	for data := range c.raw {
		var m relaywire.Message
		json.Unmarshal(data, &m)
		if m.Method == relaywire.MethodServerNameTaken {
			tb.Fatalf("the server extension was refused: %s", m.Params)
		}
		if m.Method == relaywire.MethodAuthenticated {
			var p relaywire.AuthenticatedParams
			json.Unmarshal(m.Params, &p)
			e.id = p.ExtensionID
			break
		}
	}
	go func() {
		for data := range c.raw {
			m, _, perr := relaywire.Parse(append([]byte(nil), data...))
			if perr != nil {
				tb.Errorf("the proxy sent %s: %v", data, perr)
				continue
			}
			switch {
			case m.IsRequest():
				e.requests <- m
			case m.ID != nil:
				e.replies <- m
			default:
				e.notes <- m
			}
		}
	}()
	return e
}

func (e *srvExt) nextRequest(tb testing.TB) *relaywire.Message {
	tb.Helper()
	select {
	case m := <-e.requests:
		return m
	case <-time.After(5 * time.Second):
		tb.Fatal("the server extension received no request")
	}
	return nil
}

func (e *srvExt) nextReply(tb testing.TB) *relaywire.Message {
	tb.Helper()
	select {
	case m := <-e.replies:
		return m
	case <-time.After(5 * time.Second):
		tb.Fatal("the server extension received no reply")
	}
	return nil
}

func (e *srvExt) note(tb testing.TB, method string) *relaywire.Message {
	tb.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-e.notes:
			if m.Method == method {
				return m
			}
		case <-deadline:
			tb.Fatalf("the server extension got no %s", method)
		}
	}
}

// noReply fails if the extension receives a reply before a request it
// sends afterwards as a marker comes back refused.
func (e *srvExt) noReplyBefore(tb testing.TB, marker string) {
	tb.Helper()
	e.sendRaw([]byte(`{"jsonrpc":"2.0","id":"` + marker + `","method":"marker"}`))
	m := e.nextReply(tb)
	if s, _ := relaywire.IDString(m.ID); s != marker {
		tb.Fatalf("the extension received %s %s %s before its marker's refusal", m.ID, m.Result, m.Error)
	}
}

// clientRequest waits for the next request the proxy sends client c.
func clientRequest(tb testing.TB, c *tclient) *relaywire.Message {
	tb.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-c.notes:
			if m.IsRequest() {
				return m
			}
		case <-deadline:
			tb.Fatal("the client received no request")
		}
	}
}

// quietFor fails if c receives anything but status within a round trip of
// marker client mc (whose own call proves the proxy handled what came
// before).
func quietExceptStatus(tb testing.TB, name string, c *tclient) {
	tb.Helper()
	for {
		select {
		case m := <-c.notes:
			if m.Method != relaywire.MethodStatus {
				tb.Errorf("%s received %s %s %s", name, m.Method, m.ID, m.Params)
			}
		default:
			return
		}
	}
}

// TestServerExtensionKinds: authenticate's kind and server are recorded,
// listed for the endpoints and checked; an extension without them is a
// browser, as before.
func TestServerExtensionKinds(t *testing.T) {
	tp := newTestProxy(t, Options{})
	browser := tp.extension(t, "alice", "Chrome").ready(t)
	everything := tp.serverExt(t, "alice", "everything (laptop)", "everything")
	memory := tp.serverExt(t, "alice", "memory (desktop)", "memory")
	tp.serverExt(t, "bob", "everything (bob)", "everything")

	all := tp.srv.extensionsOf("alice", "")
	if len(all) != 3 {
		t.Fatalf("alice has %d extensions, want 3", len(all))
	}
	servers := tp.srv.extensionsOf("alice", relaywire.ExtensionKindServer)
	var names []string
	for _, e := range servers {
		names = append(names, e.info().Server+"="+e.info().Name)
	}
	if strings.Join(names, ",") != "everything=everything (laptop),memory=memory (desktop)" {
		t.Fatalf("alice's servers: %v", names)
	}
	browsers := tp.srv.extensionsOf("alice", relaywire.ExtensionKindBrowser)
	if len(browsers) != 1 || browsers[0].id != browser.id || browsers[0].info() != (relaywire.ExtensionInfo{ID: browser.id, Name: "Chrome", Connected: true, Kind: "browser"}) {
		t.Fatalf("alice's browsers: %+v", browsers)
	}
	// list_extensions tells the two kinds apart, so a spec-001 client can
	// pick a browser or a server.
	var listed relaywire.ListExtensionsResult
	json.Unmarshal(tp.mcp(t, "alice").call(1, relaywire.MethodListExtensions, map[string]any{}).Result, &listed)
	kinds := map[string]string{}
	for _, e := range listed.Extensions {
		kinds[e.Name] = e.Kind + "/" + e.Server
	}
	if len(listed.Extensions) != 3 || kinds["Chrome"] != "browser/" || kinds["everything (laptop)"] != "server/everything" {
		t.Fatalf("list_extensions: %+v", listed.Extensions)
	}
	if e := tp.srv.serverExtension("alice", "everything"); e == nil || e.id != everything.id {
		t.Fatalf("serverExtension(alice, everything) = %+v, want %s", e, everything.id)
	}
	if e := tp.srv.serverExtension("alice", "memory"); e == nil || e.id != memory.id {
		t.Fatalf("serverExtension(alice, memory) = %+v, want %s", e, memory.id)
	}
	if e := tp.srv.serverExtension("carol", "everything"); e != nil {
		t.Fatalf("carol has no servers, got %+v", e)
	}

	for _, tc := range []struct {
		name string
		res  relaywire.AuthenticateResult
		want string
	}{
		{"unknown kind", relaywire.AuthenticateResult{Name: "x", Kind: "robot"}, `kind must be "browser" or "server"`},
		{"server without a name", relaywire.AuthenticateResult{Name: "x", Kind: "server"}, "server is required"},
		{"server name with a slash", relaywire.AuthenticateResult{Name: "x", Kind: "server", Server: "a/b"}, "URL paths"},
		{"browser with a server name", relaywire.AuthenticateResult{Name: "x", Server: "a"}, "only with kind"},
		{"browser asking to replace", relaywire.AuthenticateResult{Name: "x", Replace: true}, `replace is given only with kind "server"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tp.authExtension(t, "alice", tc.res)
			code, text := c.closed()
			if code != websocket.ClosePolicyViolation || !strings.HasPrefix(text, "authentication failed: ") || !strings.Contains(text, tc.want) {
				t.Fatalf("closed %d %q, want 1008 with %q", code, text, tc.want)
			}
		})
	}
}

// TestExtensionRequestsReachTheirCallerOnly: a server extension's request
// (sampling, elicitation, roots) about a call in flight reaches that
// call's client alone, id and params unchanged, and the client's answer
// reaches that extension alone; after the call, or for anyone else's call
// or connection, nothing is delivered and the extension is told so at
// once; another client cannot answer for the one asked.
func TestExtensionRequestsReachTheirCallerOnly(t *testing.T) {
	tp := newTestProxy(t, Options{Strikes: -1})
	srv := tp.serverExt(t, "alice", "everything (laptop)", "everything")
	other := tp.serverExt(t, "alice", "memory (laptop)", "memory")
	bobSrv := tp.serverExt(t, "bob", "everything (bob)", "everything")

	a1, a2, a3, b := tp.mcp(t, "alice"), tp.mcp(t, "alice"), tp.mcp(t, "alice"), tp.mcp(t, "bob")
	conn1, conn2 := connectTo(t, a1, srv.id), connectTo(t, a2, srv.id)
	conn3, connB := connectTo(t, a3, other.id), connectTo(t, b, bobSrv.id)

	// Each client makes a call with the same id, which each extension
	// holds unanswered.
	call1 := a1.start(4, "tools/call", map[string]any{"name": "sampleLLM"})
	call2 := a2.start(4, "tools/call", map[string]any{"name": "sampleLLM"})
	a3.start(4, "tools/call", nil)
	b.start(4, "tools/call", nil)
	mapped := map[string]string{}
	for range 2 {
		m := srv.nextRequest(t)
		id, _ := relaywire.IDString(m.ID)
		c, _, _ := relaywire.UnmapID(id)
		mapped[c] = id
	}
	mapped3 := mustID(other.nextRequest(t))
	mappedB := mustID(bobSrv.nextRequest(t))
	if mapped[conn1] == "" || mapped[conn2] == "" {
		t.Fatalf("forwarded ids %v, want one of %s and %s", mapped, conn1, conn2)
	}

	params := `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}`
	t.Run("delivered to the caller, answered back", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:1", mapped[conn1], "", "sampling/createMessage", json.RawMessage(params)))
		got := clientRequest(t, a1)
		if string(got.ID) != `"ext:1"` || got.Method != "sampling/createMessage" || string(got.Params) != params || got.RequestID != nil || got.ConnectionID != "" {
			t.Fatalf("the client got %s %s %s requestId=%s connectionId=%q", got.ID, got.Method, got.Params, got.RequestID, got.ConnectionID)
		}
		// Another client of the same extension, of the same user, and of
		// another user cannot answer it.
		a2.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:1","result":{"forged":"a2"}}`))
		a3.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:1","result":{"forged":"a3"}}`))
		b.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:1","result":{"forged":"b"}}`))
		syncClient(t, a2, "rt2")
		syncClient(t, a3, "rt3")
		syncClient(t, b, "rtb")
		a1.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:1","result":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}}`))
		r := srv.nextReply(t)
		if string(r.ID) != `"ext:1"` || !strings.Contains(string(r.Result), `"text":"ok"`) {
			t.Fatalf("the extension got %s %s %s", r.ID, r.Result, r.Error)
		}
		// The answer is taken: a second one is dropped.
		a1.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:1","result":{"again":true}}`))
		syncClient(t, a1, "rt1")
		srv.noReplyBefore(t, "ext:marker-1")
		for _, other := range []*srvExt{other, bobSrv} {
			other.noReplyBefore(t, "ext:marker-x")
		}
		quietExceptStatus(t, "a2", a2)
		quietExceptStatus(t, "a3", a3)
		quietExceptStatus(t, "b", b)
	})

	t.Run("an error answer and a malformed one", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:2", mapped[conn2], "", "elicitation/create", json.RawMessage(`{}`)))
		if got := clientRequest(t, a2); string(got.ID) != `"ext:2"` {
			t.Fatalf("a2 got %s", got.ID)
		}
		a2.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:2","error":{"code":-1,"message":"declined"}}`))
		if r := srv.nextReply(t); string(r.Error) != `{"code":-1,"message":"declined"}` {
			t.Fatalf("got %s %s", r.Result, r.Error)
		}
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:3", mapped[conn2], "", "elicitation/create", json.RawMessage(`{}`)))
		clientRequest(t, a2)
		a2.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:3","error":{"message":"no code"}}`))
		if code, _ := errCode(t, srv.nextReply(t)); code != relaywire.CodeInternalError {
			t.Fatalf("a malformed error object came back %d", code)
		}
	})

	t.Run("by connection", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:4", "", conn2, "roots/list", nil))
		if got := clientRequest(t, a2); string(got.ID) != `"ext:4"` || got.Method != "roots/list" {
			t.Fatalf("a2 got %s %s", got.ID, got.Method)
		}
		a2.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:4","result":{"roots":[]}}`))
		if r := srv.nextReply(t); string(r.Result) != `{"roots":[]}` {
			t.Fatalf("got %s %s", r.Result, r.Error)
		}
		quietExceptStatus(t, "a1", a1)
	})

	t.Run("refused, at once, to the extension", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			frame []byte
			code  int
		}{
			{"a call of another extension", relaywire.AppendRoutedRequest(nil, "ext:10", mapped3, "", "sampling/createMessage", nil), relaywire.CodeNoRoute},
			{"another user's call", relaywire.AppendRoutedRequest(nil, "ext:11", mappedB, "", "sampling/createMessage", nil), relaywire.CodeNoRoute},
			{"a call never made", relaywire.AppendRoutedRequest(nil, "ext:12", conn1+":99", "", "sampling/createMessage", nil), relaywire.CodeNoRoute},
			{"the client's own id", relaywire.AppendRoutedRequest(nil, "ext:13", "4", "", "sampling/createMessage", nil), relaywire.CodeNoRoute},
			{"another extension's connection", relaywire.AppendRoutedRequest(nil, "ext:14", "", conn3, "roots/list", nil), relaywire.CodeNoRoute},
			{"another user's connection", relaywire.AppendRoutedRequest(nil, "ext:15", "", connB, "roots/list", nil), relaywire.CodeNoRoute},
			{"requestId and connectionId disagree", []byte(`{"jsonrpc":"2.0","id":"ext:16","method":"roots/list","requestId":"` + mapped[conn1] + `","connectionId":"` + conn2 + `"}`), relaywire.CodeNoRoute},
			{"an id outside ext:", relaywire.AppendRoutedRequest(nil, "proxy:9", mapped[conn1], "", "sampling/createMessage", nil), relaywire.CodeInvalidRequest},
			{"a numeric id", []byte(`{"jsonrpc":"2.0","id":17,"method":"roots/list","connectionId":"` + conn1 + `"}`), relaywire.CodeInvalidRequest},
			{"a control method", relaywire.AppendRoutedRequest(nil, "ext:18", mapped[conn1], "", "connect", nil), relaywire.CodeMethodNotFound},
			{"a notification method as a request", relaywire.AppendRoutedRequest(nil, "ext:19", mapped[conn1], "", "notifications/progress", nil), relaywire.CodeMethodNotFound},
			{"no route at all", []byte(`{"jsonrpc":"2.0","id":"ext:20","method":"sampling/createMessage"}`), relaywire.CodeMethodNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv.sendRaw(tc.frame)
				r := srv.nextReply(t)
				if code, msg := errCode(t, r); code != tc.code {
					t.Fatalf("got %s %d %q, want %d", r.ID, code, msg, tc.code)
				}
			})
		}
		for name, c := range map[string]*tclient{"a1": a1, "a2": a2, "a3": a3, "b": b} {
			syncClient(t, c, "rt-refused")
			quietExceptStatus(t, name, c)
		}
	})

	t.Run("one id at a time, a few at once", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:dup", mapped[conn1], "", "roots/list", nil))
		clientRequest(t, a1)
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:dup", mapped[conn1], "", "roots/list", nil))
		if code, _ := errCode(t, srv.nextReply(t)); code != relaywire.CodeDuplicateID {
			t.Fatalf("a duplicate id: %d", code)
		}
		for i := 1; i < relaywire.MaxAsksPerConnection; i++ {
			srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:many-"+string(rune('a'+i)), mapped[conn1], "", "roots/list", nil))
			clientRequest(t, a1)
		}
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:one-too-many", mapped[conn1], "", "roots/list", nil))
		if code, _ := errCode(t, srv.nextReply(t)); code != relaywire.CodeRateLimited {
			t.Fatalf("one request too many: %d", code)
		}
	})

	t.Run("withdrawn by the extension", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, conn1, relaywire.MethodCancelled, json.RawMessage(`{"requestId":"ext:dup","reason":"timeout"}`)))
		n := a1.note(relaywire.MethodCancelled)
		if string(n.Params) != `{"requestId":"ext:dup","reason":"timeout"}` || n.ConnectionID != "" {
			t.Fatalf("a1 got %s", n.Params)
		}
		// Withdrawn: the late answer is dropped; a cancellation of the
		// client's own request, or of nothing, never reaches it.
		a1.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:dup","result":{}}`))
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, conn1, relaywire.MethodCancelled, json.RawMessage(`{"requestId":4}`)))
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, conn1, relaywire.MethodCancelled, json.RawMessage(`{"requestId":"ext:nothing"}`)))
		syncClient(t, a1, "rt-cancel")
		srv.noReplyBefore(t, "ext:marker-2")
		quietExceptStatus(t, "a1", a1)
	})

	t.Run("notifications by connection", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, conn2, "notifications/message", json.RawMessage(`{"level":"info","data":"for a2"}`)))
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, conn3, "notifications/message", json.RawMessage(`{"level":"info","data":"not mine"}`)))
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, connB, "notifications/message", json.RawMessage(`{"level":"info","data":"not mine"}`)))
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, conn2, relaywire.MethodProgress, json.RawMessage(`{"progressToken":1,"progress":1}`)))
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, conn2, "status", json.RawMessage(`{}`)))
		if n := a2.note("notifications/message"); string(n.Params) != `{"level":"info","data":"for a2"}` || n.ConnectionID != "" {
			t.Fatalf("a2 got %s", n.Params)
		}
		for name, c := range map[string]*tclient{"a1": a1, "a2": a2, "a3": a3, "b": b} {
			syncClient(t, c, "rt-notes")
			quietExceptStatus(t, name, c)
		}
	})

	t.Run("after the call, nothing", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendResult(nil, relaywire.AppendString(nil, mapped[conn2]), json.RawMessage(`{"content":[]}`)))
		if r := a2.wait(call2); r.Error != nil {
			t.Fatalf("call 2: %s", r.Error)
		}
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:late", mapped[conn2], "", "sampling/createMessage", nil))
		if code, _ := errCode(t, srv.nextReply(t)); code != relaywire.CodeNoRoute {
			t.Fatalf("a request about an answered call: %d", code)
		}
		syncClient(t, a2, "rt-late")
		quietExceptStatus(t, "a2", a2)
	})

	t.Run("the client leaves: its requests are answered, the server told", func(t *testing.T) {
		a1.ws.Close()
		seen := map[string]bool{}
		for range relaywire.MaxAsksPerConnection - 1 { // the ones still waiting
			r := srv.nextReply(t)
			code, _ := errCode(t, r)
			if code != relaywire.CodeExtensionGone {
				t.Fatalf("a request left waiting was answered %s %d", r.ID, code)
			}
			seen[string(r.ID)] = true
		}
		n := srv.note(t, relaywire.MethodConnectionClosed)
		var p relaywire.ConnectionClosedParams
		json.Unmarshal(n.Params, &p)
		if p.ConnectionID != conn1 || p.Reason != relaywire.ReasonClientGone {
			t.Fatalf("connection_closed %s", n.Params)
		}
		_ = call1
	})

	t.Run("disconnect tells the server; a browser is not told", func(t *testing.T) {
		a2.call("d", relaywire.MethodDisconnect, nil)
		n := srv.note(t, relaywire.MethodConnectionClosed)
		var p relaywire.ConnectionClosedParams
		json.Unmarshal(n.Params, &p)
		if p.ConnectionID != conn2 || p.Reason != relaywire.ReasonClientDisconnected {
			t.Fatalf("connection_closed %s", n.Params)
		}
		browser := tp.extension(t, "alice", "Chrome").ready(t)
		a3.call("d3", relaywire.MethodDisconnect, nil)
		connectTo(t, a3, browser.id)
		a3.call("d4", relaywire.MethodDisconnect, nil)
		syncClient(t, a3, "rt-b")
		// The browser's status notifications came after the disconnect:
		// had connection_closed been sent, it would be there before them.
		for {
			select {
			case m := <-browser.notes:
				if m.Method == relaywire.MethodConnectionClosed {
					t.Fatalf("a browser got %s %s", m.Method, m.Params)
				}
				continue
			default:
			}
			break
		}
	})
}

// syncClient makes a call the proxy answers itself, so that everything c
// sent before was handled (the proxy reads each client in order).
func syncClient(tb testing.TB, c *tclient, id any) {
	tb.Helper()
	if r := c.call(id, relaywire.MethodListExtensions, nil); r.Error != nil {
		tb.Fatalf("list_extensions: %s", r.Error)
	}
}

func mustID(m *relaywire.Message) string {
	s, _ := relaywire.IDString(m.ID)
	return s
}
