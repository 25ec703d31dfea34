package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/jsonscan"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/ipc"
)

// TestMain runs the tests and benchmarks with the collector setting of
// `browserbridge serve`, so the figures are the product's.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
	if os.Getenv(bridgeProcEnv) != "" {
		os.Exit(serveBridgeProcess())
	}
	os.Exit(m.Run())
}

// bridge is an in-process bridge: the host link on a temp socket, the MCP
// server and its HTTP transports on an httptest server.
type bridge struct {
	t      testing.TB
	socket string
	links  *hostlink.Server
	mcps   *Server
	srv    *httptest.Server
	sse    *SSE
	st     *Streamable
}

func newBridge(t testing.TB, opts Options, hopts HTTPOptions) *bridge {
	dir, err := os.MkdirTemp("", "mcps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if opts.Logger == nil && testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b, mux, stop, err := startBridge(filepath.Join(dir, "bridge.sock"), opts, hopts)
	if err != nil {
		t.Fatal(err)
	}
	b.t = t
	b.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		b.srv.CloseClientConnections()
		b.srv.Close()
		stop()
	})
	return b
}

// startBridge serves the host link on socket and assembles the MCP server
// and its HTTP transports, whose routes mux has; stop ends the host link.
// The tests' bridges and BenchmarkCallsProc's bridge process are built
// by it alike.
func startBridge(socket string, opts Options, hopts HTTPOptions) (b *bridge, mux *http.ServeMux, stop func(), err error) {
	b = &bridge{socket: socket}
	b.mcps = New(opts)
	b.links = hostlink.NewServer(hostlink.Options{Handle: b.mcps.HandleBrowserMessage, OnChange: b.mcps.BrowsersChanged})
	b.mcps.Attach(b.links)
	ln, err := ipc.Listen(socket)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.links.Serve(ctx, ln); close(done) }()
	b.st = b.mcps.NewStreamable(hopts)
	b.sse = b.mcps.NewSSE(hopts)
	mux = http.NewServeMux()
	mux.Handle("/mcp", b.st)
	mux.HandleFunc("/sse", b.sse.Stream)
	mux.HandleFunc("/message", b.sse.Message)
	return b, mux, func() { cancel(); <-done }, nil
}

// tool is what the fake extension offers.
var fakeTools = []map[string]any{
	{"name": "echo", "description": "Echo the text back", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}},
	{"name": "slow", "description": "Report progress, then answer", "inputSchema": map[string]any{"type": "object"}},
	{"name": "block", "description": "Never answer until cancelled", "inputSchema": map[string]any{"type": "object"}},
	{"name": "fail", "description": "Fail as a tool", "inputSchema": map[string]any{"type": "object"}},
	{"name": "wait", "description": "Answer after ms milliseconds", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"ms": map[string]any{"type": "integer"}}}},
	{"name": "rich", "description": "Answer with every kind of content", "inputSchema": map[string]any{"type": "object"}},
	{"name": "empty", "description": "Answer with no content at all", "inputSchema": map[string]any{"type": "object"}},
}

// richResult is what the rich tool answers: every field a result can have,
// and some it cannot.
const richResult = `{"content":[{"type":"text","text":"<b>&amp;</b> \u2028 \"q\" é"},` +
	`{"type":"image","data":"aGk=","mimeType":"image/png","annotations":{"audience":["user"]}},` +
	`{"type":"resource_link","uri":"bb://shot/1","name":"shot"}],` +
	`"structuredContent":{"z":1,"a":[true,null]},"isError":false,"_meta":{"x/y":"z"},"unknownField":42}`

// fakeExtension is a browser's extension on the native link, attached
// straight to the bridge's socket (the host only moves frames, and its own
// tests cover it). It stands for the real extension of issue 4.
type fakeExtension struct {
	*testbrowser.Browser
	id string

	mu        sync.Mutex
	tools     []map[string]any
	calls     []json.RawMessage // params of every tools/call
	cancelled chan string       // requestIds of notifications/cancelled
}

