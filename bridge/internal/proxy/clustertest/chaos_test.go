//go:build unix

package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/browserbridge/browserbridge/bridge/internal/natsembed"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// buildProxy builds browserbridge-proxy into the test's directory.
func buildProxy(tb testing.TB) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "browserbridge-proxy")
	cmd := exec.Command("go", "build", "-o", out, "../../../cmd/browserbridge-proxy")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build browserbridge-proxy: %v\n%s", err, b)
	}
	return out
}

// procNode is a proxy node run as its own process (`browserbridge-proxy
// serve --nats …`), so that it can die as a process does: SIGKILL, no
// goodbye to NATS or to its peers.
type procNode struct {
	name     string
	cmd      *exec.Cmd
	out      *syncBuffer
	exited   chan struct{}
	ws, http string
	health   string // http://host:port of --metrics-listen: the whole /health
}

// servingURL finds the listener's address in the command's log, and
// healthURL the --metrics-listen one.
var (
	servingURL = regexp.MustCompile(`msg="browserbridge-proxy serving".* url=(?:ws|http)://([^/\s]+)/`)
	healthURL  = regexp.MustCompile(` health=(http://[^/\s]+)/health`)
)

func startProc(tb testing.TB, bin, secretFile, name string, ttl time.Duration, natsURLs ...string) *procNode {
	tb.Helper()
	p := &procNode{name: name, out: &syncBuffer{}, exited: make(chan struct{})}
	// Connection caps off: every client here comes from 127.0.0.1.
	p.cmd = exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--secret-file", secretFile,
		"--nats", strings.Join(natsURLs, ","), "--node", name, "--presence-ttl", ttl.String(),
		"--nats-replicas", fmt.Sprint(clusterReplicas),
		"--max-conns-per-ip", "0", "--max-mcp-per-user", "0", "--max-extensions-per-user", "0",
		"--metrics-listen", "127.0.0.1:0")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	tb.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(deadlockGuard):
			tb.Errorf("node %s did not exit within %v of SIGTERM", name, deadlockGuard)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if tb.Failed() {
			tb.Logf("--- node %s output ---\n%s", name, tail(p.out.String(), 60))
		}
	})
	testutil.WaitWithin(tb, deadlockGuard, "node "+name+" to serve", func() (bool, string) {
		select {
		case <-p.exited:
			tb.Fatalf("node %s exited: %v\n%s", name, p.cmd.ProcessState, p.out.String())
		default:
		}
		m, h := servingURL.FindStringSubmatch(p.out.String()), healthURL.FindStringSubmatch(p.out.String())
		if m == nil || h == nil {
			return false, tail(p.out.String(), 5)
		}
		p.http, p.ws, p.health = "http://"+m[1], "ws://"+m[1], h[1]
		return true, ""
	})
	return p
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// the roles of the kill test's clients.
const (
	roleOnVictim   = iota // on the node that dies: its WebSocket ends
	roleToVictim          // on a survivor, connected to an extension of the node that dies
	roleSurvivors         // between two survivors
	roleSameNode          // on a survivor, to an extension on the same node
	roleVictimSelf        // on the node that dies, to one of its own extensions
)

