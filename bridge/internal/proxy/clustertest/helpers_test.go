// Package clustertest tests the proxy as a cluster of nodes over NATS
// (issue 18, docs/relay.md "Cluster") from the outside: real proxy nodes
// (in this process, or built and run as processes), real embedded NATS
// servers clustered with each other, and WebSocket clients of its own that
// speak spec 001 without the proxy's code, so that a bug shared by the
// proxy's reader and writer cannot hide itself.
package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"

	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
	"github.com/browserbridge/browserbridge/bridge/internal/natsembed"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// testSecret signs the tokens of every node of a test (one deployment).
const testSecret = "clustertest-0123456789abcdef-0123456789abcdef"

// deadlockGuard bounds every wait on something the cluster must do: far
// longer than it takes on a busy machine, so reaching it means a call was
// lost or a node stuck, never a slow run.
const deadlockGuard = 90 * time.Second

func testKeys(tb testing.TB) *token.Keys {
	tb.Helper()
	k, err := token.NewHS256([]byte(testSecret))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func mint(tb testing.TB, keys *token.Keys, user string, kind token.Kind) string {
	tb.Helper()
	tok, err := keys.MintFor(user, kind, time.Hour, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// startNATS starts a cluster of n embedded NATS servers with JetStream,
// stores in the test's directory, shut down when the test ends (after the
// nodes, whose cleanups are registered later and so run first).
func startNATS(tb testing.TB, n int) []*natsembed.Server {
	tb.Helper()
	var servers []*natsembed.Server
	if n == 1 {
		// Alone, not a cluster of one (StartCluster(1) never sees its
		// JetStream meta leader).
		s, err := natsembed.Start(natsembed.Options{Listen: "127.0.0.1:0", StoreDir: tb.TempDir()})
		if err != nil {
			tb.Fatal(err)
		}
		servers = append(servers, s)
	} else {
		var err error
		if servers, err = natsembed.StartCluster(n, tb.TempDir()); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
		}
	})
	return servers
}

// connectNATS connects as a node does (design: no reconnect buffer, so a
// publish while NATS is away fails at once instead of arriving late).
func connectNATS(tb testing.TB, urls ...string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(strings.Join(urls, ","), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.DontRandomize())
	if err != nil {
		tb.Fatal(err)
	}
	return nc
}

// node is a proxy node in this process, on an httptest server.
type node struct {
	name   string
	srv    *proxy.Server
	hs     *httptest.Server
	nc     *nats.Conn
	ws     string // ws://host:port
	http   string // http://host:port
	health string // http://host:port of the internal handler: the whole /health
	panics atomic.Bool
}

// panicWatch is the HTTP server's error log: a handler's panic that
// net/http recovered fails the test.
type panicWatch struct{ flag *atomic.Bool }

func (p panicWatch) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("panic")) {
		p.flag.Store(true)
		os.Stderr.Write(b)
	}
	return len(b), nil
}

// startNode starts a node joined to the cluster through natsURLs (its own
// server first). Rates and per-user caps are off: these tests count lost
// and crossed calls, and a refusal by a limit would be neither.
func startNode(tb testing.TB, keys *token.Keys, name string, replicas int, ttl time.Duration, natsURLs ...string) *node {
	tb.Helper()
	nc := connectNATS(tb, natsURLs...)
	tb.Cleanup(nc.Close) // after the proxy's Shutdown below
	// Each node derives its own keyring from the deployment's secret (the
	// one its tokens are signed with), as browserbridge-proxy serve does.
	secrets, err := keys.Secrets()
	if err != nil {
		tb.Fatal(err)
	}
	ring, err := clusterseal.New(secrets)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{
		Keys: keys, ConnRate: -1, UserRate: -1, MaxMCPPerUser: -1, MaxExtensionsPerUser: -1, Logger: clusterLog(tb),
		Cluster: &proxy.ClusterOptions{Keyring: ring, Conn: nc, Node: name, PresenceTTL: ttl, Replicas: replicas},
	})
	if err != nil {
		tb.Fatal(err)
	}
	n := &node{name: name, srv: srv, nc: nc}
	n.hs = httptest.NewUnstartedServer(srv.Handler())
	n.hs.Config.ErrorLog = log.New(panicWatch{&n.panics}, "", 0)
	n.hs.Start()
	n.http = n.hs.URL
	internal := httptest.NewServer(srv.InternalHandler())
	n.health = internal.URL
	n.ws = "ws" + strings.TrimPrefix(n.hs.URL, "http")
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("node %s: shutdown: %v", name, err)
		}
		n.hs.Close()
		internal.Close()
		if n.panics.Load() {
			tb.Errorf("node %s: a handler panicked", name)
		}
	})
	return n
}

