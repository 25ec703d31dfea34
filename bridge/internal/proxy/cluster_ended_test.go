package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// endedBucketOf is the cluster's bucket of kept session ends, read through
// a connection of the test's own (as anyone on the NATS could).
func endedBucketOf(tb testing.TB, tp *testProxy) jetstream.KeyValue {
	tb.Helper()
	js, err := jetstream.New(natsConn(tb, tp.natsURL))
	if err != nil {
		tb.Fatal(err)
	}
	var kv jetstream.KeyValue
	// Made by the first node that keeps or takes a notice.
	testutil.WaitFor(tb, "the ended bucket", func() bool {
		kv, err = js.KeyValue(testutil.Context(tb, 10*time.Second), "browserbridge_ended")
		return err == nil
	})
	return kv
}

// browserGone waits until no node lists the user's browsers and no id
// claim is left in presence: a browser coming back on any node then
// finds its stable id free.
func browserGone(tb testing.TB, user string, nodes ...*testProxy) {
	tb.Helper()
	testutil.WaitFor(tb, "every node to see the browser gone", func() bool {
		for _, n := range nodes {
			if len(n.srv.extensionsOf(user, relaywire.ExtensionKindBrowser)) != 0 {
				return false
			}
		}
		return true
	})
	js, err := jetstream.New(natsConn(tb, nodes[0].natsURL))
	if err != nil {
		tb.Fatal(err)
	}
	kvP, err := js.KeyValue(testutil.Context(tb, 10*time.Second), "browserbridge_presence")
	if err != nil {
		tb.Fatal(err)
	}
	testutil.WaitFor(tb, "the browser's id claim to be released", func() bool {
		return len(bucketKeys(tb, kvP, claimPrefix)) == 0
	})
}

// notesUntilStatus returns the methods of the notifications b receives up
// to its first status, which follows the notices sent at authentication.
func notesUntilStatus(tb testing.TB, b *fakeBrowser) []string {
	tb.Helper()
	var seen []string
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-b.notes:
			if m.Method == relaywire.MethodStatus {
				return seen
			}
			seen = append(seen, m.Method)
		case <-deadline:
			tb.Fatalf("no status within 10 s (received %v)", seen)
			return nil
		}
	}
}

// keptInMemory counts the notices every node keeps in its own memory.
func keptInMemory(nodes ...*testProxy) int {
	n := 0
	for _, tp := range nodes {
		tp.srv.ended.mu.Lock()
		for _, l := range tp.srv.ended.byExt {
			n += len(l)
		}
		tp.srv.ended.mu.Unlock()
	}
	return n
}

