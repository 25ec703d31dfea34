package gatewayserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// env is one test's world: a directory for its files and a gateway
// config listening on a free loopback port.
type env struct {
	dir string
}

func newEnv(t testing.TB) *env {
	return &env{dir: t.TempDir()}
}

func (e *env) config() *config.Config {
	return &config.Config{Listen: "127.0.0.1:0", Log: config.Log{File: "-"}}
}

// npmTools are the MCP servers installed in tools/npm and the Node.js
// that runs them.
type npmTools struct {
	root string // the repository
	node string
}

// needNpmTools finds tools/npm, failing the test when it is missing or
// older than tools/npm/package-lock.json.
func needNpmTools(t *testing.T) npmTools {
	t.Helper()
	found, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	return npmTools{root: found.Root, node: found.Node}
}

// serversJSON writes a servers file with the npm test servers named.
func serversJSON(t *testing.T, path string, tools npmTools, names ...string) {
	t.Helper()
	mods := filepath.Join(tools.root, "tools", "npm", "node_modules", "@modelcontextprotocol")
	all := map[string]any{
		"everything": map[string]any{"command": tools.node, "args": []string{filepath.Join(mods, "server-everything", "dist", "index.js"), "stdio"}},
		"memory": map[string]any{"command": tools.node, "args": []string{filepath.Join(mods, "server-memory", "dist", "index.js")},
			"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}},
	}
	servers := map[string]any{}
	for _, n := range names {
		servers[n] = all[n]
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	// Write then rename, as editors do: the watcher must take it whole.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// sdkClient is an MCP SDK client session on url, closed when the test ends.
func sdkClient(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t, "gateway"}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testWriter sends log lines to t.Log, and nowhere after the test ends.
type testWriter struct {
	t      testing.TB
	prefix string
}

func (w testWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a late line after the test ended
	if testing.Verbose() {
		w.t.Log(w.prefix + ": " + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

var _ io.Writer = testWriter{}