// clusterLog passes a node's log lines about the cluster (peers gone,
// NATS away) to the test's log, with the time: what explains a failure.
func clusterLog(tb testing.TB) *slog.Logger {
	w := &testLogWriter{tb: tb}
	tb.Cleanup(func() { w.mu.Lock(); w.over = true; w.mu.Unlock() }) // runs after the nodes' cleanups
	return slog.New(slog.NewTextHandler(w, nil))
}

type testLogWriter struct {
	tb   testing.TB
	mu   sync.Mutex
	over bool
}

func (w *testLogWriter) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("cluster")) || bytes.Contains(b, []byte("NATS")) {
		w.mu.Lock()
		if !w.over {
			w.tb.Logf("%s", bytes.TrimSpace(b))
		}
		w.mu.Unlock()
	}
	return len(b), nil
}

// health is the part of /health these tests read.
type health struct {
	Node  string `json:"node"`
	NATS  string `json:"nats"`
	Peers []struct {
		Node  string `json:"node"`
		Alive bool   `json:"alive"`
	} `json:"peers"`
	Pairs map[string]int `json:"pairs"`
}

func getHealth(base string) (health, error) {
	var h health
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(base + relaywire.PathHealth)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("/health: %v", err)
	}
	return h, nil
}

// alivePeers lists the peers a node's /health calls alive.
func (h health) alivePeers() []string {
	var out []string
	for _, p := range h.Peers {
		if p.Alive {
			out = append(out, p.Node)
		}
	}
	return out
}

// waitMesh waits until every node (by /health base URL) is connected to
// NATS and sees the others alive.
func waitMesh(tb testing.TB, bases ...string) {
	tb.Helper()
	testutil.WaitWithin(tb, deadlockGuard, "every node to see the others alive", func() (bool, string) {
		for _, b := range bases {
			h, err := getHealth(b)
			if err != nil {
				return false, err.Error()
			}
			if h.NATS != "connected" || len(h.alivePeers()) != len(bases)-1 {
				return false, fmt.Sprintf("node %s: nats %s, alive peers %v", h.Node, h.NATS, h.alivePeers())
			}
		}
		return true, ""
	})
}

// errConnLost ends the calls of a client whose WebSocket ended.
var errConnLost = errors.New("the WebSocket connection ended")

// reply is a call's outcome: the proxy's answer, or the connection's end.
type reply struct {
	msg *relaywire.Message
	err error
}

// code returns the reply's JSON-RPC error code and message (0 for a
// result, -1 for a lost connection).
func (r reply) code() (int, string) {
	if r.err != nil {
		return -1, r.err.Error()
	}
	if r.msg.Error == nil {
		return 0, ""
	}
	var e relaywire.Error
	if err := json.Unmarshal(r.msg.Error, &e); err != nil {
		return -2, "malformed error object " + string(r.msg.Error)
	}
	return e.Code, e.Message
}

// client is an MCP client of the proxy (spec 001's active side): a reader
// goroutine hands each reply to the call with its id and keeps the rest
// (notifications, replies nobody waits for) apart.
type client struct {
	name string
	ws   *websocket.Conn
	wmu  sync.Mutex

	mu      sync.Mutex
	pending map[string]chan reply // by the id's JSON text
	ended   bool
	notes   []*relaywire.Message
	strays  []string // replies that matched no call: a crossed or doubled reply
	noteSig chan struct{}

	done   chan struct{}
	endErr error
}

func dialWS(url string) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 20 * time.Second}
	ws, _, err := d.Dial(url, nil)
	return ws, err
}

func dialClient(tb testing.TB, base, name string) *client {
	tb.Helper()
	ws, err := dialWS(base + relaywire.PathMCP)
	if err != nil {
		tb.Fatalf("client %s: dial: %v", name, err)
	}
	c := &client{name: name, ws: ws, pending: make(map[string]chan reply), noteSig: make(chan struct{}, 1), done: make(chan struct{})}
	go c.readLoop()
	tb.Cleanup(func() { c.ws.Close() })
	return c
}

