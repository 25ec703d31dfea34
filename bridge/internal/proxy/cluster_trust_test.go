package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/natsembed"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// The cluster against an attacker on its NATS (issue 26, docs/proxy-cluster.md
// "Trust"). Each test plays someone who reaches the bus with valid NATS
// credentials (the test NATS asks for none) but without the deployment's
// secret, and who has sniffed the subjects in use (the worst case: the
// user's keyed hash is computed here with the real keyring, as if read off
// the wire). Another deployment's keyring stands for a forger that seals
// with a secret of its own.

var otherDeployment = []byte("another deployment's secret, also 32+ bytes")

// attacker is an anonymous NATS client of the test's bus.
func attacker(tb testing.TB, url string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url, nats.Name("attacker"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// rejected is node tp's count of what did not open, by what and reason.
func rejected(tb testing.TB, tp *testProxy, what, reason string) float64 {
	tb.Helper()
	return metric(tb, tp, fmt.Sprintf(`browserbridge_proxy_cluster_rejected_total{what=%q,reason=%q}`, what, reason))
}

// waitRejected waits until tp has counted more than before.
func waitRejected(tb testing.TB, tp *testProxy, what, reason string, before float64) {
	tb.Helper()
	testutil.WaitFor(tb, "a rejection: "+what+" ("+reason+")", func() bool { return rejected(tb, tp, what, reason) > before })
}

// noneSeen fails if the extension received anything but the sentinel
// request, which the test sends after the forged ones on the same path:
// by the time it arrives, the forged ones were handled.
func noneSeenBefore(tb testing.TB, e *fakeExt, sentinel string) {
	tb.Helper()
	var m relaywire.Message
	json.Unmarshal(nextSeen(tb, e), &m)
	if m.Method != sentinel {
		tb.Fatalf("the extension received %q before the sentinel %q", m.Method, sentinel)
	}
}

// TestClusterAttackerDrivesNoBrowser: an attacker asks alice's extension's
// node to attach it (plain, and sealed with another secret) and publishes
// calls on the connection subject of a live cross-node connection (plain,
// foreign-sealed, and a sniffed real message replayed, tampered, cut and
// moved): the browser runs none of them, the attacker hears nothing back,
// every one is counted, and the real client's calls go on.
func TestClusterAttackerDrivesNoBrowser(t *testing.T) {
	url := startNATS(t)
	a, b, ext, c := acrossNodes(t, url)
	conn := connectTo(t, c, ext.id)

	bad := attacker(t, url)
	sniffed := make(chan *nats.Msg, 64)
	sub, err := bad.ChanSubscribe("browserbridge.n.a.>", sniffed)
	if err != nil {
		t.Fatal(err)
	}
	bad.Flush()
	uk := testRing().UserKey("alice")
	attach := "browserbridge.n.a.u." + uk + ".attach"
	toExt := "browserbridge.n.a.u." + uk + ".x." + conn
	foreign, err := clusterseal.New([][]byte{otherDeployment})
	if err != nil {
		t.Fatal(err)
	}

	// Attaching: no answer to either request.
	before := rejected(t, a, "message", "malformed")
	req, _ := json.Marshal(attachRequest{User: "alice", Ext: ext.id, Conn: "conn-attacker", Client: "mcp-attacker", Node: "b"})
	if msg, err := bad.Request(attach, req, time.Second); err == nil {
		t.Fatalf("node a answered a plain attach request: %s", msg.Data)
	}
	if msg, err := bad.Request(attach, foreign.SealMessage(attach, []byte{msgOpNone, 0, 0}, req), time.Second); err == nil {
		t.Fatalf("node a answered an attach request sealed with another secret: %s", msg.Data)
	}
	waitRejected(t, a, "message", "malformed", before)
	if v := rejected(t, a, "message", "unknown_key"); v < 1 {
		t.Errorf("the foreign attach request was not counted: %v", v)
	}

	// A real call, sniffed on its way to node a.
	if r := c.call(1, "real", map[string]string{"q": "first"}); r.Error != nil {
		t.Fatalf("the real call: %s", r.Error)
	}
	noneSeenBefore(t, ext, "real")
	var real *nats.Msg
	for real == nil {
		select {
		case m := <-sniffed:
			if m.Subject == toExt {
				real = m
			}
		case <-time.After(10 * time.Second):
			t.Fatal("sniffed no message on the connection's subject")
		}
	}
	sub.Unsubscribe()
	if bytes.Contains(real.Data, []byte("first")) || bytes.Contains(real.Data, []byte("real")) {
		t.Fatalf("the sniffed call is readable: %q", real.Data)
	}
	call := `{"jsonrpc":"2.0","id":"forged","method":"tools/call","params":{"name":"javascript_tool"}}`
	tampered := bytes.Clone(real.Data)
	tampered[len(tampered)-3] ^= 1
	counts := map[string]float64{}
	for _, r := range []string{"malformed", "unknown_key", "forged", "replayed"} {
		counts[r] = rejected(t, a, "message", r)
	}
	for _, forged := range []struct {
		subject string
		data    []byte
	}{
		{toExt, []byte(call)}, // malformed
		{toExt, foreign.SealMessage(toExt, nil, []byte(call))}, // unknown_key
		{toExt, tampered},                                       // forged
		{toExt, real.Data[:len(real.Data)-1]},                   // forged (cut)
		{toExt, real.Data[:20]},                                 // malformed (cut short)
		{toExt, real.Data},                                      // replayed
		{"browserbridge.n.a.u." + uk + ".x.conn-1", real.Data},  // forged (moved)
		{attach, real.Data},                                     // forged (moved)
		{"browserbridge.n.b.u." + uk + ".c." + conn, real.Data}, // forged (moved to the client's node)
	} {
		if err := bad.Publish(forged.subject, forged.data); err != nil {
			t.Fatal(err)
		}
	}
	bad.Flush()
	// The real client's next call arrives, and nothing before it.
	if r := c.call(2, "sentinel", nil); r.Error != nil {
		t.Fatalf("the real client's call after the attack: %s", r.Error)
	}
	noneSeenBefore(t, ext, "sentinel")
	want := map[string]float64{"malformed": 2, "unknown_key": 1, "forged": 3, "replayed": 1}
	for reason, n := range want {
		testutil.WaitFor(t, "the rejections: "+reason+"", func() bool { return rejected(t, a, "message", reason) >= counts[reason]+n })
	}
	waitRejected(t, b, "message", "forged", 0) // the one moved to node b
}

// TestClusterAttackerMintsNoToken: an attacker writes an access token and
// its sign-in family into the OAuth buckets (in the store's own format,
// unsealed; sealed with another secret; and a real entry's sealed value
// moved under the made-up token's key): the made-up token works on no
// node, the real one still does, and each write is counted.
func TestClusterAttackerMintsNoToken(t *testing.T) {
	lb, nodes := clusterHTTPNodes(t, 2)
	startBrowser(t, nodes[0], "alice", "Chrome")
	p := passwordPerson()
	resource := lb.URL + "/mcp"
	realTok := accessToken(t, p, resource)

	ctx := context.Background()
	js, err := jetstream.New(attacker(t, nodes[0].natsURL))
	if err != nil {
		t.Fatal(err)
	}
	access, err := js.KeyValue(ctx, "bbtest_oauth_access")
	if err != nil {
		t.Fatal(err)
	}
	families, err := js.KeyValue(ctx, "bbtest_oauth_families")
	if err != nil {
		t.Fatal(err)
	}
	madeUp := "made-up-token-" + strings.Repeat("x", 30)
	key := hashHex(madeUp)
	exp := time.Now().Add(time.Hour)
	// The store's envelope: version 1, expiry (0: none), then the JSON.
	envelope := func(v any) []byte {
		b, _ := json.Marshal(v)
		return append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0}, b...)
	}
	entry := envelope(map[string]any{"family_id": "fam-attacker", "client_id": "c", "subject": map[string]string{"id": "password:owner", "method": "password"},
		"resource": resource, "scope": "mcp", "expires_at": exp})
	family := envelope(map[string]any{"id": "fam-attacker", "client_id": "c", "subject": map[string]string{"id": "password:owner", "method": "password"},
		"resource": resource, "created_at": time.Now(), "current": "x"})
	foreign, _ := clusterseal.New([][]byte{otherDeployment})
	realEntry, err := access.Get(ctx, hashHex(realTok))
	if err != nil {
		t.Fatalf("the real token's entry: %v", err)
	}
	for _, w := range []struct {
		name          string
		entry, family []byte
		reason        string
	}{
		// The store's envelope begins with 1, the sealed form's version:
		// its zero bytes after it name no key of the ring.
		{"unsealed", entry, family, "unknown_key"},
		{"sealed with another secret", foreign.SealValue("bbtest_oauth_access/"+key, entry), foreign.SealValue("bbtest_oauth_families/fam-attacker", family), "unknown_key"},
		{"a real entry moved", realEntry.Value(), nil, "forged"},
	} {
		t.Run(w.name, func(t *testing.T) {
			before := rejected(t, nodes[1], "oauth", w.reason)
			if _, err := access.Put(ctx, key, w.entry); err != nil {
				t.Fatal(err)
			}
			if w.family != nil {
				if _, err := families.Put(ctx, "fam-attacker", w.family); err != nil {
					t.Fatal(err)
				}
			}
			for i, n := range nodes {
				if status, _, body := nodePost(t, n, lb, "/mcp", madeUp, initBody); status != http.StatusUnauthorized {
					t.Fatalf("node %d took the made-up token: %d %s", i, status, body)
				}
			}
			if v := rejected(t, nodes[1], "oauth", w.reason); v <= before {
				t.Errorf("node b did not count the %s entry (%s): %v", w.name, w.reason, v)
			}
		})
	}
	for i, n := range nodes {
		if status, _, body := nodePost(t, n, lb, "/mcp", realTok, initBody); status != http.StatusOK {
			t.Fatalf("node %d refused the real token after the attack: %d %s", i, status, body)
		}
	}
}