// TestClusterNodeKilled: three nodes as processes, load across all of
// them, one node SIGKILLed mid-load. Its clients lose their WebSocket;
// calls elsewhere to its extensions end -32005, then `disconnected`; calls
// between the surviving nodes all succeed; its extensions reconnect to a
// survivor and are usable again once its presence is gone.
func TestClusterNodeKilled(t *testing.T) {
	const (
		users = 6
		ttl   = 2 * time.Second
		// A light load, paced: liveness is under test, and heartbeats
		// must keep flowing on a starved machine (TestClusterLoad is the
		// heavy one). The paced rate also stays under the per-connection
		// and per-user rate limits the command keeps.
		window = 2
		pace   = 50 * time.Millisecond
	)
	bin := buildProxy(t)
	keys := testKeys(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(testSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := startNATS(t, 3)
	var nodes []*procNode
	for i, s := range ns {
		nodes = append(nodes, startProc(t, bin, secret, fmt.Sprintf("node%d", i+1), ttl, s.ClientURL()))
	}
	waitMesh(t, nodes[0].health, nodes[1].health, nodes[2].health)
	victim, survivors := nodes[0], nodes[1:]

	type userSet struct {
		name          string
		doomed        *fakeExtension // on the victim
		steady        *fakeExtension // on a survivor
		steadyNode    *procNode
		otherSurvivor *procNode
		allowed       map[string]bool
	}
	var us []*userSet
	for u := range users {
		set := &userSet{name: fmt.Sprintf("user-%d", u), allowed: map[string]bool{}}
		set.steadyNode, set.otherSurvivor = survivors[u%2], survivors[1-u%2]
		set.doomed = dialExtension(t, keys, victim.ws, victim.name, set.name, "Doomed")
		set.steady = dialExtension(t, keys, set.steadyNode.ws, set.steadyNode.name, set.name, "Steady")
		set.allowed[set.doomed.id], set.allowed[set.steady.id] = true, true
		us = append(us, set)
	}

	type roleClient struct {
		*loadClient
		role     int
		set      *userSet
		loadDone chan struct{} // its load ended
	}
	var rcs []*roleClient
	for u, set := range us {
		for role, where := range []struct {
			n   *procNode
			ext *fakeExtension
		}{
			roleOnVictim:   {victim, set.steady},
			roleToVictim:   {set.otherSurvivor, set.doomed},
			roleSurvivors:  {set.otherSurvivor, set.steady},
			roleSameNode:   {set.steadyNode, set.steady},
			roleVictimSelf: {victim, set.doomed},
		} {
			c := dialClient(t, where.n.ws, fmt.Sprintf("%s/role%d", set.name, role))
			c.handshake(t, mint(t, keys, set.name, token.KindMCP))
			c.waitListed(t, []string{set.doomed.id, set.steady.id}, set.allowed)
			lc := &loadClient{client: c, user: set.name, ext: where.ext.id, node: where.n.name, extNode: where.ext.node,
				style: idStyle((u + role) % 3)}
			var code int
			var msg string
			if lc.conn, code, msg = c.connect(t, lc.ext); code != 0 {
				t.Fatalf("client %s: connect: %d %s", c.name, code, msg)
			}
			rcs = append(rcs, &roleClient{loadClient: lc, role: role, set: set, loadDone: make(chan struct{})})
		}
	}

	// The extensions of the victim reconnect, as the real one does, to a
	// surviving node (the one its user's steady extension is not on).
	type rejoin struct {
		ext   *fakeExtension
		after time.Duration // from the kill
	}
	var killed time.Time          // set before killCh closes
	killCh := make(chan struct{}) // closed at the kill
	rejoined := make([]chan rejoin, users)
	for u, set := range us {
		rejoined[u] = make(chan rejoin, 1)
		go func() {
			<-set.doomed.done
			<-killCh
			target := set.otherSurvivor
			for {
				e, err := tryExtension(keys, target.ws, target.name, set.name, "Doomed")
				if err == nil {
					rejoined[u] <- rejoin{ext: e, after: time.Since(killed)}
					return
				}
				if time.Since(killed) > deadlockGuard {
					t.Errorf("extension of %s could not reconnect: %v", set.name, err)
					close(rejoined[u])
					return
				}
				time.Sleep(100 * time.Millisecond) // a reconnecting extension's backoff
			}
		}()
	}

	// Load. Clients of the victim and to it may end with their node;
	// between survivors nothing may fail.
	steadyTally, doomedTally := newTally(), newTally()
	endLoad := make(chan struct{})
	okBefore := make([]int, len(rcs)) // correct answers per client, before the kill
	var okMu sync.Mutex
	doomedJudge := func(lc *loadClient, i int, id json.RawMessage, method string, p callParams, r reply, ok bool) verdict {
		what := fmt.Sprintf("client %s (node %s → %s on %s) call %s", lc.name, lc.node, lc.ext, lc.extNode, id)
		switch {
		case !ok:
			doomedTally.add(func(t *tally) { t.lost = append(t.lost, what) })
			return stop
		case r.err != nil || r.msg.Error != nil:
			code, msg := r.code()
			doomedTally.add(func(t *tally) {
				t.failed[code]++
				// The end of a call on the dead node: the connection lost
				// (a client of it), -32005 (its extension's calls, answered
				// by the client's node), or -32002 for a call that met the
				// connection already ended.
				if code != -1 && code != relaywire.CodeExtensionGone && code != relaywire.CodeNotConnected {
					t.other = append(t.other, fmt.Sprintf("%s: %d %s", what, code, msg))
				}
			})
			return stop
		}
		if bad := checkEcho(r.msg, id, method, p, lc.conn, lc.ext, lc.user); bad != "" {
			doomedTally.add(func(t *tally) { t.crossed = append(t.crossed, what+": "+bad) })
			return stop
		}
		doomedTally.add(func(t *tally) { t.ok++ })
		return goOn
	}
	var wg sync.WaitGroup
	for k, rc := range rcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			judge := doomedJudge
			if rc.role == roleSurvivors || rc.role == roleSameNode {
				judge = strict(steadyTally)
			}
			counted := func(lc *loadClient, i int, id json.RawMessage, method string, p callParams, r reply, ok bool) verdict {
				v := judge(lc, i, id, method, p, r, ok)
				select {
				case <-killCh:
				default:
					if ok && r.err == nil && r.msg.Error == nil {
						okMu.Lock()
						okBefore[k]++
						okMu.Unlock()
					}
				}
				return v
			}
			rc.run(-1, window, pace, endLoad, counted)
			close(rc.loadDone)
		}()
	}
	defer func() {
		select {
		case <-endLoad:
		default:
			close(endLoad)
		}
		wg.Wait()
	}()
	// Every client has had answers before the node dies.
	testutil.WaitWithin(t, deadlockGuard, "every client to have 10 answers", func() (bool, string) {
		okMu.Lock()
		defer okMu.Unlock()
		for k, n := range okBefore {
			if n < 10 {
				return false, fmt.Sprintf("client %s: %d answers", rcs[k].name, n)
			}
		}
		return true, ""
	})
	noteMark := make([]int, len(rcs))
	for k, rc := range rcs {
		noteMark[k] = rc.noteCount()
	}

	killed = time.Now()
	close(killCh)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	t.Logf("node %s killed", victim.name)

	// Clients of the victim: their WebSocket ends, and so every call.
	// Clients of its extensions elsewhere: -32005, then `disconnected`.
	var disconnectedAfter []time.Duration
	for k, rc := range rcs {
		switch rc.role {
		case roleOnVictim, roleVictimSelf:
			select {
			case <-rc.done:
			case <-time.After(deadlockGuard):
				t.Fatalf("client %s of the killed node still connected after %v", rc.name, deadlockGuard)
			}
		case roleToVictim:
			n, _, ok := rc.waitNote(relaywire.MethodDisconnected, noteMark[k], deadlockGuard)
			if !ok {
				t.Fatalf("client %s of an extension of the killed node: no `disconnected` within %v", rc.name, deadlockGuard)
			}
			disconnectedAfter = append(disconnectedAfter, time.Since(killed))
			var p relaywire.DisconnectedParams
			if err := json.Unmarshal(n.Params, &p); err != nil || p.ConnectionID != rc.conn || p.Reason != relaywire.ReasonExtensionGone {
				t.Errorf("client %s: disconnected %s; want connection %s, reason %q", rc.name, n.Params, rc.conn, relaywire.ReasonExtensionGone)
			}
		}
	}

	// The victim's extensions rejoin a survivor; the clients that lost
	// them connect again and call; a fresh client on the other survivor
	// can too.
	var rejoinAfter, usableAfter []time.Duration
	var rejoinedLinks []link // connections made to the rejoined extensions
	for u, set := range us {
		rj, ok := <-rejoined[u]
		if !ok {
			t.FailNow()
		}
		t.Cleanup(func() { rj.ext.ws.Close() })
		rejoinAfter = append(rejoinAfter, rj.after)
		set.allowed[rj.ext.id] = true
		for _, rc := range rcs {
			if rc.set != set || rc.role != roleToVictim {
				continue
			}
			// Its load has ended (every call after the first error ends
			// too); it lists the extension again and connects.
			select {
			case <-rc.loadDone:
			case <-time.After(deadlockGuard):
				t.Fatalf("client %s: calls still running after `disconnected`", rc.name)
			}
			rc.waitListed(t, []string{rj.ext.id}, set.allowed)
			conn, code, msg := rc.connect(t, rj.ext.id)
			if code != 0 {
				t.Fatalf("client %s: connect to the rejoined extension %s on %s: %d %s", rc.name, rj.ext.id, rj.ext.node, code, msg)
			}
			rejoinedLinks = append(rejoinedLinks, link{rc.node, rj.ext.node})
			again := &loadClient{client: rc.client, user: set.name, ext: rj.ext.id, conn: conn, node: rc.node, extNode: rj.ext.node, style: rc.style}
			tl := newTally()
			again.run(20, 1, 0, nil, strict(tl))
			usableAfter = append(usableAfter, time.Since(killed))
			if ok, _, crossed, lost, other := tl.snapshot(); ok != 20 {
				t.Errorf("client %s after the extension rejoined: %d of 20 answered; crossed %v lost %v failed %v", rc.name, ok, crossed, lost, other)
			}
		}
		fresh := dialClient(t, set.steadyNode.ws, set.name+"/fresh")
		fresh.handshake(t, mint(t, keys, set.name, token.KindMCP))
		fresh.waitListed(t, []string{rj.ext.id}, set.allowed)
		conn, code, msg := fresh.connect(t, rj.ext.id)
		if code != 0 {
			t.Fatalf("fresh client of %s: connect to the rejoined extension: %d %s", set.name, code, msg)
		}
		rejoinedLinks = append(rejoinedLinks, link{set.steadyNode.name, rj.ext.node})
		tl := newTally()
		(&loadClient{client: fresh, user: set.name, ext: rj.ext.id, conn: conn, node: set.steadyNode.name, extNode: rj.ext.node}).run(5, 1, 0, nil, strict(tl))
		if ok, _, _, _, other := tl.snapshot(); ok != 5 {
			t.Errorf("fresh client of %s: %d of 5 answered: %v", set.name, ok, other)
		}
	}
	// The load between survivors went on through all of this.
	close(endLoad)
	wg.Wait()
	// The survivors hold exactly the connections alive now: none left to
	// or from the dead node.
	live := append([]link(nil), rejoinedLinks...)
	for _, rc := range rcs {
		if rc.role == roleSurvivors || rc.role == roleSameNode {
			live = append(live, link{rc.node, rc.extNode})
		}
	}
	waitPairs(t, map[string]string{survivors[0].name: survivors[0].health, survivors[1].name: survivors[1].health}, live)

	ok, failed, crossed, lost, other := steadyTally.snapshot()
	if len(other) > 0 || len(crossed) > 0 || len(lost) > 0 {
		t.Errorf("calls between surviving nodes: %d ok; %d failed (%v), %d crossed, %d lost:\n  %s",
			ok, len(other), failed, len(crossed), len(lost), firstFew(slices.Concat(other, crossed, lost)))
	}
	dok, dfailed, dcrossed, dlost, dother := doomedTally.snapshot()
	if len(dother) > 0 || len(dcrossed) > 0 || len(dlost) > 0 {
		t.Errorf("calls with the killed node: %d ok; unexpected failures %v (%d), %d crossed, %d lost:\n  %s",
			dok, dfailed, len(dother), len(dcrossed), len(dlost), firstFew(slices.Concat(dother, dcrossed, dlost)))
	}
	for _, rc := range rcs {
		if s := rc.strayReplies(); len(s) > 0 {
			t.Errorf("client %s received %d replies to no call of its own: %s", rc.name, len(s), firstFew(s))
		}
	}
	// Each of these clients had calls ending with the node: its own
	// WebSocket lost, or -32005 from its node for the dead node's
	// extension (its workers wait for every answer, so some call was in
	// flight when its node gave up on the dead one).
	onVictim, toVictim := 0, 0
	for _, rc := range rcs {
		switch rc.role {
		case roleOnVictim, roleVictimSelf:
			onVictim++
		case roleToVictim:
			toVictim++
		}
	}
	if dfailed[-1] < onVictim || dfailed[relaywire.CodeExtensionGone] < toVictim {
		t.Errorf("calls ended by the lost WebSocket: %d, by -32005: %d; want at least one for each of %d clients of the killed node and %d of its extensions",
			dfailed[-1], dfailed[relaywire.CodeExtensionGone], onVictim, toVictim)
	}
	t.Logf("between survivors: %d calls, all answered; with the killed node: %d answered, ended by code %v (-1: WebSocket lost)", ok, dok, dfailed)
	t.Logf("presence TTL %v: `disconnected` after %v; extensions rejoined after %v; usable again (list, connect, 20 calls) after %v",
		ttl, spread(disconnectedAfter), spread(rejoinAfter), spread(usableAfter))
}