func (c *client) readLoop() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			c.endErr, c.ended = err, true
			for id, ch := range c.pending {
				ch <- reply{err: fmt.Errorf("%w: %v", errConnLost, err)}
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		var m relaywire.Message
		if err := json.Unmarshal(data, &m); err != nil {
			c.mu.Lock()
			c.strays = append(c.strays, "invalid JSON: "+string(data))
			c.mu.Unlock()
			continue
		}
		c.mu.Lock()
		if m.ID != nil && m.Method == "" {
			if ch, ok := c.pending[string(m.ID)]; ok {
				delete(c.pending, string(m.ID))
				c.mu.Unlock()
				ch <- reply{msg: &m}
				continue
			}
			c.strays = append(c.strays, string(data))
		} else {
			c.notes = append(c.notes, &m)
		}
		c.mu.Unlock()
		select {
		case c.noteSig <- struct{}{}:
		default:
		}
	}
}

// start sends a request with the id (its JSON text) and returns where its
// reply will arrive. A send that fails, or a connection that ended, ends
// the call with errConnLost.
func (c *client) start(id json.RawMessage, method string, params any) <-chan reply {
	ch := make(chan reply, 1)
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	data, err := json.Marshal(msg)
	if err != nil {
		ch <- reply{err: err}
		return ch
	}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		ch <- reply{err: errConnLost}
		return ch
	}
	if _, dup := c.pending[string(id)]; dup {
		c.mu.Unlock()
		ch <- reply{err: fmt.Errorf("test bug: id %s is in flight already", id)}
		return ch
	}
	c.pending[string(id)] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	c.ws.SetWriteDeadline(time.Now().Add(deadlockGuard))
	err = c.ws.WriteMessage(websocket.TextMessage, data)
	c.wmu.Unlock()
	if err != nil {
		c.mu.Lock()
		if p, ok := c.pending[string(id)]; ok && p == ch {
			delete(c.pending, string(id))
			ch <- reply{err: fmt.Errorf("%w: %v", errConnLost, err)}
		}
		c.mu.Unlock()
	}
	return ch
}

// await waits for a call's reply; past the deadlock guard it counts as lost.
func await(ch <-chan reply) (reply, bool) {
	t := time.NewTimer(deadlockGuard)
	defer t.Stop()
	select {
	case r := <-ch:
		return r, true
	case <-t.C:
		return reply{}, false
	}
}

// call sends a control request and waits for its reply.
func (c *client) call(tb testing.TB, id, method string, params any) reply {
	tb.Helper()
	r, ok := await(c.start(json.RawMessage(strconv.Quote(id)), method, params))
	if !ok {
		tb.Fatalf("client %s: no reply to %s within %v", c.name, method, deadlockGuard)
	}
	return r
}

func (c *client) handshake(tb testing.TB, tok string) {
	tb.Helper()
	r := c.call(tb, "hs", relaywire.MethodHandshake, relaywire.HandshakeParams{AccessToken: tok})
	var res relaywire.HandshakeResult
	if r.err != nil || r.msg.Error != nil || json.Unmarshal(r.msg.Result, &res) != nil || !res.Authenticated {
		tb.Fatalf("client %s: handshake: %+v %v", c.name, r.msg, r.err)
	}
}

// list returns the extensions list_extensions shows the client.
func (c *client) list(tb testing.TB) []relaywire.ExtensionInfo {
	tb.Helper()
	r := c.call(tb, "ls", relaywire.MethodListExtensions, nil)
	var res relaywire.ListExtensionsResult
	if r.err != nil || r.msg.Error != nil || json.Unmarshal(r.msg.Result, &res) != nil {
		code, msg := r.code()
		tb.Fatalf("client %s: list_extensions: %d %s", c.name, code, msg)
	}
	return res.Extensions
}

// waitListed polls list_extensions until every id in want shows (presence
// reaches other nodes asynchronously) and nothing outside allowed does.
func (c *client) waitListed(tb testing.TB, want []string, allowed map[string]bool) {
	tb.Helper()
	testutil.WaitWithin(tb, deadlockGuard, "client "+c.name+" to list "+strings.Join(want, ","), func() (bool, string) {
		got := map[string]bool{}
		for _, e := range c.list(tb) {
			if !allowed[e.ID] {
				tb.Fatalf("client %s was shown extension %s (%s), not one of its user's", c.name, e.ID, e.Name)
			}
			got[e.ID] = true
		}
		for _, id := range want {
			if !got[id] {
				return false, fmt.Sprintf("%s missing from %v", id, got)
			}
		}
		return true, ""
	})
}

