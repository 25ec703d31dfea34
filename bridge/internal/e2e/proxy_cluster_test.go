//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/natsembed"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/npmtools"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// The proxy as a cluster (issue 18), end to end: two built
// `browserbridge-proxy serve --nats` processes on one NATS server, real
// bridges relaying to one node, and clients on the other: over spec 001
// both ways, over the public /mcp behind one front, and across a node's
// graceful stop.

// clusterWait bounds how long the nodes take to see each other, and an
// extension of one node to show on the other (presence is written
// asynchronously: tests poll for it).
const clusterWait = 30 * time.Second

// startClusterNATS runs a real NATS server with JetStream in the test
// process, on a loopback port the proxy processes connect to. Call it
// before the nodes: its teardown then runs after theirs.
func startClusterNATS(t *testing.T) string {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Options{Name: "e2e", Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

// clusterSecret writes the token key every node of a cluster shares.
func clusterSecret(t *testing.T) string {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(randomHex(t, 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	return secret
}

// startClusterNode starts `browserbridge-proxy serve --nats natsURL --node
// node` on a free loopback port with the cluster's secret, and, when
// public is set, its MCP endpoint with OAuth for that public URL (the
// front all nodes sit behind). It returns once the node's /health names
// it. Call it before startWorld, as for startPublicProxy.
func startClusterNode(t *testing.T, natsURL, node, secret, public string) *publicProxy {
	t.Helper()
	bin := proxyBinary(t)
	p := &publicProxy{t: t, dir: t.TempDir(), secret: secret, out: &testbrowser.SyncBuffer{}, exited: make(chan struct{})}
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p.public, p.relay = "http://"+listen, "ws://"+listen
	// A link in the node's own directory, as in startPublicProxy: the
	// worlds' leftover checks kill whatever names binDir.
	link := filepath.Join(p.dir, "browserbridge-proxy")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	// The whole /health (node, peers) is on the internal listener only.
	p.internal = "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	args := []string{"serve", "--listen", listen, "--secret-file", secret, "-v", "--nats", natsURL, "--node", node,
		"--metrics-listen", strings.TrimPrefix(p.internal, "http://")}
	if public != "" {
		// --advertise-url: where the other nodes pass the requests of
		// this node's Streamable HTTP sessions.
		args = append(args, "--public-url", public, "--advertise-url", p.public)
	}
	p.cmd = exec.Command(link, args...)
	p.cmd.Dir = p.dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("=== node %s ===", node)
		}
		p.stop()
	})
	testutil.WaitWithin(t, gatewayUpWait, "", func() (bool, string) {
		select {
		case <-p.exited:
			t.Fatalf("browserbridge-proxy node %s exited (%v):\n%s", node, p.cmd.ProcessState, tail(p.out.String(), 40))
		default:
		}
		h, err := nodeHealth(p)
		if err != nil {
			return false, err.Error()
		}
		return h.Status == "ok" && h.Node == node, fmt.Sprintf("/health of node %s: %+v", node, h)
	})
	return p
}

// clusterHealth is what the tests read of a node's /health.
type clusterHealth struct {
	Status      string        `json:"status"`
	Node        string        `json:"node"`
	NATS        string        `json:"nats"`
	Peers       []clusterPeer `json:"peers"`
	RemotePairs struct {
		Out int `json:"out"`
		In  int `json:"in"`
	} `json:"remote_pairs"`
}

type clusterPeer struct {
	Node       string `json:"node"`
	Alive      bool   `json:"alive"`
	Extensions int    `json:"extensions"`
}

func nodeHealth(p *publicProxy) (clusterHealth, error) {
	var h clusterHealth
	resp, err := http.Get(p.internal + relaywire.PathHealth)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("/health: %s: %v", resp.Status, err)
	}
	return h, nil
}

// waitPeers waits until every node's /health shows every other node alive.
func waitPeers(t *testing.T, nodes map[string]*publicProxy) {
	t.Helper()
	testutil.WaitWithin(t, clusterWait, "", func() (bool, string) {
		for name, p := range nodes {
			h, err := nodeHealth(p)
			if err != nil {
				return false, err.Error()
			}
			for other := range nodes {
				if other == name {
					continue
				}
				if !slices.ContainsFunc(h.Peers, func(pr clusterPeer) bool { return pr.Node == other && pr.Alive }) {
					return false, fmt.Sprintf("node %s does not see node %s alive: %+v", name, other, h)
				}
			}
		}
		return true, ""
	})
}

