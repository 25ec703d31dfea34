package relay_test

// A bridge's stdio servers through the relay, end to end: a real bridge
// (daemon.Start) whose gateway runs server-everything from tools/npm, a
// real proxy, and spec 001 WebSocket MCP clients that connect to the
// server's extension and speak MCP to it: initialize, echo, a tool that
// reports progress, and the sampling tool, whose sampling/createMessage
// the client answers. Then `browserbridge connect`'s RemoteServer against
// the same extension (no initialize of its own), and servers added and
// removed by a reload of the servers file.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/daemon"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

const bridgeName = "test-bridge"

// serverBridge is a bridge with a relay and a gateway.
type serverBridge struct {
	t       *testing.T
	b       *daemon.Bridge
	sock    string
	servers string // the servers file
}

func startServerBridge(t *testing.T, p *realProxy, user string, servers ...string) *serverBridge {
	t.Helper()
	dir, err := os.MkdirTemp("", "bbs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sb := &serverBridge{t: t, sock: filepath.Join(dir, "b.sock"), servers: filepath.Join(dir, "servers.json")}
	testutil.ServersFile(t, sb.servers, servers...)
	cfg := &config.Config{Listen: "127.0.0.1:0", Socket: sb.sock, Log: config.Log{File: "-"},
		Relay:   config.Relay{URL: p.url(), Token: p.token(user, token.KindExtension), Name: bridgeName},
		Gateway: config.Gateway{ServersFile: sb.servers}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := daemon.Start(cfg, testLog(t, "bridge-"+user))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bridge %s: %v", user, err)
		}
	})
	sb.b = b
	return sb
}

// waitServers waits until the relay's server extensions are exactly those
// named, and the gateway's aggregate ("all"), all connected, and returns
// their extension ids by server.
func (sb *serverBridge) waitServers(names ...string) map[string]string {
	sb.t.Helper()
	names = append(names, "all") // the aggregate is offered while there is a server
	var got map[string]string
	testutil.WaitFor(sb.t, fmt.Sprintf("the server extensions %v connected", names), func() bool {
		got = map[string]string{}
		var st []protocol.RelayInfo
		if r := sb.b.Relay(); r != nil {
			st = r.ServerStatus()
		}
		for _, r := range st {
			if r.State == relay.StateConnected && r.ExtensionID != "" {
				got[r.Server] = r.ExtensionID
			}
		}
		ok := len(got) == len(names) && len(st) == len(names)
		for _, n := range names {
			ok = ok && got[n] != ""
		}
		return ok
	})
	return got
}

// gatewaySessions is the number of sessions the bridge's gateway has open.
func (sb *serverBridge) gatewaySessions() int {
	sb.t.Helper()
	resp, err := http.Get("http://" + sb.b.Addr() + "/health")
	if err != nil {
		sb.t.Fatal(err)
	}
	defer resp.Body.Close()
	var h daemon.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		sb.t.Fatal(err)
	}
	return h.Sessions["gateway"]
}

// waitNote waits for a notification with the method.
func waitNote(t *testing.T, c *wsClient, method string) *relaywire.Message {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case n, ok := <-c.notes:
			if !ok {
				t.Fatalf("the connection ended before %s", method)
			}
			if n.Method == method {
				return n
			}
		case <-deadline:
			t.Fatalf("no %s within 30 s", method)
		}
	}
}

// wsClient is a spec 001 MCP client of the proxy that also answers the
// requests the proxy passes on from a server (sampling).
type wsClient struct {
	t  *testing.T
	ws *websocket.Conn

	wmu  sync.Mutex
	mu   sync.Mutex
	wait map[string]chan *relaywire.Message
	next int

	requests chan *relaywire.Message // from the server, through the proxy
	notes    chan *relaywire.Message
	done     chan struct{} // closed when the connection ends
}

func (c *wsClient) closed() <-chan struct{} { return c.done }

