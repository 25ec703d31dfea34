package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/npmtools"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
)

// The tests run real stdio servers from the npm registry (installed by
// scripts/install-test-tools.sh into tools/npm) behind a real gateway on a
// real socket, driven by the official Go SDK client.

// npmServers finds Node.js and tools/npm/node_modules.
func npmServers(t testing.TB) (node, mods string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the npm test tools are installed for linux")
	}
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	return tools.Node, tools.Modules
}

func everything(t testing.TB) stdio.ServerConfig {
	node, mods := npmServers(t)
	return stdio.ServerConfig{Command: node, Args: []string{filepath.Join(mods, "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"}}
}

func memoryServer(t testing.TB) stdio.ServerConfig {
	node, mods := npmServers(t)
	return stdio.ServerConfig{Command: node, Args: []string{filepath.Join(mods, "@modelcontextprotocol", "server-memory", "dist", "index.js")},
		Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}}
}

func filesystemServer(t testing.TB, dir string) stdio.ServerConfig {
	node, mods := npmServers(t)
	return stdio.ServerConfig{Command: node, Args: []string{filepath.Join(mods, "@modelcontextprotocol", "server-filesystem", "dist", "index.js"), dir}}
}

type testGateway struct {
	t   testing.TB
	gw  *Gateway
	srv *httptest.Server
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("GATEWAY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// newTestGateway serves servers the way the bridge mounts the gateway:
// /servers/, the /{name}/sse aliases and host-based routing.
func newTestGateway(t testing.TB, servers map[string]stdio.ServerConfig, opts Options) *testGateway {
	t.Helper()
	for name, cfg := range servers {
		cfg.Name = name
		servers[name] = cfg
	}
	opts.Servers = servers
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	if opts.Stdio.MinBackoff == 0 {
		opts.Stdio.MinBackoff = 100 * time.Millisecond
	}
	opts.Stdio.StopGrace = 2 * time.Second
	gw, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()
	mux := http.NewServeMux()
	mux.Handle("/servers/", gw)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if name := gw.HostRoute(r.Host); name != "" {
			gw.ServeHost(w, r, name)
			return
		}
		if gw.Alias(r.URL.Path) {
			gw.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
	})
	return &testGateway{t: t, gw: gw, srv: srv}
}

// era is one way a client talks to a route.
type era struct {
	name    string
	sse     bool
	version string // "" means the SDK's default: 2026-07-28, stateless
}

var eras = []era{
	{"sse-2024-11-05", true, "2024-11-05"},
	{"streamable-2025-03-26", false, "2025-03-26"},
	{"streamable-2025-06-18", false, "2025-06-18"},
	{"streamable-2025-11-25", false, "2025-11-25"},
	{"streamable-2026-07-28", false, ""},
}

var sessionEra = era{"streamable-2025-11-25", false, "2025-11-25"}

// connect opens an SDK client session on route (a path such as
// /servers/everything) in era e.
func (tg *testGateway) connect(route string, e era, copts *mcp.ClientOptions) *mcp.ClientSession {
	tg.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-" + e.name, Version: "1"}, copts)
	var tr mcp.Transport
	if e.sse {
		tr = &mcp.SSEClientTransport{Endpoint: tg.srv.URL + route + "/sse"}
	} else {
		tr = &mcp.StreamableClientTransport{Endpoint: tg.srv.URL + route + "/mcp", MaxRetries: -1}
	}
	// The SSE client's stream lives as long as Connect's context.
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: e.version})
	if err != nil {
		tg.t.Fatalf("%s %s: connect: %v", route, e.name, err)
	}
	tg.t.Cleanup(func() { cs.Close() })
	return cs
}

func echo(ctx context.Context, cs *mcp.ClientSession, msg string) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", &toolError{testutil.Text(res)}
	}
	return testutil.Text(res), nil
}

type toolError struct{ s string }

func (e *toolError) Error() string { return "tool error: " + e.s }

// waitState polls the supervisor until cond holds for server name.
func (tg *testGateway) waitState(name, what string, cond func(stdio.State) bool) stdio.State {
	tg.t.Helper()
	var st stdio.State
	defer func() {
		if tg.t.Failed() {
			tg.t.Logf("%s: last state %+v", name, st)
		}
	}()
	testutil.WaitFor(tg.t, name+" to be "+what, func() bool { st, _ = tg.gw.Supervisor().State(name); return cond(st) })
	return st
}
