package hostlink

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// step is one message a test peer sends: a request whose reply must be a
// result (want "") or an error mentioning want, or a notification.
type step struct {
	method string
	params any
	notif  bool
	want   string
	code   int64 // the error's code; 0 means -32600
}

func (st step) run(t *testing.T, p *peer) {
	t.Helper()
	if st.notif {
		if err := p.write(map[string]any{"jsonrpc": "2.0", "method": st.method, "params": st.params}); err != nil {
			t.Fatalf("%s: %v", st.method, err)
		}
		return
	}
	m, err := p.call(st.method, st.params)
	if err != nil {
		t.Fatalf("%s: %v", st.method, err)
	}
	switch {
	case st.want == "" && m.Error != nil:
		t.Fatalf("%s: error %d %q, want a result", st.method, m.Error.Code, m.Error.Message)
	case st.want == "":
	case m.Error == nil:
		t.Fatalf("%s: result %s, want an error mentioning %q", st.method, m.Result, st.want)
	default:
		code := st.code
		if code == 0 {
			code = jsonrpc2.CodeInvalidRequest
		}
		if int64(m.Error.Code) != code || !strings.Contains(m.Error.Message, st.want) {
			t.Fatalf("%s: error %d %q, want %d mentioning %q", st.method, m.Error.Code, m.Error.Message, code, st.want)
		}
	}
}

// answerOne answers the next request the bridge sends p with its params
// and hands that request to the test.
func answerOne(t *testing.T, p *peer) <-chan message {
	got := make(chan message, 1)
	go func() {
		defer close(got)
		m, err := p.read()
		if err != nil || m.Method == "" {
			t.Errorf("waiting for the bridge's request: %+v, %v", m, err)
			return
		}
		if err := p.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": m.Params}); err != nil {
			t.Errorf("answering %s: %v", m.Method, err)
		}
		got <- m
	}()
	return got
}

// Issue 13, finding 7: a peer that skipped host.attach (or whose attach
// was refused) must never become a browser: not listed, not the default,
// never handed a client's call.
func TestOnlyAttachedHostsCarryBrowsers(t *testing.T) {
	hello := step{method: protocol.Hello, params: helloParams("instance-peer")}
	refusedHello := step{method: protocol.Hello, params: helloParams("instance-peer"), want: "send host.attach as the first message"}
	afterRefusal := step{method: protocol.Hello, params: helloParams("instance-peer"), want: "host.attach was refused"}
	hostLog := step{method: protocol.HostLog, notif: true, params: map[string]any{"level": "WARN", "msg": "a line from the peer"}}
	for _, tc := range []struct {
		name        string
		steps       []step
		wantHosts   int
		wantBrowser bool
		wantHandled int64
	}{
		{name: "hello first", steps: []step{refusedHello}},
		{name: "bad origin, then hello", steps: []step{
			{method: protocol.HostAttach, params: attachParams("chrome-extension://bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/"), want: "is not allowed"},
			afterRefusal,
		}},
		{name: "old protocol, then hello", steps: []step{
			{method: protocol.HostAttach, params: map[string]any{"protocol": 0, "origin": goodOrigin}, want: "install matching versions"},
			afterRefusal,
		}},
		{name: "attach after another message", steps: []step{
			{method: protocol.BridgeStatus},
			{method: protocol.HostAttach, params: attachParams(goodOrigin), want: "must be the first message"},
			afterRefusal,
		}},
		{name: "browser methods without attach", steps: []step{
			{method: protocol.SessionClose, params: map[string]any{"session": "local-1"}, want: "send host.attach"},
			{method: "notifications/tools/list_changed", notif: true},
			hostLog,
			refusedHello,
			{method: protocol.Ping},
		}},
		{name: "attached twice", wantHosts: 1, steps: []step{
			{method: protocol.HostAttach, params: attachParams(goodOrigin)},
			{method: protocol.HostAttach, params: attachParams(goodOrigin), want: "already attached"},
		}},
		// The control: the same messages after an attach are a browser's.
		{name: "attached host", wantHosts: 1, wantBrowser: true, wantHandled: 1, steps: []step{
			{method: protocol.HostAttach, params: attachParams(goodOrigin)},
			hello,
			{method: protocol.SessionClose, params: map[string]any{"session": "local-1"}},
			hostLog,
			{method: protocol.Ping},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testbrowser.SyncBuffer
			var handled, changes atomic.Int64
			s, socket := serveServer(t, Options{
				Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
				AllowedOrigins: []string{goodOrigin},
				Handle: func(context.Context, *Browser, *jsonrpc2.Request) (any, error) {
					handled.Add(1)
					return struct{}{}, nil
				},
				OnChange: func() { changes.Add(1) },
			})
			p := dialPeer(t, socket)
			for _, st := range tc.steps {
				st.run(t, p)
			}
			// A ping answered after the notifications proves they were read.
			step{method: protocol.Ping}.run(t, p)

			_, listed := s.Browser("instance-peer")
			st := s.Status()
			if listed != tc.wantBrowser || len(s.Browsers()) != len(st.Browsers) || (len(st.Browsers) == 1) != tc.wantBrowser {
				t.Fatalf("peer listed = %v, Browsers() = %d, status browsers = %+v; want listed %v", listed, len(s.Browsers()), st.Browsers, tc.wantBrowser)
			}
			if st.Hosts != tc.wantHosts {
				t.Errorf("status hosts = %d, want %d", st.Hosts, tc.wantHosts)
			}
			if want := map[bool]int64{true: 1}[tc.wantBrowser]; changes.Load() != want {
				t.Errorf("OnChange called %d times, want %d", changes.Load(), want)
			}
			if handled.Load() != tc.wantHandled {
				t.Errorf("Handle called %d times, want %d", handled.Load(), tc.wantHandled)
			}
			// host.log reaches the bridge's log from an attached host only.
			if logged := strings.Contains(logs.String(), "a line from the peer"); logged != tc.wantBrowser {
				t.Errorf("host.log logged = %v, want %v; log:\n%s", logged, tc.wantBrowser, logs.String())
			}

			// A client's tool call goes to an attached browser, never to
			// the peer.
			target, want := "instance-peer", p
			if !tc.wantBrowser {
				legit := dialPeer(t, socket)
				step{method: protocol.HostAttach, params: attachParams(goodOrigin)}.run(t, legit)
				step{method: protocol.Hello, params: helloParams("instance-legit")}.run(t, legit)
				target, want = "instance-legit", legit
			}
			def, ok := s.Default()
			if !ok || def.ID() != target {
				t.Fatalf("default browser = %v, %v; want %s", def, ok, target)
			}
			got := answerOne(t, want)
			ctx, cancel := context.WithTimeout(context.Background(), peerDeadline)
			defer cancel()
			args := map[string]any{"name": "navigate", "arguments": map[string]any{"url": "https://bank.example/"}}
			if _, err := def.Call(ctx, "local-7f3a:1", "tools/call", args); err != nil {
				t.Fatal(err)
			}
			if m := <-got; m.Method != "tools/call" || !strings.Contains(string(m.Params), "bank.example") {
				t.Fatalf("%s received %s %s", target, m.Method, m.Params)
			}
			// The peer's next frame is the answer to its ping: no call
			// was queued for it (peer.call fails on any request).
			step{method: protocol.Ping}.run(t, p)
		})
	}
}

