package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// fakeRemotes stands for the extension reached through the host link: it
// holds the remote servers the browser would report and answers calls the
// way the extension's remote.call does. (The real path is tested end to
// end in bridge/internal/e2e.)
type fakeRemotes struct {
	mu      sync.Mutex
	servers []RemoteServer
	calls   []string
	err     error
}

func (f *fakeRemotes) List(context.Context) ([]RemoteServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]RemoteServer(nil), f.servers...), f.err
}

func (f *fakeRemotes) Call(_ context.Context, server string, params json.RawMessage) (json.RawMessage, error) {
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	json.Unmarshal(params, &p)
	f.mu.Lock()
	f.calls = append(f.calls, server+"/"+p.Name)
	f.mu.Unlock()
	if p.Name == "fails" {
		return nil, errors.New(`remote server "notion" needs sign-in: open the extension's options`)
	}
	return json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "remote " + server + " " + p.Name}}})
}

func (f *fakeRemotes) set(servers ...RemoteServer) {
	f.mu.Lock()
	f.servers = servers
	f.mu.Unlock()
}

func tool(name string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}})
	return b
}

func TestRemoteServersThroughTheGateway(t *testing.T) {
	src := &fakeRemotes{}
	src.set(RemoteServer{Name: "notion", URL: "https://mcp.notion.com/mcp", State: "connected", Tools: []json.RawMessage{tool("search"), tool("fails")}},
		RemoteServer{Name: "everything", State: "connected", Tools: []json.RawMessage{tool("shadowed")}})
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": everything(t)}, Options{Remote: src})
	ctx := testutil.Context(t, 30*time.Second)
	testutil.WaitFor(t, "the remote list", func() bool { _, ok := tg.gw.remote.get("notion"); return ok })

	changed := make(chan struct{}, 10)
	cs := tg.connect("/servers/notion", sessionEra, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 2 {
		t.Fatalf("tools: %v %v", err, lt)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "x"}})
	if err != nil || testutil.Text(res) != "remote notion search" {
		t.Fatalf("call: %v %+v", err, res)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fails", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "needs sign-in") {
		t.Fatalf("a failing remote call: %v", err)
	}

	t.Run("a stdio server of the same name wins", func(t *testing.T) {
		ev := tg.connect("/servers/everything", sessionEra, nil)
		if got, err := echo(ctx, ev, "x"); err != nil || got != "Echo: x" {
			t.Fatalf("%q %v", got, err)
		}
	})
	t.Run("aggregate names them mcp_{server}_{tool}", func(t *testing.T) {
		all := tg.connect("/servers/all", sessionEra, nil)
		lt, err := all.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range lt.Tools {
			names = append(names, tl.Name)
		}
		joined := strings.Join(names, ",")
		if !strings.Contains(joined, "mcp_notion_search") || !strings.Contains(joined, "everything_echo") || !strings.Contains(joined, "mcp_everything_shadowed") {
			t.Fatalf("aggregate: %s", joined)
		}
		res, err := all.CallTool(ctx, &mcp.CallToolParams{Name: "mcp_notion_search", Arguments: map[string]any{}})
		if err != nil || testutil.Text(res) != "remote notion search" {
			t.Fatalf("aggregate call: %v %+v", err, res)
		}
	})
	t.Run("a changed tool list reaches the session", func(t *testing.T) {
		src.set(RemoteServer{Name: "notion", State: "connected", Tools: []json.RawMessage{tool("search"), tool("fails"), tool("create_page")}})
		tg.gw.RemotesChanged()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no tools/list_changed")
		}
		lt, err := cs.ListTools(ctx, nil)
		if err != nil || len(lt.Tools) != 3 {
			t.Fatalf("after the change: %v %d", err, len(lt.Tools))
		}
	})
	t.Run("a browser gone takes its remote servers along", func(t *testing.T) {
		src.mu.Lock()
		src.err = errors.New("no browser is connected")
		src.mu.Unlock()
		tg.gw.RemotesChanged()
		testutil.WaitFor(t, "the remote server to go", func() bool { _, ok := tg.gw.remote.get("notion"); return !ok })
		// The route is gone (404), so the client is told its session is.
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{}}); err == nil {
			t.Fatal("a call with the browser gone succeeded")
		}
		r := tg.raw("POST", "/servers/notion/mcp", initBody, nil)
		if r.status != 404 || !strings.Contains(r.msg, `no server named "notion"`) {
			t.Fatalf("initialize with the browser gone: %+v", r)
		}
	})
}
