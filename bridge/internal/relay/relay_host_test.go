package relay_test

// The relay with REAL native hosts: the real proxy (in this process), two
// real bridges (daemon.Start, relay on), and for each of two users two
// browsers, each a real browserbridge-host process started the way Chrome
// starts it (testbrowser.Start), with the test playing the extension behind
// the host's stdio. relay_test.go attaches fake extensions straight to the
// bridge's socket; here every forwarded call crosses the host.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// bins are the host and bridge built from this checkout, for the tests
// that run the real host.
var bins testbrowser.Binaries

func TestMain(m *testing.M) {
	testbrowser.RunEchoIfAsked()
	os.Exit(testutil.RunWithBinaries(m, "bbr-bin", &bins))
}

// hostBrowser is the test playing an extension behind a real host process.
// Its tools: "echo" answers "<label> <client> <n> <session>" from its
// arguments {client, n} and the relay session in _meta; "slow" waits until
// the test releases it (or the test ends).
type hostBrowser struct {
	*testbrowser.Browser
	label     string
	started   chan string   // the session of each "slow" call, when it starts
	release   chan struct{} // closed to let "slow" calls answer
	cancelled chan string   // requestIds of notifications/cancelled
	calls     atomic.Int64

	mu       sync.Mutex
	sessions map[string]int // relay connection ids seen in _meta, with counts
	twins    *rendezvous    // while set, echo calls wait for their twin (testSameIDs)
}

// rendezvous holds each call n until the call with the same n from the
// other client has arrived too, so that the two are in flight together
// whatever the scheduler does: testSameIDs is about colliding ids, and on
// a busy machine one client can otherwise run far ahead of the other.
type rendezvous struct {
	mu      sync.Mutex
	waiting map[int]chan struct{}
	release <-chan struct{} // closed when the test ends: nobody waits past it
}

func (r *rendezvous) meet(n int) {
	r.mu.Lock()
	if ch, ok := r.waiting[n]; ok {
		delete(r.waiting, n)
		r.mu.Unlock()
		close(ch)
		return
	}
	ch := make(chan struct{})
	r.waiting[n] = ch
	r.mu.Unlock()
	select {
	case <-ch:
	case <-r.release:
	}
}