// TestClusterSessionEndReachesBrowserBackOnAnotherNode: a session on node
// a whose calls went to a browser on node b ends while the browser is
// away; the browser comes back on node c (the load balancer's pick, b
// restarting) and is told there, even though node a, which saw the end,
// has stopped meanwhile. Told once: nothing is left kept anywhere.
func TestClusterSessionEndReachesBrowserBackOnAnotherNode(t *testing.T) {
	lb, nodes := clusterHTTPNodes(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	br := startBrowser(t, b, "alice", "Chrome")
	testutil.WaitFor(t, "node a to see alice's browser on node b", func() bool {
		return len(a.srv.extensionsOf("alice", relaywire.ExtensionKindBrowser)) == 1
	})
	endpoint := lb.URL + "/mcp"
	tok := accessToken(t, passwordPerson(), endpoint)
	sid := echoSessionOnNodeA(t, endpoint, tok)

	br.leave()
	browserGone(t, "alice", a, b, c)
	deleteSession(t, endpoint, tok, sid)
	kv := endedBucketOf(t, a)
	testutil.WaitFor(t, "node a to keep the session's end in the cluster", func() bool {
		return len(bucketKeys(t, kv, "")) == 1
	})
	// The node that kept it stops: the notice is not in its memory.
	if err := a.srv.Shutdown(testutil.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	back := startBrowser(t, c, "alice", "Chrome")
	if back.id != br.id {
		t.Fatalf("the browser came back as %s, was %s", back.id, br.id)
	}
	var p relaywire.SessionEndedParams
	if err := json.Unmarshal(back.note(relaywire.MethodSessionEnded).Params, &p); err != nil || p.Key != sessionKey(sid) || p.Client != "raw" {
		t.Fatalf("session_ended params %+v (%v); want key %s, client raw", p, err, sessionKey(sid))
	}
	if keys := bucketKeys(t, kv, ""); len(keys) != 0 {
		t.Errorf("still kept after the browser was told: %v", keys)
	}
	if n := keptInMemory(a, b, c); n != 0 {
		t.Errorf("%d notices kept in the nodes' memory", n)
	}
	// Back once more, on node b: told nothing again.
	back.leave()
	browserGone(t, "alice", b, c)
	again := startBrowser(t, b, "alice", "Chrome")
	if seen := notesUntilStatus(t, again); len(seen) != 0 {
		t.Errorf("the browser back a second time received %v", seen)
	}
}

// TestClusterSessionEndKeptByBrowsersNode: the end of a session of node a
// reaches node b while its browser has just left b (presence had not
// caught up): b keeps it in the cluster, and the browser is told on c.
// The notice is sealed and published as node a's would be.
func TestClusterSessionEndKeptByBrowsersNode(t *testing.T) {
	ns := nodes(t, 3, Options{})
	b, c := ns[1], ns[2]
	br := startBrowser(t, b, "alice", "Chrome")
	br.leave()
	browserGone(t, "alice", ns...)

	bus := natsConn(t, b.natsURL)
	ring := testRing()
	subject := "browserbridge.n.b.u." + ring.UserKey("alice") + ".e"
	notice, _ := json.Marshal(endedNotice{User: "alice", Extension: br.id, Key: "0123456789abcdef0123456789abcdef", Client: "raw"})
	if err := bus.Publish(subject, ring.SealMessage(subject, []byte{msgOpNone, 0, 0}, notice)); err != nil {
		t.Fatal(err)
	}
	kv := endedBucketOf(t, b)
	testutil.WaitFor(t, "node b to keep the notice in the cluster", func() bool {
		return len(bucketKeys(t, kv, "")) == 1
	})
	back := startBrowser(t, c, "alice", "Chrome")
	var p relaywire.SessionEndedParams
	if err := json.Unmarshal(back.note(relaywire.MethodSessionEnded).Params, &p); err != nil || p.Key != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("session_ended params %+v (%v)", p, err)
	}
}

// TestClusterEndedSealing: a browser of another user is never handed a
// user's kept notices: not under its own key (the keys are keyed hashes
// of user and browser), not from the user's entry copied under its key
// (the seal binds a value to its key), not from an entry sealed under its
// key that names the other user (checked on reading). The user's browser
// still gets its own.
func TestClusterEndedSealing(t *testing.T) {
	ns := nodes(t, 2, Options{})
	a, b := ns[0], ns[1]
	alice := relaywire.SessionEndedParams{Key: strings.Repeat("a", 32), Client: "raw"}
	aliceExt := stableID(relaywire.PrefixExtension, "alice", "Chrome")
	bobExt := stableID(relaywire.PrefixExtension, "bob", "Chrome")
	if !a.srv.cluster.keepEnded("alice", aliceExt, alice) {
		t.Fatal("node a did not keep alice's notice in the cluster")
	}
	kv := endedBucketOf(t, a)
	ctx := testutil.Context(t, 10*time.Second)
	aliceKey := a.srv.cluster.endedKeys("alice", aliceExt)[0]
	bobKey := a.srv.cluster.endedKeys("bob", bobExt)[0]
	entry, err := kv.Get(ctx, aliceKey)
	if err != nil {
		t.Fatal(err)
	}

	// bob's browser authenticates with nothing kept for it.
	bob := startBrowser(t, b, "bob", "Chrome")
	if seen := notesUntilStatus(t, bob); len(seen) != 0 {
		t.Fatalf("bob's browser received %v", seen)
	}
	bob.leave()
	browserGone(t, "bob", a, b)

	// alice's entry copied under bob's key: does not open.
	if _, err := kv.Put(ctx, bobKey, entry.Value()); err != nil {
		t.Fatal(err)
	}
	bob = startBrowser(t, b, "bob", "Chrome")
	if seen := notesUntilStatus(t, bob); len(seen) != 0 {
		t.Fatalf("bob's browser received %v from alice's moved entry", seen)
	}
	bob.leave()
	browserGone(t, "bob", a, b)

	// Sealed under bob's key, naming alice.
	plain, _ := json.Marshal(keptEnded{User: "alice", Extension: aliceExt, Notices: []relaywire.SessionEndedParams{alice}})
	if _, err := kv.Put(ctx, bobKey, testRing().SealValue(kv.Bucket()+"/"+bobKey, plain)); err != nil {
		t.Fatal(err)
	}
	before := metric(t, b, `browserbridge_proxy_cluster_dropped_total{reason="user_mismatch"}`)
	bob = startBrowser(t, b, "bob", "Chrome")
	if seen := notesUntilStatus(t, bob); len(seen) != 0 {
		t.Fatalf("bob's browser received %v from an entry naming alice", seen)
	}
	if v := metric(t, b, `browserbridge_proxy_cluster_dropped_total{reason="user_mismatch"}`); v != before+1 {
		t.Errorf("node b counted %v user mismatches, want %v", v, before+1)
	}

	// alice's own, intact.
	ab := startBrowser(t, b, "alice", "Chrome")
	var p relaywire.SessionEndedParams
	if err := json.Unmarshal(ab.note(relaywire.MethodSessionEnded).Params, &p); err != nil || p != alice {
		t.Fatalf("alice's browser: session_ended %+v (%v), want %+v", p, err, alice)
	}
}

// TestClusterEndedBounds: a browser's entry holds maxEndedPerBrowser
// notices (the rest are dropped; one kept twice is kept once), and of two
// nodes taking it at once exactly one gets it.
func TestClusterEndedBounds(t *testing.T) {
	ns := nodes(t, 2, Options{})
	a, b := ns[0].srv.cluster, ns[1].srv.cluster
	ext := stableID(relaywire.PrefixExtension, "alice", "Chrome")
	notice := func(i int) relaywire.SessionEndedParams {
		return relaywire.SessionEndedParams{Key: fmt.Sprintf("%032x", i), Client: "raw"}
	}
	for i := range maxEndedPerBrowser + 5 {
		if !a.keepEnded("alice", ext, notice(i)) {
			t.Fatalf("notice %d: not kept and not dropped for the bound", i)
		}
	}
	if !b.keepEnded("alice", ext, notice(0)) {
		t.Fatal("a notice kept again")
	}

	var wg sync.WaitGroup
	got := make([][]relaywire.SessionEndedParams, 2)
	for i, n := range []*clusterNode{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = n.takeEnded("alice", ext)
		}()
	}
	wg.Wait()
	if len(got[0]) != 0 && len(got[1]) != 0 {
		t.Fatalf("both nodes took the entry: %d and %d notices", len(got[0]), len(got[1]))
	}
	all := append(got[0], got[1]...)
	if len(all) != maxEndedPerBrowser {
		t.Fatalf("%d notices taken, want the bound %d", len(all), maxEndedPerBrowser)
	}
	for i, p := range all {
		if p != notice(i) {
			t.Fatalf("notice %d: %+v, want %+v (the first ones kept, in order)", i, p, notice(i))
		}
	}
	if more := a.takeEnded("alice", ext); len(more) != 0 {
		t.Fatalf("taken again: %d notices", len(more))
	}
}

