package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

func healthOf(t *testing.T, base string) Health {
	t.Helper()
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

func serverHealth(h Health, name string) (gateway.ServerHealth, bool) {
	for _, s := range h.Servers {
		if s.Name == name {
			return s, true
		}
	}
	return gateway.ServerHealth{}, false
}

// The gateway inside the bridge: /servers/{name}/mcp, the browser as a
// server, the aggregate, host-based routing through the guard, health and
// metrics per server, and hot reload by watching the servers file.
func TestGatewayInTheBridge(t *testing.T) {
	file := filepath.Join(t.TempDir(), "servers.json")
	testutil.ServersFile(t, file, "everything")
	base, _ := httpBridge(t, func(c *config.Config) {
		c.Gateway.ServersFile = file
		c.Gateway.HostDomain = "example.test"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ev := testutil.SDKSession(t, base+"/servers/everything/mcp")
	res, err := ev.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}

	t.Run("browser is a server", func(t *testing.T) {
		br := testutil.SDKSession(t, base+"/servers/browser/mcp")
		lt, err := br.ListTools(ctx, nil)
		if err != nil || !strings.Contains(fmt.Sprint(toolNames(lt)), "list_browsers") {
			t.Fatalf("browser tools: %v %v", err, toolNames(lt))
		}
	})
	t.Run("aggregate", func(t *testing.T) {
		all := testutil.SDKSession(t, base+"/servers/all/mcp")
		lt, err := all.ListTools(ctx, nil)
		names := fmt.Sprint(toolNames(lt))
		if err != nil || !strings.Contains(names, "browser_list_browsers") || !strings.Contains(names, "everything_echo") {
			t.Fatalf("aggregate tools: %v %s", err, names)
		}
		r, err := all.CallTool(ctx, &mcp.CallToolParams{Name: "browser_list_browsers", Arguments: map[string]any{}})
		if err != nil || r == nil {
			t.Fatalf("browser_list_browsers: %v", err)
		}
	})
	t.Run("host-based routing", func(t *testing.T) {
		port := base[strings.LastIndex(base, ":")+1:]
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
		for _, tc := range []struct {
			host string
			want int
		}{
			{"everything.mcp.example.test:" + port, 200},
			{"everything.mcp.example.test", 200},
			{"nothing.mcp.example.test:" + port, 404},
			{"everything.evil.test:" + port, 403},
		} {
			req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(init))
			req.Host = tc.host
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("Host %s: %d %s", tc.host, resp.StatusCode, body)
			}
			if tc.want == 200 && (resp.Header.Get("Mcp-Session-Id") == "" || !strings.Contains(string(body), "mcp-servers/everything")) {
				t.Fatalf("Host %s: not everything's initialize: %s", tc.host, body)
			}
		}
	})
	t.Run("health and metrics", func(t *testing.T) {
		s, ok := serverHealth(healthOf(t, base), "everything")
		if !ok || s.Status != "running" || s.PID == 0 || s.Sessions < 1 {
			t.Fatalf("health: %+v", s)
		}
		// /health answers without the token: no stderr lines there, but in
		// GET /servers/ (server-everything says it started on stderr).
		if len(s.LastStderr) != 0 {
			t.Fatalf("/health carries stderr lines: %q", s.LastStderr)
		}
		resp, err := http.Get(base + "/servers/")
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Servers []gateway.ServerHealth `json:"servers"`
		}
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if len(list.Servers) != 1 || len(list.Servers[0].LastStderr) == 0 {
			t.Fatalf("GET /servers/ lacks the stderr lines: %+v", list.Servers)
		}
		resp, err = http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`browserbridge_gateway_server_up{server="everything"} 1`, `browserbridge_gateway_requests_total{server="everything",method="tools/call",outcome="ok"}`} {
			if !strings.Contains(string(body), want) {
				t.Fatalf("/metrics lacks %s", want)
			}
		}
	})
	t.Run("hot reload adds a server, everything keeps its process", func(t *testing.T) {
		before, _ := serverHealth(healthOf(t, base), "everything")
		testutil.ServersFile(t, file, "everything", "memory")
		testutil.WaitFor(t, "the new server to appear", func() bool {
			_, ok := serverHealth(healthOf(t, base), "memory")
			return ok
		})
		mem := testutil.SDKSession(t, base+"/servers/memory/mcp")
		if _, err := mem.CallTool(ctx, &mcp.CallToolParams{Name: "read_graph", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		after, _ := serverHealth(healthOf(t, base), "everything")
		if after.PID != before.PID {
			t.Fatalf("everything restarted: %d → %d", before.PID, after.PID)
		}
		if r, err := ev.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "still"}}); err != nil || r.IsError {
			t.Fatalf("everything's session after the reload: %v", err)
		}
	})
}

func toolNames(lt *mcp.ListToolsResult) []string {
	if lt == nil {
		return nil
	}
	var out []string
	for _, t := range lt.Tools {
		out = append(out, t.Name)
	}
	return out
}

// Bad server configurations stop the bridge before it serves, with a
// message that names the file, the server and the key.
func TestGatewayBadServerFiles(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"not json", `{"mcpServers": `, "servers.json"},
		{"unknown key", `{"mcpServers": {"mem": {"command": "x", "comand": "y"}}}`, "mcpServers.mem.comand"},
		{"no command", `{"mcpServers": {"mem": {"args": ["a"]}}}`, "mcpServers.mem.command"},
		{"bad name", `{"mcpServers": {"Mem_1": {"command": "x"}}}`, "Mem_1"},
		{"reserved name", `{"mcpServers": {"all": {"command": "x"}}}`, `"all" is reserved`},
		{"env not strings", `{"mcpServers": {"mem": {"command": "x", "env": {"A": 1}}}}`, "mcpServers.mem.env.A"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			file := filepath.Join(t.TempDir(), "servers.json")
			os.WriteFile(file, []byte(tc.body), 0o600)
			cfg := e.config()
			cfg.Gateway.ServersFile = file
			b, err := Start(cfg, testutil.Logger(t, "bridge"))
			if err == nil {
				b.httpLn.Close()
				b.sock.Close()
				t.Fatal("started with a bad servers file")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// TestServeRefusesPublicURL: the local bridge has no OAuth in front of its
// routes, so a config that asks it to be public is refused before anything
// listens, with a sentence naming the command that is.
func TestServeRefusesPublicURL(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Gateway.PublicURL = "https://mcp.example.com"
	b, err := Start(cfg, testutil.Logger(t, "bridge"))
	if err == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = b.Run(ctx) // stops at once
		t.Fatal("serve started with gateway.public_url set")
	}
	for _, want := range []string{`"gateway.public_url"`, "https://mcp.example.com", "browserbridge gateway --public-url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if _, statErr := os.Stat(e.socket); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("the bridge's socket %s: %v; want none, since serve refuses before it listens", e.socket, statErr)
	}
}
