package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver/jetstreamkv"
	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// The cluster (issue 18), tested across two or three proxy nodes in this
// process that share one real NATS server with JetStream: an extension on
// one node and an MCP client on another must work together exactly as the
// single-node tests (proxy_test.go, notify_test.go, serverext_test.go,
// lifecycle_test.go) expect on one node.

// testTTL is the presence TTL of the test nodes: short, so that a test
// never waits long for a node that stopped heartbeating; nothing below
// waits for it to pass except where a test says so.
const testTTL = 2 * time.Second

// natsConn connects to the NATS at url as a proxy node does. Its cleanup
// is registered before the node's, so it runs after the node's shutdown.
func natsConn(tb testing.TB, url string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url, nats.ReconnectBufSize(-1), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// joinCluster starts a proxy node named node on the NATS at url.
func joinCluster(tb testing.TB, url, node string, opts Options, ttl time.Duration) *testProxy {
	tb.Helper()
	opts.Cluster = &ClusterOptions{Keyring: testRing(), Conn: natsConn(tb, url), Node: node, PresenceTTL: ttl}
	tp := newTestProxy(tb, opts)
	tp.natsURL = url
	return tp
}

// nodes starts n proxy nodes, "a", "b", "c"…, on one fresh NATS.
func nodes(tb testing.TB, n int, opts Options) []*testProxy {
	tb.Helper()
	url := startNATS(tb)
	out := make([]*testProxy, n)
	for i := range out {
		out[i] = joinCluster(tb, url, string(rune('a'+i)), opts, testTTL)
	}
	return out
}

func browserInfo(id, name string) relaywire.ExtensionInfo {
	return relaywire.ExtensionInfo{ID: id, Name: name, Connected: true, Kind: relaywire.ExtensionKindBrowser}
}

// listOf returns what list_extensions answers c now.
func listOf(tb testing.TB, c *tclient) []relaywire.ExtensionInfo {
	tb.Helper()
	r := c.call("list", relaywire.MethodListExtensions, nil)
	var res relaywire.ListExtensionsResult
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Extensions == nil {
		tb.Fatalf("list_extensions: %s %s", r.Result, r.Error)
	}
	return res.Extensions
}

// waitListed polls list_extensions on c until it answers exactly want
// (in its order: by name, then id). Presence crosses nodes
// asynchronously: a node learns another's extensions a moment after they
// authenticate, or leave.
func waitListed(tb testing.TB, c *tclient, want ...relaywire.ExtensionInfo) {
	tb.Helper()
	want = slices.Clone(want)
	if want == nil {
		want = []relaywire.ExtensionInfo{}
	}
	slices.SortFunc(want, func(a, b relaywire.ExtensionInfo) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	testutil.WaitFor(tb, fmt.Sprintf("list_extensions to answer %+v", want), func() bool { return slices.Equal(listOf(tb, c), want) })
}

// statusPeers waits for a status notification to c with the peer count.
func statusPeers(tb testing.TB, c *tclient, connected bool, peers int) {
	tb.Helper()
	for {
		var st relaywire.StatusParams
		n := c.note(relaywire.MethodStatus)
		if err := json.Unmarshal(n.Params, &st); err != nil {
			tb.Fatalf("status %s: %v", n.Params, err)
		}
		if st.Connected == connected && st.PeerCount == peers {
			return
		}
	}
}

// drainSeen empties the record of requests an extension received (each is
// recorded before it is answered, so after the answers arrived).
func drainSeen(e *fakeExt) {
	for len(e.seen) > 0 {
		<-e.seen
	}
}

// nextSeen waits for the next request the extension receives.
func nextSeen(tb testing.TB, e *fakeExt) []byte {
	tb.Helper()
	select {
	case data := <-e.seen:
		return data
	case <-time.After(10 * time.Second):
		tb.Fatal("the extension received no request")
		return nil
	}
}

// TestClusterControlAndForwarding: spec 001's control methods and
// forwarding with an extension on one node and clients on others:
// list_extensions lists the caller's extensions of every node once;
// connect and disconnect; status to both sides with remote peers counted;
// ids of every kind mapped to conn-…:ID; duplicate ids in flight refused.
func TestClusterControlAndForwarding(t *testing.T) {
	ns := nodes(t, 3, Options{})
	a, b, c := ns[0], ns[1], ns[2]
	chrome := a.extension(t, "alice", "Chrome").ready(t)
	edge := c.extension(t, "alice", "Edge").ready(t)
	bobs := b.extension(t, "bob", "Chrome").ready(t)
	alice := []relaywire.ExtensionInfo{browserInfo(chrome.id, "Chrome"), browserInfo(edge.id, "Edge")}

	cb := b.mcp(t, "alice")
	cc := c.mcp(t, "alice")
	t.Run("list_extensions: the caller's own, of every node, once", func(t *testing.T) {
		for name, cl := range map[string]*tclient{"a": a.mcp(t, "alice"), "b": cb, "c": cc} {
			t.Run("on "+name, func(t *testing.T) { waitListed(t, cl, alice...) })
		}
		waitListed(t, a.mcp(t, "bob"), browserInfo(bobs.id, "Chrome"))
		waitListed(t, b.mcp(t, "carol"))
	})
	t.Run("the extension's status after authenticated", func(t *testing.T) {
		statusPeers(t, chrome.tclient, true, 0)
	})
	var connB, connC string
	t.Run("connect from two other nodes", func(t *testing.T) {
		r := cb.call(2, relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: chrome.id})
		var res relaywire.ConnectResult
		json.Unmarshal(r.Result, &res)
		if !strings.HasPrefix(res.ConnectionID, relaywire.PrefixConnection) || res.ExtensionID != chrome.id || res.ExtensionName != "Chrome" || string(r.ID) != "2" {
			t.Fatalf("connect: %s %s", r.Result, r.Error)
		}
		connB = res.ConnectionID
		statusPeers(t, cb, true, 1)
		statusPeers(t, chrome.tclient, true, 1)
		connC = connectTo(t, cc, chrome.id)
		statusPeers(t, cc, true, 2) // counts the client on node b
		statusPeers(t, chrome.tclient, true, 2)
		if connB == connC {
			t.Fatalf("two connections with one id %s", connB)
		}
	})
	t.Run("connect twice", func(t *testing.T) {
		r := cb.call(3, relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: edge.id})
		if code, msg := errCode(t, r); code != relaywire.CodeAlreadyConnected || msg != relaywire.MsgAlreadyConnected {
			t.Fatalf("got %d %q", code, msg)
		}
	})
	t.Run("forwarding", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			rawID     string
			connField bool
		}{
			{"number id", `7`, false},
			{"string id that looks like a number", `"7"`, false},
			{"uuid", `"550e8400-e29b-41d4-a716-446655440000"`, false},
			{"large number", `12345678901234567`, false},
			{"fraction", `1.5`, false},
			{"number with an exponent", `1e3`, false},
			{"string with escapes", `"a\"b\\c\u00e9"`, false},
			{"with connectionId", `8`, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, side := range []struct {
					cl   *tclient
					conn string
				}{{cb, connB}, {cc, connC}} {
					ch := make(chan *relaywire.Message, 1)
					side.cl.mu.Lock()
					side.cl.waiters[tc.rawID] = ch
					side.cl.mu.Unlock()
					msg := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(tc.rawID), "method": "createTab", "params": map[string]any{"url": "https://example.com"}}
					if tc.connField {
						msg["connectionId"] = side.conn
					}
					side.cl.send(msg)
					r := side.cl.wait(ch)
					if string(r.ID) != tc.rawID {
						t.Fatalf("reply id %s, want %s", r.ID, tc.rawID)
					}
					e := echoOf(t, r)
					var seenID string
					json.Unmarshal(e.ID, &seenID)
					if want := side.conn + ":" + tc.rawID; seenID != want {
						t.Fatalf("the extension saw id %s, want %q", e.ID, want)
					}
					if strings.Contains(e.Frame, "connectionId") || !strings.Contains(e.Frame, `"params":{"url":"https://example.com"}`) {
						t.Fatalf("the extension saw %s", e.Frame)
					}
				}
			})
		}
	})
	t.Run("extension errors come back unchanged", func(t *testing.T) {
		r := cb.call(9, "nope", nil)
		if code, msg := errCode(t, r); code != relaywire.CodeMethodNotFound || string(r.ID) != "9" || msg != `method "nope" not found` {
			t.Fatalf("got %s %s", r.ID, r.Error)
		}
	})
	t.Run("another connection's id", func(t *testing.T) {
		cb.send(map[string]any{"jsonrpc": "2.0", "id": 14, "method": "createTab", "connectionId": connC})
		m := cb.note("") // the refusal: a reply nobody waits for
		if code, msg := errCode(t, m); code != relaywire.CodeInvalidParams || string(m.ID) != "14" || !strings.Contains(msg, "not this client's connection") {
			t.Fatalf("got %s %d %q", m.ID, code, msg)
		}
	})
	t.Run("duplicate id in flight; 1 and \"1\" apart", func(t *testing.T) {
		drainSeen(chrome)
		held := cb.start(100, "hold", nil)
		nextSeen(t, chrome)
		cb.sendRaw([]byte(`{"jsonrpc":"2.0","id":100,"method":"createTab"}`))
		m := cb.wait(held)
		if code, _ := errCode(t, m); code != relaywire.CodeDuplicateID || string(m.ID) != "100" {
			t.Fatalf("a duplicate of a call in flight: %s %s", m.ID, m.Error)
		}
		// The same text as a string is another id; the same id from
		// another client, another call.
		cb.start("100", "hold", nil)
		again := cb.start(100, "hold", nil) // its first still holds
		cc.start("100", "hold", nil)
		cc.start(100, "hold", nil)
		if m := cb.wait(again); string(m.ID) != "100" {
			t.Fatalf("cb's second 100: %s %s", m.ID, m.Error)
		} else if code, _ := errCode(t, m); code != relaywire.CodeDuplicateID {
			t.Fatalf("cb's second 100: %s", m.Error)
		}
		seen := map[string]bool{}
		for range 3 {
			var m relaywire.Message
			json.Unmarshal(nextSeen(t, chrome), &m)
			id, _ := relaywire.IDString(m.ID)
			seen[id] = true
		}
		for _, want := range []string{connB + `:"100"`, connC + `:"100"`, connC + `:100`} {
			if !seen[want] {
				t.Fatalf("the extension saw %v, lacking %s", seen, want)
			}
		}
	})
	t.Run("disconnect, twice", func(t *testing.T) {
		for i := range 2 {
			r := cb.call(10+i, relaywire.MethodDisconnect, map[string]any{})
			if string(r.Result) != `{"disconnected":true}` {
				t.Fatalf("disconnect %d: %s %s", i, r.Result, r.Error)
			}
		}
		statusPeers(t, cb, false, 0)
		statusPeers(t, chrome.tclient, true, 1) // cc is still connected
		r := cb.call(12, "createTab", nil)
		if code, _ := errCode(t, r); code != relaywire.CodeNotConnected {
			t.Fatalf("after disconnect: %s", r.Error)
		}
		// Connecting to an extension of a third node works.
		connectTo(t, cb, edge.id)
		if e := echoOf(t, cb.call(13, "getTabs", nil)); e.Method != "getTabs" {
			t.Fatalf("echo %+v", e)
		}
		// cc's connection went on meanwhile.
		if e := echoOf(t, cc.call(13, "getTabs", nil)); e.Method != "getTabs" {
			t.Fatalf("echo %+v", e)
		}
		// cc leaves: the extension hears it has no peer left.
		cc.ws.Close()
		statusPeers(t, chrome.tclient, true, 0)
	})
}