// connect connects the client to an extension and returns the connection
// id, or the error reply's code and message.
func (c *client) connect(tb testing.TB, extID string) (string, int, string) {
	tb.Helper()
	r := c.call(tb, "cn", relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: extID})
	if code, msg := r.code(); code != 0 {
		return "", code, msg
	}
	var res relaywire.ConnectResult
	if err := json.Unmarshal(r.msg.Result, &res); err != nil || res.ExtensionID != extID || !strings.HasPrefix(res.ConnectionID, relaywire.PrefixConnection) {
		tb.Fatalf("client %s: connect to %s: %s", c.name, extID, r.msg.Result)
	}
	return res.ConnectionID, 0, ""
}

// waitNote waits for a notification with the method that arrived after the
// first `from` notes, and returns it with its index.
func (c *client) waitNote(method string, from int, limit time.Duration) (*relaywire.Message, int, bool) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		for i := from; i < len(c.notes); i++ {
			if c.notes[i].Method == method {
				m := c.notes[i]
				c.mu.Unlock()
				return m, i, true
			}
		}
		c.mu.Unlock()
		select {
		case <-c.noteSig:
		case <-c.done:
			return nil, 0, false
		case <-deadline.C:
			return nil, 0, false
		}
	}
}

func (c *client) noteCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.notes)
}

func (c *client) strayReplies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.strays...)
}

// fakeExtension stands for the browser extension (spec 001's passive
// side): it authenticates, then answers every forwarded request with what
// it received, the mapped id, the method and the whole frame, plus its own
// extension id and user, so that a client can check that the answer is to
// its own request and came from its own user's extension.
type fakeExtension struct {
	user, name, id string
	node           string // where it is connected
	ws             *websocket.Conn
	wmu            sync.Mutex
	served         atomic.Int64
	done           chan struct{}
}

// echo is the fake extension's answer.
type echo struct {
	ID     string `json:"id"` // the mapped id it was sent: conn-…:<client's id>
	Method string `json:"method"`
	Frame  string `json:"frame"`
	Ext    string `json:"ext"`
	User   string `json:"user"`
}

// dialExtension connects an extension to a node and waits until it is
// authenticated, then serves it.
func dialExtension(tb testing.TB, keys *token.Keys, base, nodeName, user, name string) *fakeExtension {
	tb.Helper()
	e, err := tryExtension(keys, base, nodeName, user, name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.ws.Close() })
	return e
}

func tryExtension(keys *token.Keys, base, nodeName, user, name string) (*fakeExtension, error) {
	tok, err := keys.MintFor(user, token.KindExtension, time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	ws, err := dialWS(base + relaywire.PathExtension)
	if err != nil {
		return nil, fmt.Errorf("extension %s/%s: dial %s: %w", user, name, nodeName, err)
	}
	fail := func(format string, args ...any) (*fakeExtension, error) {
		ws.Close()
		return nil, fmt.Errorf("extension %s/%s on %s: "+format, append([]any{user, name, nodeName}, args...)...)
	}
	ws.SetReadDeadline(time.Now().Add(deadlockGuard))
	var auth relaywire.Message
	if err := ws.ReadJSON(&auth); err != nil || auth.Method != relaywire.MethodAuthenticate {
		return fail("first message %+v, %v", auth, err)
	}
	if err := ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": auth.ID,
		"result": relaywire.AuthenticateResult{Name: name, AccessToken: tok}}); err != nil {
		return fail("%v", err)
	}
	var ok relaywire.Message
	if err := ws.ReadJSON(&ok); err != nil || ok.Method != relaywire.MethodAuthenticated {
		return fail("after authenticate: %+v, %v", ok, err)
	}
	var p relaywire.AuthenticatedParams
	if err := json.Unmarshal(ok.Params, &p); err != nil || p.UserID != user || !strings.HasPrefix(p.ExtensionID, relaywire.PrefixExtension) {
		return fail("authenticated %s", ok.Params)
	}
	ws.SetReadDeadline(time.Time{})
	e := &fakeExtension{user: user, name: name, id: p.ExtensionID, node: nodeName, ws: ws, done: make(chan struct{})}
	go e.serve()
	return e, nil
}