func (b *bridge) attach(id string) *fakeExtension {
	b.t.Helper()
	fe, c, err := dialExtension(b.socket, id)
	if c != nil {
		b.t.Cleanup(func() { c.Close() })
	}
	if err != nil {
		b.t.Fatal(err)
	}
	b.waitTools("echo")
	return fe
}

// dialExtension attaches a fake extension with this instance id to the
// bridge's socket and says hello; c, once dialled, is the caller's to
// close.
func dialExtension(socket, id string) (fe *fakeExtension, c net.Conn, err error) {
	c, err = ipc.Dial(context.Background(), socket)
	if err != nil {
		return nil, nil, err
	}
	fe = &fakeExtension{id: id, tools: fakeTools, cancelled: make(chan string, 16)}
	fe.Browser = testbrowser.Attach(c, fe.handle)
	fe.OnNotify(func(method string, p json.RawMessage) {
		if method == "notifications/cancelled" {
			var n struct {
				RequestID string `json:"requestId"`
			}
			json.Unmarshal(p, &n)
			fe.cancelled <- n.RequestID
		}
	})
	if _, err := fe.Hello(context.Background(), id); err != nil {
		return nil, c, err
	}
	return fe, c, nil
}

func (fe *fakeExtension) handle(method string, p json.RawMessage) (any, map[string]any) {
	switch method {
	case "tools/list":
		fe.mu.Lock()
		defer fe.mu.Unlock()
		return map[string]any{"tools": fe.tools}, nil
	case "tools/call":
		fe.mu.Lock()
		fe.calls = append(fe.calls, p)
		fe.mu.Unlock()
		if res, ok := echoResult(p); ok {
			return res, nil
		}
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		}
		json.Unmarshal(p, &call)
		text := func(s string) map[string]any {
			return map[string]any{"content": []map[string]any{{"type": "text", "text": s}}}
		}
		switch call.Name {
		case "echo":
			var a struct{ Text any }
			json.Unmarshal(call.Arguments, &a)
			if s, ok := a.Text.(string); ok || a.Text == nil {
				return text(s), nil
			}
			// What the extension answers arguments its inputSchema refuses.
			return nil, map[string]any{"code": -32602, "message": "invalid arguments for echo: text: expected a string",
				"data": map[string]any{"argumentErrors": []string{"text: expected a string"}}}
		case "slow":
			for i := 1; i <= 3; i++ {
				fe.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
					"params": map[string]any{"progressToken": call.Meta.ProgressToken, "progress": i, "total": 3, "message": fmt.Sprintf("step %d", i)}})
			}
			return text("done"), nil
		case "block":
			time.Sleep(10 * time.Second)
			return text("too late"), nil
		case "fail":
			return map[string]any{"isError": true, "content": []map[string]any{{"type": "text", "text": "the page said no"}}}, nil
		case "wait":
			var a struct{ Ms int }
			json.Unmarshal(call.Arguments, &a)
			time.Sleep(time.Duration(a.Ms) * time.Millisecond)
			return text("waited"), nil
		case "rich":
			return json.RawMessage(richResult), nil
		case "empty":
			return map[string]any{}, nil
		}
		return nil, map[string]any{"code": -32602, "message": "unknown tool " + call.Name}
	}
	if method == "notifications/cancelled" {
		return nil, nil
	}
	return nil, map[string]any{"code": -32601, "message": "no " + method}
}

// echoResult answers a call of echo whose params hold only what the bridge
// sends (name, arguments, _meta) and whose arguments hold at most a text
// string, as handle does, without decoding into maps or encoding from them:
// the text goes back as the JSON string it came as. The benchmarks call
// echo, and their figures are to be the bridge's, not this stand-in's; its
// floor's echo copies bytes. ok is false for any other call.
func echoResult(params []byte) (json.RawMessage, bool) {
	var name, args []byte
	ok := jsonscan.EachMember(params, func(key, val []byte) bool {
		switch string(key) {
		case "name":
			return name == nil && setRaw(&name, val)
		case "arguments":
			return args == nil && setRaw(&args, val)
		case "_meta":
			return true
		}
		return false
	})
	if !ok || string(name) != `"echo"` {
		return nil, false
	}
	var text []byte
	if args != nil && !jsonscan.EachMember(args, func(key, val []byte) bool {
		return string(key) == "text" && text == nil && len(val) > 0 && val[0] == '"' && setRaw(&text, val)
	}) {
		return nil, false
	}
	if text == nil {
		text = []byte(`""`)
	}
	res := make([]byte, 0, len(text)+40)
	res = append(res, `{"content":[{"type":"text","text":`...)
	res = append(res, text...)
	return append(res, "}]}"...), true
}