func dialClient(t *testing.T, p *realProxy, user string) *wsClient {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(p.url()+relaywire.PathMCP, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &wsClient{t: t, ws: ws, wait: map[string]chan *relaywire.Message{},
		requests: make(chan *relaywire.Message, 64), notes: make(chan *relaywire.Message, 1024), done: make(chan struct{})}
	t.Cleanup(func() { ws.Close() })
	go c.read()
	if m := c.call(relaywire.MethodHandshake, relaywire.HandshakeParams{AccessToken: p.token(user, token.KindMCP)}); m.Error != nil {
		t.Fatalf("handshake: %s", m.Error)
	}
	return c
}

func (c *wsClient) read() {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			close(c.done)
			close(c.notes)
			return
		}
		m, kind, perr := relaywire.Parse(data)
		if perr != nil {
			c.t.Errorf("bad message %s: %v", data, perr)
			continue
		}
		switch kind {
		case relaywire.KindReply:
			c.mu.Lock()
			ch := c.wait[string(m.ID)]
			delete(c.wait, string(m.ID))
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		case relaywire.KindRequest:
			c.requests <- m
		default:
			c.notes <- m
		}
	}
}

func (c *wsClient) send(msg []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
		c.t.Errorf("send: %v", err)
	}
}

// start sends a request and returns where its reply arrives.
func (c *wsClient) start(method string, params any) chan *relaywire.Message {
	c.mu.Lock()
	c.next++
	id := fmt.Sprint(c.next)
	ch := make(chan *relaywire.Message, 1)
	c.wait[id] = ch
	c.mu.Unlock()
	c.send(relaywire.AppendRequestRawID(nil, json.RawMessage(id), method, relaywire.MarshalParams(params)))
	return ch
}

func (c *wsClient) await(ch chan *relaywire.Message) *relaywire.Message {
	c.t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(30 * time.Second):
		c.t.Fatal("no reply within 30 s")
	}
	return nil
}

func (c *wsClient) call(method string, params any) *relaywire.Message {
	c.t.Helper()
	return c.await(c.start(method, params))
}

// extension finds the extension named name in list_extensions.
func (c *wsClient) extension(name string) (relaywire.ExtensionInfo, bool) {
	c.t.Helper()
	var list relaywire.ListExtensionsResult
	m := c.call(relaywire.MethodListExtensions, struct{}{})
	if m.Error != nil || json.Unmarshal(m.Result, &list) != nil {
		c.t.Fatalf("list_extensions: %s %s", m.Result, m.Error)
	}
	for _, e := range list.Extensions {
		if e.Name == name {
			return e, true
		}
	}
	return relaywire.ExtensionInfo{}, false
}

func toolText(t *testing.T, m *relaywire.Message) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("tools/call failed: %s", m.Error)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatalf("not a CallToolResult: %s", m.Result)
	}
	return testutil.Text(&res)
}

