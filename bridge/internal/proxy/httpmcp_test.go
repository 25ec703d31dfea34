package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

func toolNames(tb testing.TB, cs *mcp.ClientSession) []string {
	tb.Helper()
	res, err := cs.ListTools(testutil.Context(tb, 30*time.Second), nil)
	if err != nil {
		tb.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names
}

// eras runs f once per era the Go SDK client can speak with the proxy.
func eras(t *testing.T, f func(t *testing.T, era string)) {
	for _, c := range []struct{ name, era string }{{"stateless", eraStateless}, {"session", eraSession}} {
		t.Run(c.name, func(t *testing.T) { f(t, c.era) })
	}
}

// TestHTTPBrowserEndpoint: the Go SDK client signs in (password, mapped
// to alice) and sees alice's browsers: the browser's tools with
// list_browsers and select_browser (the browser's own list_browsers
// hidden), list_browsers naming both of alice's browsers, calls going to
// the default one, then to the one chosen: by select_browser in a
// session, by its own endpoint /browsers/{id}/mcp statelessly (which
// select_browser then names).
func TestHTTPBrowserEndpoint(t *testing.T) {
	eras(t, func(t *testing.T, era string) {
		tp := newHTTPTestProxy(t, Options{}, nil)
		work := startBrowser(t, tp, "alice", "Chrome at work")
		home := startBrowser(t, tp, "alice", "Chrome at home") // the most recent: the default
		p := passwordPerson()
		cs := sdkClient(t, tp.public()+"/mcp", era, p, nil)

		names := toolNames(t, cs)
		want := []string{"list_browsers", "select_browser", "echo", "slow", "hang"}
		if !slices.Equal(names, want) {
			t.Fatalf("tools: %q; want %q", names, want)
		}

		lb, err := cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "list_browsers"})
		if err != nil || lb.IsError {
			t.Fatalf("list_browsers: %+v, %v", lb, err)
		}
		if lb.StructuredContent != nil {
			t.Errorf("list_browsers has structuredContent %v; Claude Code would hand a model that in place of the text", lb.StructuredContent)
		}
		text := testutil.Text(lb)
		for _, s := range []string{home.id + ": Chrome at home (used by this session)", work.id + ": Chrome at work"} {
			if !strings.Contains(text, s) {
				t.Errorf("list_browsers lacks %q:\n%s", s, text)
			}
		}
		if strings.Index(text, home.id) > strings.Index(text, work.id) {
			t.Errorf("list_browsers does not put the default (most recently connected) first:\n%s", text)
		}

		if got := callTool(t, cs, "echo", map[string]any{"message": "hi"}); got != "Chrome at home: hi" {
			t.Errorf("echo answered %q; want the default browser's answer", got)
		}
		call := home.call(t)
		id, _ := relaywire.IDString(call.ID)
		if _, _, ok := relaywire.UnmapID(id); !ok {
			t.Errorf("the browser got id %s: not spec 001's mapped id", call.ID)
		}
		// The browser learns the client's name and a key that stays with
		// the session (issue 31, items 1 and 2); a stateless client's calls
		// share one, its name's (one tab group for the client).
		cm := clientOf(t, call)
		if cm.Name != "proxy-test" || !relaywire.ValidClientKey(cm.Key) {
			t.Errorf("the browser's call names client %+v; want proxy-test, with a key", cm)
		}
		callTool(t, cs, "echo", map[string]any{"message": "again"})
		if again := clientOf(t, home.call(t)); again != cm {
			t.Errorf("the session's second call names client %+v, its first %+v", again, cm)
		}

		res, err := cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "select_browser", Arguments: map[string]any{"browser": work.id}})
		if err != nil {
			t.Fatal(err)
		}
		if era == eraStateless {
			if !res.IsError || !strings.Contains(testutil.Text(res), "connect to "+tp.public()+"/browsers/"+work.id+"/mcp") {
				t.Errorf("stateless select_browser answered %+v", res)
			}
			cs = sdkClient(t, tp.public()+"/browsers/"+work.id+"/mcp", era, p, nil)
		} else if got := testutil.Text(res); res.IsError || got != "This session now uses Chrome at work ("+work.id+")." {
			t.Errorf("select_browser answered %q", got)
		}
		if got := callTool(t, cs, "echo", map[string]any{"message": "there"}); got != "Chrome at work: there" {
			t.Errorf("after choosing, echo answered %q", got)
		}
		if era == eraSession {
			res, err = cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "select_browser", Arguments: map[string]any{"browser": "ext-nope"}})
			if err != nil || !res.IsError || !strings.Contains(testutil.Text(res), `no browser of yours connected to this proxy has id "ext-nope"`) {
				t.Errorf("select_browser of an unknown id: %v %+v", err, res)
			}
		}
	})
}