// waitTools waits until the server offers the named tool.
func (b *bridge) waitTools(name string) {
	b.t.Helper()
	testutil.WaitFor(b.t, fmt.Sprintf("tool %q offered", name), func() bool { return offers(b.mcps, name) })
}

// offers reports whether s offers the named tool.
func offers(s *Server, name string) bool {
	for _, t := range s.ToolList() {
		if t.Name == name {
			return true
		}
	}
	return false
}

// era is one way a client can talk to the bridge.
type era struct {
	name      string
	transport func(base string) mcp.Transport
	version   string
}

var eras = []era{
	{"sse-2024-11-05", func(base string) mcp.Transport { return &mcp.SSEClientTransport{Endpoint: base + "/sse"} }, "2024-11-05"},
	{"streamable-2025-03-26", streamable, "2025-03-26"},
	{"streamable-2025-06-18", streamable, "2025-06-18"},
	{"streamable-2025-11-25", streamable, "2025-11-25"},
	{"streamable-2026-07-28", streamable, ""}, // the client's default: stateless, server/discover
}

func streamable(base string) mcp.Transport {
	return &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1}
}

func (b *bridge) connect(e era, copts *mcp.ClientOptions, query string) *mcp.ClientSession {
	b.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-" + e.name, Version: "1"}, copts)
	tr := e.transport(b.srv.URL)
	if query != "" {
		switch t := tr.(type) {
		case *mcp.SSEClientTransport:
			t.Endpoint += query
		case *mcp.StreamableClientTransport:
			t.Endpoint += query
		}
	}
	// The SSE client's stream lives as long as Connect's context, so that
	// context must outlive the session; the test's timeout bounds it.
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: e.version})
	if err != nil {
		b.t.Fatalf("%s: connect: %v", e.name, err)
	}
	b.t.Cleanup(func() { cs.Close() })
	return cs
}

// TestEchoResult: echoResult answers what handle's decoding answers, and
// leaves to it every call it is unsure of.
func TestEchoResult(t *testing.T) {
	for _, tc := range []struct {
		params string
		ok     bool
	}{
		{`{"_meta":{"browserbridge/session":{"client":"c","id":"local-1"}},"arguments":{"text":"x"},"name":"echo"}`, true},
		{`{"name":"echo","arguments":{"text":"<b>\u2028\"&\"</b> é \ud83d\ude00"}}`, true},
		{`{"name":"echo","arguments":{}}`, true},
		{`{"name":"echo"}`, true},
		{`{"name":"echo","arguments":{"text":1}}`, false},
		{`{"name":"echo","arguments":{"Text":"x"}}`, false},
		{`{"name":"echo","arguments":{"text":"x","other":1}}`, false},
		{`{"name":"echo","arguments":null}`, false},
		{`{"name":"fail","arguments":{"text":"x"}}`, false},
		{`{"name":"ech\u006f"}`, false},
		{`{"name":"echo","extra":1}`, false},
	} {
		res, ok := echoResult([]byte(tc.params))
		if ok != tc.ok {
			t.Fatalf("%s: answered %v, want %v", tc.params, ok, tc.ok)
		}
		if !ok {
			continue
		}
		var call struct{ Arguments json.RawMessage }
		var args struct{ Text string }
		json.Unmarshal([]byte(tc.params), &call)
		json.Unmarshal(call.Arguments, &args)
		var got struct {
			Content []struct{ Type, Text string }
		}
		if err := json.Unmarshal(res, &got); err != nil || len(got.Content) != 1 || got.Content[0].Type != "text" || got.Content[0].Text != args.Text {
			t.Errorf("%s: answered %s (%v), want the text %q", tc.params, res, err, args.Text)
		}
	}
}
