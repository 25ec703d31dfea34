package proxy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// One holder per server name (servername.go, docs/relay.md): the first
// bridge of a user to register a server name keeps it; another's
// registration is refused with a sentence naming the holder, unless it
// asks to replace; the same bridge coming back is never refused by its
// own old connection.

// refusedServer registers a server extension of user that the proxy must
// refuse: it returns the server_name_taken it was sent first, and checks
// the close frame that follows it.
func (tp *testProxy) refusedServer(tb testing.TB, user, server string, res relaywire.AuthenticateResult) relaywire.ServerNameTakenParams {
	tb.Helper()
	res.Kind, res.Server = relaywire.ExtensionKindServer, server
	c := tp.authExtension(tb, user, res)
	p := takenFrom(tb, c)
	code, text := c.closed()
	if code != websocket.ClosePolicyViolation || !strings.HasPrefix(text, relaywire.CloseServerNameTaken) || len(text) > relaywire.MaxCloseReason {
		tb.Fatalf("closed %d %q, want 1008 starting %q", code, text, relaywire.CloseServerNameTaken)
	}
	return p
}

// takenFrom waits for the server_name_taken c receives; it fails if c is
// told it is authenticated first.
func takenFrom(tb testing.TB, c *tclient) relaywire.ServerNameTakenParams {
	tb.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case data := <-c.raw:
			var m relaywire.Message
			json.Unmarshal(data, &m)
			switch m.Method {
			case relaywire.MethodAuthenticated:
				tb.Fatalf("authenticated: %s", m.Params)
			case relaywire.MethodServerNameTaken:
				var p relaywire.ServerNameTakenParams
				if err := json.Unmarshal(m.Params, &p); err != nil {
					tb.Fatalf("server_name_taken %s: %v", m.Params, err)
				}
				return p
			}
		case <-deadline:
			tb.Fatal("no server_name_taken within 5 s")
		}
	}
}

// takenNote decodes the server_name_taken a registered server extension
// receives.
func takenNote(tb testing.TB, e *srvExt) relaywire.ServerNameTakenParams {
	tb.Helper()
	var p relaywire.ServerNameTakenParams
	if err := json.Unmarshal(e.note(tb, relaywire.MethodServerNameTaken).Params, &p); err != nil {
		tb.Fatal(err)
	}
	return p
}

// registered returns this node's extension id of user, or nil.
func (tp *testProxy) registered(user, id string) *extension {
	tp.srv.mu.Lock()
	defer tp.srv.mu.Unlock()
	if u := tp.srv.users[user]; u != nil {
		return u.exts[id]
	}
	return nil
}

// forwardTo checks that a new client of user connected to the server
// extension e gets its request to e, and e's answer back.
func forwardTo(tb testing.TB, tp *testProxy, user string, e *srvExt) {
	tb.Helper()
	cl := tp.mcp(tb, user)
	connectTo(tb, cl, e.id)
	ch := cl.start(7, "tools/list", nil)
	m := e.nextRequest(tb)
	if m.Method != "tools/list" {
		tb.Fatalf("the server extension got %s", m.Method)
	}
	e.sendRaw(relaywire.AppendResult(nil, m.ID, json.RawMessage(`{"tools":[]}`)))
	if r := cl.wait(ch); r.Error != nil || string(r.Result) != `{"tools":[]}` {
		tb.Fatalf("the client got %s %s", r.Result, r.Error)
	}
}