// TestHTTPProgressAndCancel: progress reaches the client on the call's
// own stream; a call the client cancels is cancelled at the browser under
// the id the browser knows it by.
func TestHTTPProgressAndCancel(t *testing.T) {
	eras(t, func(t *testing.T, era string) {
		tp := newHTTPTestProxy(t, Options{}, nil)
		b := startBrowser(t, tp, "alice", "Chrome")
		progress := make(chan string, 10)
		cs := sdkClient(t, tp.public()+"/mcp", era, passwordPerson(), &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				progress <- req.Params.Message
			},
		})

		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			params := &mcp.CallToolParams{Name: "slow", Meta: mcp.Meta{"progressToken": "tok-1"}}
			res, err := cs.CallTool(testutil.Context(t, 30*time.Second), params)
			if err != nil {
				t.Errorf("slow: %v", err)
			}
			done <- res
		}()
		b.call(t)
		for _, want := range []string{"step 1", "step 2"} {
			select {
			case got := <-progress:
				if got != want {
					t.Errorf("progress %q; want %q", got, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no progress %q", want)
			}
		}
		close(b.release)
		if res := <-done; res == nil || testutil.Text(res) != "slow done" {
			t.Fatalf("slow answered %+v", res)
		}

		ctx, cancel := context.WithCancel(testutil.Context(t, 30*time.Second))
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang"})
			errc <- err
		}()
		m := b.call(t)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled call returned %v", err)
		}
		select {
		case id := <-b.cancels:
			if want, _ := relaywire.IDString(m.ID); id != want {
				t.Errorf("the browser was told to cancel %q; the call was %q", id, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the browser was not told the call was cancelled")
		}
	})
}

// TestHTTPExtensionLeavesMidCall: the browser's relay drops while a call
// waits: the call ends with -32005 and a sentence, the client is told the
// tools changed (the session's stream, or its subscriptions/listen), the
// tools are then the endpoint's own; when the browser is back, the client
// is told again and its calls reach it.
func TestHTTPExtensionLeavesMidCall(t *testing.T) {
	eras(t, func(t *testing.T, era string) {
		tp := newHTTPTestProxy(t, Options{}, nil)
		b := startBrowser(t, tp, "alice", "Chrome")
		changed := make(chan struct{}, 10)
		cs := sdkClient(t, tp.public()+"/mcp", era, passwordPerson(), &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		toolsChanged := func(why string) {
			t.Helper()
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatalf("no tools/list_changed after %s", why)
			}
		}
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "hang"})
			errc <- err
		}()
		b.call(t)
		b.leave()
		err := <-errc
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != relaywire.CodeExtensionGone || !strings.Contains(rpcErr.Message, "disconnected before answering") {
			t.Fatalf("the call cut off by the browser leaving returned %v; want -32005 saying the extension disconnected", err)
		}
		toolsChanged("the browser left")
		if names := toolNames(t, cs); !slices.Equal(names, []string{"list_browsers", "select_browser"}) {
			t.Errorf("tools with no browser: %q", names)
		}
		_, err = cs.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}})
		if !errors.As(err, &rpcErr) || rpcErr.Code != relaywire.CodeNotConnected || !strings.Contains(rpcErr.Message, "no browser of yours is connected") {
			t.Errorf("a call with no browser: %v", err)
		}

		// The browser comes back (same name, same id).
		b2 := startBrowser(t, tp, "alice", "Chrome")
		if b2.id != b.id {
			t.Fatalf("the browser came back as %s, not %s", b2.id, b.id)
		}
		toolsChanged("the browser came back")
		if names := toolNames(t, cs); !slices.Contains(names, "echo") {
			t.Errorf("tools after the browser came back: %q", names)
		}
		if got := callTool(t, cs, "echo", map[string]any{"message": "back"}); got != "Chrome: back" {
			t.Errorf("echo after the browser came back: %q", got)
		}
	})
}

