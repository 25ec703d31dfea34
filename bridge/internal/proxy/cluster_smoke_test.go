package proxy

import (
	"encoding/json"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

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
	return newTestProxy(tb, Options{Cluster: &ClusterOptions{Conn: nc, Node: node, PresenceTTL: 2 * time.Second}})
}

func TestClusterSmoke(t *testing.T) {
	url := startNATS(t)
	a := clusterNodeProxy(t, url, "a")
	b := clusterNodeProxy(t, url, "b")
	ext := a.extension(t, "alice", "Chrome").ready(t)
	c := b.mcp(t, "alice")
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := c.call("l", relaywire.MethodListExtensions, nil)
		var res relaywire.ListExtensionsResult
		json.Unmarshal(r.Result, &res)
		if len(res.Extensions) == 1 && res.Extensions[0].ID == ext.id {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the extension on node a never showed on node b: %s", r.Result)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	ch := c.start("held", "hold", nil)
	<-ext.seen
	for len(ext.seen) > 0 {
		<-ext.seen
	}
	ext.ws.Close()
	m := c.wait(ch)
	if code, msg := errCode(t, m); code != relaywire.CodeExtensionGone {
		t.Fatalf("held call: %d %s", code, msg)
	}
	n := c.note(relaywire.MethodDisconnected)
	t.Logf("disconnected: %s", n.Params)
}
