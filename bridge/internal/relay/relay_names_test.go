package relay_test

// One holder per server name (docs/relay.md), seen from the bridge: two
// relay clients of one user offer a gateway server of the same name to a
// real proxy. The second is refused with the proxy's sentence, shown in
// its status, logged once, and retried only at the longest backoff; one
// set to replace takes the name over, and the one it replaced says so and
// does not take it back; a bridge whose connection dropped without the
// proxy noticing comes back under its name.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// whoGateway stands in for a bridge's gateway with one server, "notes",
// that answers every request with the name of its bridge; it is served by
// the real session engine.
type whoGateway struct {
	engine *mcphttp.Server
	who    string
}

func newWhoGateway(t *testing.T, who string) whoGateway {
	e := mcphttp.NewServer(mcphttp.ServerOptions{})
	t.Cleanup(e.Close)
	return whoGateway{engine: e, who: who}
}

func (whoGateway) Names() []string { return []string{"notes"} }

func (g whoGateway) Route(name string) (*mcphttp.Server, mcphttp.Target, bool) {
	return g.engine, whoTarget{g.who}, name == "notes"
}

// whoTarget is whoGateway's "notes".
type whoTarget struct{ who string }

func (whoTarget) Name() string { return "notes" }

func (w whoTarget) Open(context.Context, *mcphttp.Session, json.RawMessage) (json.RawMessage, error) {
	return relaywire.MarshalParams(map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "serverInfo": map[string]string{"name": w.who, "version": "1"}}), nil
}

func (w whoTarget) Request(_ context.Context, _ *mcphttp.Session, m *mcphttp.Message, reply mcphttp.Sink) {
	reply.Send(relaywire.AppendResult(nil, m.ID, relaywire.MarshalParams(map[string]any{"who": w.who})), true)
}

func (whoTarget) Notification(*mcphttp.Session, *mcphttp.Message)   {}
func (whoTarget) Response(*mcphttp.Session, *mcphttp.Message) error { return nil }
func (whoTarget) Close(*mcphttp.Session)                            {}
func (w whoTarget) Discover(context.Context) (json.RawMessage, error) {
	return relaywire.MarshalParams(map[string]any{"who": w.who}), nil
}

type noBrowsers struct{}

func (noBrowsers) Browsers() []*hostlink.Browser { return nil }

// namedRelay is one bridge's relay client offering whoGateway's "notes".
type namedRelay struct {
	*relay.Client
	logs *testutil.Watch
}

func startNamedRelay(t *testing.T, url, tok, host string, replace bool, maxBackoff time.Duration) *namedRelay {
	t.Helper()
	logs := &testutil.Watch{}
	var w io.Writer = logs
	if testing.Verbose() {
		w = io.MultiWriter(logs, logWriter{t, "relay-" + host})
	}
	c := relay.New(relay.Options{URL: url, Token: tok, Links: noBrowsers{}, Servers: newWhoGateway(t, host), Host: host,
		ReplaceServers: replace, MinBackoff: time.Millisecond, MaxBackoff: maxBackoff, ServersPoll: time.Hour,
		Logger: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &namedRelay{Client: c, logs: logs}
}

// wait polls the relay's "notes" connection until ok holds, for 15 s.
func (r *namedRelay) wait(t *testing.T, what string, ok func(protocol.RelayInfo) bool) protocol.RelayInfo {
	t.Helper()
	var st []protocol.RelayInfo
	testutil.WaitFor(t, "the relay's notes to be "+what, func() bool {
		st = r.ServerStatus()
		return len(st) == 1 && ok(st[0])
	})
	return st[0]
}

func connected(r protocol.RelayInfo) bool {
	return r.State == relay.StateConnected && r.ExtensionID != ""
}

// whoAnswers connects a new client of user to the extension id and
// returns which bridge answers its request.
func whoAnswers(t *testing.T, p *realProxy, user, id string) string {
	t.Helper()
	c := dialClient(t, p, user)
	if m := c.call(relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: id}); m.Error != nil {
		t.Fatalf("connect %s: %s", id, m.Error)
	}
	m := c.call("tools/list", struct{}{})
	var res struct{ Who string }
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		t.Fatalf("tools/list: %s %s", m.Result, m.Error)
	}
	return res.Who
}

func TestRelayServerNameRefused(t *testing.T) {
	p := startProxy(t)
	laptop := startNamedRelay(t, p.url(), p.token("alice", token.KindExtension), "laptop", false, time.Minute)
	held := laptop.wait(t, "connected", connected)

	const maxBackoff = 300 * time.Millisecond
	start := time.Now()
	desktop := startNamedRelay(t, p.url(), p.token("alice", token.KindExtension), "desktop", false, maxBackoff)
	st := desktop.wait(t, "refused three times", func(r protocol.RelayInfo) bool { return r.State == relay.StateNameTaken && r.Attempt >= 3 })
	// Attempts 2 and 3 each waited at least half of MaxBackoff (its
	// jitter), where a drop's backoff would have started at 1 ms.
	if d := time.Since(start); d < maxBackoff {
		t.Errorf("three refused attempts in %v: the relay did not wait the longest backoff between them", d)
	}
	for _, want := range []string{`server name "notes" is already offered by "notes (laptop)"`, held.ExtensionID, "relay.replace_servers"} {
		if !strings.Contains(st.Error, want) {
			t.Errorf("the status's error %q does not say %q", st.Error, want)
		}
	}
	if n := strings.Count(desktop.logs.String(), "a server is not offered through the relay"); n != 1 {
		t.Errorf("the refusal was logged %d times in %d attempts, want once:\n%s", n, st.Attempt, desktop.logs)
	}
	// The holder keeps serving new sessions.
	if who := whoAnswers(t, p, "alice", held.ExtensionID); who != "laptop" {
		t.Fatalf("%s answered, want laptop", who)
	}
	if now := laptop.wait(t, "connected", connected); now.ExtensionID != held.ExtensionID {
		t.Fatalf("the holder's registration changed: %+v", now)
	}
}