// attachHost starts a real host for ub's bridge and says hello through it.
func (ub *userBridge) attachHost(label string) *hostBrowser {
	t := ub.t
	t.Helper()
	hb := &hostBrowser{label: label, started: make(chan string, 16), release: make(chan struct{}),
		cancelled: make(chan string, 64), sessions: map[string]int{}}
	home := filepath.Join(filepath.Dir(ub.sock), "home-"+label)
	br, err := testbrowser.Start(testbrowser.Options{
		HostBin: bins.Host,
		Env: []string{
			"BROWSERBRIDGE_SOCKET=" + ub.sock,
			"BROWSERBRIDGE_HOME=" + home,
			// The host must reach this bridge and never start another.
			"BROWSERBRIDGE_BIN=" + filepath.Join(filepath.Dir(ub.sock), "no-bridge-here"),
		},
		Handler: hb.handle,
		Stderr:  logWriter{t, "host-" + label},
	})
	if err != nil {
		t.Fatal(err)
	}
	hb.Browser = br
	var releaseOnce sync.Once
	t.Cleanup(func() {
		releaseOnce.Do(func() { close(hb.release) })
		if err := br.Stop(5 * time.Second); err != nil {
			t.Errorf("host %s: %v", label, err)
		}
		if err := br.Err(); err != nil {
			t.Errorf("host %s broke the protocol: %v", label, err)
		}
	})
	br.OnNotify(func(method string, p json.RawMessage) {
		if method != "notifications/cancelled" {
			return
		}
		var n struct {
			RequestID string `json:"requestId"`
		}
		_ = json.Unmarshal(p, &n)
		select {
		case hb.cancelled <- n.RequestID:
		default:
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := br.WaitState(ctx, protocol.StateConnected); err != nil {
		t.Fatalf("host %s: %v", label, err)
	}
	if _, err := br.Hello(ctx, "instance-"+strings.ToLower(label)); err != nil {
		t.Fatalf("hello through host %s: %v", label, err)
	}
	return hb
}

func (hb *hostBrowser) handle(method string, params json.RawMessage) (any, map[string]any) {
	switch method {
	case "tools/list":
		return map[string]any{"tools": []map[string]any{
			{"name": "echo", "description": "Answer with the browser, the arguments and the session.", "inputSchema": map[string]any{"type": "object"}},
			{"name": "whoami", "description": "Say which browser this is.", "inputSchema": map[string]any{"type": "object"}},
			{"name": "slow", "description": "Wait until the test releases it.", "inputSchema": map[string]any{"type": "object"}},
		}}, nil
	case "tools/call":
	default:
		return nil, map[string]any{"code": -32601, "message": "no method " + method}
	}
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Client string `json:"client"`
			N      int    `json:"n"`
		} `json:"arguments"`
		Meta struct {
			Session struct {
				ID string `json:"id"`
			} `json:"browserbridge/session"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, map[string]any{"code": -32602, "message": err.Error()}
	}
	hb.calls.Add(1)
	session := p.Meta.Session.ID
	hb.mu.Lock()
	hb.sessions[session]++
	hb.mu.Unlock()
	text := func(s string) map[string]any {
		return map[string]any{"content": []map[string]any{{"type": "text", "text": s}}}
	}
	switch p.Name {
	case "echo":
		hb.mu.Lock()
		twins := hb.twins
		hb.mu.Unlock()
		if twins != nil {
			twins.meet(p.Arguments.N)
		}
		return text(fmt.Sprintf("%s %s %d %s", hb.label, p.Arguments.Client, p.Arguments.N, session)), nil
	case "whoami":
		return text(hb.label), nil
	case "slow":
		hb.started <- session
		<-hb.release
		return nil, map[string]any{"code": -32000, "message": "released"}
	}
	return nil, map[string]any{"code": -32602, "message": "unknown tool " + p.Name}
}

// saw reports whether the browser got a call of the relay connection conn.
func (hb *hostBrowser) saw(conn string) bool {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.sessions[conn] > 0
}

// connectTo makes r connect to ext and returns its connection id.
func (r *rawMCP) connectTo(ext string) string {
	r.t.Helper()
	m := r.call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: ext})
	var res relaywire.ConnectResult
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.ConnectionID == "" {
		r.t.Fatalf("connect to %s: %s %s", ext, m.Result, m.Error)
	}
	return res.ConnectionID
}

// errorOf decodes a reply's error.
func errorOf(t *testing.T, m *relaywire.Message) relaywire.Error {
	t.Helper()
	var e relaywire.Error
	if m.Error == nil || json.Unmarshal(m.Error, &e) != nil {
		t.Fatalf("want an error reply, got result %s error %s", m.Result, m.Error)
	}
	return e
}

// echo calls the echo tool through a raw client.
func (r *rawMCP) echo(client string, n int) *relaywire.Message {
	r.t.Helper()
	return r.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"client": client, "n": n}})
}

func resultText(m *relaywire.Message) string {
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(m.Result, &res)
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestRelayRealHosts(t *testing.T) {
	start := time.Now()
	p := startProxy(t)
	alice := startBridge(t, p, "alice")
	bob := startBridge(t, p, "bob")
	a1, a2 := alice.attachHost("A1"), alice.attachHost("A2")
	b1, b2 := bob.attachHost("B1"), bob.attachHost("B2")
	aRelay, bRelay := alice.waitRelay(2), bob.waitRelay(2)
	ext := map[string]string{
		"A1": aRelay["instance-a1"].ExtensionID, "A2": aRelay["instance-a2"].ExtensionID,
		"B1": bRelay["instance-b1"].ExtensionID, "B2": bRelay["instance-b2"].ExtensionID,
	}
	seen := map[string]bool{}
	for _, id := range ext {
		if id == "" || seen[id] {
			t.Fatalf("extension ids %v (relay status %+v %+v)", ext, aRelay, bRelay)
		}
		seen[id] = true
	}
	browsers := map[string]*hostBrowser{"A1": a1, "A2": a2, "B1": b1, "B2": b2}
	t.Logf("4 real hosts registered through 2 bridges in %v", time.Since(start).Round(time.Millisecond))

	t.Run("two users isolated", func(t *testing.T) {
		lists := map[string]map[string]bool{}
		for _, user := range []string{"alice", "bob"} {
			m := dialMCP(t, p, user).call(relaywire.MethodListExtensions, struct{}{})
			var list relaywire.ListExtensionsResult
			if m.Error != nil || json.Unmarshal(m.Result, &list) != nil {
				t.Fatalf("%s list_extensions: %s %s", user, m.Result, m.Error)
			}
			lists[user] = map[string]bool{}
			for _, e := range list.Extensions {
				lists[user][e.ID] = true
			}
		}
		for label, id := range ext {
			mine, theirs := "alice", "bob"
			if label[0] == 'B' {
				mine, theirs = "bob", "alice"
			}
			if !lists[mine][id] || lists[theirs][id] {
				t.Errorf("%s (%s): listed to %s %v, to %s %v", label, id, mine, lists[mine][id], theirs, lists[theirs][id])
			}
		}
		if len(lists["alice"]) != 2 || len(lists["bob"]) != 2 {
			t.Errorf("lists %v", lists)
		}

		// Alice on A1, bob on B1: each reaches their own.
		ra, rb := dialMCP(t, p, "alice"), dialMCP(t, p, "bob")
		connA := ra.connectTo(ext["A1"])
		connB := rb.connectTo(ext["B1"])
		if got := resultText(ra.echo("alice", 1)); got != "A1 alice 1 "+connA {
			t.Errorf("alice's echo on A1 = %q", got)
		}
		if got := resultText(rb.echo("bob", 1)); got != "B1 bob 1 "+connB {
			t.Errorf("bob's echo on B1 = %q", got)
		}

		// Bob cannot connect to either of alice's browsers, with the same
		// answer as for an id that does not exist.
		rb2 := dialMCP(t, p, "bob")
		for _, id := range []string{ext["A1"], ext["A2"], "ext-00000000-0000-0000-0000-000000000000"} {
			m := rb2.call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: id})
			if e := errorOf(t, m); e.Code != relaywire.CodeServerError || e.Message != relaywire.MsgExtensionNotFound {
				t.Errorf("bob connect %s: %+v", id, e)
			}
		}
		// Not connected, a forwarded call goes nowhere.
		if e := errorOf(t, rb2.echo("bob", 2)); e.Code != relaywire.CodeNotConnected {
			t.Errorf("bob's unconnected call: %+v", e)
		}
		// Naming alice's connection id does not route bob's call there.
		rb2.n++
		id := strconv.Itoa(rb2.n)
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "tools/call",
			"connectionId": connA, "params": map[string]any{"name": "echo", "arguments": map[string]any{"client": "bob-forged", "n": 3}}})
		if err := rb2.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			t.Fatal(err)
		}
		if e := errorOf(t, readReply(rb2, id)); e.Code != relaywire.CodeNotConnected && e.Code != relaywire.CodeInvalidParams {
			t.Errorf("bob's call naming alice's connection: %+v", e)
		}
		// And connected to his own browser, a wrong connectionId is refused.
		rb2.connectTo(ext["B2"])
		rb2.n++
		id = strconv.Itoa(rb2.n)
		msg, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "tools/call",
			"connectionId": connA, "params": map[string]any{"name": "echo", "arguments": map[string]any{"client": "bob-forged", "n": 4}}})
		if err := rb2.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			t.Fatal(err)
		}
		if e := errorOf(t, readReply(rb2, id)); e.Code != relaywire.CodeInvalidParams {
			t.Errorf("bob's call with alice's connectionId: %+v", e)
		}
		// Through `connect`'s machinery too: bob's Remote pinned to A2 fails.
		r := relay.NewRemote(relay.RemoteOptions{URL: p.url(), Token: p.token("bob", token.KindMCP), ExtensionID: ext["A2"],
			MinBackoff: 20 * time.Millisecond, ReadyWait: 500 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go r.Run(ctx)
		if _, err := r.Call(ctx, "tools/call", map[string]any{"name": "whoami"}); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("bob's Remote on alice's A2: %v", err)
		}
		// Alice's browsers never saw a call of bob's, nor bob's of alice's.
		for _, label := range []string{"A1", "A2"} {
			if browsers[label].saw(connB) {
				t.Errorf("%s got a call of bob's connection", label)
			}
		}
		for _, label := range []string{"B1", "B2"} {
			if browsers[label].saw(connA) {
				t.Errorf("%s got a call of alice's connection", label)
			}
		}
		for _, hb := range browsers {
			hb.mu.Lock()
			for s := range hb.sessions {
				if s == "" {
					t.Errorf("%s got a call without a relay session", hb.label)
				}
			}
			hb.mu.Unlock()
		}
	})

	t.Run("same ids from two clients, 10000 calls, none crossed", func(t *testing.T) {
		testSameIDs(t, p, ext["A2"], a2)
	})

	t.Run("proxy killed mid-call and restarted", func(t *testing.T) {
		testKillRestart(t, p, alice, bob, ext, a1, b2)
	})
	t.Logf("whole test %v", time.Since(start).Round(time.Millisecond))
}

// readReply reads r2's socket until the reply with id.
func readReply(r2 *rawMCP, id string) *relaywire.Message {
	r2.t.Helper()
	_ = r2.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, data, err := r2.ws.ReadMessage()
		if err != nil {
			r2.t.Fatal(err)
		}
		m, kind, perr := relaywire.Parse(data)
		if perr != nil {
			r2.t.Fatalf("bad message %s: %v", data, perr)
		}
		if kind == relaywire.KindReply && string(m.ID) == id {
			return m
		}
	}
}

// pacer keeps a client under the proxy's default per-connection rate
// (1,000/s, bursts of 2,000): a burst of 1,500, then 900/s.
type pacer struct {
	start time.Time
	burst float64
	rate  float64
}

func (p pacer) wait(sent int) {
	if float64(sent) < p.burst {
		return
	}
	at := p.start.Add(time.Duration((float64(sent) - p.burst + 1) / p.rate * float64(time.Second)))
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
}

// testSameIDs: two MCP clients of one user, connected to one extension,
// send the same ids (numbers and strings alternately) at the same time,
// 5,000 each; every reply must carry its own id, its own client's payload
// and its own connection, exactly once. The browser answers call n of
// either client only once call n of the other has arrived, so every id is
// in flight on both clients at once, however the machine schedules them.
func testSameIDs(t *testing.T, p *realProxy, ext string, hb *hostBrowser) {
	const perClient = 5000
	const window = 128
	type client struct {
		name     string
		r        *rawMCP
		conn     string
		inflight []atomic.Bool // by call number
		answered []atomic.Bool
	}
	clients := make([]*client, 2)
	for i := range clients {
		c := &client{name: fmt.Sprintf("c%d", i+1), r: dialMCP(t, p, "alice"),
			inflight: make([]atomic.Bool, perClient+1), answered: make([]atomic.Bool, perClient+1)}
		c.conn = c.r.connectTo(ext)
		clients[i] = c
	}
	rawID := func(n int) string {
		if n%2 == 0 {
			return strconv.Itoa(n)
		}
		return `"` + strconv.Itoa(n) + `"`
	}
	callOf := func(id json.RawMessage) int {
		s := string(id)
		s = strings.Trim(s, `"`)
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > perClient || rawID(n) != string(id) {
			return 0
		}
		return n
	}
	hb.mu.Lock()
	hb.twins = &rendezvous{waiting: map[int]chan struct{}{}, release: hb.release}
	hb.mu.Unlock()
	defer func() {
		hb.mu.Lock()
		hb.twins = nil
		hb.mu.Unlock()
	}()
	// On the first failure, say whether the host behind the browser is
	// still alive: a call that fails on the host link (a write to the
	// bridge socket refused, say) is the host's doing or the bridge's.
	describeHost := func() string {
		select {
		case <-hb.Exited():
			return fmt.Sprintf("the host process has exited (%v)", hb.ExitErr())
		default:
			return "the host process is still running"
		}
	}
	before := hb.calls.Load()
	var crossed, overlaps, errs atomic.Int64
	var firstBad sync.Once
	var wg sync.WaitGroup
	begin := make(chan struct{})
	t0 := time.Now()
	for ci, c := range clients {
		other := clients[1-ci]
		sem := make(chan struct{}, window)
		readerDone := make(chan struct{})
		wg.Add(2)
		go func() { // reader
			defer wg.Done()
			defer close(readerDone)
			got := 0
			for got < perClient {
				// Each reply waits for its twin: generous, for a busy machine.
				_ = c.r.ws.SetReadDeadline(time.Now().Add(60 * time.Second))
				_, data, err := c.r.ws.ReadMessage()
				if err != nil {
					t.Errorf("%s: reading after %d replies: %v", c.name, got, err)
					return
				}
				m, kind, perr := relaywire.Parse(data)
				if perr != nil {
					t.Errorf("%s: bad message %s: %v", c.name, data, perr)
					return
				}
				if kind != relaywire.KindReply {
					continue // status notifications
				}
				got++
				n := callOf(m.ID)
				want := fmt.Sprintf("A2 %s %d %s", c.name, n, c.conn)
				switch {
				case n == 0:
					crossed.Add(1)
					firstBad.Do(func() { t.Errorf("%s: reply with an id it never sent: %s", c.name, data) })
				case m.Error != nil:
					errs.Add(1)
					firstBad.Do(func() { t.Errorf("%s: call %d failed: %s; %s", c.name, n, m.Error, describeHost()) })
				case !c.inflight[n].Load() || c.answered[n].Swap(true):
					crossed.Add(1)
					firstBad.Do(func() { t.Errorf("%s: reply to id %s not in flight or answered twice: %s", c.name, m.ID, data) })
				case resultText(m) != want:
					crossed.Add(1)
					firstBad.Do(func() { t.Errorf("%s: reply to id %s carries %q, want %q", c.name, m.ID, resultText(m), want) })
				}
				if n != 0 {
					c.inflight[n].Store(false)
				}
				<-sem
			}
		}()
		go func() { // sender
			defer wg.Done()
			<-begin
			pc := pacer{start: time.Now(), burst: 1500, rate: 900}
			for n := 1; n <= perClient; n++ {
				pc.wait(n - 1)
				select {
				case sem <- struct{}{}:
				case <-readerDone:
					return
				}
				c.inflight[n].Store(true)
				if other.inflight[n].Load() {
					overlaps.Add(1) // the other client has the same id in flight right now
				}
				args := relaywire.MarshalParams(map[string]any{"name": "echo", "arguments": map[string]any{"client": c.name, "n": n}})
				msg := relaywire.AppendRequestRawID(nil, json.RawMessage(rawID(n)), "tools/call", args)
				if err := c.r.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
					t.Errorf("%s: send %d: %v", c.name, n, err)
					return
				}
			}
		}()
	}
	close(begin)
	wg.Wait()
	elapsed := time.Since(t0)
	for _, c := range clients {
		missing := 0
		for n := 1; n <= perClient; n++ {
			if !c.answered[n].Load() {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("%s: %d calls never answered", c.name, missing)
		}
	}
	if crossed.Load() != 0 || errs.Load() != 0 {
		t.Errorf("%d crossed replies, %d errors in %d calls", crossed.Load(), errs.Load(), 2*perClient)
	}
	if got := hb.calls.Load() - before; got != 2*perClient {
		t.Errorf("the browser behind the host got %d calls, want %d", got, 2*perClient)
	}
	// The test is about collisions: of each pair of calls with one id, the
	// second sent found the first in flight (it cannot be answered before
	// its twin reaches the browser).
	if overlaps.Load() < perClient {
		t.Errorf("only %d sends found the same id in flight on the other client, want at least %d", overlaps.Load(), perClient)
	}
	t.Logf("%d calls with colliding ids in %v (%.0f calls/s), %d sent while the same id was in flight on the other client; %d crossed",
		2*perClient, elapsed.Round(time.Millisecond), float64(2*perClient)/elapsed.Seconds(), overlaps.Load(), crossed.Load())
}

// testKillRestart: calls in flight through `connect`'s server and a raw
// client when the proxy dies end cleanly; the bridges' relays and the
// MCP side reconnect to the restarted proxy, and later calls succeed.
func testKillRestart(t *testing.T, p *realProxy, alice, bob *userBridge, ext map[string]string, a1, b2 *hostBrowser) {
	csA, rsA := mcpClient(t, p, "alice", ext["A1"])
	csB, rsB := mcpClient(t, p, "bob", ext["B2"])
	if got, isErr := callText(t, csA, "whoami"); got != "A1" || isErr {
		t.Fatalf("alice's whoami = %q (%v)", got, isErr)
	}
	if got, isErr := callText(t, csB, "whoami"); got != "B2" || isErr {
		t.Fatalf("bob's whoami = %q (%v)", got, isErr)
	}
	raw := dialMCP(t, p, "bob")
	raw.connectTo(ext["B2"])

	sdkDone := startCall(csA, "slow")
	rawDone := make(chan error, 1)
	raw.n++
	slowID := strconv.Itoa(raw.n)
	if err := raw.ws.WriteMessage(websocket.TextMessage, relaywire.AppendRequestRawID(nil, json.RawMessage(slowID), "tools/call",
		relaywire.MarshalParams(map[string]any{"name": "slow", "arguments": map[string]any{}}))); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = raw.ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			_, data, err := raw.ws.ReadMessage()
			if err != nil {
				rawDone <- err
				return
			}
			if m, kind, _ := relaywire.Parse(data); kind == relaywire.KindReply && string(m.ID) == slowID {
				// The proxy may see the extension's socket die before the
				// client's and answer for it: clean too, if it says so.
				var e relaywire.Error
				if m.Error != nil && json.Unmarshal(m.Error, &e) == nil && e.Code == relaywire.CodeExtensionGone {
					rawDone <- nil
				} else {
					rawDone <- fmt.Errorf("an unexpected reply: %s", data)
				}
				return
			}
		}
	}()
	for _, hb := range []*hostBrowser{a1, b2} {
		select {
		case <-hb.started:
		case <-time.After(10 * time.Second):
			t.Fatalf("the slow call never reached %s", hb.label)
		}
	}

	p.kill()
	killed := time.Now()
	select {
	case r := <-sdkDone:
		if r.err != nil || !r.isErr || !(strings.Contains(r.text, "dropped") || strings.Contains(r.text, "disconnected before answering")) {
			t.Fatalf("alice's in-flight call after the kill: %+v", r)
		}
		t.Logf("the in-flight call through connect failed %v after the kill: %q", time.Since(killed).Round(time.Millisecond), r.text)
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight call through connect did not fail after the proxy died")
	}
	select {
	case err := <-rawDone:
		// Either -32005 from the proxy, or the socket cut (the proxy died
		// before it could say anything): never a result, never a hang.
		if err != nil && !strings.Contains(err.Error(), "unexpected EOF") && !strings.Contains(err.Error(), "connection reset") &&
			!strings.Contains(err.Error(), "close 1006") {
			t.Errorf("the raw client's in-flight call: %v", err)
		}
		t.Logf("the raw client's in-flight call ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the raw client's socket did not end after the proxy died")
	}
	// Each browser behind its host is told to stop the call it was running.
	for _, hb := range []*hostBrowser{a1, b2} {
		select {
		case id := <-hb.cancelled:
			if !strings.HasPrefix(id, "conn-") {
				t.Errorf("%s: cancelled id %q", hb.label, id)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s was not told its call was cancelled", hb.label)
		}
	}
	// The bridges show the relay down, with a reason.
	for _, ub := range []*userBridge{alice, bob} {
		testutil.WaitFor(t, ub.user+"'s status to show both relays down", func() bool { return relaysDown(ub) == 2 })
	}
	// A call made while the proxy is down waits for it (ReadyWait).
	downCall := startCall(csB, "whoami")
	// Time for the call to reach the bridge and wait there: nothing shows
	// a call waiting for the relay, and one that came late would pass as
	// well (it would only not have waited), so no assertion hangs on it.
	time.Sleep(200 * time.Millisecond)

	p.start()
	restarted := time.Now()
	againA, againB := alice.waitRelay(2), bob.waitRelay(2)
	if againA["instance-a1"].ExtensionID != ext["A1"] || againB["instance-b2"].ExtensionID != ext["B2"] {
		t.Errorf("extension ids changed across the restart: %+v %+v, were %v", againA, againB, ext)
	}
	t.Logf("both bridges' relays reconnected %v after the restart", time.Since(restarted).Round(time.Millisecond))
	select {
	case r := <-downCall:
		if r.err != nil || r.isErr || r.text != "B2" {
			t.Errorf("bob's call made while the proxy was down: %+v", r)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("bob's call made while the proxy was down never ended")
	}
	if got, isErr := callText(t, csA, "whoami"); got != "A1" || isErr {
		t.Fatalf("alice's whoami after the restart = %q (error %v)", got, isErr)
	}
	for _, rs := range []*relay.RemoteServer{rsA, rsB} {
		if _, ok := rs.Remote().Connected(); !ok {
			t.Errorf("connect's Remote not connected after the restart: %s", rs.Remote().LastError())
		}
	}
	t.Logf("calls through connect succeed %v after the restart", time.Since(restarted).Round(time.Millisecond))
	// A fresh raw client works too.
	r2 := dialMCP(t, p, "bob")
	conn := r2.connectTo(ext["B2"])
	if got := resultText(r2.echo("bob", 7)); got != "B2 bob 7 "+conn {
		t.Errorf("echo after the restart = %q", got)
	}
}