// TestClusterNotifications: progress reaches only its caller, wherever it
// is; list_changed reaches every client of the extension on every node and
// nobody else; a client's notifications/cancelled reaches the extension
// with the id mapped as the request was, and only for its own call in
// flight.
func TestClusterNotifications(t *testing.T) {
	ns := nodes(t, 3, Options{})
	a, b, c := ns[0], ns[1], ns[2]
	ext := a.extension(t, "alice", "Chrome").ready(t)
	other := c.extension(t, "alice", "Edge").ready(t)
	bobs := a.extension(t, "bob", "Chrome").ready(t)

	ca, cb, cc := a.mcp(t, "alice"), b.mcp(t, "alice"), c.mcp(t, "alice")
	cOther, cBob, idle := b.mcp(t, "alice"), b.mcp(t, "bob"), c.mcp(t, "alice")
	waitListed(t, cb, browserInfo(ext.id, "Chrome"), browserInfo(other.id, "Edge"))
	waitListed(t, cc, browserInfo(ext.id, "Chrome"), browserInfo(other.id, "Edge"))
	waitListed(t, cBob, browserInfo(bobs.id, "Chrome"))
	conn := map[*tclient]string{}
	for _, cl := range []*tclient{ca, cb, cc} {
		conn[cl] = connectTo(t, cl, ext.id)
	}
	connectTo(t, cOther, other.id)
	connectTo(t, cBob, bobs.id)
	all := map[string]*tclient{"a": ca, "b": cb, "c": cc, "other extension's": cOther, "bob's": cBob, "idle": idle}

	// Every client of ext holds a call with the same id.
	held := map[*tclient]chan *relaywire.Message{}
	for _, cl := range []*tclient{ca, cb, cc} {
		held[cl] = cl.start(1, "hold", nil)
	}
	ids := mappedIDs(t, ext, 3)
	mapped := map[*tclient]string{}
	for cl, cn := range conn {
		if mapped[cl] = ids[cn]; mapped[cl] != cn+":1" {
			t.Fatalf("mapped ids %v", ids)
		}
	}
	for name, cl := range all {
		quiet(t, name, cl)
	}

	progress := func(requestID, params string) {
		t.Helper()
		if err := ext.sendRaw(relaywire.AppendRequestNotification(nil, requestID, relaywire.MethodProgress, json.RawMessage(params))); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("progress to its caller only", func(t *testing.T) {
		for i, cl := range []*tclient{cb, cc, ca} {
			params := fmt.Sprintf(`{"progressToken":"tok-%d","progress":1,"total":3,"message":"loading","_meta":{"x":1}}`, i)
			progress(mapped[cl], params)
			n := cl.note(relaywire.MethodProgress)
			if string(n.Params) != params || n.RequestID != nil || n.ID != nil {
				t.Fatalf("client %d got %+v", i, n)
			}
			for name, o := range all {
				if o != cl {
					quiet(t, name, o)
				}
			}
		}
		// Not about a call in flight: nobody.
		progress(conn[cb]+":2", `{"progress":1}`)
		progress(conn[cb]+":\"1\"", `{"progress":1}`)
		progress("1", `{"progress":1}`)
		for name, o := range all {
			quiet(t, name, o)
		}
	})
	t.Run("list_changed to every client of the extension", func(t *testing.T) {
		ext.sendRaw([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
		for _, cl := range []*tclient{ca, cb, cc} {
			if n := cl.note(relaywire.MethodToolsListChanged); n.Params != nil || n.ID != nil {
				t.Fatalf("got %+v", n)
			}
		}
		for _, name := range []string{"other extension's", "bob's", "idle"} {
			quiet(t, name, all[name])
		}
		// After disconnecting, cb hears no more; cc still does.
		cb.call("d", relaywire.MethodDisconnect, nil)
		ext.sendRaw([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{}}`))
		if n := cc.note(relaywire.MethodResourcesListChanged); string(n.Params) != `{}` {
			t.Fatalf("params %s", n.Params)
		}
		ca.note(relaywire.MethodResourcesListChanged)
		quiet(t, "b after disconnect", cb)
		conn[cb] = connectTo(t, cb, ext.id)
		statusPeers(t, ext.tclient, true, 3)
	})
	t.Run("cancellation mapped", func(t *testing.T) {
		for _, id := range []any{7, "7", "550e8400-e29b-41d4-a716-446655440000", 1.5} {
			cb.start(id, "hold", nil)
		}
		mappedIDs(t, ext, 4)
		cancelled := func() relaywire.CancelledParams {
			t.Helper()
			n := ext.note(relaywire.MethodCancelled)
			var p relaywire.CancelledParams
			if err := json.Unmarshal(n.Params, &p); err != nil {
				t.Fatalf("params %s: %v", n.Params, err)
			}
			return p
		}
		send := func(c *tclient, params string) {
			t.Helper()
			if err := c.sendRaw([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":` + params + `}`)); err != nil {
				t.Fatal(err)
			}
		}
		connB := conn[cb]
		for _, tc := range []struct {
			name, params string
			want         string // mapped id the extension must see, "" for none
		}{
			{"number", `{"requestId":7,"reason":"user stopped it"}`, connB + `:7`},
			{"string that looks like a number", `{"requestId":"7"}`, connB + `:"7"`},
			{"uuid", `{"requestId":"550e8400-e29b-41d4-a716-446655440000"}`, connB + `:"550e8400-e29b-41d4-a716-446655440000"`},
			{"number text kept", `{"requestId":1.5}`, connB + `:1.5`},
			{"same number, other text", `{"requestId":1.50}`, ""},
			{"not in flight", `{"requestId":8}`, ""},
			{"an already mapped id", `{"requestId":"` + connB + `:7"}`, ""},
			{"no requestId", `{"reason":"x"}`, ""},
			{"no params", `null`, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				send(cb, tc.params)
				if tc.want == "" {
					// cb's notifications reach the extension in order.
					send(cb, `{"requestId":7,"reason":"sentinel"}`)
				}
				p := cancelled()
				got, _ := relaywire.IDString(p.RequestID)
				want := tc.want
				if want == "" {
					want = connB + `:7`
					if p.Reason != "sentinel" {
						t.Fatalf("the extension saw %s (reason %q), want it dropped", p.RequestID, p.Reason)
					}
				}
				if got != want {
					t.Fatalf("the extension saw requestId %s, want %q", p.RequestID, want)
				}
				if tc.name == "number" && p.Reason != "user stopped it" {
					t.Errorf("reason %q", p.Reason)
				}
			})
		}
		t.Run("another client cannot cancel b's call", func(t *testing.T) {
			send(cc, `{"requestId":7}`)     // cc has no call 7
			send(cOther, `{"requestId":7}`) // another extension's client
			send(idle, `{"requestId":7}`)
			// Round trips through ext prove cc's went first.
			if e := echoOf(t, cc.call("cc-sync", "getTabs", nil)); e.Method != "getTabs" {
				t.Fatal(e)
			}
			idle.call("idle-sync", "getTabs", nil) // -32002, still a round trip
			send(cb, `{"requestId":"7","reason":"sentinel"}`)
			if p := cancelled(); p.Reason != "sentinel" {
				t.Fatalf("the extension saw %s from another client", p.RequestID)
			}
		})
	})
	t.Run("no progress after the reply", func(t *testing.T) {
		ext.sendRaw(relaywire.AppendResult(nil, relaywire.AppendString(nil, mapped[cc]), json.RawMessage(`{"done":true}`)))
		if r := cc.wait(held[cc]); string(r.Result) != `{"done":true}` || string(r.ID) != "1" {
			t.Fatalf("reply %s %s %s", r.ID, r.Result, r.Error)
		}
		progress(mapped[cc], `{"progressToken":"late","progress":3}`)
		// ca's call with the same id is still served.
		progress(mapped[ca], `{"progressToken":"a","progress":3}`)
		ca.note(relaywire.MethodProgress)
		quiet(t, "c after its reply", cc)
	})
}

