package proxy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

func TestTokensRefused(t *testing.T) {
	tp := newTestProxy(t, Options{})
	other, _ := token.NewHS256([]byte(strings.Repeat("z", 40)))
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ed, _ := token.NewEdDSA(priv, nil)
	now := time.Now()
	mint := func(k *token.Keys, kind token.Kind, iat, exp time.Time) string {
		s, err := k.Mint(token.Claims{Subject: "alice", Kind: kind, IssuedAt: iat.Unix(), Expires: exp.Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	b64 := base64.RawURLEncoding.EncodeToString
	algNone := func(kind token.Kind) string {
		payload, _ := json.Marshal(token.Claims{Subject: "alice", Kind: kind, IssuedAt: now.Unix(), Expires: now.Add(time.Hour).Unix()})
		return b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64(payload) + "."
	}
	for _, side := range []token.Kind{token.KindMCP, token.KindExtension} {
		wrong := token.KindExtension
		if side == token.KindExtension {
			wrong = token.KindMCP
		}
		for _, tc := range []struct {
			name, tok, reason string
		}{
			{"expired", mint(tp.keys, side, now.Add(-2*time.Hour), now.Add(-time.Hour)), "token expired"},
			{"forged", mint(other, side, now, now.Add(time.Hour)), "signature is invalid"},
			{"wrong kind", mint(tp.keys, wrong, now, now.Add(time.Hour)), "wrong kind"},
			{"alg none", algNone(side), `alg "none"`},
			{"EdDSA for an HS256 proxy", mint(ed, side, now, now.Add(time.Hour)), `alg "EdDSA"`},
			{"garbage", "not-a-token", "malformed"},
		} {
			t.Run(string(side)+"/"+tc.name, func(t *testing.T) {
				var c *tclient
				if side == token.KindMCP {
					c = dial(t, tp.url+relaywire.PathMCP, false)
					r := c.call(1, relaywire.MethodHandshake, relaywire.HandshakeParams{AccessToken: tc.tok})
					code, msg := errCode(t, r)
					if code != -32000 || !strings.HasPrefix(msg, "Authentication failed: ") || !strings.Contains(msg, tc.reason) {
						t.Fatalf("handshake error %d %q", code, msg)
					}
				} else {
					c = tp.extensionWithToken(t, "Chrome", tc.tok, "alice").tclient
				}
				code, reason := c.closed()
				if code != websocket.ClosePolicyViolation || !strings.Contains(reason, "authentication failed") || !strings.Contains(reason, tc.reason) {
					t.Fatalf("closed with %d %q", code, reason)
				}
			})
		}
	}
	t.Run("extension without name", func(t *testing.T) {
		c := tp.extensionWithToken(t, "", tp.token(t, "alice", token.KindExtension), "alice")
		if code, reason := c.closed(); code != websocket.ClosePolicyViolation || !strings.Contains(reason, "name is missing") {
			t.Fatalf("closed with %d %q", code, reason)
		}
	})
	t.Run("EdDSA proxy", func(t *testing.T) {
		tp := newTestProxy(t, Options{Keys: ed})
		e := tp.extension(t, "alice", "Chrome").ready(t)
		c := tp.mcp(t, "alice")
		connectTo(t, c, e.id)
		if echoOf(t, c.call(1, "getTabs", nil)).Method != "getTabs" {
			t.Fatal("no echo")
		}
	})
}

func TestAuthTimeout(t *testing.T) {
	tp := newTestProxy(t, Options{AuthTimeout: 100 * time.Millisecond})
	for _, path := range []string{relaywire.PathExtension, relaywire.PathMCP} {
		c := dial(t, tp.url+path, false)
		if code, reason := c.closed(); code != websocket.ClosePolicyViolation || !strings.Contains(reason, "in time") {
			t.Fatalf("%s: closed with %d %q", path, code, reason)
		}
	}
}

func TestIsolation(t *testing.T) {
	w := newWorld(t, Options{})
	bob := w.tp.mcp(t, "bob")
	r := bob.call(1, relaywire.MethodListExtensions, nil)
	for name, e := range w.exts {
		if strings.HasPrefix(name, "alice/") && strings.Contains(string(r.Result), e.id) {
			t.Fatalf("bob sees alice's %s: %s", name, r.Result)
		}
		if strings.HasPrefix(name, "bob/") && !strings.Contains(string(r.Result), e.id) {
			t.Fatalf("bob misses his %s: %s", name, r.Result)
		}
	}
	for name, e := range w.exts {
		if !strings.HasPrefix(name, "alice/") {
			continue
		}
		r := bob.call(2, relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: e.id})
		if code, msg := errCode(t, r); code != -32000 || msg != relaywire.MsgExtensionNotFound {
			t.Fatalf("bob connecting to %s: %d %q", name, code, msg)
		}
	}
	// Bob, connected to his own browser, naming alice's connection: refused.
	alice := w.tp.mcp(t, "alice")
	aliceConn := connectTo(t, alice, w.exts["alice/Chrome 141"].id)
	connectTo(t, bob, w.exts["bob/Chrome 141"].id)
	bob.send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "createTab", "connectionId": aliceConn})
	for m := range bob.notes {
		if m.Method == "" {
			if code, _ := errCode(t, m); code != relaywire.CodeInvalidParams {
				t.Fatalf("bob using alice's connection id: %s %s", m.Result, m.Error)
			}
			break
		}
	}
	// A forged reply from bob's extension naming alice's connection goes nowhere.
	held := alice.start(4, "hold", nil)
	<-w.exts["alice/Chrome 141"].seen
	w.exts["bob/Chrome 141"].sendRaw([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"forged":true}}`, aliceConn+":4")))
	if e := echoOf(t, bob.call(5, "getTabs", nil)); e.Method != "getTabs" {
		t.Fatal(e)
	}
	select {
	case m := <-held:
		t.Fatalf("alice got a reply from bob's extension: %s", m.Result)
	case <-time.After(100 * time.Millisecond):
	}
	if len(w.exts["alice/Chrome 141"].seen) != 0 || len(w.exts["alice/Edge 140"].seen) != 0 {
		t.Fatal("alice's extensions saw bob's traffic")
	}
}

// TestNoCrossedReplies: two MCP clients of one user on one extension send
// the same ids at the same time; every reply reaches the client that asked.
func TestNoCrossedReplies(t *testing.T) {
	const perClient = 5000
	tp := newTestProxy(t, Options{ConnRate: -1, UserRate: -1})
	ext := tp.extension(t, "alice", "Chrome").ready(t)
	clients := []*tclient{tp.mcp(t, "alice"), tp.mcp(t, "alice")}
	conns := make([]string, len(clients))
	for i, c := range clients {
		conns[i] = connectTo(t, c, ext.id)
	}
	go func() { // keep the extension's record of requests from filling up
		for range ext.seen {
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 2*perClient)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := make(chan struct{}, 64) // calls in flight per client
			var inner sync.WaitGroup
			for n := 1; n <= perClient; n++ {
				sem <- struct{}{}
				var id any = n
				if n%2 == 0 {
					id = fmt.Sprint(n) // strings and numbers with the same text
				}
				ch := c.start(id, "createTab", map[string]int{"n": n})
				inner.Add(1)
				go func() {
					defer inner.Done()
					defer func() { <-sem }()
					select {
					case r := <-ch:
						var e echo
						if json.Unmarshal(r.Result, &e) != nil {
							errs <- fmt.Errorf("client %d id %v: %s %s", i, id, r.Result, r.Error)
							return
						}
						want, _ := json.Marshal(id)
						var seen string
						json.Unmarshal(e.ID, &seen)
						if seen != conns[i]+":"+string(want) || string(r.ID) != string(want) {
							errs <- fmt.Errorf("client %d id %s got reply id %s for extension id %s", i, want, r.ID, seen)
						}
					case <-time.After(10 * time.Second):
						errs <- fmt.Errorf("client %d id %v: no reply", i, id)
					}
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d calls crossed or failed", n, 2*perClient)
	}
	for _, c := range clients {
		select {
		case m := <-c.notes:
			if m.Method != relaywire.MethodStatus {
				t.Fatalf("stray message %+v", m)
			}
		default:
		}
	}
}

func TestExtensionLeaves(t *testing.T) {
	tp := newTestProxy(t, Options{})
	ext := tp.extension(t, "alice", "Chrome").ready(t)
	c1, c2 := tp.mcp(t, "alice"), tp.mcp(t, "alice")
	ids := []string{connectTo(t, c1, ext.id), connectTo(t, c2, ext.id)}
	var held []chan *relaywire.Message
	for i := range 5 {
		held = append(held, c1.start(i, "hold", nil), c2.start(fmt.Sprint(i), "hold", nil))
	}
	for range 10 {
		<-ext.seen
	}
	ext.ws.Close()
	for _, ch := range held {
		r := c1.wait(ch)
		if code, msg := errCode(t, r); code != relaywire.CodeExtensionGone || !strings.Contains(msg, "disconnected before answering") {
			t.Fatalf("held call: %d %q", code, msg)
		}
	}
	for i, c := range []*tclient{c1, c2} {
		var p relaywire.DisconnectedParams
		json.Unmarshal(c.note(relaywire.MethodDisconnected).Params, &p)
		if p.ConnectionID != ids[i] || p.Reason != relaywire.ReasonExtensionGone {
			t.Fatalf("disconnected %+v", p)
		}
		if code, _ := errCode(t, c.call(99, "getTabs", nil)); code != relaywire.CodeNotConnected {
			t.Fatalf("after the extension left: %d", code)
		}
		if r := c.call(100, relaywire.MethodListExtensions, nil); string(r.Result) != `{"extensions":[]}` {
			t.Fatalf("list after leaving: %s", r.Result)
		}
	}
	// The same browser coming back gets the same extension id.
	again := tp.extension(t, "alice", "Chrome").ready(t)
	if again.id != ext.id {
		t.Fatalf("extension id changed across reconnection: %s → %s", ext.id, again.id)
	}
}

func TestMCPLeavesAndDisconnect(t *testing.T) {
	tp := newTestProxy(t, Options{})
	ext := tp.extension(t, "alice", "Chrome").ready(t)
	ext.note(relaywire.MethodStatus)
	c := tp.mcp(t, "alice")
	connectTo(t, c, ext.id)
	peers := func() int {
		var p relaywire.StatusParams
		json.Unmarshal(ext.note(relaywire.MethodStatus).Params, &p)
		return p.PeerCount
	}
	if n := peers(); n != 1 {
		t.Fatalf("peers %d", n)
	}
	ch := c.start(1, "hold", nil)
	<-ext.seen
	c.call(2, relaywire.MethodDisconnect, nil)
	if code, _ := errCode(t, c.wait(ch)); code != relaywire.CodeExtensionGone {
		t.Fatalf("held call after disconnect: %d", code)
	}
	if n := peers(); n != 0 {
		t.Fatalf("peers %d", n)
	}
	connectTo(t, c, ext.id)
	peers()
	c.ws.Close()
	if n := peers(); n != 0 {
		t.Fatalf("peers after the client left: %d", n)
	}
}

func TestShutdownTellsBothSides(t *testing.T) {
	tp := newTestProxy(t, Options{ShutdownGrace: 200 * time.Millisecond})
	ext := tp.extension(t, "alice", "Chrome").ready(t)
	c := tp.mcp(t, "alice")
	conn := connectTo(t, c, ext.id)
	quick := c.start(1, "getTabs", nil)
	held := c.start(2, "hold", nil)
	// Both must have reached the extension before the shutdown starts: a
	// request still in the socket when the connection closes gets the close
	// frame, not a reply.
	<-ext.seen
	<-ext.seen
	c.wait(quick)
	done := make(chan error)
	go func() { done <- tp.srv.Shutdown(context.Background()) }()
	if code, msg := errCode(t, c.wait(held)); code != relaywire.CodeShuttingDown || !strings.Contains(msg, "shutting down") {
		t.Fatalf("held call: %d %q", code, msg)
	}
	var p relaywire.DisconnectedParams
	json.Unmarshal(c.note(relaywire.MethodDisconnected).Params, &p)
	if p.ConnectionID != conn || p.Reason != relaywire.ReasonShuttingDown {
		t.Fatalf("disconnected %+v", p)
	}
	for {
		var st relaywire.StatusParams
		json.Unmarshal(ext.note(relaywire.MethodStatus).Params, &st)
		if !st.Connected {
			break
		}
	}
	for _, cl := range []*tclient{c, ext.tclient} {
		if code, reason := cl.closed(); code != websocket.CloseGoingAway || reason != relaywire.ReasonShuttingDown {
			t.Fatalf("closed with %d %q", code, reason)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestShutdownWaitsForCallsInFlight(t *testing.T) {
	tp := newTestProxy(t, Options{ShutdownGrace: 5 * time.Second})
	ext := tp.extension(t, "alice", "Chrome").ready(t)
	c := tp.mcp(t, "alice")
	connectTo(t, c, ext.id)
	ch := c.start(1, "hold", nil)
	raw := <-ext.seen
	done := make(chan error)
	go func() { done <- tp.srv.Shutdown(context.Background()) }()
	testutil.WaitFor(t, "the proxy to begin shutting down", tp.srv.closingFlag.Load)
	// New calls are refused while the held one may still finish.
	if code, _ := errCode(t, c.call(2, "getTabs", nil)); code != relaywire.CodeShuttingDown {
		t.Fatalf("new call during shutdown: %d", code)
	}
	var m relaywire.Message
	json.Unmarshal(raw, &m)
	ext.sendRaw(relaywire.AppendResult(nil, m.ID, json.RawMessage(`{"late":true}`)))
	if r := c.wait(ch); string(r.Result) != `{"late":true}` {
		t.Fatalf("held call: %s %s", r.Result, r.Error)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRateLimits(t *testing.T) {
	t.Run("per connection, then closed on abuse", func(t *testing.T) {
		tp := newTestProxy(t, Options{ConnRate: 10, Strikes: 5})
		c := tp.mcp(t, "alice")
		for i := range 40 {
			c.sendRaw([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"list_extensions"}`, i)))
		}
		code, reason := c.closed()
		limited := 0
		for len(c.notes) > 0 {
			m := <-c.notes
			if code, msg := errCode(t, m); code == relaywire.CodeRateLimited {
				if !strings.Contains(msg, "rate limit exceeded: more than 10 messages per second on this connection") {
					t.Fatalf("message %q", msg)
				}
				limited++
			}
		}
		if code != websocket.ClosePolicyViolation || !strings.Contains(reason, "rate limit") || limited == 0 {
			t.Fatalf("closed with %d %q after %d refusals", code, reason, limited)
		}
	})
	t.Run("per user", func(t *testing.T) {
		tp := newTestProxy(t, Options{ConnRate: -1, UserRate: 10, Strikes: -1})
		a, b := tp.mcp(t, "alice"), tp.mcp(t, "alice")
		other := tp.mcp(t, "bob")
		for i := range 15 {
			a.call(i, relaywire.MethodListExtensions, nil)
		}
		code, msg := 0, ""
		for i := range 15 {
			if code, msg = errCode(t, b.call(i, relaywire.MethodListExtensions, nil)); code != 0 {
				break
			}
		}
		if code != relaywire.CodeRateLimited || !strings.Contains(msg, "for this user") {
			t.Fatalf("got %d %q", code, msg)
		}
		if code, _ := errCode(t, other.call(1, relaywire.MethodListExtensions, nil)); code != 0 {
			t.Fatal("another user was limited")
		}
	})
}