// waitRemotePairs waits until node from has at least one of its clients
// linked to an extension of another node (out) and node to at least one of
// its extensions linked to a client of another (in): the proof that a
// connection crosses the cluster rather than staying on one node.
func waitRemotePairs(t *testing.T, from, to *publicProxy) {
	t.Helper()
	testutil.WaitWithin(t, clusterWait, "", func() (bool, string) {
		hf, err := nodeHealth(from)
		if err != nil {
			return false, err.Error()
		}
		ht, err := nodeHealth(to)
		if err != nil {
			return false, err.Error()
		}
		return hf.RemotePairs.Out >= 1 && ht.RemotePairs.In >= 1,
			fmt.Sprintf("remote pairs: client's node %s %+v, extension's node %s %+v", hf.Node, hf.RemotePairs, ht.Node, ht.RemotePairs)
	})
}

// ---------------------------------------------------------------------------
// A spec 001 MCP-role client on one WebSocket, for list_extensions: the
// question every client asks a node first. One request at a time, read
// until its reply (the proxy's own notifications are skipped).

type relayLister struct {
	t    *testing.T
	ws   *websocket.Conn
	next int
}

func dialLister(t *testing.T, p *publicProxy, tok string) *relayLister {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(p.relay+relaywire.PathMCP, nil)
	if err != nil {
		t.Fatalf("dialling %s%s: %v", p.relay, relaywire.PathMCP, err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	l := &relayLister{t: t, ws: ws}
	var hs relaywire.HandshakeResult
	if err := json.Unmarshal(l.call(relaywire.MethodHandshake, relaywire.HandshakeParams{AccessToken: tok}), &hs); err != nil || !hs.Authenticated {
		t.Fatalf("mcp_handshake: %+v %v", hs, err)
	}
	return l
}

func (l *relayLister) call(method string, params any) json.RawMessage {
	l.t.Helper()
	res, _ := l.callNotes(method, params)
	return res
}

// callNotes sends a request and returns its result and the notifications
// that came before it, in order.
func (l *relayLister) callNotes(method string, params any) (json.RawMessage, []*relaywire.Message) {
	l.t.Helper()
	l.next++
	id := json.RawMessage(strconv.Itoa(l.next))
	_ = l.ws.SetWriteDeadline(time.Now().Add(callWait))
	if err := l.ws.WriteMessage(websocket.TextMessage, relaywire.AppendRequestRawID(nil, id, method, relaywire.MarshalParams(params))); err != nil {
		l.t.Fatalf("%s: %v", method, err)
	}
	var notes []*relaywire.Message
	for {
		_ = l.ws.SetReadDeadline(time.Now().Add(callWait)) // a deadlock guard
		_, data, err := l.ws.ReadMessage()
		if err != nil {
			l.t.Fatalf("%s: no reply: %v", method, err)
		}
		m, kind, perr := relaywire.Parse(data) // a *Error: compared as such, never as an error
		if perr != nil {
			l.t.Fatalf("%s: a bad message %s: %v", method, data, perr)
		}
		switch {
		case kind == relaywire.KindNotification:
			notes = append(notes, m)
			continue
		case kind != relaywire.KindReply || string(m.ID) != string(id):
			continue
		case m.Error != nil:
			l.t.Fatalf("%s: %s", method, m.Error)
		}
		return m.Result, notes
	}
}

// waitListed polls list_extensions until an extension with id is listed,
// and returns it.
func (l *relayLister) waitListed(id string) relaywire.ExtensionInfo {
	l.t.Helper()
	var found relaywire.ExtensionInfo
	testutil.WaitWithin(l.t, clusterWait, "", func() (bool, string) {
		var res relaywire.ListExtensionsResult
		raw := l.call(relaywire.MethodListExtensions, nil)
		if err := json.Unmarshal(raw, &res); err != nil {
			return false, err.Error()
		}
		for _, e := range res.Extensions {
			if e.ID == id {
				found = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("list_extensions has no %s: %s", id, raw)
	})
	return found
}

// ---------------------------------------------------------------------------
// A bridge with no browser: `browserbridge serve` whose gateway runs
// server-everything (a real stdio MCP server) and relays it to the proxy
// as a server extension. A second bridge for the price of a Node.js
// process rather than a second Chromium.

type serverBridge struct {
	t       *testing.T
	dir     string
	env     []string
	serve   *exec.Cmd
	out     *testbrowser.SyncBuffer
	stopped bool
}

// startServerBridge starts it relaying to relayURL with tok, and waits
// until the proxy has its server extension. Start it after the worlds of
// the test: it must stop before them, since their leftover checks count
// every process of this run's binaries.
func startServerBridge(t *testing.T, relayURL, tok string) *serverBridge {
	t.Helper()
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	everything, err := tools.Module("@modelcontextprotocol", "server-everything", "dist", "index.js")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "bbs") // short: the socket's path must fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	sb := &serverBridge{t: t, dir: dir, out: &testbrowser.SyncBuffer{}}
	t.Cleanup(sb.stop)
	home, bbHome := filepath.Join(dir, "home"), filepath.Join(dir, "bb")
	for _, d := range []string{home, filepath.Join(bbHome, "config")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Node runs through a link in this directory, so the leftover check
	// below finds it.
	node := filepath.Join(dir, "node")
	if err := os.Symlink(tools.Node, node); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(bbHome, "config", "config.json"), map[string]any{
		"listen":     "127.0.0.1:0",
		"relay":      map[string]string{"url": relayURL, "token": tok},
		"mcpServers": map[string]any{gatewayServer: map[string]any{"command": node, "args": []string{everything, "stdio"}}},
	})
	sb.env = append(os.Environ(),
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_RUNTIME_DIR=",
		"BROWSERBRIDGE_HOME="+bbHome,
		"BROWSERBRIDGE_SOCKET="+filepath.Join(dir, "run", "bridge.sock"),
		"BROWSERBRIDGE_BIN="+filepath.Join(dir, "no-bridge-here"),
	)
	sb.serve = exec.Command(bins.Bridge, "serve")
	sb.serve.Env = sb.env
	sb.serve.Stdout, sb.serve.Stderr = sb.out, sb.out
	sb.serve.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sb.serve.Start(); err != nil {
		t.Fatal(err)
	}
	return sb
}

// status is `browserbridge status --json` of this bridge.
func (sb *serverBridge) status() (protocol.StatusResult, error) {
	var st protocol.StatusResult
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Bridge, "status", "--json")
	cmd.Env = sb.env
	out, err := cmd.Output()
	if err != nil {
		return st, fmt.Errorf("browserbridge status --json: %v", err)
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, fmt.Errorf("browserbridge status --json: %v\n%s", err, out)
	}
	return st, nil
}

// waitServer waits until the proxy has the bridge's server extension
// named name, and returns its id.
func (sb *serverBridge) waitServer(name string) string {
	sb.t.Helper()
	var id string
	testutil.WaitWithin(sb.t, relayWait, "", func() (bool, string) {
		st, err := sb.status()
		if err != nil {
			return false, err.Error()
		}
		for _, r := range st.RelayServers {
			if r.Server == name && r.State == relay.StateConnected && r.ExtensionID != "" {
				id = r.ExtensionID
				return true, ""
			}
		}
		return false, "relay servers: " + relayJSON(st.RelayServers)
	})
	return id
}

// stop ends the bridge and its stdio server and fails the test if any of
// its processes outlives it.
func (sb *serverBridge) stop() {
	if sb.stopped {
		return
	}
	sb.stopped = true
	if sb.t.Failed() {
		if b, err := os.ReadFile(filepath.Join(sb.dir, "bb", "logs", "bridge.log")); err == nil {
			sb.t.Logf("--- server bridge log ---\n%s", tail(string(b), 120))
		}
		sb.t.Logf("--- server bridge output ---\n%s", tail(sb.out.String(), 60))
	}
	stopGroup(sb.serve)
	var left []int
	for deadline := time.Now().Add(stopWait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		left = pgrep("-f", sb.dir+"/")
		if sb.serve != nil && sb.serve.Process != nil {
			left = append(left, pgrep("-g", strconv.Itoa(sb.serve.Process.Pid))...)
		}
		if len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		sb.t.Errorf("processes of the server bridge outlived it (killed now): %v", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = os.RemoveAll(sb.dir)
}

// ---------------------------------------------------------------------------

// connectVia starts the real `browserbridge connect --proxy node --extension
// id` (a remote client, spec 001) under env and speaks MCP to it with the
// Go SDK. The world closes the session (which ends the process) before its
// leftover check.
func connectVia(t *testing.T, w *world, node *publicProxy, tok, extID, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	stderr := &testbrowser.SyncBuffer{}
	cmd := exec.Command(bins.Bridge, "connect", "--proxy", node.relay, "--token", tok, "--extension", extID)
	cmd.Env = w.env
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, opts).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		w.fatalWithLogs("MCP connect to `browserbridge connect` (%s): %v\nits stderr:\n%s", name, err, stderr.String())
	}
	w.mu.Lock()
	w.sessions = append(w.sessions, cs)
	w.mu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- browserbridge connect (%s) stderr ---\n%s", name, tail(stderr.String(), 60))
		}
	})
	return cs
}