// TestClusterExtensionLeavesAndComesBack: when an extension leaves, its
// clients on other nodes get every call in flight answered -32005 and
// `disconnected`; it vanishes from list_extensions everywhere; when it
// reconnects, to another node, the clients can connect to it again.
func TestClusterExtensionLeavesAndComesBack(t *testing.T) {
	ns := nodes(t, 3, Options{})
	a, b, c := ns[0], ns[1], ns[2]
	ext := a.extension(t, "alice", "Chrome").ready(t)
	c1, c2 := b.mcp(t, "alice"), c.mcp(t, "alice")
	waitListed(t, c1, browserInfo(ext.id, "Chrome"))
	waitListed(t, c2, browserInfo(ext.id, "Chrome"))
	ids := []string{connectTo(t, c1, ext.id), connectTo(t, c2, ext.id)}
	var held []chan *relaywire.Message
	for i := range 3 {
		held = append(held, c1.start(i, "hold", nil), c2.start(fmt.Sprint(i), "hold", nil))
	}
	for range 6 {
		nextSeen(t, ext)
	}
	ext.ws.Close()
	for _, ch := range held {
		r := c1.wait(ch)
		if code, msg := errCode(t, r); code != relaywire.CodeExtensionGone || !strings.Contains(msg, "disconnected before answering") {
			t.Fatalf("held call %s: %d %q", r.ID, code, msg)
		}
	}
	for i, cl := range []*tclient{c1, c2} {
		var p relaywire.DisconnectedParams
		json.Unmarshal(cl.note(relaywire.MethodDisconnected).Params, &p)
		if p.ConnectionID != ids[i] || p.Reason != relaywire.ReasonExtensionGone {
			t.Fatalf("client %d: disconnected %+v, want %s", i, p, ids[i])
		}
		// Calls now: not connected, and no strike (the extension left).
		if code, _ := errCode(t, cl.call("after", "getTabs", nil)); code != relaywire.CodeNotConnected {
			t.Fatalf("client %d after the extension left: %d", i, code)
		}
		waitListed(t, cl)
		r := cl.call("c-gone", relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: ext.id})
		if code, msg := errCode(t, r); code != relaywire.CodeServerError || msg != relaywire.MsgExtensionNotFound {
			t.Fatalf("connecting to the extension gone: %d %q", code, msg)
		}
	}
	// It comes back on node c, under its id (stable per user and name):
	// node a's presence of it is gone everywhere (listed nowhere above).
	back := c.extension(t, "alice", "Chrome").ready(t)
	if back.id != ext.id {
		t.Errorf("back on node c with id %s; it had %s on node a", back.id, ext.id)
	}
	for i, cl := range []*tclient{c1, c2} {
		waitListed(t, cl, browserInfo(back.id, "Chrome"))
		connectTo(t, cl, back.id)
		if e := echoOf(t, cl.call("again", "getTabs", nil)); e.Method != "getTabs" {
			t.Fatalf("client %d: %+v", i, e)
		}
	}
	statusPeers(t, back.tclient, true, 2)
}

// syncThrough makes a call from cl that srv answers: everything cl sent
// before it reached srv's node first (a client's messages stay in order).
func syncThrough(tb testing.TB, srv *srvExt, cl *tclient, id string) {
	tb.Helper()
	ch := cl.start(id, "ping", nil)
	for {
		m := srv.nextRequest(tb)
		if m.Method == "ping" {
			srv.sendRaw(relaywire.AppendResult(nil, m.ID, json.RawMessage(`{}`)))
			break
		}
	}
	if r := cl.wait(ch); r.Error != nil {
		tb.Fatalf("sync %s: %s", id, r.Error)
	}
}

