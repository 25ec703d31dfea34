package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/daemon"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

const secret = "0123456789abcdef0123456789abcdef-relay-test"

func testLog(t testing.TB, prefix string) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(logWriter{t, prefix}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type logWriter struct {
	t      testing.TB
	prefix string
}

func (w logWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }()
	w.t.Log(w.prefix + ": " + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// realProxy is the real proxy on a fixed loopback address, which the test
// can kill (every TCP connection cut, no close frames, as kill -9 does) and
// start again on the same address.
type realProxy struct {
	t    *testing.T
	keys *token.Keys
	addr string

	mu    sync.Mutex
	ln    net.Listener
	srv   *proxy.Server
	hs    *http.Server
	conns []net.Conn
}

func startProxy(t *testing.T) *realProxy {
	keys, err := token.NewHS256([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	p := &realProxy{t: t, keys: keys, addr: "127.0.0.1:0"}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *realProxy) url() string { return "ws://" + p.addr }

func (p *realProxy) start() {
	p.t.Helper()
	var ln net.Listener
	var err error
	testutil.WaitFor(p.t, "the proxy's port "+p.addr+" to be free again", func() bool {
		ln, err = net.Listen("tcp", p.addr)
		return err == nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Keys: p.keys, Logger: testLog(p.t, "proxy"), ShutdownGrace: 100 * time.Millisecond})
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.addr, p.ln, p.srv, p.conns = ln.Addr().String(), ln, srv, nil
	p.hs = &http.Server{Handler: srv.Handler()}
	p.mu.Unlock()
	go p.hs.Serve(trackingListener{ln, p})
}

// kill cuts every connection at once.
func (p *realProxy) kill() {
	p.mu.Lock()
	ln, conns, srv := p.ln, p.conns, p.srv
	p.ln, p.conns = nil, nil
	p.mu.Unlock()
	if ln == nil {
		return
	}
	ln.Close()
	for _, c := range conns {
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx) // frees what the dead connections held
}

func (p *realProxy) token(user string, kind token.Kind) string {
	tok, err := p.keys.MintFor(user, kind, time.Hour, time.Now())
	if err != nil {
		p.t.Fatal(err)
	}
	return tok
}

type trackingListener struct {
	net.Listener
	p *realProxy
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.p.mu.Lock()
		l.p.conns = append(l.p.conns, c)
		l.p.mu.Unlock()
	}
	return c, err
}

// userBridge is one user's bridge, in this process, with its relay on.
type userBridge struct {
	t    *testing.T
	user string
	b    *daemon.Bridge
	sock string
	stop func() // stops the bridge (as for a restart) and waits for it; once
}

func startBridge(t *testing.T, p *realProxy, user string) *userBridge {
	return startBridgeAt(t, p.url(), p.token(user, token.KindExtension), user)
}

// fakeBrowser is an extension on the bridge's native link whose one tool
// "whoami" answers with the browser's label, and "slow" waits for release.
type fakeBrowser struct {
	*testbrowser.Browser
	label     string
	started   chan string // ids of tools/call "slow" received
	release   chan struct{}
	cancelled chan string // requestIds of notifications/cancelled
	ended     chan string // sessions of session.ended
	mu        sync.Mutex
	metas     []json.RawMessage
}

func (ub *userBridge) attach(label string) *fakeBrowser {
	t := ub.t
	c, err := ipc.Dial(context.Background(), ub.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fb := &fakeBrowser{label: label, started: make(chan string, 16), release: make(chan struct{}),
		cancelled: make(chan string, 16), ended: make(chan string, 16)}
	fb.Browser = testbrowser.Attach(c, func(method string, params json.RawMessage) (any, map[string]any) {
		switch method {
		case "tools/list":
			return map[string]any{"tools": []map[string]any{
				{"name": "whoami", "description": "Say which browser this is.", "inputSchema": map[string]any{"type": "object"}},
				{"name": "slow", "description": "Wait until the test releases it.", "inputSchema": map[string]any{"type": "object"}},
				{"name": "strict", "description": "Refuse its arguments.", "inputSchema": map[string]any{"type": "object"}},
			}}, nil
		case "tools/call":
			var p struct {
				Name string          `json:"name"`
				Meta json.RawMessage `json:"_meta"`
			}
			_ = json.Unmarshal(params, &p)
			fb.mu.Lock()
			fb.metas = append(fb.metas, p.Meta)
			fb.mu.Unlock()
			switch p.Name {
			case "whoami":
				return map[string]any{"content": []map[string]any{{"type": "text", "text": label}}}, nil
			case "slow":
				fb.started <- string(params)
				<-fb.release
				return nil, map[string]any{"code": -32000, "message": "stopped"}
			case "strict": // the extension's refusal of arguments that do not match the schema (sw/tools.js)
				return nil, map[string]any{"code": -32602, "message": "Invalid arguments for strict: url is required",
					"data": map[string]any{"argumentErrors": []string{"url is required"}}}
			}
			return nil, map[string]any{"code": -32602, "message": "unknown tool " + p.Name}
		}
		return nil, map[string]any{"code": -32601, "message": "no method " + method}
	})
	fb.OnNotify(func(method string, p json.RawMessage) {
		var n struct {
			RequestID string `json:"requestId"`
			Session   string `json:"session"`
		}
		_ = json.Unmarshal(p, &n)
		switch method {
		case "notifications/cancelled":
			fb.cancelled <- n.RequestID
		case protocol.SessionEnded:
			select {
			case fb.ended <- n.Session:
			default:
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := fb.Hello(ctx, "instance-"+strings.ToLower(label)); err != nil {
		t.Fatal(err)
	}
	return fb
}

// relaysDown counts the bridge's relays that are down with a reason.
func relaysDown(ub *userBridge) int {
	down := 0
	for _, r := range ub.b.Links().Status().Relay {
		if r.State != relay.StateConnected && r.Error != "" {
			down++
		}
	}
	return down
}

// waitRelay waits until the bridge's relay shows n browsers connected and
// returns their extension ids by browser id.
func (ub *userBridge) waitRelay(n int) map[string]protocol.RelayInfo {
	ub.t.Helper()
	var got map[string]protocol.RelayInfo
	testutil.WaitFor(ub.t, fmt.Sprintf("%d browsers connected in %s's relay", n, ub.user), func() bool {
		got = map[string]protocol.RelayInfo{}
		for _, r := range ub.b.Links().Status().Relay {
			if r.State == relay.StateConnected && r.ExtensionID != "" {
				got[r.BrowserID] = r
			}
		}
		return len(got) == n
	})
	return got
}

// mcpClient connects an MCP SDK client to a RemoteServer (what `connect`
// serves on stdio) through in-memory transports.
func mcpClient(t *testing.T, p *realProxy, user, extID string) (*mcp.ClientSession, *relay.RemoteServer) {
	t.Helper()
	return mcpClientWith(t, p, user, extID, nil)
}

// mcpClientWith is mcpClient with the client's options.
func mcpClientWith(t *testing.T, p *realProxy, user, extID string, copts *mcp.ClientOptions) (*mcp.ClientSession, *relay.RemoteServer) {
	t.Helper()
	rs := relay.NewRemoteServer(relay.RemoteOptions{URL: p.url(), Token: p.token(user, token.KindMCP), ExtensionID: extID,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, ReadyWait: 10 * time.Second, Logger: testLog(t, "connect-"+user)}, "test")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); rs.Remote().Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-rs.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("connect for %s never listed the tools: %s", user, rs.Remote().LastError())
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := rs.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, copts)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, rs
}

func callText(t *testing.T, cs *mcp.ClientSession, name string) (string, bool) {
	t.Helper()
	r := <-startCall(cs, name)
	if r.err != nil {
		t.Fatalf("call %s: %v", name, r.err)
	}
	return r.text, r.isErr
}

// callResult is a tool call's outcome: its text content, isError, or the
// error that ended it.
type callResult struct {
	text  string
	isErr bool
	err   error
}

// startCall calls tool name in the background (20 s at most); the outcome
// arrives on the channel.
func startCall(cs *mcp.ClientSession, name string) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		r := callResult{err: err}
		if err == nil {
			r.isErr = res.IsError
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					r.text += tc.Text
				}
			}
		}
		done <- r
	}()
	return done
}

// rawMCP is a bare WebSocket MCP client of the proxy, for control methods.
type rawMCP struct {
	t  *testing.T
	ws *websocket.Conn
	n  int
}

func dialMCP(t *testing.T, p *realProxy, user string) *rawMCP {
	ws, _, err := websocket.DefaultDialer.Dial(p.url()+relaywire.PathMCP, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	r := &rawMCP{t: t, ws: ws}
	if m := r.call(relaywire.MethodHandshake, relaywire.HandshakeParams{AccessToken: p.token(user, token.KindMCP)}); m.Error != nil {
		t.Fatalf("handshake: %s", m.Error)
	}
	return r
}

func (r *rawMCP) call(method string, params any) *relaywire.Message {
	r.t.Helper()
	r.n++
	id := fmt.Sprint(r.n)
	msg := relaywire.AppendRequestRawID(nil, json.RawMessage(id), method, relaywire.MarshalParams(params))
	if err := r.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
		r.t.Fatal(err)
	}
	_ = r.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, data, err := r.ws.ReadMessage()
		if err != nil {
			r.t.Fatal(err)
		}
		m, kind, perr := relaywire.Parse(data)
		if perr != nil {
			r.t.Fatalf("bad message %s: %v", data, perr)
		}
		if kind == relaywire.KindReply && string(m.ID) == id {
			return m
		}
	}
}

func TestRelayTwoUsersIsolationAndRestart(t *testing.T) {
	p := startProxy(t)
	alice := startBridge(t, p, "alice")
	bob := startBridge(t, p, "bob")
	a1, a2 := alice.attach("A1"), alice.attach("A2")
	b1, _ := bob.attach("B1"), bob.attach("B2")
	aRelay := alice.waitRelay(2)
	bRelay := bob.waitRelay(2)
	extA2 := aRelay["instance-a2"].ExtensionID
	extB1 := bRelay["instance-b1"].ExtensionID
	if extA2 == "" || extB1 == "" || aRelay["instance-a1"].Name == aRelay["instance-a2"].Name {
		t.Fatalf("relay status: %+v %+v", aRelay, bRelay)
	}

	t.Run("each user lists only their own browsers", func(t *testing.T) {
		for _, c := range []struct {
			user string
			want map[string]protocol.RelayInfo
		}{{"alice", aRelay}, {"bob", bRelay}} {
			m := dialMCP(t, p, c.user).call(relaywire.MethodListExtensions, struct{}{})
			var list relaywire.ListExtensionsResult
			if err := json.Unmarshal(m.Result, &list); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, e := range list.Extensions {
				got[e.ID] = true
			}
			if len(got) != 2 {
				t.Errorf("%s lists %+v, want 2", c.user, list.Extensions)
			}
			for _, r := range c.want {
				if !got[r.ExtensionID] {
					t.Errorf("%s does not list own %s (%s)", c.user, r.ExtensionID, r.BrowserID)
				}
			}
		}
	})

	t.Run("bob cannot connect to alice's browser", func(t *testing.T) {
		m := dialMCP(t, p, "bob").call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: extA2})
		if m.Error == nil || !strings.Contains(string(m.Error), relaywire.MsgExtensionNotFound) {
			t.Fatalf("connect to another user's extension: %s %s", m.Result, m.Error)
		}
		// And through `connect`'s machinery: no tools, calls fail clearly.
		r := relay.NewRemote(relay.RemoteOptions{URL: p.url(), Token: p.token("bob", token.KindMCP), ExtensionID: extA2,
			MinBackoff: 20 * time.Millisecond, ReadyWait: 500 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go r.Run(ctx)
		_, err := r.Call(ctx, "tools/call", map[string]any{"name": "whoami"})
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("bob's call to alice's browser: %v", err)
		}
	})

	cs, rs := mcpClient(t, p, "alice", extA2)

	t.Run("connect calls the right browser", func(t *testing.T) {
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(tools.Tools) != 3 {
			t.Fatalf("tools %+v %v", tools, err)
		}
		if got, isErr := callText(t, cs, "whoami"); got != "A2" || isErr {
			t.Fatalf("whoami = %q (error %v), want A2", got, isErr)
		}
		a2.mu.Lock()
		meta := string(a2.metas[len(a2.metas)-1])
		a2.mu.Unlock()
		// Named after the client of `browserbridge connect`, on the key of
		// its process (issue 31, items 1 and 2).
		if !regexp.MustCompile(`"browserbridge/session":\{"client":"test-client","id":"conn-k[0-9a-z]+","remote":true\}`).MatchString(meta) {
			t.Errorf("tools/call _meta = %s, want the session of test-client, remote, on its key", meta)
		}
		a1.mu.Lock()
		n := len(a1.metas)
		a1.mu.Unlock()
		if n != 0 {
			t.Errorf("A1 got %d calls meant for A2", n)
		}
		cs2, _ := mcpClient(t, p, "bob", extB1)
		if got, _ := callText(t, cs2, "whoami"); got != "B1" {
			t.Fatalf("bob's whoami = %q, want B1", got)
		}
	})

	t.Run("proxy killed mid-call and restarted", func(t *testing.T) {
		done := startCall(cs, "slow")
		select {
		case <-a2.started:
		case <-time.After(10 * time.Second):
			t.Fatal("the slow call never reached the browser")
		}
		p.kill()
		start := time.Now()
		// The MCP client is told at once, in words.
		select {
		case r := <-done:
			// Either connect saw its socket drop first, or the proxy saw the
			// extension's drop first and answered for it: both are clean.
			if r.err != nil || !r.isErr || !(strings.Contains(r.text, "dropped") || strings.Contains(r.text, "disconnected before answering")) {
				t.Fatalf("in-flight call after the kill: %+v", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the in-flight call did not fail after the proxy died")
		}
		// The browser is told to stop the call it was running.
		select {
		case id := <-a2.cancelled:
			if !strings.HasPrefix(id, "conn-") {
				t.Errorf("cancelled id %q", id)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the browser was not told the call was cancelled")
		}
		close(a2.release) // the late answer goes nowhere
		select {
		case s := <-a2.ended:
			if !strings.HasPrefix(s, "conn-") {
				t.Errorf("session.ended %q", s)
			}
		case <-time.After(5 * time.Second):
			t.Error("no session.ended for the remote session")
		}
		// While the proxy is down, status says so.
		testutil.WaitFor(t, "the status to show both relays down", func() bool { return relaysDown(alice) == 2 })
		t.Logf("in-flight call failed %v after the kill", time.Since(start))

		p.start()
		again := alice.waitRelay(2)
		if again["instance-a2"].ExtensionID != extA2 {
			t.Errorf("A2 re-registered as %s, was %s (stable ids let connect --extension survive)", again["instance-a2"].ExtensionID, extA2)
		}
		bob.waitRelay(2)
		if got, isErr := callText(t, cs, "whoami"); got != "A2" || isErr {
			t.Fatalf("whoami after the restart = %q (error %v)", got, isErr)
		}
		if res, ok := rs.Remote().Connected(); !ok || res.ExtensionID != extA2 {
			t.Fatalf("connect state after restart: %+v %v", res, ok)
		}
		_ = b1
	})
}

// TestRelayAuthFailure: a bad token is shown as auth_failed with the
// proxy's reason, and nothing is forwarded.
func TestRelayAuthFailure(t *testing.T) {
	p := startProxy(t)
	ub := startBridge(t, p, "carol")
	_ = ub.attach("C1")
	// Swap in a forged token: start another bridge whose token is signed
	// with another secret.
	forged, _ := token.NewHS256([]byte("another-secret-another-secret-0123456789"))
	tok, _ := forged.MintFor("carol", token.KindExtension, time.Hour, time.Now())
	dir, _ := os.MkdirTemp("", "bbr")
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := &config.Config{Listen: "127.0.0.1:0", Socket: filepath.Join(dir, "b.sock"), Log: config.Log{File: "-"},
		Relay: config.Relay{URL: p.url(), Token: tok}}
	b, err := daemon.Start(cfg, testLog(t, "bridge-forged"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	bad := &userBridge{t: t, user: "forged", b: b, sock: cfg.Socket}
	bad.attach("F1")
	var st protocol.StatusResult
	testutil.WaitFor(t, "the forged relay token to be refused", func() bool {
		st = b.Links().Status()
		return len(st.Relay) == 1 && st.Relay[0].State == relay.StateAuthFailed
	})
	if !strings.Contains(st.Relay[0].Error, "refused the relay token") {
		t.Errorf("error %q", st.Relay[0].Error)
	}
	ub.waitRelay(1)
}

func TestBackoff(t *testing.T) {
	for n := 1; n < 20; n++ {
		d := relay.Backoff(100*time.Millisecond, 2*time.Second, n)
		want := min(100*time.Millisecond<<(n-1), 2*time.Second)
		if n > 6 {
			want = 2 * time.Second
		}
		if d < want/2 || d > want {
			t.Errorf("attempt %d: %v, want in [%v, %v]", n, d, want/2, want)
		}
	}
}

var _ = io.Discard

// TestRelayNamesDoNotDependOnOrder: two browsers that look alike (same
// name, version, profile, as the fake browsers here do) attached in one
// order to one bridge and in the other order to another get the same
// names, so the proxy's extension id of each stays the same across bridge
// restarts whichever attaches first.
func TestRelayNamesDoNotDependOnOrder(t *testing.T) {
	p := startProxy(t)
	names := func(user string, order []string) map[string]string {
		ub := startBridge(t, p, user)
		for _, label := range order {
			ub.attach(label)
		}
		got := map[string]string{}
		for id, r := range ub.waitRelay(len(order)) {
			got[id] = r.Name
		}
		return got
	}
	first := names("carol", []string{"X", "Y"})
	second := names("dave", []string{"Y", "X"})
	if len(first) != 2 || first["instance-x"] == first["instance-y"] {
		t.Fatalf("alike browsers must get different names: %v", first)
	}
	for id, name := range first {
		if second[id] != name {
			t.Fatalf("browser %s is %q when attached first and %q when attached second", id, name, second[id])
		}
	}
}

// TestConnectBadArgumentsAreAToolError: `browserbridge connect` answers a
// browser's refusal of a call's arguments as the tool error the client's
// protocol version asks for (SEP-1303 from 2025-11-25), while an unknown
// tool stays a JSON-RPC -32602.
func TestConnectBadArgumentsAreAToolError(t *testing.T) {
	p := startProxy(t)
	alice := startBridge(t, p, "alice")
	alice.attach("A1")
	ext := alice.waitRelay(1)["instance-a1"].ExtensionID
	cs, _ := mcpClient(t, p, "alice", ext)
	if v := cs.InitializeResult().ProtocolVersion; v < mcphttp.VersionToolArgumentErrors {
		t.Fatalf("the Go SDK client negotiated %s; this test needs %s or later", v, mcphttp.VersionToolArgumentErrors)
	}
	got, isErr := callText(t, cs, "strict")
	if !isErr || !strings.Contains(got, "url is required") || !strings.Contains(got, "Correct the arguments") {
		t.Errorf("bad arguments: got %q (isError %v), want a tool error naming the problem and what to do", got, isErr)
	}
	r := <-startCall(cs, "nosuch")
	var rpcErr *jsonrpc.Error
	if !errors.As(r.err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown tool: got %+v, want JSON-RPC -32602", r)
	}
}

// TestRelayCallCutByBridgeStop: a relayed call in flight when its bridge
// stops (for a restart, most often) ends with a sentence naming the
// restart, as a local client's does, not as a browser that went away.
func TestRelayCallCutByBridgeStop(t *testing.T) {
	p := startProxy(t)
	alice := startBridge(t, p, "alice")
	fb := alice.attach("A1")
	defer close(fb.release) // the fake browser's handler still waits after its link is gone
	ext := alice.waitRelay(1)["instance-a1"].ExtensionID
	cs, _ := mcpClient(t, p, "alice", ext)
	res := startCall(cs, "slow")
	select {
	case <-fb.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the browser never received the relayed call")
	}
	alice.stop()
	r := <-res
	if r.err != nil || !r.isErr || !strings.Contains(r.text, "restarting (or was stopped)") {
		t.Errorf("call cut short by the bridge's stop: %+v; want a tool error naming the restart", r)
	}
}

// TestConnectEndsItsSession: `browserbridge connect`'s session with the
// browser ends with its client: the browser is told (session.ended, for
// the session of connect's key), so that its tab group goes as a local
// session's does; a connect that never called the browser tells it
// nothing.
func TestConnectEndsItsSession(t *testing.T) {
	p := startProxy(t)
	alice := startBridge(t, p, "alice")
	a := alice.attach("A1")
	ext := alice.waitRelay(1)["instance-a1"].ExtensionID
	cs, rs := mcpClient(t, p, "alice", ext)
	if got, isErr := callText(t, cs, "whoami"); got != "A1" || isErr {
		t.Fatalf("whoami = %q (error %v), want A1", got, isErr)
	}
	a.mu.Lock()
	meta := string(a.metas[len(a.metas)-1])
	a.mu.Unlock()
	m := regexp.MustCompile(`"id":"(conn-k[0-9a-z]+)"`).FindStringSubmatch(meta)
	if m == nil {
		t.Fatalf("the call's _meta names no keyed session: %s", meta)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !rs.EndSession(ctx) {
		t.Fatalf("EndSession could not tell the browser: %s", rs.Remote().LastError())
	}
	select {
	case s := <-a.ended:
		if s != m[1] {
			t.Fatalf("session.ended for %q; want the connect's session %q", s, m[1])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the browser was not told that the connect's session ended")
	}

	_, idle := mcpClient(t, p, "alice", ext)
	if idle.EndSession(ctx) {
		t.Error("a connect that never called the browser says it told the browser its session ended")
	}
}