// TestProxyClusterRelay: two proxy nodes, a and b, on one NATS. Alice's
// real bridge, Chromium, extension and host relay to node a; a remote
// client on node b lists her browser, connects, and drives it. Then a
// second bridge of hers relays server-everything to node b, and a client
// on node a calls it, with progress: traffic crosses both ways.
func TestProxyClusterRelay(t *testing.T) {
	start := time.Now()
	natsURL := startClusterNATS(t)
	secret := clusterSecret(t)
	a := startClusterNode(t, natsURL, "a", secret, "")
	b := startClusterNode(t, natsURL, "b", secret, "")
	waitPeers(t, map[string]*publicProxy{"a": a, "b": b})
	t.Logf("two nodes up and peered %v after start", time.Since(start).Round(time.Millisecond))

	w := startRelayedWorld(t, a, a.relay, "alice")
	browserID, _ := extensionIDs(t, w)
	t.Logf("alice's browser %s on node a %v after start", browserID, time.Since(start).Round(time.Millisecond))

	// Node b lists the browser node a holds; another user sees nothing.
	onB := dialLister(t, b, b.mint("alice", "mcp"))
	if info := onB.waitListed(browserID); info.Kind == relaywire.ExtensionKindServer {
		t.Errorf("node b lists alice's browser as %+v, want a browser", info)
	}
	var eve relaywire.ListExtensionsResult
	if err := json.Unmarshal(dialLister(t, b, b.mint("eve", "mcp")).call(relaywire.MethodListExtensions, nil), &eve); err != nil || len(eve.Extensions) != 0 {
		t.Errorf("eve's list_extensions on node b: %+v %v, want none", eve, err)
	}

	// A client on node b drives the browser on node a.
	cs := connectVia(t, w, b, b.mint("alice", "mcp"), browserID, "on-b", nil)
	c := &client{w: w, cs: cs, name: "on-b", remote: true}
	lctx, lcancel := context.WithTimeout(context.Background(), callWait)
	tools, err := cs.ListTools(lctx, nil)
	lcancel()
	if err != nil {
		t.Fatalf("tools/list through node b: %v", err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range spec004Tools {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list through node b lacks %s (offered: %s)", want, strings.Join(names, ", "))
		}
	}
	tab := c.newTab(t, w.pages.url("index.html"))
	prose := w.pages.url("prose.html")
	c.navigate(t, tab, prose)
	if got := c.tabOf(t, tab).URL; got != prose {
		t.Fatalf("after navigate through node b, the tab is at %q, want %q", got, prose)
	}
	if text := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab})); !strings.Contains(text, "The last paragraph of the prose page.") {
		t.Errorf("get_page_text through node b does not have the page's text:\n%s", clip(text, 500))
	}
	waitRemotePairs(t, b, a)
	t.Logf("browser on node a driven from node b %v after start", time.Since(start).Round(time.Millisecond))

	// The other way: a bridge relaying to node b, a client on node a.
	sb := startServerBridge(t, b.relay, b.mint("alice", "extension"))
	serverID := sb.waitServer(gatewayServer)
	onA := dialLister(t, a, a.mint("alice", "mcp"))
	if info := onA.waitListed(serverID); info.Kind != relaywire.ExtensionKindServer || info.Server != gatewayServer {
		t.Errorf("node a lists the server extension of node b as %+v, want kind %q, server %q", info, relaywire.ExtensionKindServer, gatewayServer)
	}
	var (
		mu       sync.Mutex
		progress []string
	)
	srv := connectVia(t, w, a, a.mint("alice", "mcp"), serverID, "on-a", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, fmt.Sprintf("%v:%g/%g", req.Params.ProgressToken, req.Params.Progress, req.Params.Total))
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	res, err := srv.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "across the cluster"}})
	if err != nil || res.IsError || testutil.Text(res) != "Echo: across the cluster" {
		t.Fatalf("echo through node a to node b's server: %v %s", err, describeResult(res))
	}
	params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 0.3, "steps": 3}}
	params.SetProgressToken("cluster-7")
	res, err = srv.CallTool(ctx, params)
	if err != nil || res.IsError || !strings.Contains(testutil.Text(res), "completed") {
		t.Fatalf("the long-running operation through node a to node b's server: %v %s", err, describeResult(res))
	}
	// The SDK client hands notifications to its handler on a goroutine of
	// their own, so they may come after CallTool returned: wait for them.
	testutil.WaitWithin(t, callWait, "", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		got := strings.Join(progress, " ")
		return got == "cluster-7:1/3 cluster-7:2/3 cluster-7:3/3", fmt.Sprintf("progress through node a from node b's server: %q, want three steps of token cluster-7", got)
	})
	waitRemotePairs(t, a, b)

	// On the wire, a call's progress comes before its result, in order,
	// across the nodes as on one: spec 001 on node a, read in order.
	onA.call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: serverID})
	raw, notes := onA.callNotes("tools/call", map[string]any{"name": "trigger-long-running-operation",
		"arguments": map[string]any{"duration": 0.3, "steps": 3}, "_meta": map[string]any{"progressToken": "wire-8"}})
	if !strings.Contains(string(raw), "completed") {
		t.Fatalf("the long-running operation over spec 001 on node a: %s", raw)
	}
	var steps []string
	for _, n := range notes {
		if n.Method != relaywire.MethodProgress {
			continue
		}
		var pp struct {
			Token    string  `json:"progressToken"`
			Progress float64 `json:"progress"`
			Total    float64 `json:"total"`
		}
		_ = json.Unmarshal(n.Params, &pp)
		steps = append(steps, fmt.Sprintf("%s:%g/%g", pp.Token, pp.Progress, pp.Total))
	}
	if got := strings.Join(steps, " "); got != "wire-8:1/3 wire-8:2/3 wire-8:3/3" {
		t.Errorf("progress before the result over spec 001 on node a: %q, want three steps of token wire-8", got)
	}

	waitRemotePairs(t, a, b)

	// Both clients close: their `browserbridge connect` processes end.
	w.closeSession(srv)
	w.closeSession(cs)
	t.Logf("TestProxyClusterRelay %v", time.Since(start).Round(time.Millisecond))
}