// TestClusterServerExtension: a server extension on node a, clients on
// nodes b and c: its requests about a call (requestId) or a connection
// (connectionId) reach that client alone, whose answer reaches it alone;
// it can withdraw them; it hears connection_closed, with the reason, when
// a client disconnects or leaves, and its requests left waiting are
// answered.
func TestClusterServerExtension(t *testing.T) {
	ns := nodes(t, 3, Options{Strikes: -1})
	a, b, c := ns[0], ns[1], ns[2]
	srv := a.serverExt(t, "alice", "everything (laptop)", "everything")
	a1, a2 := b.mcp(t, "alice"), c.mcp(t, "alice")
	info := relaywire.ExtensionInfo{ID: srv.id, Name: "everything (laptop)", Connected: true, Kind: relaywire.ExtensionKindServer, Server: "everything"}
	waitListed(t, a1, info)
	waitListed(t, a2, info)
	conn1, conn2 := connectTo(t, a1, srv.id), connectTo(t, a2, srv.id)

	a1.start(4, "tools/call", map[string]any{"name": "sampleLLM"})
	call2 := a2.start(4, "tools/call", map[string]any{"name": "sampleLLM"})
	mapped := map[string]string{}
	for range 2 {
		id := mustID(srv.nextRequest(t))
		cn, _, _ := relaywire.UnmapID(id)
		mapped[cn] = id
	}
	if mapped[conn1] != conn1+":4" || mapped[conn2] != conn2+":4" {
		t.Fatalf("forwarded ids %v", mapped)
	}

	params := `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}`
	t.Run("by requestId, answered back", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:1", mapped[conn1], "", "sampling/createMessage", json.RawMessage(params)))
		got := clientRequest(t, a1)
		if string(got.ID) != `"ext:1"` || got.Method != "sampling/createMessage" || string(got.Params) != params || got.RequestID != nil || got.ConnectionID != "" {
			t.Fatalf("the client got %s %s %s requestId=%s connectionId=%q", got.ID, got.Method, got.Params, got.RequestID, got.ConnectionID)
		}
		// Another client of the extension cannot answer it.
		a2.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:1","result":{"forged":"a2"}}`))
		syncThrough(t, srv, a2, "sync-a2")
		a1.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:1","result":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}}`))
		r := srv.nextReply(t)
		if string(r.ID) != `"ext:1"` || !strings.Contains(string(r.Result), `"text":"ok"`) {
			t.Fatalf("the extension got %s %s %s", r.ID, r.Result, r.Error)
		}
		// Taken: a second answer is dropped.
		a1.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:1","result":{"again":true}}`))
		syncThrough(t, srv, a1, "sync-a1")
		srv.noReplyBefore(t, "ext:marker-1")
		quietExceptStatus(t, "a2", a2)
	})
	t.Run("an error answer", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:2", mapped[conn2], "", "elicitation/create", json.RawMessage(`{}`)))
		if got := clientRequest(t, a2); string(got.ID) != `"ext:2"` {
			t.Fatalf("a2 got %s", got.ID)
		}
		a2.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:2","error":{"code":-1,"message":"declined"}}`))
		if r := srv.nextReply(t); string(r.Error) != `{"code":-1,"message":"declined"}` {
			t.Fatalf("got %s %s", r.Result, r.Error)
		}
	})
	t.Run("by connectionId", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:3", "", conn2, "roots/list", nil))
		if got := clientRequest(t, a2); string(got.ID) != `"ext:3"` || got.Method != "roots/list" {
			t.Fatalf("a2 got %s %s", got.ID, got.Method)
		}
		a2.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:3","result":{"roots":[]}}`))
		if r := srv.nextReply(t); string(r.Result) != `{"roots":[]}` || string(r.ID) != `"ext:3"` {
			t.Fatalf("got %s %s", r.Result, r.Error)
		}
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, conn2, "notifications/message", json.RawMessage(`{"level":"info","data":"for a2"}`)))
		if n := a2.note("notifications/message"); string(n.Params) != `{"level":"info","data":"for a2"}` || n.ConnectionID != "" {
			t.Fatalf("a2 got %s", n.Params)
		}
		quietExceptStatus(t, "a1", a1)
	})
	t.Run("withdrawn by the extension", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:w", mapped[conn1], "", "roots/list", nil))
		clientRequest(t, a1)
		srv.sendRaw(relaywire.AppendConnectionNotification(nil, conn1, relaywire.MethodCancelled, json.RawMessage(`{"requestId":"ext:w","reason":"timeout"}`)))
		if n := a1.note(relaywire.MethodCancelled); string(n.Params) != `{"requestId":"ext:w","reason":"timeout"}` {
			t.Fatalf("a1 got %s", n.Params)
		}
		a1.sendRaw([]byte(`{"jsonrpc":"2.0","id":"ext:w","result":{}}`))
		syncThrough(t, srv, a1, "sync-w")
		srv.noReplyBefore(t, "ext:marker-2")
	})
	t.Run("the call answered: nothing more about it", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendResult(nil, relaywire.AppendString(nil, mapped[conn2]), json.RawMessage(`{"content":[]}`)))
		if r := a2.wait(call2); r.Error != nil || string(r.Result) != `{"content":[]}` {
			t.Fatalf("call 2: %s %s", r.Result, r.Error)
		}
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:late", mapped[conn2], "", "sampling/createMessage", nil))
		if code, _ := errCode(t, srv.nextReply(t)); code != relaywire.CodeNoRoute {
			t.Fatalf("a request about an answered call: %d", code)
		}
	})
	t.Run("disconnect: requests waiting answered, connection_closed", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:wait-1", "", conn1, "roots/list", nil))
		clientRequest(t, a1)
		a1.call("d", relaywire.MethodDisconnect, nil)
		r := srv.nextReply(t)
		if code, msg := errCode(t, r); string(r.ID) != `"ext:wait-1"` || code != relaywire.CodeExtensionGone || !strings.Contains(msg, relaywire.ReasonClientDisconnected) {
			t.Errorf("the request left waiting: %s %d %q, want -32005 naming %q", r.ID, code, msg, relaywire.ReasonClientDisconnected)
		}
		var p relaywire.ConnectionClosedParams
		json.Unmarshal(srv.note(t, relaywire.MethodConnectionClosed).Params, &p)
		if p.ConnectionID != conn1 || p.Reason != relaywire.ReasonClientDisconnected {
			t.Errorf("connection_closed %+v, want %s %q (as on one node)", p, conn1, relaywire.ReasonClientDisconnected)
		}
	})
	t.Run("the client leaves", func(t *testing.T) {
		srv.sendRaw(relaywire.AppendRoutedRequest(nil, "ext:wait-2", "", conn2, "roots/list", nil))
		clientRequest(t, a2)
		a2.ws.Close()
		r := srv.nextReply(t)
		if code, msg := errCode(t, r); string(r.ID) != `"ext:wait-2"` || code != relaywire.CodeExtensionGone || !strings.Contains(msg, relaywire.ReasonClientGone) {
			t.Errorf("the request left waiting: %s %d %q", r.ID, code, msg)
		}
		var p relaywire.ConnectionClosedParams
		json.Unmarshal(srv.note(t, relaywire.MethodConnectionClosed).Params, &p)
		if p.ConnectionID != conn2 || p.Reason != relaywire.ReasonClientGone {
			t.Errorf("connection_closed %+v, want %s %q", p, conn2, relaywire.ReasonClientGone)
		}
	})
}