func (e *fakeExtension) serve() {
	defer close(e.done)
	for {
		_, data, err := e.ws.ReadMessage()
		if err != nil {
			return
		}
		var m relaywire.Message
		if json.Unmarshal(data, &m) != nil || m.ID == nil || m.Method == "" {
			continue // notifications (status), replies to requests it never sends
		}
		var id string
		if json.Unmarshal(m.ID, &id) != nil {
			id = "not a string: " + string(m.ID)
		}
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID,
			"result": echo{ID: id, Method: m.Method, Frame: string(data), Ext: e.id, User: e.user}})
		e.wmu.Lock()
		e.ws.SetWriteDeadline(time.Now().Add(deadlockGuard))
		err = e.ws.WriteMessage(websocket.TextMessage, out)
		e.wmu.Unlock()
		if err != nil {
			return
		}
		e.served.Add(1)
	}
}

// callParams are what a load call sends: who sent it, in which order.
type callParams struct {
	Client string `json:"client"`
	Seq    int    `json:"seq"`
	Pad    string `json:"pad,omitempty"`
}

// checkEcho says what is wrong with a reply to the call (id, params) made
// by a client connected as connID to extension ext of user; "" if nothing.
func checkEcho(r *relaywire.Message, id json.RawMessage, method string, p callParams, connID, ext, user string) string {
	if !bytes.Equal(r.ID, id) {
		return fmt.Sprintf("reply id %s to call %s", r.ID, id)
	}
	var e echo
	if err := json.Unmarshal(r.Result, &e); err != nil {
		return fmt.Sprintf("result %s: %v", r.Result, err)
	}
	if want := connID + ":" + string(id); e.ID != want {
		return fmt.Sprintf("the extension was sent id %q, want %q", e.ID, want)
	}
	if e.Method != method {
		return fmt.Sprintf("the extension was sent method %q, want %q", e.Method, method)
	}
	if e.User != user || e.Ext != ext {
		return fmt.Sprintf("answered by extension %s of user %q, want %s of %q", e.Ext, e.User, ext, user)
	}
	var f struct {
		ID     string     `json:"id"`
		Method string     `json:"method"`
		Params callParams `json:"params"`
	}
	if err := json.Unmarshal([]byte(e.Frame), &f); err != nil {
		return fmt.Sprintf("frame %s: %v", e.Frame, err)
	}
	if f.ID != e.ID || f.Method != method || f.Params != p {
		return fmt.Sprintf("the extension got frame %s for call %s %s %+v", e.Frame, id, method, p)
	}
	return ""
}

// idStyle is how a load client writes its ids: every client counts 1..N,
// so ids collide across clients (and, with idMixed, within one client: 1
// and "1" are in flight at once, two ids as the proxy sees them).
type idStyle int

const (
	idNumber idStyle = iota // 1, 2, 3…
	idString                // "1", "2", "3"…
	idMixed                 // 1, "1", 2, "2"…
)

func (s idStyle) id(i int) json.RawMessage {
	switch s {
	case idString:
		return json.RawMessage(strconv.Quote(strconv.Itoa(i + 1)))
	case idMixed:
		if i%2 == 1 {
			return json.RawMessage(strconv.Quote(strconv.Itoa(i/2 + 1)))
		}
		return json.RawMessage(strconv.Itoa(i/2 + 1))
	}
	return json.RawMessage(strconv.Itoa(i + 1))
}

func (s idStyle) String() string {
	return [...]string{"number", "string", "mixed"}[s]
}

// tally counts a load's outcomes. Every call ends in exactly one of: ok,
// failed (an error reply or the connection's end, by code), crossed (a
// reply that was not to this call, or an answer from the wrong place), or
// lost (no reply within the deadlock guard).
type tally struct {
	mu      sync.Mutex
	ok      int
	failed  map[int]int
	crossed []string
	lost    []string
	other   []string // failures the test did not allow, with the message
}

func newTally() *tally { return &tally{failed: map[int]int{}} }

func (t *tally) add(f func(t *tally)) {
	t.mu.Lock()
	f(t)
	t.mu.Unlock()
}

func (t *tally) snapshot() (ok int, failed map[int]int, crossed, lost, other []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	failed = map[int]int{}
	for k, v := range t.failed {
		failed[k] = v
	}
	return t.ok, failed, append([]string(nil), t.crossed...), append([]string(nil), t.lost...), append([]string(nil), t.other...)
}