// ---------------------------------------------------------------------------
// A front for the cluster's public URL: what a load balancer is in a
// deployment. It sends each request to the node route picks, keeps the
// public Host (the only one the nodes answer), and counts what each node
// was sent.

type clusterFront struct {
	URL    string
	mu     sync.Mutex
	served map[string][]string // node → "METHOD path" it was sent
}

func startClusterFront(t *testing.T, route func(*http.Request) string) (*clusterFront, func(nodes map[string]*publicProxy)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &clusterFront{URL: "http://" + ln.Addr().String(), served: map[string][]string{}}
	var nodes map[string]*publicProxy
	ready := make(chan struct{})
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			<-ready
			name := route(r.In)
			target, _ := url.Parse(nodes[name].public)
			r.SetURL(target)
			r.Out.Host = r.In.Host
			f.mu.Lock()
			f.served[name] = append(f.served[name], r.In.Method+" "+r.In.URL.Path)
			f.mu.Unlock()
		},
		FlushInterval: -1, // SSE as it comes
	}
	// The body is read whole first: an HTTP/1.1 server stops a request's
	// body once the response has begun, and a node may begin an event
	// stream before the transport has sent the body's end, which would
	// then cut the stream.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
		if err != nil {
			http.Error(w, "the front could not read the request's body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	})
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return f, func(n map[string]*publicProxy) { nodes = n; close(ready) }
}

func (f *clusterFront) sent(node string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.served[node])
}