// TestClusterEndedSettles: a notice kept while its browser was in fact
// back (it authenticated between the presence check and the keep) is
// taken again at once and delivered, on the keeping node or, passed on,
// on the node that holds the browser; nothing stays kept.
func TestClusterEndedSettles(t *testing.T) {
	ns := nodes(t, 2, Options{})
	a, b := ns[0], ns[1]
	for _, tc := range []struct {
		name string
		on   *testProxy
	}{
		{"browser on the keeping node", a},
		{"browser on another node", b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := startBrowser(t, tc.on, "alice", "Chrome")
			testutil.WaitFor(t, "node a to see the browser", func() bool {
				return len(a.srv.extensionsOf("alice", relaywire.ExtensionKindBrowser)) == 1
			})
			p := relaywire.SessionEndedParams{Key: fmt.Sprintf("%032x", len(tc.name)), Client: "raw"}
			a.srv.cluster.keepAway("alice", br.id, p, true)
			var got relaywire.SessionEndedParams
			if err := json.Unmarshal(br.note(relaywire.MethodSessionEnded).Params, &got); err != nil || got != p {
				t.Fatalf("session_ended %+v (%v), want %+v", got, err, p)
			}
			if keys := bucketKeys(t, endedBucketOf(t, a), ""); len(keys) != 0 {
				t.Errorf("still kept after the browser was told: %v", keys)
			}
			br.leave()
			browserGone(t, "alice", a, b)
		})
	}
}

// BenchmarkClusterTakeEndedEmpty: what a browser's authentication in a
// cluster now adds when nothing is kept for it (the common case): one read
// of the ended bucket.
func BenchmarkClusterTakeEndedEmpty(b *testing.B) {
	c := nodes(b, 1, Options{})[0].srv.cluster
	ext := stableID(relaywire.PrefixExtension, "alice", "Chrome")
	c.takeEnded("alice", ext) // opens the bucket
	for b.Loop() {
		if got := c.takeEnded("alice", ext); len(got) != 0 {
			b.Fatalf("taken %d", len(got))
		}
	}
}