// firstFew keeps a failure message short.
func firstFew(s []string) string {
	if len(s) > 5 {
		return strings.Join(s[:5], "\n  ") + fmt.Sprintf("\n  … and %d more", len(s)-5)
	}
	return strings.Join(s, "\n  ")
}

// loadClient is a client connected to an extension, making load calls.
type loadClient struct {
	*client
	user, ext, conn string
	node, extNode   string // the client's node and its extension's
	style           idStyle
	calls           atomic.Int64 // calls made
	finished        time.Time    // when its last call ended
}

// methods the load calls rotate through, so a reply to the wrong call
// shows in the method as well as in the id and params.
var methods = []string{"tools/call", "tools/list", "resources/read", "prompts/get"}

// verdict is what a judge makes of one call's outcome.
type verdict int

const (
	goOn verdict = iota // next call
	stop                // this worker stops
)

// run makes calls 0, 1, … n-1 (n < 0: until done closes) with window calls
// in flight (one worker each), pacing each worker to one call per pace if
// pace > 0. judge sees every outcome (ok false: no reply within the
// deadlock guard).
func (lc *loadClient) run(n, window int, pace time.Duration, done <-chan struct{}, judge func(lc *loadClient, i int, id json.RawMessage, method string, p callParams, r reply, ok bool) verdict) {
	var wg sync.WaitGroup
	for w := range window {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var tick *time.Ticker
			if pace > 0 {
				tick = time.NewTicker(pace)
				defer tick.Stop()
			}
			for i := w; n < 0 || i < n; i += window {
				if tick != nil {
					select {
					case <-tick.C:
					case <-done:
						return
					}
				}
				select {
				case <-done:
					return
				default:
				}
				id := lc.style.id(i)
				method := methods[i%len(methods)]
				p := callParams{Client: lc.name, Seq: i}
				if i%16 == 0 {
					p.Pad = strings.Repeat("x", 1024+i%512)
				}
				lc.calls.Add(1)
				r, ok := await(lc.start(id, method, p))
				if judge(lc, i, id, method, p, r, ok) == stop {
					return
				}
			}
		}()
	}
	wg.Wait()
	lc.finished = time.Now()
}

// strict is the judge of a load where every call must succeed.
func strict(tl *tally) func(lc *loadClient, i int, id json.RawMessage, method string, p callParams, r reply, ok bool) verdict {
	return func(lc *loadClient, i int, id json.RawMessage, method string, p callParams, r reply, ok bool) verdict {
		what := fmt.Sprintf("client %s (node %s → extension %s on %s) call %s", lc.name, lc.node, lc.ext, lc.extNode, id)
		switch {
		case !ok:
			tl.add(func(t *tally) { t.lost = append(t.lost, what) })
			return stop
		case r.err != nil || r.msg.Error != nil:
			code, msg := r.code()
			tl.add(func(t *tally) { t.failed[code]++; t.other = append(t.other, fmt.Sprintf("%s: %d %s", what, code, msg)) })
			return goOn
		}
		if bad := checkEcho(r.msg, id, method, p, lc.conn, lc.ext, lc.user); bad != "" {
			tl.add(func(t *tally) { t.crossed = append(t.crossed, what+": "+bad) })
			return goOn
		}
		tl.add(func(t *tally) { t.ok++ })
		return goOn
	}
}

// link is a live client→extension connection: the client's node and the
// extension's.
type link struct{ client, ext string }

// waitPairs polls each node's /health until its pair counts are those of
// the live links: nothing left over from connections that ended (a node
// gone, NATS away), nothing missing. bases maps node names to /health
// base URLs.
func waitPairs(tb testing.TB, bases map[string]string, live []link) {
	tb.Helper()
	want := map[string]map[string]int{}
	for name := range bases {
		want[name] = map[string]int{"local": 0, "remote_in": 0, "remote_out": 0}
	}
	for _, l := range live {
		if l.client == l.ext {
			want[l.client]["local"]++
			continue
		}
		want[l.client]["remote_out"]++
		want[l.ext]["remote_in"]++
	}
	testutil.WaitWithin(tb, deadlockGuard, "the nodes' pair counts", func() (bool, string) {
		for name, base := range bases {
			h, err := getHealth(base)
			if err != nil {
				return false, err.Error()
			}
			for k, v := range want[name] {
				if h.Pairs[k] != v {
					return false, fmt.Sprintf("node %s: pairs %v, want %v", name, h.Pairs, want[name])
				}
			}
		}
		return true, ""
	})
}