// TestClusterIsolation: two users, each with an extension and clients on
// every node, never see or reach each other's, and 1,000 calls of both,
// interleaved with colliding ids, each come back to their caller from its
// own user's extension.
func TestClusterIsolation(t *testing.T) {
	ns := nodes(t, 3, Options{ConnRate: -1, UserRate: -1})
	users := []string{"alice", "bob"}
	exts := map[string][]*fakeExt{}
	want := map[string][]relaywire.ExtensionInfo{}
	for _, u := range users {
		for i, n := range ns {
			name := fmt.Sprintf("Chrome on %c", 'a'+i)
			e := n.extension(t, u, name).ready(t)
			exts[u] = append(exts[u], e)
			want[u] = append(want[u], browserInfo(e.id, name))
		}
	}
	type client struct {
		user string
		node int
		cl   *tclient
		conn string
	}
	var clients []*client
	for _, u := range users {
		for i, n := range ns {
			cl := &client{user: u, node: i, cl: n.mcp(t, u)}
			waitListed(t, cl.cl, want[u]...)
			clients = append(clients, cl)
		}
	}
	t.Run("another user's extensions cannot be reached", func(t *testing.T) {
		for _, cl := range clients {
			for _, u := range users {
				if u == cl.user {
					continue
				}
				for _, e := range exts[u] {
					r := cl.cl.call("x", relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: e.id})
					if code, msg := errCode(t, r); code != relaywire.CodeServerError || msg != relaywire.MsgExtensionNotFound {
						t.Fatalf("%s on node %d connecting to %s's %s: %d %q %s", cl.user, cl.node, u, e.id, code, msg, r.Result)
					}
				}
			}
		}
	})
	// Each client connects to its user's extension on the next node.
	for _, cl := range clients {
		cl.conn = connectTo(t, cl.cl, exts[cl.user][(cl.node+1)%len(ns)].id)
	}
	t.Run("another user's connection id", func(t *testing.T) {
		alice, bob := clients[0], clients[len(ns)]
		bob.cl.send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "createTab", "connectionId": alice.conn})
		m := bob.cl.note("")
		if code, _ := errCode(t, m); code != relaywire.CodeInvalidParams || string(m.ID) != "3" {
			t.Fatalf("bob naming alice's connection: %s %s %s", m.ID, m.Result, m.Error)
		}
	})
	t.Run("1,000 calls interleaved", func(t *testing.T) {
		const total = 1000
		for _, es := range exts {
			for _, e := range es {
				drainSeen(e)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, total)
		per := total / len(clients)
		for k, cl := range clients {
			n := per
			if k < total%len(clients) {
				n++
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem := make(chan struct{}, 16) // calls in flight per client
				var inner sync.WaitGroup
				for i := 1; i <= n; i++ {
					sem <- struct{}{}
					var id any = i
					if i%2 == 0 {
						id = strconv.Itoa(i) // "2" next to another client's 2
					}
					ch := cl.cl.start(id, "createTab", map[string]any{"user": cl.user, "node": cl.node, "n": i})
					inner.Add(1)
					go func() {
						defer inner.Done()
						defer func() { <-sem }()
						select {
						case r := <-ch:
							var e echo
							if r.Error != nil || json.Unmarshal(r.Result, &e) != nil {
								errs <- fmt.Errorf("%s on %d id %v: %s %s", cl.user, cl.node, id, r.Result, r.Error)
								return
							}
							raw, _ := json.Marshal(id)
							var seen string
							json.Unmarshal(e.ID, &seen)
							mine := fmt.Sprintf(`"params":{"n":%d,"node":%d,"user":%q}`, i, cl.node, cl.user)
							if string(r.ID) != string(raw) || seen != cl.conn+":"+string(raw) || !strings.Contains(e.Frame, mine) {
								errs <- fmt.Errorf("%s on %d id %s got reply id %s for extension id %s, frame %s", cl.user, cl.node, raw, r.ID, seen, e.Frame)
							}
						case <-time.After(30 * time.Second):
							errs <- fmt.Errorf("%s on %d id %v: no reply", cl.user, cl.node, id)
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
			t.Fatalf("%d of %d calls crossed or failed", n, total)
		}
		// Every extension saw only its own user's calls.
		got := 0
		for u, es := range exts {
			for _, e := range es {
				for len(e.seen) > 0 {
					data := <-e.seen
					got++
					if !strings.Contains(string(data), fmt.Sprintf(`"user":%q`, u)) {
						t.Fatalf("%s's extension %s received %s", u, e.id, data)
					}
				}
			}
		}
		if got != total {
			t.Fatalf("the extensions received %d calls, want %d", got, total)
		}
		for _, cl := range clients {
			quiet(t, cl.user, cl.cl)
		}
	})
	t.Run("one name on two nodes: two ids, each listed once", func(t *testing.T) {
		first := ns[0].extension(t, "alice", "Twin").ready(t)
		waitListed(t, clients[2].cl, append(slices.Clone(want["alice"]), browserInfo(first.id, "Twin"))...)
		second := ns[1].extension(t, "alice", "Twin").ready(t)
		if second.id == first.id {
			t.Fatalf("node b gave the id %s that node a holds", second.id)
		}
		waitListed(t, clients[2].cl, append(slices.Clone(want["alice"]), browserInfo(first.id, "Twin"), browserInfo(second.id, "Twin"))...)
		waitListed(t, clients[len(ns)].cl, want["bob"]...)
	})
}

// TestClusterNodeShutdown: a node stopping gracefully ends its
// extensions' connections with clients of other nodes (calls in flight
// answered -32005, `disconnected`), and its extensions leave
// list_extensions everywhere at once: the presence TTL here is a minute,
// so only the node's own leaving can make them go within the test.
func TestClusterNodeShutdown(t *testing.T) {
	url := startNATS(t)
	a := joinCluster(t, url, "a", Options{ShutdownGrace: 100 * time.Millisecond}, time.Minute)
	b := joinCluster(t, url, "b", Options{}, time.Minute)
	c := joinCluster(t, url, "c", Options{}, time.Minute)
	onA := a.extension(t, "alice", "Chrome").ready(t)
	onC := c.extension(t, "alice", "Edge").ready(t)
	cb, cc := b.mcp(t, "alice"), c.mcp(t, "alice")
	both := []relaywire.ExtensionInfo{browserInfo(onA.id, "Chrome"), browserInfo(onC.id, "Edge")}
	waitListed(t, cb, both...)
	waitListed(t, cc, both...)
	connB := connectTo(t, cb, onA.id)
	connectTo(t, cc, onA.id)
	other := b.mcp(t, "alice")
	connectTo(t, other, onC.id)
	held := []chan *relaywire.Message{cb.start(1, "hold", nil), cb.start("1", "hold", nil), cc.start(2, "hold", nil)}
	for range held {
		nextSeen(t, onA)
	}
	otherHeld := other.start(3, "hold", nil)
	nextSeen(t, onC)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, ch := range held {
		r := cb.wait(ch)
		if code, msg := errCode(t, r); code != relaywire.CodeExtensionGone {
			t.Errorf("a call held on the node that stopped: %s %d %q, want -32005", r.ID, code, msg)
		}
	}
	var p relaywire.DisconnectedParams
	json.Unmarshal(cb.note(relaywire.MethodDisconnected).Params, &p)
	if p.ConnectionID != connB || p.Reason != relaywire.ReasonExtensionGone {
		t.Errorf("disconnected %+v, want %s %q", p, connB, relaywire.ReasonExtensionGone)
	}
	cc.note(relaywire.MethodDisconnected)
	waitListed(t, cb, browserInfo(onC.id, "Edge"))
	waitListed(t, cc, browserInfo(onC.id, "Edge"))
	r := cb.call("c", relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: onA.id})
	if code, msg := errCode(t, r); code != relaywire.CodeServerError || msg != relaywire.MsgExtensionNotFound {
		t.Fatalf("connecting to the stopped node's extension: %d %q", code, msg)
	}
	// Nothing else was touched.
	onC.sendRaw(relaywire.AppendResult(nil, relaywire.AppendString(nil, connectionOf(t, other)+":3"), json.RawMessage(`{"ok":true}`)))
	if r := other.wait(otherHeld); string(r.Result) != `{"ok":true}` {
		t.Fatalf("a call between nodes b and c: %s %s", r.Result, r.Error)
	}
	connectTo(t, cb, onC.id)
	if e := echoOf(t, cb.call(5, "getTabs", nil)); e.Method != "getTabs" {
		t.Fatal(e)
	}
	h := health(t, b)
	if peers := fmt.Sprint(h["peers"]); !strings.Contains(peers, "alive:false") || !strings.Contains(peers, "node:a") {
		t.Errorf("node b's peers after a stopped: %s", peers)
	}
}

// connectionOf asks c's extension (an echo) which connection c uses.
func connectionOf(tb testing.TB, c *tclient) string {
	tb.Helper()
	r := c.call("which", "getTabs", nil)
	var seen string
	json.Unmarshal(echoOf(tb, r).ID, &seen)
	conn, _, ok := relaywire.UnmapID(seen)
	if !ok {
		tb.Fatalf("the extension saw %q", seen)
	}
	return conn
}

// health reads a node's /health.
func health(tb testing.TB, tp *testProxy) map[string]any {
	tb.Helper()
	resp := tp.internal(relaywire.PathHealth)
	defer resp.Body.Close()
	var h map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("/health: %d %v", resp.StatusCode, err)
	}
	return h
}

// metric returns the value of a metric's line on tp's /metrics (0 if
// absent).
func metric(tb testing.TB, tp *testProxy, line string) float64 {
	tb.Helper()
	resp := tp.internal(relaywire.PathMetrics)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, l := range strings.Split(string(body), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == line {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				tb.Fatalf("%s: %v", l, err)
			}
			return v
		}
	}
	return 0
}

// TestClusterHealthAndMetrics: /health names the node, its peers (alive)
// and its pairs, local and remote each way; /metrics counts cross-node
// forwards.
func TestClusterHealthAndMetrics(t *testing.T) {
	ns := nodes(t, 2, Options{})
	a, b := ns[0], ns[1]
	onA := a.extension(t, "alice", "Chrome").ready(t)
	onB := b.extension(t, "alice", "Edge").ready(t)
	remote, local := b.mcp(t, "alice"), b.mcp(t, "alice")
	waitListed(t, remote, browserInfo(onA.id, "Chrome"), browserInfo(onB.id, "Edge"))
	connectTo(t, remote, onA.id)
	connectTo(t, local, onB.id)
	for i := range 5 {
		echoOf(t, remote.call(i, "getTabs", nil))
	}
	if v := metric(t, b, "browserbridge_proxy_cluster_forwarded_total"); v < 5 {
		t.Errorf("node b forwarded %v calls to another node, want at least 5", v)
	}
	if v := metric(t, a, "browserbridge_proxy_cluster_forwarded_total"); v != 0 {
		t.Errorf("node a forwarded %v calls to another node, want 0", v)
	}
	// Peers come with their heartbeats: poll until each sees the other.
	for _, tc := range []struct {
		tp          *testProxy
		node, peer  string
		local       float64
		remoteIn    float64
		remoteOut   float64
		extensions  float64
		mcpClients  float64
		peerExts    float64
		peerClients float64
	}{
		{b, "b", "a", 1, 0, 1, 1, 2, 1, 0},
		{a, "a", "b", 0, 1, 0, 1, 0, 1, 2},
	} {
		t.Run(tc.node, func(t *testing.T) {
			testutil.WaitFor(t, fmt.Sprintf("node %s's /health to count its peer %s", tc.node, tc.peer), func() bool {
				h := health(t, tc.tp)
				peers, _ := h["peers"].([]any)
				var peer map[string]any
				if len(peers) == 1 {
					peer, _ = peers[0].(map[string]any)
				}
				pairs, _ := h["pairs"].(map[string]any)
				return h["node"] == tc.node && h["nats"] == "connected" && peer != nil && peer["node"] == tc.peer && peer["alive"] == true &&
					peer["extensions"] == tc.peerExts && peer["mcp_clients"] == tc.peerClients &&
					pairs["local"] == tc.local && pairs["remote_in"] == tc.remoteIn && pairs["remote_out"] == tc.remoteOut &&
					pairs["remote"] == tc.remoteIn+tc.remoteOut && h["extensions"] == tc.extensions && h["mcp_clients"] == tc.mcpClients
			})
		})
	}
}

// TestClusterRefusals: a cluster that cannot work is refused by New with a
// sentence that says why.
func TestClusterRefusals(t *testing.T) {
	url := startNATS(t)
	nc := natsConn(t, url)
	for _, tc := range []struct {
		name string
		opts ClusterOptions
		want string
	}{
		{"no connection", ClusterOptions{Node: "a"}, "ClusterOptions.Conn is required"},
		{"no keyring", ClusterOptions{Conn: nc, Node: "a"}, "ClusterOptions.Keyring is required"},
		{"no node name", ClusterOptions{Keyring: testRing(), Conn: nc}, `cluster node name "" must be 1 to 64 letters, digits, '-' or '_'`},
		{"a dot in the node name", ClusterOptions{Keyring: testRing(), Conn: nc, Node: "a.b"}, `cluster node name "a.b" must be`},
		{"a wildcard", ClusterOptions{Keyring: testRing(), Conn: nc, Node: "a>"}, `cluster node name "a>" must be`},
		{"a space", ClusterOptions{Keyring: testRing(), Conn: nc, Node: "node a"}, `cluster node name "node a" must be`},
		{"not ASCII", ClusterOptions{Keyring: testRing(), Conn: nc, Node: "nœud"}, `must be 1 to 64 letters`},
		{"too long", ClusterOptions{Keyring: testRing(), Conn: nc, Node: strings.Repeat("n", 65)}, `must be 1 to 64 letters`},
		{"a bad prefix", ClusterOptions{Keyring: testRing(), Conn: nc, Node: "a", Prefix: "bb.test"}, `cluster prefix "bb.test" must be`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			_, err := New(Options{Cluster: &opts, Keys: testKeys(t)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("the longest node name is fine", func(t *testing.T) {
		joinCluster(t, url, strings.Repeat("n", 64), Options{}, testTTL)
	})
	t.Run("NATS without JetStream", func(t *testing.T) {
		ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats not ready")
		}
		t.Cleanup(ns.Shutdown)
		_, err = New(Options{Cluster: &ClusterOptions{Keyring: testRing(), Conn: natsConn(t, ns.ClientURL()), Node: "a"}, Keys: testKeys(t)})
		if err == nil || !strings.Contains(err.Error(), "JetStream") {
			t.Fatalf("New on a NATS without JetStream: %v; want an error naming JetStream", err)
		}
		t.Log(err)
	})
}

func testKeys(tb testing.TB) *token.Keys {
	tb.Helper()
	k, err := token.NewHS256([]byte(testSecret))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// balancer stands for the load balancer in front of a cluster's HTTP side:
// one public URL, whose sign-in pages and OAuth endpoints are served by
// node signIn and whose MCP endpoints by node mcp, with the Host header
// kept (the nodes answer only the public host). Its public URL is known
// before the nodes start; signIn and mcp are set, and it is started, after.
type balancer struct {
	hs          *httptest.Server
	signIn, mcp *url.URL
}

func newBalancer(tb testing.TB) *balancer {
	tb.Helper()
	lb := &balancer{}
	lb.hs = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := lb.signIn
		if p := r.URL.Path; p == "/mcp" || strings.HasPrefix(p, "/browsers/") || strings.HasPrefix(p, "/servers/") {
			to = lb.mcp
		}
		// The body is read whole first: an HTTP/1.1 server stops the
		// request body once the response has begun, and a node may answer
		// (an event stream) before the proxy's transport has seen the
		// body's end, which would then fail and cut the stream.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp := httputil.NewSingleHostReverseProxy(to) // keeps r.Host
		rp.FlushInterval = -1                        // event streams as they come
		rp.ErrorLog = log.New(io.Discard, "", 0)     // a client's cancelled request is no news
		rp.ServeHTTP(w, r)
	}))
	tb.Cleanup(lb.hs.Close)
	return lb
}

func (lb *balancer) public() string { return "http://" + lb.hs.Listener.Addr().String() }

// httpCluster starts nodes a and b with the HTTP side on, behind a
// balancer that sends sign-ins to a and MCP requests to b; their OAuth
// state is one JetStream KV store on their NATS.
func httpCluster(t *testing.T) (a, b *testProxy, lb *balancer) {
	t.Helper()
	url := startNATS(t)
	js, err := jetstream.New(natsConn(t, url))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := jetstreamkv.New(js, testRing(), "bbtest", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	lb = newBalancer(t)
	node := func(name string) *testProxy {
		opts := Options{Cluster: &ClusterOptions{Keyring: testRing(), Conn: natsConn(t, url), Node: name, PresenceTTL: testTTL}}
		return newHTTPTestProxy(t, opts, func(o *HTTPOptions) {
			o.PublicURL = lb.public()
			o.KV = kv
		})
	}
	a, b = node("a"), node("b")
	lb.signIn, _ = neturl(a.hs.URL)
	lb.mcp, _ = neturl(b.hs.URL)
	lb.hs.Start()
	return a, b, lb
}

// TestClusterHTTPServerEndpoint: a bridge's server on node a, reached at
// /servers/NAME/mcp on node b: its request to the client (sampling) crosses
// to the client's session and the answer back; the session's end reaches
// the server as connection_closed.
func TestClusterHTTPServerEndpoint(t *testing.T) {
	a, b, lb := httpCluster(t)
	srv := startServer(t, a, "alice", "notes")
	watch := b.mcp(t, "alice")
	testutil.WaitFor(t, "node b to list the server of node a", func() bool { return strings.Contains(fmt.Sprint(listOf(t, watch)), "notes") })
	p := passwordPerson()
	cs := sdkClient(t, lb.public()+"/servers/notes/mcp", eraSession, p, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "hi from the client"}}, nil
		},
	})
	if info := cs.InitializeResult().ServerInfo; info == nil || info.Name != "fake-server" {
		t.Errorf("initialize result's server: %+v; want the server's own", info)
	}
	if names := toolNames(t, cs); !slices.Equal(names, []string{"ask"}) {
		t.Errorf("tools: %q", names)
	}
	if got := callTool(t, cs, "ask", nil); got != "the client said: hi from the client" {
		t.Errorf("ask answered %q", got)
	}
	cs.Close()
	select {
	case <-srv.closed:
	case <-time.After(10 * time.Second):
		t.Error("the server on node a was not told the session's connection on node b ended")
	}
}