// TestProxyClusterHTTP: the proxy's public MCP endpoint on a cluster, one
// public URL in front of two nodes. Alice's bridge relays to node a, and
// `browserbridge pair` gets its code there; she types it on node b's
// sign-in page, and each step of the sign-in lands on the other node than
// the step before (the OAuth state and the codes are in JetStream). Her
// client's session begins on node b, then its requests alternate between
// the nodes (node a passes them to node b, which holds the session), and it
// drives her browser on node a.
func TestProxyClusterHTTP(t *testing.T) {
	start := time.Now()
	natsURL := startClusterNATS(t)
	secret := clusterSecret(t)
	var mcpRequests atomic.Int64
	route := func(r *http.Request) string {
		switch p := r.URL.Path; {
		case p == "/oauth/register", p == "/oauth/consent":
			return "a"
		case p == "/mcp" && r.Header.Get("Mcp-Session-Id") != "":
			// A load balancer that knows nothing of sessions.
			if mcpRequests.Add(1)%2 == 1 {
				return "a"
			}
			return "b"
		default: // the authorization request, the code, the token exchange, initialize
			return "b"
		}
	}
	front, serve := startClusterFront(t, route)
	a := startClusterNode(t, natsURL, "a", secret, front.URL)
	b := startClusterNode(t, natsURL, "b", secret, front.URL)
	serve(map[string]*publicProxy{"a": a, "b": b})
	waitPeers(t, map[string]*publicProxy{"a": a, "b": b})
	pub := &publicProxy{t: t, public: front.URL, secret: secret}

	w := startRelayedWorld(t, a, a.relay, "alice")
	browserID, _ := extensionIDs(t, w)
	t.Logf("alice's browser %s on node a %v after start", browserID, time.Since(start).Round(time.Millisecond))

	endpoint := front.URL + "/mcp"
	_, tok := signInWithCode(t, pub, endpoint, pair(t, w))
	for _, n := range []struct {
		node string
		want []string
	}{
		{"a", []string{"POST /oauth/register", "POST /oauth/consent"}},
		{"b", []string{"GET /oauth/authorize", "POST /oauth/signin", "POST /oauth/token"}},
	} {
		for _, req := range n.want {
			if !slices.Contains(front.sent(n.node), req) {
				t.Fatalf("the sign-in never sent %s to node %s (it sent %v)", req, n.node, front.sent(n.node))
			}
		}
	}
	t.Logf("signed in across the nodes %v after start", time.Since(start).Round(time.Millisecond))

	cs := connectBearer(t, w, endpoint, tok.Access, "claude-ai", nil)
	if !strings.HasPrefix(cs.ID(), "b.") {
		t.Errorf("the session initialized on node b has id %q, want it to begin with \"b.\"", cs.ID())
	}
	c := &client{w: w, cs: cs, name: "claude-ai", remote: true}
	if got := testutil.Text(c.call(t, "list_browsers", nil)); !strings.Contains(got, browserID) {
		t.Fatalf("list_browsers at the cluster's /mcp: %q, want alice's browser %s (on node a)", got, browserID)
	}
	tab := c.newTab(t, w.pages.url("index.html"))
	prose := w.pages.url("prose.html")
	c.navigate(t, tab, prose)
	if text := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab})); !strings.Contains(text, "The last paragraph of the prose page.") {
		t.Errorf("get_page_text at the cluster's /mcp does not have the page's text:\n%s", clip(text, 500))
	}
	// The session's requests went to both nodes, and all were answered.
	if !slices.Contains(front.sent("a"), "POST /mcp") || !slices.Contains(front.sent("b"), "POST /mcp") {
		t.Errorf("the session's requests did not reach both nodes: node a got %v, node b %v", front.sent("a"), front.sent("b"))
	}
	waitRemotePairs(t, b, a)
	w.closeSession(cs)
	noSecretsIn(t, a.out.String()+b.out.String(), map[string]string{"access token": tok.Access, "refresh token": tok.Refresh})
	t.Logf("TestProxyClusterHTTP %v", time.Since(start).Round(time.Millisecond))
}