// spread is "min…max" of durations.
func spread(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	return fmt.Sprintf("%v…%v", slices.Min(d).Round(time.Millisecond), slices.Max(d).Round(time.Millisecond))
}

// TestClusterNATSRestart: the whole NATS cluster stops mid-load and starts
// again on its ports and stores. Meanwhile calls across nodes end cleanly
// (-32005, then `disconnected`), calls within a node go on, and no answer
// reaches the wrong client; once NATS is back the nodes reconnect and
// rebuild their view, and clients connect across nodes again.
func TestClusterNATSRestart(t *testing.T) {
	const (
		users  = 4
		ttl    = 2 * time.Second
		window = 2
		pace   = 50 * time.Millisecond // a light load: see TestClusterNodeKilled
	)
	keys := testKeys(t)
	ns := startNATS(t, 3)
	var nodes []*node
	for i, s := range ns {
		nodes = append(nodes, startNode(t, keys, fmt.Sprintf("node%d", i+1), clusterReplicas, ttl, s.ClientURL()))
	}
	waitMesh(t, nodes[0].health, nodes[1].health, nodes[2].health)

	type userSet struct {
		name    string
		ext     *fakeExtension
		allowed map[string]bool
	}
	type nodeClient struct {
		*loadClient
		set      *userSet
		loadDone chan struct{}
	}
	var same, cross []*nodeClient
	for u := range users {
		home := nodes[u%3]
		set := &userSet{name: fmt.Sprintf("user-%d", u), allowed: map[string]bool{}}
		set.ext = dialExtension(t, keys, home.ws, home.name, set.name, "Chrome")
		set.allowed[set.ext.id] = true
		for k := range 3 {
			n := nodes[(u+k)%3]
			c := dialClient(t, n.ws, fmt.Sprintf("%s/c%d", set.name, k))
			c.handshake(t, mint(t, keys, set.name, token.KindMCP))
			c.waitListed(t, []string{set.ext.id}, set.allowed)
			lc := &loadClient{client: c, user: set.name, ext: set.ext.id, node: n.name, extNode: home.name, style: idStyle((u + k) % 3)}
			var code int
			var msg string
			if lc.conn, code, msg = c.connect(t, lc.ext); code != 0 {
				t.Fatalf("client %s: connect: %d %s", c.name, code, msg)
			}
			nc := &nodeClient{loadClient: lc, set: set, loadDone: make(chan struct{})}
			if k == 0 {
				same = append(same, nc)
			} else {
				cross = append(cross, nc)
			}
		}
	}

	// Same-node calls must all succeed; a cross-node client's calls end at
	// its first error, which must be -32005 (or -32002 for a call that met
	// its connection ended).
	sameTally, crossTally := newTally(), newTally()
	answered := func(tl *tally) int { ok, _, _, _, _ := tl.snapshot(); return ok }
	crossJudge := func(lc *loadClient, i int, id json.RawMessage, method string, p callParams, r reply, ok bool) verdict {
		what := fmt.Sprintf("client %s (node %s → %s on %s) call %s", lc.name, lc.node, lc.ext, lc.extNode, id)
		switch {
		case !ok:
			crossTally.add(func(t *tally) { t.lost = append(t.lost, what) })
			return stop
		case r.err != nil || r.msg.Error != nil:
			code, msg := r.code()
			crossTally.add(func(t *tally) {
				t.failed[code]++
				if code != relaywire.CodeExtensionGone && code != relaywire.CodeNotConnected {
					t.other = append(t.other, fmt.Sprintf("%s: %d %s", what, code, msg))
				}
			})
			return stop
		}
		if bad := checkEcho(r.msg, id, method, p, lc.conn, lc.ext, lc.user); bad != "" {
			crossTally.add(func(t *tally) { t.crossed = append(t.crossed, what+": "+bad) })
			return stop
		}
		crossTally.add(func(t *tally) { t.ok++ })
		return goOn
	}
	endLoad := make(chan struct{})
	var wg sync.WaitGroup
	for _, nc := range slices.Concat(same, cross) {
		judge := strict(sameTally)
		if nc.node != nc.extNode {
			judge = crossJudge
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(nc.loadDone)
			nc.run(-1, window, pace, endLoad, judge)
		}()
	}
	defer func() {
		select {
		case <-endLoad:
		default:
			close(endLoad)
		}
		wg.Wait()
	}()
	testutil.WaitWithin(t, deadlockGuard, "calls on every client", func() (bool, string) {
		s, c := answered(sameTally), answered(crossTally)
		return s >= 10*len(same) && c >= 10*len(cross), fmt.Sprintf("%d same-node, %d cross-node answers", s, c)
	})
	noteMark := map[*nodeClient]int{}
	for _, nc := range cross {
		noteMark[nc] = nc.noteCount()
	}

	down := time.Now()
	for _, s := range ns {
		s.Stop()
	}
	t.Logf("NATS stopped (%d servers)", len(ns))
	testutil.WaitWithin(t, deadlockGuard, "every node to see NATS gone", func() (bool, string) {
		for _, n := range nodes {
			if st := n.nc.Status(); st == nats.CONNECTED {
				return false, "node " + n.name + " still connected"
			}
		}
		return true, ""
	})
	for _, nc := range cross {
		n, _, ok := nc.waitNote(relaywire.MethodDisconnected, noteMark[nc], deadlockGuard)
		if !ok {
			t.Fatalf("client %s: no `disconnected` within %v of NATS stopping", nc.name, deadlockGuard)
		}
		var p relaywire.DisconnectedParams
		if err := json.Unmarshal(n.Params, &p); err != nil || p.ConnectionID != nc.conn {
			t.Errorf("client %s: disconnected %s; want connection %s", nc.name, n.Params, nc.conn)
		}
		select {
		case <-nc.loadDone:
		case <-time.After(deadlockGuard):
			t.Fatalf("client %s: calls still running after `disconnected`", nc.name)
		}
	}
	// Within a node nothing needs NATS: the same-node clients keep being
	// answered while it is down. Connecting across nodes is refused.
	mark := answered(sameTally)
	testutil.WaitWithin(t, deadlockGuard, "same-node answers while NATS is down", func() (bool, string) {
		n := answered(sameTally) - mark
		return n >= 10*len(same), fmt.Sprintf("%d answers since NATS went away", n)
	})
	for i, nc := range cross {
		_, code, msg := nc.connect(t, nc.ext)
		if code != relaywire.CodeServerError {
			t.Errorf("client %s: connect across nodes while NATS is down: %d %q; want %d", nc.name, code, msg, relaywire.CodeServerError)
		}
		if i == 0 {
			t.Logf("connect across nodes while NATS is down: %d %q", code, msg)
		}
	}
	if nodes[0].nc.Status() == nats.CONNECTED {
		t.Fatal("a node reconnected while NATS was stopped")
	}
	downFor := time.Since(down)

	restart := time.Now()
	for _, s := range ns {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadlockGuard)
	defer cancel()
	if err := natsembed.WaitCluster(ctx, ns); err != nil {
		t.Fatal(err)
	}
	natsUp := time.Since(restart)
	waitMesh(t, nodes[0].health, nodes[1].health, nodes[2].health)
	meshUp := time.Since(restart)

	// Clients connect again across nodes (they got `disconnected`) and
	// call; the same-node load never stopped.
	var usable []time.Duration
	for _, nc := range cross {
		nc.waitListed(t, []string{nc.ext}, nc.set.allowed)
		conn, code, msg := nc.connect(t, nc.ext)
		if code != 0 {
			t.Fatalf("client %s: connect across nodes after NATS came back: %d %s", nc.name, code, msg)
		}
		again := &loadClient{client: nc.client, user: nc.user, ext: nc.ext, conn: conn, node: nc.node, extNode: nc.extNode, style: nc.style}
		tl := newTally()
		again.run(20, window, 0, nil, strict(tl))
		usable = append(usable, time.Since(restart))
		if ok, failed, crossed, lost, other := tl.snapshot(); ok != 20 {
			t.Errorf("client %s after NATS came back: %d of 20 answered; failed %v %v, crossed %v, lost %v", nc.name, ok, failed, other, crossed, lost)
		}
	}
	close(endLoad)
	wg.Wait()
	// Every node holds the connections as they are now: the ones NATS's
	// going cut are gone on both sides.
	bases := map[string]string{}
	for _, n := range nodes {
		bases[n.name] = n.health
	}
	var live []link
	for _, nc := range slices.Concat(same, cross) {
		live = append(live, link{nc.node, nc.extNode})
	}
	waitPairs(t, bases, live)

	sok, sfailed, scrossed, slost, sother := sameTally.snapshot()
	if len(sother)+len(scrossed)+len(slost) > 0 {
		t.Errorf("same-node calls: %d ok; %d failed (%v), %d crossed, %d lost:\n  %s",
			sok, len(sother), sfailed, len(scrossed), len(slost), firstFew(slices.Concat(sother, scrossed, slost)))
	}
	cok, cfailed, ccrossed, clost, cother := crossTally.snapshot()
	if len(cother)+len(ccrossed)+len(clost) > 0 {
		t.Errorf("cross-node calls: %d ok; unexpected failures (%v) %d, %d crossed, %d lost:\n  %s",
			cok, cfailed, len(cother), len(ccrossed), len(clost), firstFew(slices.Concat(cother, ccrossed, clost)))
	}
	for _, nc := range slices.Concat(same, cross) {
		if s := nc.strayReplies(); len(s) > 0 {
			t.Errorf("client %s received %d replies to no call of its own: %s", nc.name, len(s), firstFew(s))
		}
	}
	t.Logf("same-node: %d calls answered, none failed; cross-node before the stop: %d answered, ended by code %v", sok, cok, cfailed)
	t.Logf("NATS down for %v; after the restart: NATS cluster ready in %v, nodes meshed in %v, cross-node clients usable again in %v",
		downFor.Round(time.Millisecond), natsUp.Round(time.Millisecond), meshUp.Round(time.Millisecond), spread(usable))
}