// TestClusterHTTPEndpoint: the Streamable HTTP endpoint across nodes. The
// Go SDK client signs in on node a (the OAuth state is in JetStream KV,
// shared by the nodes) and uses /mcp on node b, which reaches the browser
// connected to node a: its tools, calls, progress and cancellation.
func TestClusterHTTPEndpoint(t *testing.T) {
	eras(t, func(t *testing.T, era string) {
		a, b, lb := httpCluster(t)
		browser := startBrowser(t, a, "alice", "Chrome at work")
		watch := b.mcp(t, "alice") // spec 001 on node b: polls until the browser shows
		waitListed(t, watch, browserInfo(browser.id, "Chrome at work"))

		progress := make(chan string, 10)
		changed := make(chan struct{}, 10)
		p := passwordPerson()
		cs := sdkClient(t, lb.public()+"/mcp", era, p, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				progress <- req.Params.Message
			},
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		toolsChanged := func(why string) {
			t.Helper()
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatalf("no tools/list_changed after %s", why)
			}
		}
		if names, want := toolNames(t, cs), []string{"list_browsers", "select_browser", "echo", "slow", "hang"}; !slices.Equal(names, want) {
			t.Fatalf("tools on node b: %q; want %q", names, want)
		}
		if text := callTool(t, cs, "list_browsers", nil); !strings.Contains(text, browser.id+": Chrome at work") {
			t.Errorf("list_browsers on node b:\n%s", text)
		}
		if got := callTool(t, cs, "echo", map[string]any{"message": "across"}); got != "Chrome at work: across" {
			t.Errorf("echo answered %q", got)
		}
		id, _ := relaywire.IDString(browser.call(t).ID)
		if _, _, ok := relaywire.UnmapID(id); !ok {
			t.Errorf("the browser got id %q: not spec 001's mapped id", id)
		}

		done := make(chan string, 1)
		go func() {
			res, err := cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "slow", Meta: mcp.Meta{"progressToken": "tok-1"}})
			if err != nil {
				t.Errorf("slow: %v", err)
				done <- ""
				return
			}
			done <- testutil.Text(res)
		}()
		browser.call(t)
		for _, want := range []string{"step 1", "step 2"} {
			select {
			case got := <-progress:
				if got != want {
					t.Errorf("progress %q; want %q", got, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no progress %q", want)
			}
		}
		close(browser.release)
		if got := <-done; got != "slow done" {
			t.Fatalf("slow answered %q", got)
		}

		ctx, cancel := context.WithCancel(testutil.Context(t, 30*time.Second))
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang"})
			errc <- err
		}()
		m := browser.call(t)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled call returned %v", err)
		}
		select {
		case id := <-browser.cancels:
			if want, _ := relaywire.IDString(m.ID); id != want {
				t.Errorf("the browser was told to cancel %q; the call was %q", id, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the browser was not told the call was cancelled")
		}
		if v := metric(t, b, "browserbridge_proxy_cluster_forwarded_total"); v < 3 {
			t.Errorf("node b forwarded %v calls to node a", v)
		}

		// The browser leaves mid-call: the call ends with -32005.
		go func() {
			_, err := cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "hang"})
			errc <- err
		}()
		browser.call(t)
		browser.leave()
		var rpcErr *jsonrpc.Error
		if err := <-errc; !errors.As(err, &rpcErr) || rpcErr.Code != relaywire.CodeExtensionGone || !strings.Contains(rpcErr.Message, "disconnected before answering") {
			t.Fatalf("the call cut off by the browser leaving node a returned %v; want -32005 saying the extension disconnected", err)
		}
		toolsChanged("the browser left node a")
		waitListed(t, watch)
		if names := toolNames(t, cs); !slices.Equal(names, []string{"list_browsers", "select_browser"}) {
			t.Errorf("tools with no browser: %q", names)
		}
		for len(changed) > 0 { // one list_changed per change is not promised
			<-changed
		}
		// It comes back, on node a again, under its id: node b's session is
		// told when node a's presence reaches it.
		back := startBrowser(t, a, "alice", "Chrome at work")
		if back.id != browser.id {
			t.Errorf("the browser came back as %s, not %s", back.id, browser.id)
		}
		waitListed(t, watch, browserInfo(back.id, "Chrome at work"))
		toolsChanged("the browser came back to node a")
		if got := callTool(t, cs, "echo", map[string]any{"message": "back"}); got != "Chrome at work: back" {
			t.Errorf("echo after the browser came back: %q", got)
		}
	})
}