// closedByBridge tells a connection the bridge closed from one still open
// when the read deadline passed.
func closedByBridge(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestUnattachedConnectionsTimeOut(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	var logs testbrowser.SyncBuffer
	s, socket := serveServer(t, Options{UnattachedTimeout: timeout, AllowedOrigins: []string{goodOrigin},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	// A status client asks and closes well within the timeout.
	status := dialPeer(t, socket)
	var st protocol.StatusResult
	if err := json.Unmarshal(status.mustCall(protocol.BridgeStatus, nil), &st); err != nil || st.PID != os.Getpid() {
		t.Fatalf("bridge.status = %+v, %v", st, err)
	}
	status.c.Close()

	// A host attaches at once; a silent peer and a status client that
	// lingers connect after it, so their timers start later than its own
	// would have.
	host := dialPeer(t, socket)
	host.mustCall(protocol.HostAttach, attachParams(goodOrigin))
	start := time.Now()
	silent := dialPeer(t, socket)
	lingering := dialPeer(t, socket)
	lingering.mustCall(protocol.BridgeStatus, nil)
	for name, p := range map[string]*peer{"silent": silent, "lingering status client": lingering} {
		if _, err := p.read(); !closedByBridge(err) {
			t.Fatalf("%s: read = %v, want the bridge to close the connection", name, err)
		}
	}
	if waited := time.Since(start); waited < timeout {
		t.Errorf("unattached connections closed after %v, before the %v timeout", waited, timeout)
	}
	step{method: protocol.Ping}.run(t, host)
	step{method: protocol.Hello, params: helloParams("instance-host")}.run(t, host)
	if _, ok := s.Browser("instance-host"); !ok {
		t.Fatal("the attached host's browser is not listed")
	}
	testutil.WaitFor(t, "the timeout to be logged", func() bool { return strings.Contains(logs.String(), "did not attach in time") })
}

// serveCounting runs a server whose log the test can read line by line.
func serveCounting(t *testing.T, opts Options, logEvery time.Duration) (*Server, string, *testbrowser.SyncBuffer) {
	logs := new(testbrowser.SyncBuffer)
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	opts.AllowedOrigins = []string{goodOrigin}
	s := NewServer(opts)
	s.refusalLogEvery = logEvery
	return s, serveOn(t, s), logs
}

// refusedLogged sums the "refused" counts of the log's lines.
func refusedLogged(t *testing.T, logs *testbrowser.SyncBuffer) (total, lines int) {
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec struct {
			Refused int    `json:"refused"`
			Reason  string `json:"reason"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec.Refused > 0 {
			if !strings.Contains(rec.Reason, "without host.attach") {
				t.Fatalf("refusal logged without its reason: %s", sc.Text())
			}
			total += rec.Refused
			lines++
		}
	}
	return total, lines
}

// answered says whether the bridge answers a ping on p: false when it
// closed the connection instead.
func answered(p *peer) bool {
	m, err := p.call(protocol.Ping, nil)
	return err == nil && m.Error == nil
}

func TestUnattachedConnectionsCapped(t *testing.T) {
	const max = 4
	_, socket, logs := serveCounting(t, Options{MaxUnattached: max, UnattachedTimeout: 10 * time.Minute}, time.Hour)
	var held []*peer
	for i := range max {
		p := dialPeer(t, socket)
		if !answered(p) {
			t.Fatalf("connection %d of %d was refused", i+1, max)
		}
		held = append(held, p)
	}
	if answered(dialPeer(t, socket)) {
		t.Fatalf("connection %d was served; the cap is %d", max+1, max)
	}
	// The bridge may close the refused connection before it logs the
	// refusal: wait for the line, then count.
	testutil.WaitFor(t, "the refusal in the log", func() bool { n, _ := refusedLogged(t, logs); return n > 0 })
	if n, _ := refusedLogged(t, logs); n != 1 {
		t.Fatalf("refusals logged: %d, want 1; log:\n%s", n, logs.String())
	}

	// A closed connection frees its slot.
	held[0].c.Close()
	var attached *peer
	testutil.WaitFor(t, "a freed slot to admit a host", func() bool {
		p := dialPeer(t, socket)
		m, err := p.call(protocol.HostAttach, attachParams(goodOrigin))
		if err != nil || m.Error != nil {
			p.c.Close()
			return false
		}
		attached = p
		return true
	})
	// An attached host holds no slot: one more unattached connection fits,
	// and then none.
	if !answered(dialPeer(t, socket)) {
		t.Fatal("the attached host still holds a slot: an unattached connection was refused")
	}
	if answered(dialPeer(t, socket)) {
		t.Fatalf("more than %d unattached connections were served", max)
	}
	step{method: protocol.Hello, params: helloParams("instance-capped")}.run(t, attached)
}

// A flood of connections holds the bridge to DefaultMaxUnattached
// descriptors, and every refusal is counted in the log.
func TestUnattachedFlood(t *testing.T) {
	const flood = 1000
	// Descriptors are counted where /proc is (Linux, where CI runs); the
	// cap and the log lines are checked everywhere.
	_, procErr := os.ReadDir("/proc/self/fd")
	fds := func() int {
		ents, _ := os.ReadDir("/proc/self/fd")
		return len(ents)
	}
	const logEvery = 50 * time.Millisecond
	s, socket, logs := serveCounting(t, Options{UnattachedTimeout: 10 * time.Minute}, logEvery)
	before := fds()
	start := time.Now()
	peers := make([]*peer, 0, flood)
	for range flood {
		peers = append(peers, dialPeer(t, socket))
	}
	served := 0
	for _, p := range peers {
		if answered(p) {
			served++
		}
	}
	during := fds()
	// This process holds both ends: the flood's own descriptors are the
	// client ends; the rest are what the bridge kept.
	bridgeHeld := during - before - flood
	t.Logf("flood of %d: %d served, %d refused; descriptors before %d, during %d (bridge's share %d)", flood, served, flood-served, before, during, bridgeHeld)
	if served != DefaultMaxUnattached {
		t.Errorf("%d connections served, want the cap %d", served, DefaultMaxUnattached)
	}
	if procErr == nil && bridgeHeld > DefaultMaxUnattached+2 {
		t.Errorf("the bridge holds %d descriptors for a flood capped at %d", bridgeHeld, DefaultMaxUnattached)
	}
	testutil.WaitFor(t, "every refusal to be logged", func() bool { n, _ := refusedLogged(t, logs); return n == flood-served })
	// One line per logEvery at most, however many were refused: the bound
	// follows how long the flood took (a busy machine stretches it), and
	// stays far below a line per refusal.
	maxLines := int(time.Since(start)/logEvery) + 2
	if _, lines := refusedLogged(t, logs); lines > maxLines || lines > (flood-served)/10 {
		t.Errorf("%d log lines for one flood of %d refusals over %v, want at most %d", lines, flood-served, time.Since(start).Round(time.Millisecond), min(maxLines, (flood-served)/10))
	}
	for _, p := range peers {
		p.c.Close()
	}
	if procErr == nil {
		testutil.WaitFor(t, "the bridge to let go of the flood", func() bool { return fds() <= before })
	}
	t.Logf("descriptors after the flood closed: %d", fds())
	if st := s.Status(); st.Hosts != 0 || len(st.Browsers) != 0 {
		t.Errorf("status after the flood: %+v", st)
	}
}