// TestHTTPUsersAreApart: alice (password) and bob (a pairing code his
// bridge asked for) each see and reach only their own browser; bob's
// token finds nothing of alice's: not her session, not her server's name.
func TestHTTPUsersAreApart(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	alice := startBrowser(t, tp, "alice", "Chrome")
	bob := startBrowser(t, tp, "bob", "Chrome")
	startServer(t, tp, "alice", "notes")

	ca := sdkClient(t, tp.public()+"/mcp", eraSession, passwordPerson(), nil)
	cb := sdkClient(t, tp.public()+"/mcp", eraStateless, pairedPerson(t, bob.tclient), nil)
	if got := callTool(t, cb, "echo", map[string]any{"message": "bob here"}); got != "Chrome: bob here" {
		t.Fatalf("bob's echo: %q", got)
	}
	if m := bob.call(t); !strings.Contains(string(m.Params), "bob here") {
		t.Fatalf("bob's browser got %s", m.Params)
	}
	text := callTool(t, cb, "list_browsers", nil)
	if !strings.Contains(text, bob.id) || strings.Contains(text, alice.id) {
		t.Errorf("bob's list_browsers:\n%s\nwant his browser %s and not alice's %s", text, bob.id, alice.id)
	}
	res, _ := cb.CallTool(testutil.Context(t, 30*time.Second), &mcp.CallToolParams{Name: "select_browser", Arguments: map[string]any{"browser": alice.id}})
	if res == nil || !res.IsError {
		t.Errorf("bob selected alice's browser: %+v", res)
	}
	callTool(t, ca, "echo", map[string]any{"message": "alice here"})
	if m := alice.call(t); !strings.Contains(string(m.Params), "alice here") {
		t.Errorf("alice's browser got %s", m.Params)
	}
	select {
	case m := <-alice.calls:
		t.Errorf("alice's browser got another call: %s", m.Params)
	default:
	}

	// Bob's token with alice's session id: no such session for him.
	bp := pairedPerson(t, bob.tclient)
	bobTok := accessToken(t, bp, tp.public()+"/mcp")
	status, _, body := rawPost(t, tp.public()+"/mcp", bobTok, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`,
		mcphttp.HeaderSessionID, ca.ID())
	if status != http.StatusNotFound || !strings.Contains(body, "session not found") {
		t.Errorf("bob with alice's session id: %d %s", status, body)
	}

	// Alice's server "notes", asked for by bob, is as absent as one nobody
	// has: the same status and words.
	notes := accessToken(t, pairedPerson(t, bob.tclient), tp.public()+"/servers/notes/mcp")
	s1, _, b1 := rawPost(t, tp.public()+"/servers/notes/mcp", notes, initBody)
	nosuch := accessToken(t, pairedPerson(t, bob.tclient), tp.public()+"/servers/nosuch/mcp")
	s2, _, b2 := rawPost(t, tp.public()+"/servers/nosuch/mcp", nosuch, initBody)
	if s1 != http.StatusNotFound || s2 != http.StatusNotFound || strings.Replace(b1, "notes", "nosuch", 1) != b2 {
		t.Errorf("bob's answers for alice's server and for none differ:\n%d %s\n%d %s", s1, b1, s2, b2)
	}
}

// TestHTTPServerEndpoint: a local stdio server a bridge registered (a
// server extension) at /servers/{name}/mcp, forwarded as it is: its own
// initialize result and tools, and a tool call during which the server
// asks the client for a completion (sampling), answered through the proxy.
func TestHTTPServerEndpoint(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	srv := startServer(t, tp, "alice", "notes")
	cs := sdkClient(t, tp.public()+"/servers/notes/mcp", eraSession, passwordPerson(), &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "hi from the client"}}, nil
		},
	})
	if info := cs.InitializeResult().ServerInfo; info == nil || info.Name != "fake-server" {
		t.Errorf("initialize result's server: %+v; want the server's own", info)
	}
	if names := toolNames(t, cs); !slices.Equal(names, []string{"ask"}) {
		t.Errorf("tools: %q", names)
	}
	if got := callTool(t, cs, "ask", nil); got != "the client said: hi from the client" {
		t.Errorf("ask answered %q", got)
	}
	cs.Close()
	select {
	case <-srv.closed:
	case <-time.After(10 * time.Second):
		t.Error("the server was not told the session's connection ended")
	}
}

// TestHTTPTokenBoundToItsResource: a token for a server's endpoint is
// refused at /mcp, and the browser endpoint's at a server's.
func TestHTTPTokenBoundToItsResource(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	startServer(t, tp, "alice", "x")
	p := passwordPerson()
	serverTok := accessToken(t, p, tp.public()+"/servers/x/mcp")
	browserTok := accessToken(t, p, tp.public()+"/mcp")
	for _, c := range []struct {
		name, url, tok string
	}{
		{"server token at /mcp", tp.public() + "/mcp", serverTok},
		{"browser token at /servers/x/mcp", tp.public() + "/servers/x/mcp", browserTok},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, h, body := rawPost(t, c.url, c.tok, initBody)
			if status != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), `error="invalid_token"`) ||
				!strings.Contains(body, "issued for another resource") {
				t.Errorf("%d %q %s", status, h.Get("WWW-Authenticate"), body)
			}
		})
	}
	if status, _, body := rawPost(t, tp.public()+"/servers/x/mcp", serverTok, initBody); status != http.StatusOK {
		t.Errorf("the server token at its own endpoint: %d %s", status, body)
	}
}

// TestHTTPBrowserToolsChange: the browser's own tools/list_changed reaches
// the client (the session's GET stream, or its subscriptions/listen), and
// the next tools/list has the new tools.
func TestHTTPBrowserToolsChange(t *testing.T) {
	eras(t, func(t *testing.T, era string) {
		tp := newHTTPTestProxy(t, Options{}, nil)
		b := startBrowser(t, tp, "alice", "Chrome")
		changed := make(chan struct{}, 10)
		cs := sdkClient(t, tp.public()+"/mcp", era, passwordPerson(), &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		if names := toolNames(t, cs); !slices.Contains(names, "echo") {
			t.Fatalf("tools: %q", names)
		}
		b.mu.Lock()
		b.tools = json.RawMessage(`{"tools":[{"name":"navigate","inputSchema":{"type":"object"}}]}`)
		b.mu.Unlock()
		b.sendRaw(relaywire.AppendNotification(nil, relaywire.MethodToolsListChanged, nil))
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("the browser's tools/list_changed did not reach the client")
		}
		if names := toolNames(t, cs); !slices.Equal(names, []string{"list_browsers", "select_browser", "navigate"}) {
			t.Errorf("tools after the change: %q", names)
		}
	})
}

// clientOf is the client member of a forwarded tools/call.
func clientOf(t *testing.T, call *relaywire.Message) relaywire.ClientMeta {
	t.Helper()
	var cm relaywire.ClientMeta
	if err := json.Unmarshal(call.Client, &cm); err != nil {
		t.Fatalf("tools/call client member %s: %v", call.Client, err)
	}
	if bytes.Contains(call.Params, []byte(relaywire.MetaClient)) {
		t.Errorf("the proxy wrote the client into the params: %s", call.Params)
	}
	return cm
}

// TestHTTPBadArgumentsPerEra: the browser's refusal of a call's arguments
// reaches a client of 2025-11-25 or later (and a stateless one) as a tool
// error the model corrects its call from (SEP-1303), one of 2025-06-18 as
// JSON-RPC -32602; an unknown tool is -32602 in every era.
func TestHTTPBadArgumentsPerEra(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	startBrowser(t, tp, "alice", "Chrome")
	p := passwordPerson()
	for _, c := range []struct {
		name, era string
		toolError bool
	}{{"2025-06-18", "2025-06-18", false}, {"2025-11-25", eraSession, true}, {"stateless", eraStateless, true}} {
		t.Run(c.name, func(t *testing.T) {
			cs := sdkClient(t, tp.public()+"/mcp", c.era, p, nil)
			ctx := testutil.Context(t, 30*time.Second)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "strict", Arguments: map[string]any{}})
			var rpcErr *jsonrpc.Error
			switch {
			case c.toolError && (err != nil || !res.IsError || !strings.Contains(testutil.Text(res), "url is required") ||
				!strings.Contains(testutil.Text(res), "Correct the arguments")):
				t.Errorf("bad arguments: %+v, %v; want a tool error naming the problem and what to do", res, err)
			case !c.toolError && (!errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams):
				t.Errorf("bad arguments: %+v, %v; want JSON-RPC -32602", res, err)
			}
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nosuch", Arguments: map[string]any{}})
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("unknown tool: %v; want JSON-RPC -32602", err)
			}
		})
	}
}