func TestServerNameFirstHolderKeepsIt(t *testing.T) {
	var logs testutil.Watch
	tp := newTestProxy(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	first := tp.serverExt(t, "alice", "everything (laptop)", "everything")

	second := relaywire.AuthenticateResult{Name: "everything (desktop)", AccessToken: tp.token(t, "alice", token.KindExtension)}
	p := tp.refusedServer(t, "alice", "everything", second)
	if p.Replaced || p.Server != "everything" || p.Holder.Name != "everything (laptop)" || p.Holder.ExtensionID != first.id || p.Holder.Since == "" {
		t.Fatalf("server_name_taken %+v", p)
	}
	for _, want := range []string{`server name "everything" is already offered by "everything (laptop)"`, first.id, "since " + p.Holder.Since, "relay.replace_servers"} {
		if !strings.Contains(p.Reason, want) {
			t.Errorf("the sentence %q does not say %q", p.Reason, want)
		}
	}
	if n := tp.srv.m.connRefused.With("server_name").Value(); n != 1 {
		t.Errorf("connections_refused_total{reason=server_name} = %v, want 1", n)
	}
	line := logs.String()
	if i := strings.Index(line, "another bridge of the user holds the server name"); i < 0 {
		t.Errorf("no log line of the refusal:\n%s", line)
	} else {
		line = line[i:]
		line = line[:strings.IndexByte(line, '\n')]
		for _, want := range []string{"user=alice", "server=everything", `refused="everything (desktop)"`, `holder="everything (laptop)"`, "holder_extension=" + first.id} {
			if !strings.Contains(line, want) {
				t.Errorf("the log line %q does not say %s", line, want)
			}
		}
		if strings.Contains(line, second.AccessToken) {
			t.Errorf("the log line shows the token: %q", line)
		}
	}

	// The first keeps the name: alice's only server extension, where a
	// new client's session goes.
	if list := listOf(t, tp.mcp(t, "alice")); len(list) != 1 || list[0].ID != first.id {
		t.Fatalf("alice's extensions: %+v", list)
	}
	if e := tp.srv.serverExtension("alice", "everything"); e == nil || e.id != first.id {
		t.Fatalf("serverExtension = %+v, want %s", e, first.id)
	}
	forwardTo(t, tp, "alice", first)

	// Names are per user, and per server name.
	tp.serverExt(t, "bob", "everything (desktop)", "everything")
	tp.serverExt(t, "alice", "memory (desktop)", "memory")

	// Once the holder leaves, the name is free.
	first.ws.Close()
	testutil.WaitFor(t, "the holder to leave", func() bool { return tp.registered("alice", first.id) == nil })
	now := tp.serverExt(t, "alice", "everything (desktop)", "everything")
	forwardTo(t, tp, "alice", now)
}

// TestServerNameReplace: a registration that asks to replace takes the
// name; the holder is told who took it, is closed, and its clients get
// disconnected; new sessions go to the newcomer. The old holder coming
// back without asking is refused, naming the new one.
func TestServerNameReplace(t *testing.T) {
	tp := newTestProxy(t, Options{})
	old := tp.serverExt(t, "alice", "everything (laptop)", "everything")
	cl := tp.mcp(t, "alice")
	connectTo(t, cl, old.id)

	nw := tp.serverExtWith(t, "alice", relaywire.AuthenticateResult{Name: "everything (desktop)", Server: "everything", Replace: true})
	p := takenNote(t, old)
	if !p.Replaced || p.Holder.Name != "everything (desktop)" || p.Holder.ExtensionID != nw.id ||
		!strings.Contains(p.Reason, `was taken over by "everything (desktop)"`) {
		t.Fatalf("the old holder was told %+v", p)
	}
	if code, text := old.closed(); code != websocket.ClosePolicyViolation || !strings.HasPrefix(text, relaywire.CloseServerNameTaken) {
		t.Fatalf("the old holder was closed %d %q", code, text)
	}
	if d := cl.note(relaywire.MethodDisconnected); !strings.Contains(string(d.Params), relaywire.ReasonExtensionGone) {
		t.Fatalf("the old holder's client got %s", d.Params)
	}
	if e := tp.srv.serverExtension("alice", "everything"); e == nil || e.id != nw.id {
		t.Fatalf("serverExtension = %+v, want %s", e, nw.id)
	}
	forwardTo(t, tp, "alice", nw)

	// The relay of the replaced bridge retries without replace.
	back := tp.refusedServer(t, "alice", "everything", relaywire.AuthenticateResult{Name: "everything (laptop)"})
	if back.Replaced || back.Holder.ExtensionID != nw.id {
		t.Fatalf("the old holder coming back was told %+v", back)
	}
}

// TestServerNameSameBridgeReconnects: a bridge whose old connection the
// proxy still holds (a drop it has not seen yet) registers again under
// the same name: it is the holder coming back, accepted, its newest
// connection used; its old one is left to end as it would, not told
// anything; other bridges are still refused.
func TestServerNameSameBridgeReconnects(t *testing.T) {
	tp := newTestProxy(t, Options{})
	stale := tp.serverExt(t, "alice", "everything (laptop)", "everything")
	again := tp.serverExt(t, "alice", "everything (laptop)", "everything")
	if again.id == stale.id {
		t.Fatalf("two live connections share id %s", again.id)
	}
	// settleServerName ran before again heard it was authenticated.
	if e := tp.registered("alice", stale.id); e == nil || e.ended.Load() {
		t.Fatalf("the old connection was ended: %+v", e)
	}
	if e := tp.srv.serverExtension("alice", "everything"); e == nil || e.id != again.id {
		t.Fatalf("serverExtension = %+v, want the newest %s", e, again.id)
	}
	forwardTo(t, tp, "alice", again)
	p := tp.refusedServer(t, "alice", "everything", relaywire.AuthenticateResult{Name: "everything (desktop)"})
	if p.Holder.Name != "everything (laptop)" || p.Holder.ExtensionID != stale.id {
		t.Fatalf("refused naming %+v; want the bridge's first registration", p.Holder)
	}
	stale.noReplyBefore(t, "ext:marker") // nothing was sent to it meanwhile
	select {
	case m := <-stale.notes:
		if m.Method == relaywire.MethodServerNameTaken {
			t.Fatalf("the old connection was told %s", m.Params)
		}
	default:
	}
}

// TestServerNameHolderOf: the rule as a function of the registrations.
func TestServerNameHolderOf(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	reg := func(name, id string, sec int, replace bool) serverReg {
		return serverReg{name: name, id: id, since: t0.Add(time.Duration(sec) * time.Second), replace: replace}
	}
	for _, tc := range []struct {
		name string
		regs []serverReg
		want string // holder's id
	}{
		{"none", nil, ""},
		{"one", []serverReg{reg("A", "a1", 0, false)}, "a1"},
		{"first wins", []serverReg{reg("B", "b1", 1, false), reg("A", "a1", 0, false)}, "a1"},
		{"tie by id", []serverReg{reg("B", "b1", 0, false), reg("A", "a1", 0, false)}, "a1"},
		{"a later replace", []serverReg{reg("A", "a1", 0, false), reg("B", "b1", 1, true)}, "b1"},
		{"an earlier replace", []serverReg{reg("A", "a1", 1, false), reg("B", "b1", 0, true)}, "b1"},
		{"the last replace", []serverReg{reg("A", "a1", 0, false), reg("B", "b1", 1, true), reg("C", "c1", 2, true)}, "c1"},
		{"refused after a replace", []serverReg{reg("A", "a1", 0, false), reg("B", "b1", 1, true), reg("C", "c1", 2, false)}, "b1"},
		{"the holder's own reconnect", []serverReg{reg("A", "a1", 0, false), reg("B", "b1", 1, false), reg("A", "a2", 2, true)}, "a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := holderOf(tc.regs)
			if h.id != tc.want || ok != (tc.want != "") {
				t.Fatalf("holderOf = %q %v, want %q", h.id, ok, tc.want)
			}
		})
	}
}