// TestClusterConnectWhileNATSDown: connecting to an extension of another
// node while NATS is unreachable is refused with a sentence that says so
// (docs/relay.md, "Failures": "connects to an extension elsewhere are
// refused with a sentence saying why"), not as if the extension did not
// exist: the client should try again later, not give up on it.
func TestClusterConnectWhileNATSDown(t *testing.T) {
	keys := testKeys(t)
	ns := startNATS(t, 1)
	a := startNode(t, keys, "a", 1, 2*time.Second, ns[0].ClientURL())
	b := startNode(t, keys, "b", 1, 2*time.Second, ns[0].ClientURL())
	waitMesh(t, a.health, b.health)
	ext := dialExtension(t, keys, a.ws, a.name, "alice", "Chrome")
	c := dialClient(t, b.ws, "alice/c")
	c.handshake(t, mint(t, keys, "alice", token.KindMCP))
	c.waitListed(t, []string{ext.id}, map[string]bool{ext.id: true})

	ns[0].Stop()
	// Node b has noticed: it takes no peer for alive.
	testutil.WaitWithin(t, deadlockGuard, "node b to see NATS gone", func() (bool, string) {
		h, err := getHealth(b.health)
		if err != nil {
			return false, err.Error()
		}
		return h.NATS != "connected" && len(h.alivePeers()) == 0, fmt.Sprintf("nats %s, alive peers %v", h.NATS, h.alivePeers())
	})
	_, code, msg := c.connect(t, ext.id)
	if code != relaywire.CodeServerError || !strings.Contains(msg, "NATS") {
		t.Errorf("connect to an extension of another node while NATS is down: %d %q; want %d saying NATS is unreachable",
			code, msg, relaywire.CodeServerError)
	}
	if err := ns[0].Restart(); err != nil {
		t.Fatal(err)
	}
}