func neturl(s string) (*url.URL, error) { return url.Parse(s) }

// bucketKeys lists the keys of a key-value bucket (presence, the ended
// sessions' notices) that begin with prefix.
func bucketKeys(tb testing.TB, kv jetstream.KeyValue, prefix string) []string {
	tb.Helper()
	l, err := kv.ListKeys(testutil.Context(tb, 10*time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Stop()
	var out []string
	for k := range l.Keys() {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// TestClusterShutdownLeavesNoPresence: once a node's graceful Shutdown has
// returned, the cluster's buckets hold neither its heartbeat nor any of
// its extensions (docs/relay.md: a clean stop deletes them), so that a
// node restarted under the same name brings back no ghosts. The presence
// TTL is a minute: only the node's own deletes can clear them here.
func TestClusterShutdownLeavesNoPresence(t *testing.T) {
	url := startNATS(t)
	a := joinCluster(t, url, "a", Options{}, time.Minute)
	b := joinCluster(t, url, "b", Options{}, time.Minute)
	js, err := jetstream.New(natsConn(t, url))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t, 30*time.Second)
	presence, err := js.KeyValue(ctx, "browserbridge_presence")
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var want []relaywire.ExtensionInfo
	for i := range n { // over several users: each has a cap of its own
		e := a.extension(t, fmt.Sprintf("user%d", i%5), fmt.Sprintf("Chrome %d", i)).ready(t)
		if i%5 == 0 {
			want = append(want, browserInfo(e.id, fmt.Sprintf("Chrome %d", i)))
		}
	}
	cb := b.mcp(t, "user0")
	waitListed(t, cb, want...)
	testutil.WaitFor(t, fmt.Sprintf("%d presence keys of node a", n), func() bool { return len(bucketKeys(t, presence, "a.")) == n })
	if err := a.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if left := bucketKeys(t, presence, "a."); len(left) != 0 {
		t.Errorf("after node a's Shutdown, %d of its %d extensions are still in the presence bucket, e.g. %s", len(left), n, left[0])
	}
	nodesKV, err := js.KeyValue(ctx, "browserbridge_nodes")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := nodesKV.Get(ctx, "a"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("node a's heartbeat after its Shutdown: %v %v", e, err)
	}
	waitListed(t, cb)
	// Node a again, without extensions: node b lists none of the old ones.
	joinCluster(t, url, "a", Options{}, time.Minute)
	testutil.WaitFor(t, "node b to see node a alive again and list none of the old node a's extensions", func() bool {
		return strings.Contains(fmt.Sprint(health(t, b)["peers"]), "alive:true") && len(listOf(t, cb)) == 0
	})
}

// TestClusterClientNodeShutdown: the node of an MCP client stops
// gracefully while the client's call to an extension of another node is
// held: as on one node (TestShutdownTellsBothSides), the call is answered
// -32007 and the client gets `disconnected` ("Proxy shutting down") before
// its close frame 1001; the extension, on the node that stays, hears its
// peer count drop.
func TestClusterClientNodeShutdown(t *testing.T) {
	url := startNATS(t)
	a := joinCluster(t, url, "a", Options{}, testTTL)
	b := joinCluster(t, url, "b", Options{ShutdownGrace: 100 * time.Millisecond}, testTTL)
	ext := a.extension(t, "alice", "Chrome").ready(t)
	c := b.mcp(t, "alice")
	waitListed(t, c, browserInfo(ext.id, "Chrome"))
	conn := connectTo(t, c, ext.id)
	statusPeers(t, ext.tclient, true, 1)
	held := c.start(2, "hold", nil)
	nextSeen(t, ext)
	done := make(chan error, 1)
	go func() { done <- b.srv.Shutdown(context.Background()) }()
	select {
	case m := <-held:
		if code, msg := errCode(t, m); code != relaywire.CodeShuttingDown || !strings.Contains(msg, "shutting down") {
			t.Errorf("held call: %d %q, want -32007", code, msg)
		}
	case <-c.done:
		t.Errorf("the client's connection closed (%v) with its call to node a unanswered", c.endErr)
	case <-time.After(10 * time.Second):
		t.Errorf("the held call was not answered")
	}
	// The disconnected notification comes after the held call's answer:
	// once the connection has closed, the reader has queued everything
	// the node sent before it.
	code, reason := c.closed()
	got := false
	for !got && len(c.notes) > 0 {
		if m := <-c.notes; m.Method == relaywire.MethodDisconnected {
			var p relaywire.DisconnectedParams
			json.Unmarshal(m.Params, &p)
			if p.ConnectionID != conn || p.Reason != relaywire.ReasonShuttingDown {
				t.Errorf("disconnected %+v", p)
			}
			got = true
		}
	}
	if !got {
		t.Errorf("no disconnected before the connection closed")
	}
	if code != websocket.CloseGoingAway || reason != relaywire.ReasonShuttingDown {
		t.Errorf("closed with %d %q", code, reason)
	}
	statusPeers(t, ext.tclient, true, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestClusterOneNameOnTwoNodesAtOnce: two browsers of one user with one
// name authenticate on two nodes at the same moment (a person's two
// machines starting up): they must get two ids, so that a third node
// lists and reaches both, as it does when they come one after the other
// (TestClusterIsolation). Presence is written asynchronously, so checking
// the mirror before choosing the stable id is not enough; and a node that
// has not heard a peer's heartbeat yet must not take that peer for gone.
func TestClusterOneNameOnTwoNodesAtOnce(t *testing.T) {
	ns := nodes(t, 3, Options{})
	// Node c started last: it has had the least time to hear of the others.
	onA, authA := pendingExtension(t, ns[0], "alice", "Twin")
	onB, authB := pendingExtension(t, ns[2], "alice", "Twin")
	errs := make(chan error, 2)
	go func() { errs <- authA() }()
	go func() { errs <- authB() }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	onA.ready(t)
	onB.ready(t)
	if onA.id == onB.id {
		t.Errorf("two browsers on two nodes share the id %s", onA.id)
	}
	waitListed(t, ns[1].mcp(t, "alice"), browserInfo(onA.id, "Twin"), browserInfo(onB.id, "Twin"))
}

// pendingExtension dials the extension endpoint and reads the proxy's
// authenticate request; the extension authenticates when authenticate is
// called (from any goroutine), so that several can at the same moment.
func pendingExtension(tb testing.TB, tp *testProxy, user, name string) (*fakeExt, func() error) {
	tb.Helper()
	c := dial(tb, tp.url+relaywire.PathExtension, true)
	e := &fakeExt{tclient: c, user: user, seen: make(chan []byte, 1<<16), replies: make(chan *relaywire.Message, 100)}
	var m relaywire.Message
	select {
	case auth := <-c.raw:
		json.Unmarshal(auth, &m)
	case <-time.After(10 * time.Second):
		tb.Fatal("no authenticate request")
	}
	res := relaywire.MarshalParams(relaywire.AuthenticateResult{Name: name, AccessToken: tp.token(tb, user, token.KindExtension)})
	return e, func() error { return c.sendRaw(relaywire.AppendResult(nil, m.ID, res)) }
}

// TestClusterSubjectsCheckTheUser: a message on the cluster's subjects
// that names a connection under another user's key (what a bug in id
// mapping, or anyone else on the bus, could send) reaches nobody, in
// either direction; under the connection's own user it would.
func TestClusterSubjectsCheckTheUser(t *testing.T) {
	url := startNATS(t)
	a, b, ext, c := acrossNodes(t, url)
	conn := connectTo(t, c, ext.id)
	bus := natsConn(t, url)
	// Sealed with the deployment's secret, as a node's would be: this is
	// the check behind the seal (TestClusterAttacker* try without it).
	ring := testRing()
	publish := func(subject string, frame string) {
		t.Helper()
		if err := bus.Publish(subject, sealedFrame(ring, subject, frame)); err != nil {
			t.Fatal(err)
		}
		if err := bus.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	toExt := func(user string) string { return "browserbridge.n.a.u." + ring.UserKey(user) + ".x." + conn }
	toClient := func(user string) string { return "browserbridge.n.b.u." + ring.UserKey(user) + ".c." + conn }

	held := c.start(1, "hold", nil)
	nextSeen(t, ext)
	before := metric(t, a, `browserbridge_proxy_cluster_dropped_total{reason="user_mismatch"}`)
	// Under bob's key: a request to alice's extension, an answer to
	// alice's client.
	publish(toExt("bob"), `{"jsonrpc":"2.0","id":"forged","method":"createTab"}`)
	publish(toClient("bob"), `{"jsonrpc":"2.0","id":1,"result":{"forged":true}}`)
	// Under alice's own key the same subjects deliver: the sentinel proves
	// the forged ones, published before on the same subjects, were handled.
	publish(toExt("alice"), `{"jsonrpc":"2.0","id":"sentinel","method":"createTab"}`)
	var m relaywire.Message
	json.Unmarshal(nextSeen(t, ext), &m)
	if id, _ := relaywire.IDString(m.ID); id != conn+`:"sentinel"` {
		t.Fatalf("alice's extension received %s before the sentinel", m.ID)
	}
	if v := metric(t, a, `browserbridge_proxy_cluster_dropped_total{reason="user_mismatch"}`); v != before+1 {
		t.Errorf("node a counted %v user mismatches, want %v", v, before+1)
	}
	testutil.WaitFor(t, "node b to count the forged answer as a user mismatch", func() bool {
		return metric(t, b, `browserbridge_proxy_cluster_dropped_total{reason="user_mismatch"}`) >= 1
	})
	select {
	case r := <-held:
		t.Fatalf("alice's held call was answered by a forged message: %s %s", r.Result, r.Error)
	default:
	}
	// The real answer still comes through.
	ext.sendRaw(relaywire.AppendResult(nil, relaywire.AppendString(nil, conn+":1"), json.RawMessage(`{"real":true}`)))
	if r := c.wait(held); string(r.Result) != `{"real":true}` {
		t.Fatalf("held call: %s %s", r.Result, r.Error)
	}
}

// testRing is a keyring of the test deployment's secret (the one its
// tokens are signed with): every node of a test cluster derives its own.
func testRing() *clusterseal.Keyring {
	ring, err := clusterseal.New([][]byte{[]byte(testSecret)})
	if err != nil {
		panic(err)
	}
	return ring
}

// sealedFrame seals a JSON-RPC frame for subject as a node does (a plain
// message: no control op, no strike, no reason).
func sealedFrame(ring *clusterseal.Keyring, subject, frame string) []byte {
	return ring.SealMessage(subject, []byte{msgOpNone, 0, 0}, []byte(frame))
}
