package testutil

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// ServersFile writes at path a claude_desktop_config.json-style file of
// the npm test servers named ("everything", "memory"), run by the tools'
// Node.js. It writes then renames, as editors do, so a watcher takes it
// whole.
func ServersFile(t testing.TB, path string, names ...string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the npm test tools are installed for linux")
	}
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	mods := filepath.Join(tools.Modules, "@modelcontextprotocol")
	all := map[string]any{
		"everything": map[string]any{"command": tools.Node, "args": []string{filepath.Join(mods, "server-everything", "dist", "index.js"), "stdio"}},
		"memory": map[string]any{"command": tools.Node, "args": []string{filepath.Join(mods, "server-memory", "dist", "index.js")},
			"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}},
	}
	servers := map[string]any{}
	for _, n := range names {
		s, ok := all[n]
		if !ok {
			t.Fatalf("no npm test server %q", n)
		}
		servers[n] = s
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// SDKSession is an official Go SDK client session on the Streamable HTTP
// endpoint url, held to 2025-11-25 sessions, closed when the test ends.
func SDKSession(t testing.TB, url string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Logger logs at debug level through LogWriter.
func Logger(t testing.TB, prefix string) *slog.Logger {
	return slog.New(slog.NewTextHandler(LogWriter(t, prefix), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// LogWriter sends each line written to t.Log after prefix when the tests
// run with -v, and nowhere after the test ends (a process's stderr, say).
func LogWriter(t testing.TB, prefix string) io.Writer { return logWriter{t, prefix} }

type logWriter struct {
	t      testing.TB
	prefix string
}

func (w logWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a late line after the test ended
	if testing.Verbose() {
		w.t.Log(w.prefix + ": " + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