// TestClusterNodeNATSBlip: one node's NATS connection drops and comes
// back at once (a network blip, its NATS server restarting, a failover to
// another server), while its peers never lost NATS and, as its heartbeats
// go on, never take it for gone. The node ends its side of every
// cross-node connection when its link drops (docs/relay.md: "every
// cross-node connection ends the same way at once on both sides"); each
// must still either work or end cleanly for the client on the other node
// too (-32005 and `disconnected`, then connect again): a call across
// nodes is never left without an answer.
func TestClusterNodeNATSBlip(t *testing.T) {
	// Far longer than the blip, so that the peers do not take node a for
	// gone: only the links can tell them anything happened.
	const ttl = 5 * time.Second
	keys := testKeys(t)
	ns := startNATS(t, 3)
	var nodes []*node
	for i, s := range ns {
		nodes = append(nodes, startNode(t, keys, fmt.Sprintf("node%d", i+1), clusterReplicas, ttl, s.ClientURL()))
	}
	waitMesh(t, nodes[0].health, nodes[1].health, nodes[2].health)
	a, b := nodes[0], nodes[1]
	extA := dialExtension(t, keys, a.ws, a.name, "alice", "On a")
	extB := dialExtension(t, keys, b.ws, b.name, "alice", "On b")
	allowed := map[string]bool{extA.id: true, extB.id: true}
	pairs := []struct {
		name string
		on   *node
		ext  *fakeExtension
	}{
		{"client on b → extension on a", b, extA},
		{"client on a → extension on b", a, extB},
	}
	var lcs []*loadClient
	for i, p := range pairs {
		c := dialClient(t, p.on.ws, fmt.Sprintf("alice/c%d", i))
		c.handshake(t, mint(t, keys, "alice", token.KindMCP))
		c.waitListed(t, []string{extA.id, extB.id}, allowed)
		lc := &loadClient{client: c, user: "alice", ext: p.ext.id, node: p.on.name, extNode: p.ext.node}
		var code int
		var msg string
		if lc.conn, code, msg = c.connect(t, lc.ext); code != 0 {
			t.Fatalf("%s: connect: %d %s", p.name, code, msg)
		}
		tl := newTally()
		lc.run(10, 2, 0, nil, strict(tl))
		if ok, _, _, _, other := tl.snapshot(); ok != 10 {
			t.Fatalf("%s: %d of 10 answered: %v", p.name, ok, other)
		}
		lcs = append(lcs, lc)
	}
	marks := []int{lcs[0].noteCount(), lcs[1].noteCount()}

	if err := a.nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	// Node a has been through its reconnection: it rebuilt its view of
	// the others (it sees them alive again).
	testutil.WaitWithin(t, deadlockGuard, "node a to reconnect to NATS", func() (bool, string) {
		return a.nc.Stats().Reconnects > 0 && a.nc.Status() == nats.CONNECTED, fmt.Sprintf("%v, %d reconnects", a.nc.Status(), a.nc.Stats().Reconnects)
	})
	waitMesh(t, a.health, b.health, nodes[2].health)

	for i, p := range pairs {
		lc := lcs[i]
		// One more call: answered by the extension, or ended -32005. The
		// guard is far past the presence TTL.
		r, ok := awaitWithin(lc.start(json.RawMessage(`"after"`), "tools/call", callParams{Client: lc.name, Seq: -1}), 4*ttl)
		if !ok {
			t.Errorf("%s: a call after node a's NATS link came back got no answer within %v (presence TTL %v)", p.name, 4*ttl, ttl)
			continue
		}
		code, msg := r.code()
		switch code {
		case 0:
			if bad := checkEcho(r.msg, json.RawMessage(`"after"`), "tools/call", callParams{Client: lc.name, Seq: -1}, lc.conn, lc.ext, lc.user); bad != "" {
				t.Errorf("%s: %s", p.name, bad)
			}
			t.Logf("%s: the connection survived", p.name)
			continue
		case relaywire.CodeExtensionGone, relaywire.CodeNotConnected:
		default:
			t.Errorf("%s: the call after the failover: %d %s", p.name, code, msg)
			continue
		}
		if _, _, ok := lc.waitNote(relaywire.MethodDisconnected, marks[i], deadlockGuard); !ok {
			t.Errorf("%s: call ended %d %q but no `disconnected` came", p.name, code, msg)
			continue
		}
		// It connects again and is answered.
		t.Logf("%s: ended cleanly (%d %q)", p.name, code, msg)
		conn, ccode, cmsg := lc.connect(t, lc.ext)
		if ccode != 0 {
			t.Errorf("%s: connect again: %d %s", p.name, ccode, cmsg)
			continue
		}
		again := &loadClient{client: lc.client, user: lc.user, ext: lc.ext, conn: conn, node: lc.node, extNode: lc.extNode}
		tl := newTally()
		again.run(10, 2, 0, nil, strict(tl))
		if ok, _, _, _, other := tl.snapshot(); ok != 10 {
			t.Errorf("%s: after connecting again, %d of 10 answered: %v", p.name, ok, other)
		}
		t.Logf("%s: connected again", p.name)
	}
	// Node a dropped its side of every link when its NATS link went;
	// the other side must not keep the dead ones: node b holds one
	// connection from node a's client (the new one), not two.
	b0 := time.Now()
	testutil.WaitWithin(t, 4*ttl, "node b to drop the connection node a's client left", func() (bool, string) {
		h, err := getHealth(b.health)
		if err != nil {
			return false, err.Error()
		}
		return h.Pairs["remote_in"] == 1, fmt.Sprintf("node b's pairs %v after %v", h.Pairs, time.Since(b0).Round(time.Second))
	})
}

// awaitWithin is await with a shorter guard.
func awaitWithin(ch <-chan reply, limit time.Duration) (reply, bool) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case r := <-ch:
		return r, true
	case <-t.C:
		return reply{}, false
	}
}
