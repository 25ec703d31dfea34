package proxy

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// startNATS runs a real NATS server with JetStream in the test process.
func startNATS(tb testing.TB) string {
	tb.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: tb.TempDir(), NoSigs: true})
	if err != nil {
		tb.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats not ready")
	}
	tb.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

func clusterNodeProxy(tb testing.TB, url, node string) *testProxy {
	tb.Helper()
	nc, err := nats.Connect(url, nats.ReconnectBufSize(-1), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close) // registered first, so it runs after the proxy's shutdown (cleanups run last-first)
	return newTestProxy(tb, Options{Cluster: &ClusterOptions{Keyring: testRing(), Conn: nc, Node: node, PresenceTTL: 2 * time.Second}})
}

func TestClusterSmoke(t *testing.T) {
	url := startNATS(t)
	a := clusterNodeProxy(t, url, "a")
	b := clusterNodeProxy(t, url, "b")
	ext := a.extension(t, "alice", "Chrome").ready(t)
	c := b.mcp(t, "alice")
	waitListed(t, c, browserInfo(ext.id, "Chrome"))
	connectTo(t, c, ext.id)
	for i := 0; i < 100; i++ {
		r := c.call(i, "tools/call", map[string]any{"n": i})
		if r.Error != nil {
			t.Fatalf("call %d: %s", i, r.Error)
		}
		var res struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
		}
		json.Unmarshal(r.Result, &res)
		if res.Method != "tools/call" {
			t.Fatalf("call %d: %s", i, r.Result)
		}
	}
	// Another user on node b sees nothing.
	eve := b.mcp(t, "eve")
	r := eve.call("l", relaywire.MethodListExtensions, nil)
	var res relaywire.ListExtensionsResult
	json.Unmarshal(r.Result, &res)
	if len(res.Extensions) != 0 {
		t.Fatalf("eve sees %s", r.Result)
	}
	r = eve.call("c", relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: ext.id})
	if code, _ := errCode(t, r); code == 0 {
		t.Fatalf("eve connected to alice's extension: %s", r.Result)
	}
	// A call held by the extension ends with an error when it leaves.
	// The extension leaves once the hold reached it: seen still holds the
	// 100 calls above, so the first entry is not the hold.
	ch := c.start("held", "hold", nil)
	for {
		var m relaywire.Message
		if json.Unmarshal(<-ext.seen, &m) == nil && m.Method == "hold" {
			break
		}
	}
	ext.ws.Close()
	m := c.wait(ch)
	if code, msg := errCode(t, m); code != relaywire.CodeExtensionGone {
		t.Fatalf("held call: %d %s", code, msg)
	}
	n := c.note(relaywire.MethodDisconnected)
	t.Logf("disconnected: %s", n.Params)
}

// TestClusterSlowClient: a client that stops reading holds up nobody
// else. Its node's one NATS reader never waits for it (its messages queue
// in its own mailbox, drained by a goroutine of its own, which waits as a
// local client's sender does, WriteWait, then drops it); another client
// of the same node and extension is served all along.
func TestClusterSlowClient(t *testing.T) {
	url := startNATS(t)
	opts := Options{WriteWait: 2 * time.Second, SendQueue: 4, ConnRate: -1, UserRate: -1}
	a := joinCluster(t, url, "a", opts, testTTL)
	b := joinCluster(t, url, "b", opts, testTTL)
	// Two browsers, so that the one the slow client floods does not
	// hold up the other client's calls itself.
	ext := a.extension(t, "alice", "Chrome").ready(t)
	other := a.extension(t, "alice", "Chrome at home").ready(t)
	for _, e := range []*fakeExt{ext, other} {
		go func() { // the extensions' log of requests is not this test's business
			for range e.seen {
			}
		}()
	}

	// The slow client: a bare WebSocket that handshakes, connects, sends
	// big requests and never reads again.
	// A small receive buffer, so that the kernel takes little of the
	// flood on the client's behalf.
	dialer := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(4 << 10)
		}
		return c, err
	}}
	slow, _, err := dialer.Dial(b.url+relaywire.PathMCP, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	write := func(v any) {
		t.Helper()
		if err := slow.WriteJSON(v); err != nil {
			t.Fatal(err)
		}
	}
	read := func() relaywire.Message {
		t.Helper()
		var m relaywire.Message
		if err := slow.ReadJSON(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	write(map[string]any{"jsonrpc": "2.0", "id": "h", "method": relaywire.MethodHandshake, "params": relaywire.HandshakeParams{AccessToken: b.token(t, "alice", token.KindMCP)}})
	read()
	y := b.mcp(t, "alice")
	waitListed(t, y, browserInfo(ext.id, "Chrome"), browserInfo(other.id, "Chrome at home"))
	write(map[string]any{"jsonrpc": "2.0", "id": "c", "method": relaywire.MethodConnect, "params": relaywire.ConnectParams{ExtensionID: ext.id}})
	for m := read(); string(m.ID) != `"c"`; m = read() {
	}
	connectTo(t, y, other.id)
	big := strings.Repeat("x", 32<<10)
	go func() {
		for i := 0; i < 200; i++ {
			if slow.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": map[string]string{"pad": big}}) != nil {
				return // dropped by the proxy, as it should be
			}
		}
	}()

	// Meanwhile the other client of node b is served, call after call.
	for i := 0; i < 200; i++ {
		if r := y.call(i, "tools/call", map[string]int{"n": i}); r.Error != nil {
			t.Fatalf("call %d of the client that reads: %s", i, r.Error)
		}
	}
	// And the one that reads nothing is dropped by its node, once its
	// kernel buffers are full and its queue stayed full for WriteWait
	// (the flood takes a while to cross a loaded machine).
	testutil.WaitFor(t, "node b to drop the client that reads nothing", func() bool { return b.srv.nMCP.Load() == 1 })
}