func TestRelayServerNameReplace(t *testing.T) {
	p := startProxy(t)
	const maxBackoff = 200 * time.Millisecond
	laptop := startNamedRelay(t, p.url(), p.token("alice", token.KindExtension), "laptop", true, maxBackoff)
	laptop.wait(t, "connected", connected)

	desktop := startNamedRelay(t, p.url(), p.token("alice", token.KindExtension), "desktop", true, maxBackoff)
	taken := desktop.wait(t, "connected", connected)
	st := laptop.wait(t, "taken over", func(r protocol.RelayInfo) bool { return r.State == relay.StateNameTaken })
	if !strings.Contains(st.Error, `server name "notes" was taken over by "notes (desktop)"`) {
		t.Errorf("the replaced bridge's status says %q", st.Error)
	}
	// It retries without asking to replace: refused, the name stays.
	st = laptop.wait(t, "refused", func(r protocol.RelayInfo) bool {
		return r.State == relay.StateNameTaken && strings.Contains(r.Error, `already offered by "notes (desktop)"`)
	})
	if now := desktop.wait(t, "connected", connected); now.ExtensionID != taken.ExtensionID || now.Attempt != 0 {
		t.Fatalf("the replacing bridge lost the name again: %+v", now)
	}
	if who := whoAnswers(t, p, "alice", taken.ExtensionID); who != "desktop" {
		t.Fatalf("%s answered, want desktop", who)
	}
	logs := laptop.logs.String()
	if strings.Count(logs, "a server is not offered through the relay") != 2 {
		t.Errorf("want the takeover and the refusal logged once each:\n%s", logs)
	}
}

// cutNet forwards TCP connections to an address; cut ends the client
// sides of those forwarded so far and leaves their other sides open and
// silent: a network that drops a laptop's connection without the proxy
// hearing of it.
type cutNet struct {
	ln net.Listener

	mu      sync.Mutex
	clients []net.Conn
	ups     []net.Conn
}

func startCutNet(t *testing.T, addr string) *cutNet {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &cutNet{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, c := range append(n.clients, n.ups...) {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			n.mu.Lock()
			n.clients, n.ups = append(n.clients, c), append(n.ups, up)
			n.mu.Unlock()
			go io.Copy(up, c) // ends when c does, leaving up open
			go io.Copy(c, up)
		}
	}()
	return n
}

func (n *cutNet) cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.clients {
		c.Close()
	}
	n.clients = nil
}

// TestRelayServerNameSameBridgeReconnects: the laptop's connection drops
// where the proxy cannot see it; its relay registers "notes" again while
// the proxy still holds the dead connection, and is accepted: it is the
// same bridge (the same name), not another one taking the name.
func TestRelayServerNameSameBridgeReconnects(t *testing.T) {
	p := startProxy(t)
	cn := startCutNet(t, p.addr)
	laptop := startNamedRelay(t, "ws://"+cn.ln.Addr().String(), p.token("alice", token.KindExtension), "laptop", false, time.Minute)
	before := laptop.wait(t, "connected", connected)
	cn.cut()
	after := laptop.wait(t, "connected again", func(r protocol.RelayInfo) bool { return connected(r) && r.ExtensionID != before.ExtensionID })
	if who := whoAnswers(t, p, "alice", after.ExtensionID); who != "laptop" {
		t.Fatalf("%s answered, want laptop", who)
	}
	// The proxy still holds the dead connection: both are the laptop's.
	var list relaywire.ListExtensionsResult
	m := dialClient(t, p, "alice").call(relaywire.MethodListExtensions, struct{}{})
	if m.Error != nil || json.Unmarshal(m.Result, &list) != nil {
		t.Fatalf("list_extensions: %s %s", m.Result, m.Error)
	}
	ids := map[string]string{}
	for _, e := range list.Extensions {
		ids[e.ID] = e.Name
	}
	if len(ids) != 2 || ids[before.ExtensionID] != "notes (laptop)" || ids[after.ExtensionID] != "notes (laptop)" {
		t.Fatalf("alice's extensions %+v; want the laptop's dead and new connections", list.Extensions)
	}
	desktop := startNamedRelay(t, p.url(), p.token("alice", token.KindExtension), "desktop", false, time.Minute)
	st := desktop.wait(t, "refused", func(r protocol.RelayInfo) bool { return r.State == relay.StateNameTaken })
	if !strings.Contains(st.Error, `already offered by "notes (laptop)"`) {
		t.Fatalf("the desktop was told %q", st.Error)
	}
}