// TestHTTPServerNameSessions: /servers/{name}/mcp opens new sessions on
// the holder, not on a later bridge, which is refused; and on the bridge
// that replaced it once one did.
func TestHTTPServerNameSessions(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	first := startServerAs(t, tp, "alice", "notes", relaywire.AuthenticateResult{Name: "notes (laptop)"})
	tp.refusedServer(t, "alice", "notes", relaywire.AuthenticateResult{Name: "notes (desktop)"})
	person := passwordPerson()
	session := func() {
		sdkClient(t, tp.public()+"/servers/notes/mcp", eraSession, person, &mcp.ClientOptions{}).Close()
	}
	session()
	if n := first.inits.Load(); n != 1 {
		t.Fatalf("the holder got %d initialize requests, want 1", n)
	}
	nw := startServerAs(t, tp, "alice", "notes", relaywire.AuthenticateResult{Name: "notes (desktop)", Replace: true})
	select {
	case <-first.taken:
	case <-time.After(5 * time.Second):
		t.Fatal("the replaced holder was not told")
	}
	session()
	if a, b := first.inits.Load(), nw.inits.Load(); a != 1 || b != 1 {
		t.Fatalf("initialize requests: %d to the replaced holder, %d to the new one; want 1 and 1", a, b)
	}
}

// TestClusterServerName: across two nodes, a name held on node a is
// refused on node b once b's presence has it, naming the holder; a
// replace on node b ends the holder on node a, which node a learns
// through presence.
func TestClusterServerName(t *testing.T) {
	ns := nodes(t, 2, Options{})
	a, b := ns[0], ns[1]
	first := a.serverExt(t, "alice", "everything (laptop)", "everything")
	onB := b.mcp(t, "alice")
	waitListed(t, onB, relaywire.ExtensionInfo{ID: first.id, Name: "everything (laptop)", Connected: true, Kind: relaywire.ExtensionKindServer, Server: "everything"})

	p := b.refusedServer(t, "alice", "everything", relaywire.AuthenticateResult{Name: "everything (desktop)"})
	if p.Replaced || p.Holder.ExtensionID != first.id || p.Holder.Name != "everything (laptop)" {
		t.Fatalf("refused on node b with %+v", p)
	}
	if e := b.srv.serverExtension("alice", "everything"); e == nil || e.id != first.id {
		t.Fatalf("node b's serverExtension = %+v, want %s on node a", e, first.id)
	}
	forwardTo(t, b, "alice", first)

	nw := b.serverExtWith(t, "alice", relaywire.AuthenticateResult{Name: "everything (desktop)", Server: "everything", Replace: true})
	if p := takenNote(t, first); !p.Replaced || p.Holder.ExtensionID != nw.id {
		t.Fatalf("the holder on node a was told %+v", p)
	}
	for _, n := range ns {
		if e := n.srv.serverExtension("alice", "everything"); e == nil || e.id != nw.id {
			t.Fatalf("serverExtension = %+v, want %s", e, nw.id)
		}
	}
	forwardTo(t, a, "alice", nw)
}