func TestRelayServersEndToEnd(t *testing.T) {
	p := startProxy(t)
	sb := startServerBridge(t, p, "alice", "everything")
	ids := sb.waitServers("everything")

	top := t
	name := "everything (" + bridgeName + ")"
	a := dialClient(t, p, "alice")
	info, ok := a.extension(name)
	if !ok || info.ID != ids["everything"] {
		t.Fatalf("alice's list_extensions has no %q with id %s: %+v", name, ids["everything"], info)
	}
	if m := a.call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: info.ID}); m.Error != nil {
		t.Fatalf("connect: %s", m.Error)
	}

	t.Run("initialize", func(t *testing.T) {
		m := a.call("initialize", map[string]any{"protocolVersion": "2025-11-25",
			"capabilities": map[string]any{"sampling": map[string]any{}}, "clientInfo": map[string]any{"name": "ws-client", "version": "1"}})
		var res struct {
			ProtocolVersion string         `json:"protocolVersion"`
			ServerInfo      map[string]any `json:"serverInfo"`
		}
		if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.ProtocolVersion != "2025-11-25" || res.ServerInfo["name"] == nil {
			t.Fatalf("initialize: %s %s", m.Result, m.Error)
		}
		a.send(relaywire.AppendNotification(nil, "notifications/initialized", nil))
		m = a.call("tools/list", struct{}{})
		for _, tool := range []string{`"echo"`, `"trigger-long-running-operation"`, `"trigger-sampling-request"`} {
			if !strings.Contains(string(m.Result), `"name":`+tool) {
				t.Fatalf("tools/list has no %s: %.300s %s", tool, m.Result, m.Error)
			}
		}
	})

	t.Run("server/discover names the server", func(t *testing.T) {
		// What the proxy forwards from /servers/{name}/mcp for a stateless
		// (2026-07-28) client: the answer carries serverInfo in _meta,
		// which such a client has no initialize to read from (issue 33).
		m := a.call("server/discover", map[string]any{"_meta": map[string]any{mcphttp.MetaProtocolVersion: mcphttp.VersionStateless}})
		var res struct {
			Meta map[string]struct {
				Name string `json:"name"`
			} `json:"_meta"`
		}
		if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.Meta["io.modelcontextprotocol/serverInfo"].Name == "" {
			t.Fatalf("server/discover: %s %s", m.Result, m.Error)
		}
	})

	t.Run("echo", func(t *testing.T) {
		m := a.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "hello through the relay"}})
		if got := toolText(t, m); got != "Echo: hello through the relay" {
			t.Fatalf("echo: %q", got)
		}
	})

	t.Run("progress", func(t *testing.T) {
		ch := a.start("tools/call", map[string]any{"name": "trigger-long-running-operation",
			"arguments": map[string]any{"duration": 0.3, "steps": 3}, "_meta": map[string]any{"progressToken": "tok-7"}})
		m := a.await(ch)
		if got := toolText(t, m); !strings.Contains(got, "completed") {
			t.Fatalf("long running operation: %q", got)
		}
		// The proxy delivers a call's progress before its reply, in order.
		var got []string
		for len(got) < 3 {
			select {
			case n := <-a.notes:
				if n.Method != relaywire.MethodProgress {
					continue
				}
				var pp struct {
					Token    string  `json:"progressToken"`
					Progress float64 `json:"progress"`
					Total    float64 `json:"total"`
				}
				json.Unmarshal(n.Params, &pp)
				if pp.Token != "tok-7" || n.RequestID != nil {
					t.Fatalf("progress %s (requestId %s)", n.Params, n.RequestID)
				}
				got = append(got, fmt.Sprintf("%g/%g", pp.Progress, pp.Total))
			default:
				t.Fatalf("progress before the reply: %v, want 3 steps", got)
			}
		}
		if strings.Join(got, " ") != "1/3 2/3 3/3" {
			t.Fatalf("progress %v", got)
		}
	})

	t.Run("sampling", func(t *testing.T) {
		// A second client of alice's on the same server, calling at the
		// same time, never sees the first one's sampling request.
		a2 := dialClient(t, p, "alice")
		if m := a2.call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: info.ID}); m.Error != nil {
			t.Fatalf("connect: %s", m.Error)
		}
		ch := a.start("tools/call", map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "say hi", "maxTokens": 5}})
		var req *relaywire.Message
		select {
		case req = <-a.requests:
		case <-time.After(30 * time.Second):
			t.Fatal("no sampling request reached the caller")
		}
		id, _ := relaywire.IDString(req.ID)
		if req.Method != "sampling/createMessage" || !strings.HasPrefix(id, relaywire.PrefixExt) || !strings.Contains(string(req.Params), "say hi") {
			t.Fatalf("the caller got %s %s %s", req.ID, req.Method, req.Params)
		}
		if m := a2.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "a2"}}); toolText(t, m) != "Echo: a2" {
			t.Fatalf("a2's echo: %s", m.Result)
		}
		a.send(relaywire.AppendResult(nil, req.ID, json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"sampled by the client"},"model":"test-model"}`)))
		if got := toolText(t, a.await(ch)); !strings.Contains(got, "sampled by the client") {
			t.Fatalf("sampling tool: %q", got)
		}
		select {
		case r := <-a2.requests:
			t.Fatalf("the other client got %s %s", r.Method, r.Params)
		default:
		}
	})

	t.Run("another user sees none of it", func(t *testing.T) {
		b := dialClient(t, p, "bob")
		if _, ok := b.extension(name); ok {
			t.Fatal("bob lists alice's server")
		}
		m := b.call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: info.ID})
		if m.Error == nil || !strings.Contains(string(m.Error), relaywire.MsgExtensionNotFound) {
			t.Fatalf("bob connecting to alice's server: %s %s", m.Result, m.Error)
		}
	})

	t.Run("browserbridge connect, without initialize", func(t *testing.T) {
		cs, _ := mcpClient(t, p, "alice", info.ID)
		res, err := cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "via connect"}})
		if err != nil || testutil.Text(res) != "Echo: via connect" {
			t.Fatalf("echo through connect: %v %s", err, testutil.Text(res))
		}
	})

	t.Run("pairing over a server's link", func(t *testing.T) {
		p.srv.ConfigurePairing(proxy.PairingOptions{})
		res, err := sb.b.Relay().PairingCode(testutil.Context(t, 10*time.Second))
		if err != nil || res.UserID != "alice" || res.SignInURL != "http://"+p.addr+"/mcp" {
			t.Fatalf("PairingCode: %+v %v", res, err)
		}
		if user, err := p.srv.RedeemPairingCode(res.Code, "192.0.2.1"); err != nil || user != "alice" {
			t.Fatalf("redeem: %q %v", user, err)
		}
	})

	t.Run("the proxy drops mid-call: sessions end, the server comes back", func(t *testing.T) {
		c := dialClient(t, p, "alice")
		if m := c.call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: info.ID}); m.Error != nil {
			t.Fatalf("connect: %s", m.Error)
		}
		ch := c.start("tools/call", map[string]any{"name": "trigger-long-running-operation",
			"arguments": map[string]any{"duration": 30, "steps": 30}, "_meta": map[string]any{"progressToken": 1}})
		waitNote(t, c, relaywire.MethodProgress) // the call runs on the server
		if sb.gatewaySessions() == 0 {
			t.Fatal("no gateway session for the relayed clients")
		}
		p.kill()
		// The call ends with an error (the proxy saw the extension's
		// connection cut first), or with the client's connection.
		select {
		case m := <-ch:
			if m.Error == nil || !strings.Contains(string(m.Error), "disconnected") {
				t.Errorf("the call was answered %s %s as the proxy died", m.Result, m.Error)
			}
		case <-c.closed():
		case <-time.After(30 * time.Second):
			t.Error("the client's connection outlived the proxy")
		}
		testutil.WaitFor(t, "the gateway sessions to end after the relay dropped", func() bool { return sb.gatewaySessions() == 0 })
		p.start()
		sb.waitServers("everything")
		c2 := dialClient(top, p, "alice") // outlives this subtest: the reload below watches it
		if m := c2.call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: info.ID}); m.Error != nil {
			t.Fatalf("connect after the restart (same extension id): %s", m.Error)
		}
		if got := toolText(t, c2.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "back"}})); got != "Echo: back" {
			t.Fatalf("echo after the restart: %q", got)
		}
		a = c2
	})

	t.Run("reload adds and removes servers", func(t *testing.T) {
		testutil.ServersFile(t, sb.servers, "everything", "memory")
		ids := sb.waitServers("everything", "memory")
		if e, ok := a.extension("memory (" + bridgeName + ")"); !ok || e.ID != ids["memory"] {
			t.Fatalf("memory not listed: %+v", e)
		}
		testutil.ServersFile(t, sb.servers, "memory")
		sb.waitServers("memory")
		// The client connected to everything is told it left.
		deadline := time.After(30 * time.Second)
		for {
			select {
			case n, ok := <-a.notes:
				if !ok {
					t.Fatal("the client's connection ended")
				}
				if n.Method == relaywire.MethodDisconnected {
					if _, ok := a.extension(name); ok {
						t.Fatalf("%s still listed after its removal", name)
					}
					return
				}
			case <-deadline:
				t.Fatal("the client was not told its server left")
			}
		}
	})
}
