package clustertest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// clusterReplicas is the JetStream replica count of the buckets on the
// tests' three NATS servers. One copy, not three: what threatens these
// tests is a starved machine, not a lost NATS server. Under the load test
// a key-value put (a heartbeat) took 1-2 s with three copies (each write
// waits for a quorum over the routes the traffic also uses) and 0.3-0.5 s
// with one, on this 2-core machine under -race and other jobs; heartbeats
// later than the presence TTL make peers take a live node for dead. The
// one test that takes NATS down (TestClusterNATSRestart) stops all three
// servers, which no replica count survives, and the buckets are in memory:
// the nodes write them again either way.
const clusterReplicas = 1

// loadTTL is the presence TTL of the load test: the default. Heartbeats
// arrived up to 6 s apart under this load on a starved machine, which once
// made nodes take live peers for dead; a node now does so only while its
// own heartbeats keep coming back (a slow bus delays all of them), and the
// load runs at the default TTL to hold it to that.
const loadTTL = 5 * time.Second

// TestClusterLoad: three nodes, each on its own server of a three-server
// NATS cluster; each user's extensions on one node, its clients on all
// three (some on the extensions' node, most elsewhere); 100 clients whose
// ids collide (each counts from 1, as numbers, as strings, or both at
// once), several calls in flight each. Every call must come back answered,
// to its caller, by the extension its caller connected to; no user may
// see or reach another's extensions.
func TestClusterLoad(t *testing.T) {
	const (
		users         = 20
		extsPerUser   = 2
		clientsByUser = 5 // 100 clients
		window        = 5 // calls in flight per client
	)
	total := 50000
	if testing.Short() {
		total = 5000
	}
	perClient := total / (users * clientsByUser)

	keys := testKeys(t)
	ns := startNATS(t, 3)
	var nodes []*node
	for i, s := range ns {
		nodes = append(nodes, startNode(t, keys, fmt.Sprintf("node%d", i+1), clusterReplicas, loadTTL, s.ClientURL()))
	}
	waitMesh(t, nodes[0].health, nodes[1].health, nodes[2].health)

	// Each user's extensions connect to one node, user u's to node u%3.
	type userSet struct {
		name    string
		exts    []*fakeExtension
		ids     []string
		allowed map[string]bool
	}
	us := make([]*userSet, users)
	for u := range us {
		set := &userSet{name: fmt.Sprintf("user-%02d", u), allowed: map[string]bool{}}
		home := nodes[u%3]
		for k := range extsPerUser {
			e := dialExtension(t, keys, home.ws, home.name, set.name, fmt.Sprintf("Chrome %d", k))
			set.exts = append(set.exts, e)
			set.ids = append(set.ids, e.id)
			set.allowed[e.id] = true
		}
		us[u] = set
	}

	// Client k of user u is on node (u+k)%3: k = 0 and 3 share the
	// extensions' node, the others cross to it.
	var lcs []*loadClient
	for u, set := range us {
		for k := range clientsByUser {
			n := nodes[(u+k)%3]
			ext := set.exts[k%extsPerUser]
			c := dialClient(t, n.ws, fmt.Sprintf("%s/c%d", set.name, k))
			c.handshake(t, mint(t, keys, set.name, token.KindMCP))
			lcs = append(lcs, &loadClient{client: c, user: set.name, ext: ext.id, node: n.name, extNode: ext.node,
				style: idStyle((u*clientsByUser + k) % 3)})
		}
	}
	// Presence travels asynchronously: every client polls until it sees all
	// of its user's extensions, and must never see another user's.
	var wg sync.WaitGroup
	for i, lc := range lcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			set := us[i/clientsByUser]
			lc.waitListed(t, set.ids, set.allowed)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Another user's extension cannot be connected to, on its node or
	// across nodes, even with its id in hand.
	for i, lc := range lcs[:clientsByUser] {
		other := us[len(us)-1-i%2].exts[0]
		if _, code, msg := lc.connect(t, other.id); code == 0 || !strings.Contains(msg, "not found") {
			t.Fatalf("client %s (node %s) connecting to %s's extension %s on %s: %d %q; want it not found",
				lc.name, lc.node, other.user, other.id, other.node, code, msg)
		}
	}
	for _, lc := range lcs {
		conn, code, msg := lc.connect(t, lc.ext)
		if code != 0 {
			t.Fatalf("client %s: connect to %s: %d %s", lc.name, lc.ext, code, msg)
		}
		lc.conn = conn
	}

	tl := newTally()
	start := time.Now()
	for _, lc := range lcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc.run(perClient, window, 0, nil, strict(tl))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	ok, failed, crossed, lost, other := tl.snapshot()
	made := 0
	for _, lc := range lcs {
		made += int(lc.calls.Load())
		if s := lc.strayReplies(); len(s) > 0 {
			t.Errorf("client %s received %d replies to no call of its own: %s", lc.name, len(s), firstFew(s))
		}
	}
	if len(crossed) > 0 {
		t.Errorf("%d crossed replies:\n  %s", len(crossed), firstFew(crossed))
	}
	if len(lost) > 0 {
		t.Errorf("%d calls lost (no reply within %v):\n  %s", len(lost), deadlockGuard, firstFew(lost))
	}
	if len(other) > 0 {
		t.Errorf("%d calls failed (codes %v):\n  %s", len(other), failed, firstFew(other))
	}
	if made != users*clientsByUser*perClient || ok != made {
		t.Errorf("%d calls made, %d answered correctly; want %d", made, ok, users*clientsByUser*perClient)
	}
	// Each request reached an extension once: the extensions answered as
	// many as were made (an extension counts a request after answering
	// it, so the count may trail the last replies by a moment).
	served := func() int64 {
		var n int64
		for _, set := range us {
			for _, e := range set.exts {
				n += e.served.Load()
			}
		}
		return n
	}
	testutil.WaitWithin(t, deadlockGuard, "the extensions' counts", func() (bool, string) {
		return served() >= int64(made), fmt.Sprintf("%d served, %d made", served(), made)
	})
	if n := served(); n != int64(made) {
		t.Errorf("the extensions answered %d requests; %d were made: some were delivered twice", n, made)
	}
	// Still nobody sees another user's extensions.
	for i, lc := range lcs {
		set := us[i/clientsByUser]
		for _, e := range lc.list(t) {
			if !set.allowed[e.ID] {
				t.Errorf("client %s sees %s (%s)", lc.name, e.ID, e.Name)
			}
		}
	}

	// Throughput: overall, and by kind of pair (the clients of one kind
	// ran beside the others, so these share the machine).
	t.Logf("%d calls by %d clients (%d in flight each) in %v: %.0f calls/s", made, len(lcs), window, elapsed.Round(time.Millisecond), float64(made)/elapsed.Seconds())
	for _, same := range []bool{true, false} {
		calls, last := 0, start
		var times []time.Duration
		for _, lc := range lcs {
			if (lc.node == lc.extNode) == same {
				calls += int(lc.calls.Load())
				times = append(times, lc.finished.Sub(start))
				if lc.finished.After(last) {
					last = lc.finished
				}
			}
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		kind := "cross-node"
		if same {
			kind = "same-node"
		}
		t.Logf("%s: %d clients, %d calls, last done after %v (median client %v): %.0f calls/s",
			kind, len(times), calls, last.Sub(start).Round(time.Millisecond), times[len(times)/2].Round(time.Millisecond), float64(calls)/last.Sub(start).Seconds())
	}
	// Each node counts the pairs it holds as they are.
	bases := map[string]string{}
	for _, n := range nodes {
		bases[n.name] = n.health
	}
	var live []link
	for _, lc := range lcs {
		live = append(live, link{lc.node, lc.extNode})
	}
	waitPairs(t, bases, live)
}