// TestClusterAttackerStealsNoSession: an attacker rewrites the session's
// node's heartbeat with its own address (plain, foreign-sealed, and a real
// heartbeat of the node moved under another node's key): the node that
// gets the session's request still passes it to the real node, the
// attacker's address sees no request (and so no bearer token), and a
// request marked forwarded without a node's proof is refused.
func TestClusterAttackerStealsNoSession(t *testing.T) {
	lb, nodes := clusterHTTPNodes(t, 2)
	startBrowser(t, nodes[0], "alice", "Chrome")
	p := passwordPerson()
	tok := accessToken(t, p, lb.URL+"/mcp")
	var stolen atomic.Int64
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		http.Error(w, "attacker", http.StatusTeapot)
	}))
	defer trap.Close()

	// A session made on node b directly.
	status, h, body := nodePost(t, nodes[1], lb, "/mcp", tok, initBody)
	sid := h.Get(mcphttp.HeaderSessionID)
	if status != http.StatusOK || !strings.HasPrefix(sid, "nodeb.") {
		t.Fatalf("initialize on node b: %d %q %s", status, sid, body)
	}
	nodePost(t, nodes[1], lb, "/mcp", tok, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, mcphttp.HeaderSessionID, sid, "MCP-Protocol-Version", "2025-11-25")

	ctx := context.Background()
	js, _ := jetstream.New(attacker(t, nodes[0].natsURL))
	kvN, err := js.KeyValue(ctx, "browserbridge_nodes")
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := clusterseal.New([][]byte{otherDeployment})
	hb, _ := json.Marshal(nodeInfo{Node: "nodeb", Started: time.Now(), URL: trap.URL, Links: "x"})
	realA, err := kvN.Get(ctx, "nodea")
	if err != nil {
		t.Fatal(err)
	}
	before := rejected(t, nodes[0], "heartbeat", "forged")
	for i, forged := range [][]byte{hb, foreign.SealValue("browserbridge_nodes/nodeb", hb), realA.Value()} {
		if _, err := kvN.Put(ctx, "nodeb", forged); err != nil {
			t.Fatal(err)
		}
		// The next request of the session reaches node a, which passes
		// it on.
		status, _, body := nodePost(t, nodes[0], lb, "/mcp", tok, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i+2),
			mcphttp.HeaderSessionID, sid, "MCP-Protocol-Version", "2025-11-25")
		if status != http.StatusOK || !strings.Contains(body, "list_browsers") {
			t.Fatalf("forged heartbeat %d: the session's request through node a: %d %s", i, status, body)
		}
	}
	if n := stolen.Load(); n != 0 {
		t.Fatalf("the attacker's address received %d of the session's requests", n)
	}
	waitRejected(t, nodes[0], "heartbeat", "forged", before)

	// Straight to node b, posing as node a: refused without a proof, and
	// with a proof of another deployment, or of another body.
	for _, proof := range []string{"", foreign.ForwardProof("nodea", http.MethodPost, "/mcp", []byte(`{}`)),
		testRing().ForwardProof("nodea", http.MethodPost, "/mcp", []byte(`{"other":"body"}`))} {
		status, _, body := nodePost(t, nodes[1], lb, "/mcp", tok, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
			mcphttp.HeaderSessionID, sid, "MCP-Protocol-Version", "2025-11-25", hdrForwardedBy, "nodea", hdrForwardProof, proof)
		if status != http.StatusForbidden || !strings.Contains(body, "no valid proof") {
			t.Fatalf("a request posing as forwarded (proof %q): %d %s", proof, status, body)
		}
	}
}

