package relay_test

// Notifications through the relay, end to end: a browser's progress for a
// relayed call reaches the one MCP client of `connect` that made it, with
// its own token; a client's cancellation reaches the browser as the mapped
// id of its call alone; a browser's list_changed makes `connect` list the
// tools again and tell its client.
//
// The bridge here is the part of `browserbridge serve` the relay needs (the
// host link and the relay client), wired as the daemon must wire them: the
// link's Handle gives browser notifications to relay.Client.HandleBrowserMessage
// first.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// linkBridge is a host link and a relay client.
type linkBridge struct {
	t     *testing.T
	links *hostlink.Server
	relay *relay.Client
	sock  string
	local chan string // methods of browser notifications the relay did not consume
}

func startLinkBridge(t *testing.T, p *realProxy, user string) *linkBridge {
	dir, err := os.MkdirTemp("", "bbn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	lb := &linkBridge{t: t, sock: filepath.Join(dir, "b.sock"), local: make(chan string, 256)}
	ln, err := ipc.Listen(lb.sock)
	if err != nil {
		t.Fatal(err)
	}
	lb.links = hostlink.NewServer(hostlink.Options{
		Logger: testLog(t, "link-"+user),
		Handle: func(_ context.Context, b *hostlink.Browser, req *jsonrpc2.Request) (any, error) {
			if lb.relay.HandleBrowserMessage(b, req) {
				return nil, nil
			}
			select {
			case lb.local <- req.Method:
			default:
			}
			if req.Notif {
				return nil, nil
			}
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "no method " + req.Method}
		},
		OnChange: func() { lb.relay.BrowsersChanged() },
	})
	lb.relay = relay.New(relay.Options{URL: p.url(), Token: p.token(user, token.KindExtension), Links: lb.links,
		Logger: testLog(t, "relay-"+user), MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); lb.links.Serve(ctx, ln) }()
	go func() { defer wg.Done(); lb.relay.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); ln.Close() })
	return lb
}

// extensionID waits until the relay of the browser is connected.
func (lb *linkBridge) extensionID(browserID string) string {
	lb.t.Helper()
	var id string
	testutil.WaitFor(lb.t, "the relay of "+browserID+" to connect", func() bool {
		for _, r := range lb.relay.Status() {
			if r.BrowserID == browserID && r.State == relay.StateConnected && r.ExtensionID != "" {
				id = r.ExtensionID
			}
		}
		return id != ""
	})
	return id
}

// toolBrowser is a fake extension whose tools report progress, wait to be
// cancelled, and change on demand.
//
//   - "progress" {who}: two notifications/progress against its
//     _meta.progressToken ("<who> 1/2", "<who> 2/2"), if it has one, then
//     a result.
//   - "slow" {who}: tells the test its _meta.progressToken (the call's link
//     id, when the caller asked for progress), then waits for release.
type toolBrowser struct {
	*testbrowser.Browser
	tokens    chan string // _meta.progressToken of each call
	slow      chan string // who and token of each slow call, when it starts
	release   chan struct{}
	relOnce   sync.Once
	cancelled chan string // requestId of each notifications/cancelled

	mu    sync.Mutex
	extra []string // more tools, to change the list
}