// ---------------------------------------------------------------------------
// A TCP front for the bridges' WebSockets that sends each new connection to
// the first node of its list that takes it: a load balancer whose health
// check has taken a stopped node out.

type failoverFront struct {
	ln    net.Listener
	nodes []string // host:port, in order of preference
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
	got   map[string]int // node address → connections sent there
}

func startFailoverFront(t *testing.T, nodes ...*publicProxy) *failoverFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &failoverFront{ln: ln, got: map[string]int{}}
	for _, n := range nodes {
		f.nodes = append(f.nodes, strings.TrimPrefix(n.public, "http://"))
	}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *failoverFront) url() string { return "ws://" + f.ln.Addr().String() }

func (f *failoverFront) accept() {
	defer f.wg.Done()
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return
		}
		var out net.Conn
		for _, n := range f.nodes {
			if out, err = net.DialTimeout("tcp", n, 5*time.Second); err == nil {
				f.mu.Lock()
				f.got[n]++
				f.mu.Unlock()
				break
			}
		}
		if out == nil {
			_ = in.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, in, out)
		f.mu.Unlock()
		f.wg.Add(2)
		go func() { defer f.wg.Done(); _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { defer f.wg.Done(); _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

func (f *failoverFront) sentTo(p *publicProxy) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got[strings.TrimPrefix(p.public, "http://")]
}

// TestProxyClusterFailover: alice's bridge reaches the cluster through a
// load balancer that prefers node a; her remote client is on node b,
// driving her browser on node a. Node a stops (SIGTERM, as a rolling
// update does): the bridge reconnects through the balancer to node b, under
// the same extension id (node a took its presence with it), and the same
// client, still running, drives the browser again, now on its own node.
func TestProxyClusterFailover(t *testing.T) {
	start := time.Now()
	natsURL := startClusterNATS(t)
	secret := clusterSecret(t)
	a := startClusterNode(t, natsURL, "a", secret, "")
	b := startClusterNode(t, natsURL, "b", secret, "")
	waitPeers(t, map[string]*publicProxy{"a": a, "b": b})
	lb := startFailoverFront(t, a, b)

	w := startRelayedWorld(t, a, lb.url(), "alice")
	browserID, _ := extensionIDs(t, w)
	if lb.sentTo(a) == 0 {
		t.Fatalf("the balancer sent the bridge to node b first; the test needs node a")
	}
	dialLister(t, b, b.mint("alice", "mcp")).waitListed(browserID)
	cs := connectVia(t, w, b, b.mint("alice", "mcp"), browserID, "on-b", nil)
	c := &client{w: w, cs: cs, name: "on-b", remote: true}
	tab := c.newTab(t, w.pages.url("index.html"))
	waitRemotePairs(t, b, a)
	t.Logf("browser on node a driven from node b %v after start", time.Since(start).Round(time.Millisecond))

	a.stop()
	testutil.WaitWithin(t, relayWait, "", func() (bool, string) {
		st, err := w.status()
		if err != nil {
			return false, err.Error()
		}
		for _, r := range st.Relay {
			if r.State == relay.StateConnected && lb.sentTo(b) > 0 {
				return true, ""
			}
		}
		return false, "relay status after node a stopped: " + relayJSON(st.Relay)
	})
	if again, _ := extensionIDs(t, w); again != browserID {
		t.Errorf("on node b the browser has id %s, on node a it had %s: a client asking for it by id loses it", again, browserID)
	}
	// A graceful stop takes the node's heartbeat with it: node b sees it
	// gone without waiting out the presence TTL.
	testutil.WaitWithin(t, clusterWait, "", func() (bool, string) {
		h, err := nodeHealth(b)
		if err != nil {
			return false, err.Error()
		}
		return !slices.ContainsFunc(h.Peers, func(pr clusterPeer) bool { return pr.Node == "a" && pr.Alive }),
			fmt.Sprintf("node b still sees node a alive: %+v", h.Peers)
	})
	t.Logf("bridge on node b %v after start", time.Since(start).Round(time.Millisecond))

	// The same `browserbridge connect` finds the browser again on its own
	// node (it was told `disconnected`, and connects again by itself).
	prose := w.pages.url("prose.html")
	testutil.WaitWithin(t, callWait, "", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.try(ctx, "navigate", map[string]any{"url": prose, "tabId": tab})
		if err != nil {
			return false, "navigate after the failover: " + err.Error()
		}
		return true, ""
	})
	c.waitURL(t, tab, prose)
	if text := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab})); !strings.Contains(text, "The last paragraph of the prose page.") {
		t.Errorf("get_page_text after the failover does not have the page's text:\n%s", clip(text, 500))
	}
	w.closeSession(cs)
	t.Logf("TestProxyClusterFailover %v", time.Since(start).Round(time.Millisecond))
}