// regWatch follows a server extension's registration: the id it was
// given (if authenticated) and the server_name_taken it got (if any).
type regWatch struct {
	c      *tclient
	authed chan string
	taken  chan relaywire.ServerNameTakenParams
}

func watchReg(c *tclient) *regWatch {
	w := &regWatch{c: c, authed: make(chan string, 1), taken: make(chan relaywire.ServerNameTakenParams, 1)}
	handle := func(data []byte) {
		var m relaywire.Message
		json.Unmarshal(data, &m)
		switch m.Method {
		case relaywire.MethodAuthenticated:
			var p relaywire.AuthenticatedParams
			json.Unmarshal(m.Params, &p)
			w.authed <- p.ExtensionID
		case relaywire.MethodServerNameTaken:
			var p relaywire.ServerNameTakenParams
			json.Unmarshal(m.Params, &p)
			w.taken <- p
		}
	}
	go func() {
		for {
			select {
			case data := <-c.raw:
				handle(data)
			case <-c.done:
				for len(c.raw) > 0 {
					handle(<-c.raw)
				}
				return
			}
		}
	}()
	return w
}

// TestClusterServerNameRace: two bridges register one server name at
// once on two nodes, answering authenticate back to back, so that often
// neither node has the other's registration in its presence yet and both
// accept theirs. Whichever way it goes, it ends with one holder, the same
// on both nodes, and the other told it was refused, naming the holder.
// (That the holder is never told is checked for what it was sent by the
// end; presence gives no moment after which nothing more can come.)
func TestClusterServerNameRace(t *testing.T) {
	ns := nodes(t, 2, Options{})
	raced := 0
	const rounds = 8
	for i := range rounds {
		server := fmt.Sprintf("srv%d", i)
		var ws [2]*regWatch
		var ids [2]json.RawMessage
		for j, n := range ns {
			c := dial(t, n.url+relaywire.PathExtension, true)
			var m relaywire.Message
			json.Unmarshal(<-c.raw, &m)
			ids[j] = m.ID
			ws[j] = watchReg(c)
		}
		for j, n := range ns {
			ws[j].c.send(map[string]any{"jsonrpc": "2.0", "id": ids[j], "result": relaywire.AuthenticateResult{
				Name: fmt.Sprintf("%s (bridge %d)", server, j), AccessToken: n.token(t, "alice", token.KindExtension),
				Kind: relaywire.ExtensionKindServer, Server: server}})
		}
		var loser relaywire.ServerNameTakenParams
		l := -1
		select {
		case loser = <-ws[0].taken:
			l = 0
		case loser = <-ws[1].taken:
			l = 1
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: neither registration was refused", i)
		}
		w := 1 - l
		var winner string
		select {
		case winner = <-ws[w].authed:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the other registration was not accepted", i)
		}
		if loser.Replaced || loser.Holder.ExtensionID != winner || loser.Holder.Name != fmt.Sprintf("%s (bridge %d)", server, w) {
			t.Fatalf("round %d: the loser was told %+v; the winner is %s", i, loser, winner)
		}
		select {
		case <-ws[l].authed:
			raced++ // accepted, then ended when presence brought the other
		default:
		}
		for _, n := range ns {
			testutil.WaitFor(t, fmt.Sprintf("round %d: every node's holder of %s to be the winner %s", i, server, winner), func() bool {
				e := n.srv.serverExtension("alice", server)
				return e != nil && e.id == winner
			})
		}
		if _, text := ws[l].c.closed(); !strings.HasPrefix(text, relaywire.CloseServerNameTaken) {
			t.Fatalf("round %d: the loser was closed with %q", i, text)
		}
		select {
		case p := <-ws[w].taken:
			t.Fatalf("round %d: the holder was told %+v", i, p)
		default:
		}
	}
	t.Logf("%d of %d rounds were accepted on both nodes and settled afterwards", raced, rounds)
}