func TestKeepAlive(t *testing.T) {
	// The live client's reader must answer each ping within PongWait even
	// when a busy machine under -race holds it back: 300 ms was not always
	// enough (a "broken pipe" on the live client). 2 s still ends the
	// dead one within the test's wait.
	tp := newTestProxy(t, Options{PongWait: 2 * time.Second})
	live := tp.mcp(t, "alice") // its reader answers pings
	// A client that never reads never answers a ping: dropped.
	d := websocket.Dialer{}
	dead, _, err := d.Dial(tp.url+relaywire.PathMCP, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	tok := tp.token(t, "alice", token.KindMCP)
	dead.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "mcp_handshake", "params": map[string]string{"accessToken": tok}})
	// Wait for the dead one to be counted, then to be dropped (it never
	// reads, so it never answers a ping).
	testutil.WaitFor(t, "2 MCP clients (the dead one's handshake)", func() bool { return tp.srv.nMCP.Load() == 2 })
	testutil.WaitFor(t, "1 MCP client (the dead one past its pong deadline)", func() bool { return tp.srv.nMCP.Load() == 1 })
	if r := live.call(2, relaywire.MethodListExtensions, nil); r.Error != nil {
		t.Fatalf("live client: %s", r.Error)
	}
	if n := tp.srv.nMCP.Load(); n != 1 {
		t.Fatalf("%d MCP clients after the live one's call, want 1: the live one was dropped too", n)
	}
}
