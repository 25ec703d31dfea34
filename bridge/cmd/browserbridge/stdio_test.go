package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioSurvivesBridgeRestart runs `browserbridge stdio` as an MCP
// client starts a stdio server, against a real `browserbridge serve`, and
// restarts the bridge under it: the client's session goes on.
func TestStdioSurvivesBridgeRestart(t *testing.T) {
	w := newWorld(t)
	addr := freeLoopbackAddr(t)
	if err := os.WriteFile(filepath.Join(w.home, "bb", "config", "config.json"), []byte(`{"listen":"`+addr+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bridge := w.serve()

	cmd := exec.Command(bins.Bridge, "stdio", "--wait", "20s")
	cmd.Env = append(os.Environ(), w.env...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-process-test", Version: "1.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting to browserbridge stdio: %v\nstderr:\n%s", err, stderr.String())
	}
	listTools := func(when string) {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list %s: %v\nstderr:\n%s", when, err, stderr.String())
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if !slices.Contains(names, "list_browsers") {
			t.Fatalf("tools %s = %v, want the bridge's list_browsers", when, names)
		}
	}
	listTools("before the restart")
	if name := cs.InitializeResult().ServerInfo.Name; name != "browserbridge" {
		t.Fatalf("server name = %q, want the bridge's", name)
	}

	bridge.Process.Signal(syscall.SIGTERM)
	bridge.Wait()
	w.serve()
	listTools("after the restart")

	if err := cs.Close(); err != nil {
		t.Errorf("closing: %v\nstderr:\n%s", err, stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("browserbridge stdio exited %d after stdin closed\nstderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "reconnected to the bridge") {
		t.Errorf("stderr does not tell of the reconnection:\n%s", stderr.String())
	}
}

// TestStdioWaitsForBridge runs `browserbridge stdio` as an MCP client
// starts a stdio server, with no bridge running: the client's initialize is
// answered at once, stderr says what is awaited and what to run, there are
// no tools yet and a call gets a tool error naming the fix. Then a real
// `browserbridge serve` starts: the client gets
// notifications/tools/list_changed and lists the bridge's tools.
func TestStdioWaitsForBridge(t *testing.T) {
	w := newWorld(t)
	addr := freeLoopbackAddr(t)
	if err := os.WriteFile(filepath.Join(w.home, "bb", "config", "config.json"), []byte(`{"listen":"`+addr+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + addr + "/mcp"

	cmd := exec.Command(bins.Bridge, "stdio")
	cmd.Env = append(os.Environ(), w.env...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	changed := make(chan struct{}, 100)
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-waiting-test", Version: "1.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to browserbridge stdio with no bridge: %v\nstderr:\n%s", err, stderr.String())
	}
	defer cs.Close()
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Tools == nil || !caps.Tools.ListChanged {
		t.Errorf("capabilities = %+v, want tools with listChanged", caps)
	}
	if want := "no bridge answers at " + endpoint + " yet: run `browserbridge start`"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
	}
	names := func(when string) []string {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list %s: %v\nstderr:\n%s", when, err, stderr.String())
		}
		out := []string{}
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	if got := names("while waiting"); len(got) != 0 {
		t.Errorf("tools while waiting = %v, want none", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_browsers", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("a call while waiting: %v, want a tool error", err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !res.IsError || !strings.Contains(text, "not running") || !strings.Contains(text, "`browserbridge start`") {
		t.Errorf("a call while waiting = %q (error %v), want a tool error saying to run `browserbridge start`", text, res.IsError)
	}

	w.serve()
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatalf("no notifications/tools/list_changed after the bridge started\nstderr:\n%s", stderr.String())
	}
	got := names("once the bridge runs")
	for _, want := range []string{"list_browsers", "select_browser"} {
		if !slices.Contains(got, want) {
			t.Errorf("tools once the bridge runs = %v, want %s among them", got, want)
		}
	}
	if !strings.Contains(stderr.String(), "the bridge answers at "+endpoint) {
		t.Errorf("stderr does not say the bridge answers:\n%s", stderr.String())
	}
}

// TestStdioCommandErrors: the exit code and message when there is no
// bridge (stdin ends at once: it says what it waited for, and exits 0), and
// for bad flags.
func TestStdioCommandErrors(t *testing.T) {
	w := newWorld(t)
	nobody := "http://" + freeLoopbackAddr(t) + "/mcp"
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no bridge", []string{"stdio", "--url", nobody, "--wait", "300ms"}, 0,
			"no bridge answers at " + nobody + " yet: run `browserbridge start`"},
		{"bad url", []string{"stdio", "--url", "localhost:3456"}, 2, "is not an http:// or https:// URL"},
		{"negative wait", []string{"stdio", "--wait", "-1s"}, 2, "--wait must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bins.Bridge, tc.args...)
			cmd.Env = append(os.Environ(), w.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("browserbridge %v: exit %d, want %d with %q\nstderr:\n%s", tc.args, code, tc.code, tc.want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing but JSON-RPC (here: nothing)", stdout.String())
			}
		})
	}
}

// freeLoopbackAddr returns a loopback address nothing listens on.
func freeLoopbackAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