// TestClusterAttackerReadsNothing: everything on the bus while browsers
// connect, a client calls one across nodes and a pairing code is issued
// and redeemed, read by an attacker subscribed to every subject: no user
// name, no extension name, no call argument or result, no code.
func TestClusterAttackerReadsNothing(t *testing.T) {
	url := startNATS(t)
	bad := attacker(t, url)
	var mu sync.Mutex
	var seen []*nats.Msg
	if _, err := bad.Subscribe(">", func(m *nats.Msg) { mu.Lock(); seen = append(seen, m); mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	bad.Flush()
	const user, browser, argument = "alice@example.com", "Chrome of Alice", "the secret argument text"
	a := joinCluster(t, url, "a", Options{}, testTTL)
	b := joinCluster(t, url, "b", Options{}, testTTL)
	ext := a.extension(t, user, browser).ready(t)
	c := b.mcp(t, user)
	waitListed(t, c, browserInfo(ext.id, browser))
	connectTo(t, c, ext.id)
	if r := c.call(1, "tools/call", map[string]any{"name": "type", "arguments": map[string]string{"text": argument}}); r.Error != nil || !strings.Contains(string(r.Result), "secret argument") {
		t.Fatalf("the call: %s %s", r.Result, r.Error)
	}
	ps := newPairingShared(&ClusterOptions{Keyring: testRing(), Conn: natsConn(t, url), Prefix: "browserbridge"}, "pairing")
	code, _, err := ps.issue(context.Background(), user, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := ps.redeem(context.Background(), code, time.Now()); err != nil || got != user {
		t.Fatalf("redeem: %q %v", got, err)
	}
	bad.Flush()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 10 {
		t.Fatalf("the attacker saw only %d messages: the test saw no traffic", len(seen))
	}
	secrets := []string{user, "alice", browser, argument, "secret argument", strings.ReplaceAll(code, "-", ""), ext.id}
	for _, m := range seen {
		text := m.Subject + " " + string(m.Data)
		for _, h := range m.Header {
			text += " " + strings.Join(h, " ")
		}
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Fatalf("the attacker read %q on %s: %q", s, m.Subject, m.Data)
			}
		}
	}
	t.Logf("the attacker saw %d messages and read none of them", len(seen))
}

// TestClusterForgedValuesDropped: values the attacker writes into the
// presence bucket (an extension of alice's that does not exist; a real
// entry tampered, cut, moved to another key, or written back from long
// ago) are never listed, each is counted, and an id claim that does not
// open is taken over: the cluster keeps serving.
func TestClusterForgedValuesDropped(t *testing.T) {
	url := startNATS(t)
	a, b, ext, c := acrossNodes(t, url)

	ctx := context.Background()
	js, _ := jetstream.New(attacker(t, url))
	kvP, err := js.KeyValue(ctx, "browserbridge_presence")
	if err != nil {
		t.Fatal(err)
	}
	ring := testRing()
	realKey := "a." + ring.UserKey("alice") + "." + ring.NameKey(ext.id)
	real, err := kvP.Get(ctx, realKey)
	if err != nil {
		t.Fatal(err)
	}
	fake, _ := json.Marshal(presenceEntry{User: "alice", ID: "ext-00000000-0000-8000-8000-000000000001", Name: "Attacker's", Kind: "browser", Node: "b", Since: time.Now()})
	tampered := bytes.Clone(real.Value())
	tampered[len(tampered)-5] ^= 1
	old := testRing()
	old.Now = func() time.Time { return time.Now().Add(-10 * time.Minute) }
	otherKey := "b." + ring.UserKey("alice") + "." + ring.NameKey("ext-other")
	for _, w := range []struct {
		key    string
		value  []byte
		reason string
	}{
		{otherKey, fake, "malformed"},
		{otherKey, tampered, "forged"},
		{otherKey, real.Value(), "forged"}, // moved
		{otherKey, real.Value()[:8], "malformed"},
		{otherKey, old.SealValue("browserbridge_presence/"+otherKey, fake), "replayed"},
	} {
		before := rejected(t, b, "presence", w.reason)
		if _, err := kvP.Put(ctx, w.key, w.value); err != nil {
			t.Fatal(err)
		}
		waitRejected(t, b, "presence", w.reason, before)
	}
	// Heartbeats: node b's tampered, cut, node a's moved under b's key,
	// and one of b's from long ago written back. Node a drops each, and
	// still takes b for alive.
	kvN, err := js.KeyValue(ctx, "browserbridge_nodes")
	if err != nil {
		t.Fatal(err)
	}
	hbB, err := kvN.Get(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	hbA, err := kvN.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	oldBeat, _ := json.Marshal(nodeInfo{Node: "b", Started: time.Now(), Links: "x"})
	tamperedBeat := bytes.Clone(hbB.Value())
	tamperedBeat[len(tamperedBeat)-2] ^= 1
	for _, w := range []struct {
		value  []byte
		reason string
	}{
		{tamperedBeat, "forged"},
		{hbB.Value()[:8], "malformed"},
		{hbA.Value(), "forged"},
		{old.SealValue("browserbridge_nodes/b", oldBeat), "replayed"},
	} {
		before := rejected(t, a, "heartbeat", w.reason)
		if _, err := kvN.Put(ctx, "b", w.value); err != nil {
			t.Fatal(err)
		}
		waitRejected(t, a, "heartbeat", w.reason, before)
	}
	if !slices.Contains(a.srv.cluster.alivePeers(), "b") {
		t.Fatalf("node a lost node b to forged heartbeats: %v", a.srv.cluster.alivePeers())
	}

	// Still exactly the one real browser, and calls reach it.
	waitListed(t, c, browserInfo(ext.id, "Chrome"))
	connectTo(t, c, ext.id)
	if r := c.call(1, "after", nil); r.Error != nil {
		t.Fatalf("a call after the forged values: %s", r.Error)
	}

	// A forged claim on the id a new browser would take: taken over.
	edge := stableID(relaywire.PrefixExtension, "alice", "Edge")
	claim := claimPrefix + ring.UserKey("alice") + "." + ring.NameKey(edge)
	before := rejected(t, a, "claim", "malformed")
	if _, err := kvP.Put(ctx, claim, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if e := a.extension(t, "alice", "Edge").ready(t); e.id != edge {
		t.Fatalf("the browser behind a forged claim got %s, not its own id %s", e.id, edge)
	}
	if v := rejected(t, a, "claim", "malformed"); v <= before {
		t.Errorf("the forged claim was not counted: %v", v)
	}
}

// TestClusterEmbeddedNATSRefusesStrangers: an embedded NATS with the
// deployment's derived user refuses a client without it, and with another
// deployment's; the nodes on it work.
func TestClusterEmbeddedNATSRefusesStrangers(t *testing.T) {
	ring := testRing()
	srv, err := natsembed.Start(natsembed.Options{Listen: "127.0.0.1:0", StoreDir: t.TempDir(),
		Auth: &natsembed.Auth{Check: ring.CheckNATSUser, Current: ring.NATSUser}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	foreign, _ := clusterseal.New([][]byte{otherDeployment})
	fu, fp := foreign.NATSUser()
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo(fu, fp)}} {
		if nc, err := nats.Connect(srv.ClientURL(), opts...); err == nil {
			nc.Close()
			t.Fatal("a stranger connected to the embedded NATS")
		}
	}
	u, pw := ring.NATSUser()
	url := strings.Replace(srv.ClientURL(), "nats://", "nats://"+u+":"+pw+"@", 1)
	_, _, ext, c := acrossNodes(t, url)
	connectTo(t, c, ext.id)
	if r := c.call(1, "x", nil); r.Error != nil {
		t.Fatal(r.Error)
	}
}

// hashHex is the OAuth store's key of a token: the hex SHA-256.
func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// nodePost is rawPost straight to one node, under the public host (the
// load balancer's) that the nodes serve.
func nodePost(tb testing.TB, n *testProxy, lb *httptest.Server, path, tok, body string, header ...string) (int, http.Header, string) {
	tb.Helper()
	return rawPostAs(tb, n.hs.URL+path, strings.TrimPrefix(lb.URL, "http://"), tok, body, header...)
}

// TestClusterRotation: three nodes roll to a new secret one at a time, in
// the three steps docs/proxy-cluster.md gives (add the new one second, put
// it first, drop the old), with calls flowing between every pair of nodes
// all along and a new connection across nodes made after every roll:
// every call is answered, and no node drops anything it cannot open.
func TestClusterRotation(t *testing.T) {
	url := startNATS(t)
	oldSecret, newSecret := []byte(testSecret), []byte("the new deployment secret, 32 bytes or more")
	names := []string{"a", "b", "c"}
	var nodes []*testProxy
	var rings []*clusterseal.Keyring
	for _, name := range names {
		ring := testRing()
		rings = append(rings, ring)
		// Rates off: the clients call as fast as the nodes answer, and a
		// refusal by a rate limit is not what this test counts.
		nodes = append(nodes, newTestProxy(t, Options{ConnRate: -1, UserRate: -1,
			Cluster: &ClusterOptions{Keyring: ring, Conn: natsConn(t, url), Node: name, PresenceTTL: testTTL}}))
	}
	exts := make([]*fakeExt, 3)
	for i, n := range nodes {
		exts[i] = n.extension(t, "alice", "Chrome "+names[i]).ready(t)
	}
	// Client on node i calls the extension on node i+1.
	var calls, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range nodes {
		c := n.mcp(t, "alice")
		ext := exts[(i+1)%3]
		waitListed(t, c, browserInfo(exts[0].id, "Chrome a"), browserInfo(exts[1].id, "Chrome b"), browserInfo(exts[2].id, "Chrome c"))
		connectTo(t, c, ext.id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := 0; ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				if r := c.call(id, "flow", nil); r.Error != nil {
					failed.Add(1)
					t.Errorf("client of node %s: call %d: %s", names[i], id, r.Error)
				}
				calls.Add(1)
			}
		}()
	}
	for _, e := range exts {
		go func() {
			for range e.seen { // the record of requests: not needed here
			}
		}()
	}
	flowing := func(why string) {
		t.Helper()
		from := calls.Load()
		testutil.WaitFor(t, "30 more calls", func() bool { return calls.Load() >= from+30 })
		// A new connection across nodes, made under the keys of now.
		for i, n := range nodes {
			c := n.mcp(t, "alice")
			connectTo(t, c, exts[(i+2)%3].id)
			if r := c.call("new", "fresh", nil); r.Error != nil {
				t.Fatalf("%s: a new connection from node %s: %s", why, names[i], r.Error)
			}
		}
	}
	flowing("before the rotation")
	// A browser that connects before the rotation and leaves after it:
	// its presence entry and id claim were written under keys of the old
	// secret, and must go all the same.
	leaver := nodes[0].extension(t, "alice", "Leaver").ready(t)
	watch := nodes[1].mcp(t, "alice")
	all := []relaywire.ExtensionInfo{browserInfo(exts[0].id, "Chrome a"), browserInfo(exts[1].id, "Chrome b"), browserInfo(exts[2].id, "Chrome c")}
	waitListed(t, watch, append(all, browserInfo(leaver.id, "Leaver"))...)
	for _, step := range []struct {
		name    string
		secrets [][]byte
	}{
		{"the new secret added second", [][]byte{oldSecret, newSecret}},
		{"the new secret put first", [][]byte{newSecret, oldSecret}},
		{"the old secret dropped", [][]byte{newSecret}},
	} {
		for i, ring := range rings {
			if err := ring.Reload(step.secrets); err != nil {
				t.Fatal(err)
			}
			flowing(fmt.Sprintf("%s, node %s rolled", step.name, names[i]))
		}
	}
	leaver.ws.Close()
	waitListed(t, watch, all...)
	// Its id claim went with it: back on another node, it takes its id again.
	if back := nodes[2].extension(t, "alice", "Leaver").ready(t); back.id != leaver.id {
		t.Errorf("the browser back after the rotation got %s, not its id %s: its claim was left behind", back.id, leaver.id)
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed during the rotation", failed.Load(), calls.Load())
	}
	for i, n := range nodes {
		for _, what := range []string{"message", "attach_reply", "presence", "heartbeat", "claim"} {
			for _, reason := range []string{"malformed", "unknown_key", "forged", "stale", "replayed"} {
				if v := rejected(t, n, what, reason); v != 0 {
					t.Errorf("node %s dropped %v %s (%s) during the rotation", names[i], v, what, reason)
				}
			}
		}
	}
	t.Logf("%d calls across nodes during the rotation, none lost", calls.Load())
}

// acrossNodes starts nodes a and b on the NATS at url, alice's browser
// "Chrome" on a and a client of alice's on b that lists it.
func acrossNodes(tb testing.TB, url string) (a, b *testProxy, ext *fakeExt, c *tclient) {
	tb.Helper()
	a = joinCluster(tb, url, "a", Options{}, testTTL)
	b = joinCluster(tb, url, "b", Options{}, testTTL)
	ext = a.extension(tb, "alice", "Chrome").ready(tb)
	c = b.mcp(tb, "alice")
	waitListed(tb, c, browserInfo(ext.id, "Chrome"))
	return a, b, ext, c
}