func (lb *linkBridge) attachTools(label string) *toolBrowser {
	t := lb.t
	c, err := ipc.Dial(context.Background(), lb.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tb := &toolBrowser{tokens: make(chan string, 64), slow: make(chan string, 16), release: make(chan struct{}), cancelled: make(chan string, 64)}
	t.Cleanup(tb.releaseAll)
	tb.Browser = testbrowser.Attach(c, func(method string, params json.RawMessage) (any, map[string]any) {
		switch method {
		case "tools/list":
			tools := []map[string]any{}
			tb.mu.Lock()
			names := append([]string{"progress", "slow"}, tb.extra...)
			tb.mu.Unlock()
			for _, n := range names {
				tools = append(tools, map[string]any{"name": n, "description": n, "inputSchema": map[string]any{"type": "object"}})
			}
			return map[string]any{"tools": tools}, nil
		case "tools/call":
		default:
			return nil, map[string]any{"code": -32601, "message": "no method " + method}
		}
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Who string `json:"who"`
			} `json:"arguments"`
			Meta struct {
				Token any `json:"progressToken"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(params, &p)
		tok, _ := p.Meta.Token.(string)
		tb.tokens <- tok
		switch p.Name {
		case "progress":
			for i := 1; i <= 2 && tok != ""; i++ {
				_ = tb.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
					"params": map[string]any{"progressToken": p.Meta.Token, "progress": i, "total": 2, "message": fmt.Sprintf("%s %d/2", p.Arguments.Who, i)}})
			}
			return map[string]any{"content": []map[string]any{{"type": "text", "text": "done " + p.Arguments.Who}}}, nil
		case "slow":
			tb.slow <- p.Arguments.Who + " " + tok
			<-tb.release
			return map[string]any{"content": []map[string]any{{"type": "text", "text": "slow done " + p.Arguments.Who}}}, nil
		}
		return map[string]any{"content": []map[string]any{{"type": "text", "text": p.Name}}}, nil
	})
	tb.OnNotify(func(method string, p json.RawMessage) {
		if method != relaywire.MethodCancelled {
			return
		}
		var n struct {
			RequestID string `json:"requestId"`
		}
		_ = json.Unmarshal(p, &n)
		tb.cancelled <- n.RequestID
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tb.Hello(ctx, "instance-"+strings.ToLower(label)); err != nil {
		t.Fatal(err)
	}
	return tb
}

// releaseAll lets the slow calls answer.
func (tb *toolBrowser) releaseAll() { tb.relOnce.Do(func() { close(tb.release) }) }

// progressLog collects the progress notifications a client receives.
type progressLog struct {
	mu  sync.Mutex
	got []*mcp.ProgressNotificationParams
}

func (l *progressLog) add(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	l.mu.Lock()
	l.got = append(l.got, req.Params)
	l.mu.Unlock()
}

func (l *progressLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.got {
		out = append(out, fmt.Sprintf("%v %v/%v %s", p.ProgressToken, p.Progress, p.Total, p.Message))
	}
	return out
}

func callWho(ctx context.Context, cs *mcp.ClientSession, tool, who string, progressToken any) (string, error) {
	params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"who": who}}
	if progressToken != nil {
		params.SetProgressToken(progressToken)
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", b.String())
	}
	return b.String(), nil
}

// TestRelayProgress: two `connect` clients of one browser use the same
// progress token at once; each gets exactly its own call's progress, in
// order and before the result, with its own token. A raw client connected
// to the same browser and the bridge's local side get none.
func TestRelayProgress(t *testing.T) {
	p := startProxy(t)
	lb := startLinkBridge(t, p, "alice")
	tb := lb.attachTools("P1")
	ext := lb.extensionID("instance-p1")

	var logs [2]progressLog
	var clients [2]*mcp.ClientSession
	for i := range clients {
		clients[i], _ = mcpClientWith(t, p, "alice", ext, &mcp.ClientOptions{ProgressNotificationHandler: logs[i].add})
	}
	raw := dialMCP(t, p, "alice")
	raw.connectTo(ext)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, cs := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprint("c", i)
			for range 3 {
				got, err := callWho(ctx, cs, "progress", who, "same-token")
				if err != nil || got != "done "+who {
					errs <- fmt.Errorf("%s: %q %v", who, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range logs {
		who := fmt.Sprint("c", i)
		var want []string
		for range 3 {
			want = append(want, "same-token 1/2 "+who+" 1/2", "same-token 2/2 "+who+" 2/2")
		}
		// The relay delivers progress ahead of the result, but the SDK's
		// client may run its handler after CallTool returned.
		var got []string
		testutil.WaitFor(t, fmt.Sprintf("client %s's %d progress notifications", who, len(want)), func() bool {
			got = logs[i].list()
			return len(got) >= len(want)
		})
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("client %s got progress\n%q\nwant\n%q", who, got, want)
		}
	}
	// The browser was asked for progress against the relayed call's own id.
	for range 6 {
		if tok := <-tb.tokens; !strings.HasPrefix(tok, relaywire.PrefixConnection) || !strings.Contains(tok, ":") {
			t.Errorf("the browser got progressToken %q, want the mapped call id", tok)
		}
	}
	// A call without a token: no progress token reaches the browser.
	if _, err := callWho(ctx, clients[0], "progress", "c0", nil); err != nil {
		t.Fatal(err)
	}
	if tok := <-tb.tokens; tok != "" {
		t.Errorf("progressToken %q on a call without one", tok)
	}
	_ = raw.ws.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	for {
		_, data, err := raw.ws.ReadMessage()
		if err != nil {
			break
		}
		if strings.Contains(string(data), "progress") {
			t.Errorf("a bystander client got %s", data)
		}
	}
	if n := len(logs[0].list()); n != 6 {
		t.Errorf("client c0 got %d progress notifications, want 6", n)
	}
	for {
		select {
		case m := <-lb.local:
			if m == relaywire.MethodProgress {
				t.Errorf("a relayed call's progress reached the bridge's local side")
			}
			continue
		default:
		}
		break
	}
}

// TestRelayCancel: two `connect` clients, whose request ids are alike, each
// have a slow call in flight on one browser; the first client cancels. The
// browser is told to cancel exactly the first call (its mapped id), and
// the second call still completes.
func TestRelayCancel(t *testing.T) {
	p := startProxy(t)
	lb := startLinkBridge(t, p, "alice")
	tb := lb.attachTools("K1")
	ext := lb.extensionID("instance-k1")
	c0, _ := mcpClientWith(t, p, "alice", ext, nil)
	c1, _ := mcpClientWith(t, p, "alice", ext, nil)

	ctx0, cancel0 := context.WithCancel(context.Background())
	defer cancel0()
	done0 := make(chan error, 1)
	go func() {
		_, err := callWho(ctx0, c0, "slow", "c0", "t") // a token, so the browser learns the call's id
		done0 <- err
	}()
	done1 := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		got, err := callWho(ctx, c1, "slow", "c1", "t")
		if err != nil {
			got = err.Error()
		}
		done1 <- got
	}()
	ids := map[string]string{}
	for range 2 {
		select {
		case s := <-tb.slow:
			who, id, _ := strings.Cut(s, " ")
			ids[who] = id
		case <-time.After(10 * time.Second):
			t.Fatal("the slow calls never reached the browser")
		}
	}
	_, orig0, _ := relaywire.UnmapID(ids["c0"])
	_, orig1, _ := relaywire.UnmapID(ids["c1"])
	t.Logf("mapped ids %q, originals %s and %s", ids, orig0, orig1)

	cancel0()
	select {
	case err := <-done0:
		if err == nil {
			t.Fatal("the cancelled call succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	select {
	case id := <-tb.cancelled:
		if id != ids["c0"] {
			t.Fatalf("the browser was told to cancel %q, want %q", id, ids["c0"])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the browser was not told to cancel")
	}
	select {
	case id := <-tb.cancelled:
		t.Fatalf("a second cancellation: %q", id)
	case <-time.After(100 * time.Millisecond):
	}
	tb.releaseAll()
	select {
	case got := <-done1:
		if got != "slow done c1" {
			t.Fatalf("the other client's call: %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other client's call did not complete")
	}
}

// TestRelayToolsListChanged: the browser's list_changed reaches `connect`
// through the proxy; connect lists the tools again and tells its client,
// and the bridge's local side still sees the notification.
func TestRelayToolsListChanged(t *testing.T) {
	p := startProxy(t)
	lb := startLinkBridge(t, p, "alice")
	tb := lb.attachTools("L1")
	other := lb.attachTools("L2")
	ext := lb.extensionID("instance-l1")
	otherExt := lb.extensionID("instance-l2")

	changed := make(chan struct{}, 16)
	cs, _ := mcpClientWith(t, p, "alice", ext, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	bystander := dialMCP(t, p, "alice")
	bystander.connectTo(otherExt)

	names := func() string {
		t.Helper()
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, tool := range res.Tools {
			n = append(n, tool.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(); got != "progress,slow" {
		t.Fatalf("tools %s", got)
	}
	tb.mu.Lock()
	tb.extra = []string{"fresh"}
	tb.mu.Unlock()
	if err := tb.Send(map[string]any{"jsonrpc": "2.0", "method": relaywire.MethodToolsListChanged}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("connect's client was not told the tools changed")
	}
	if got := names(); got != "fresh,progress,slow" {
		t.Fatalf("tools after the change %s", got)
	}
	deadline := time.After(5 * time.Second)
	for seen := false; !seen; {
		select {
		case m := <-lb.local:
			seen = m == relaywire.MethodToolsListChanged
		case <-deadline:
			t.Fatal("the bridge's local side did not see list_changed")
		}
	}
	// A change that leaves the tools as they are: connect looks, finds
	// nothing new, and does not bother its client.
	if err := tb.Send(map[string]any{"jsonrpc": "2.0", "method": relaywire.MethodToolsListChanged}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
		t.Error("list_changed for a list that did not change")
	case <-time.After(300 * time.Millisecond):
	}
	_ = bystander.ws.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	for {
		_, data, err := bystander.ws.ReadMessage()
		if err != nil {
			break
		}
		if strings.Contains(string(data), "list_changed") {
			t.Errorf("a client of another browser got %s", data)
		}
	}
	_ = other
	_ = protocol.SessionEnded
}
