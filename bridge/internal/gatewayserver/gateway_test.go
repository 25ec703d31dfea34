package gatewayserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway's HTTP server carries the timeouts that bound what an idle
// or slow connection may hold, and no write timeout (it would cut
// streams). daemon's TestHTTPServerTimeouts checks the bridge's.
func TestHTTPServerTimeouts(t *testing.T) {
	cfg := newEnv(t).config()
	cfg.Gateway.ServersFile = filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg.Gateway.ServersFile, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := Start(cfg, testutil.Logger(t, "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.ln.Close()
	hs := g.http
	if hs.ReadHeaderTimeout != HTTPReadHeaderTimeout || hs.ReadTimeout != HTTPReadTimeout || hs.IdleTimeout != HTTPIdleTimeout || hs.WriteTimeout != 0 {
		t.Fatalf("timeouts: header %v, read %v, idle %v, write %v", hs.ReadHeaderTimeout, hs.ReadTimeout, hs.IdleTimeout, hs.WriteTimeout)
	}
}

// `browserbridge gateway`: the gateway alone, no socket, no browser.
func TestGatewayAlone(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "servers.json")
	testutil.ServersFile(t, file, "everything")
	cfg := e.config()
	cfg.Gateway.ServersFile = file
	watch := false
	cfg.Gateway.Watch = &watch
	g, err := Start(cfg, testutil.Logger(t, "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	base := "http://" + g.Addr()
	cs := testutil.SDKSession(t, base+"/servers/everything/mcp")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "alone"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v", err)
	}
	resp, err := http.Get(base + "/servers/browser/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the gateway alone has no browser, yet /servers/browser/mcp answered %d", resp.StatusCode)
	}
	resp, err = http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h.Status != "ok" || len(h.Servers) != 1 || h.Servers[0].PID == 0 {
		t.Fatalf("health: %+v", h)
	}
	pid := h.Servers[0].PID

	// SIGHUP rereads the servers file (the watch is off here). Catching
	// the signal here too keeps a SIGHUP that arrives before the gateway
	// listens from ending the test process; it is sent until it lands.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	testutil.ServersFile(t, file, "everything", "memory")
	testutil.WaitFor(t, "SIGHUP to reload the servers", func() bool {
		if len(g.gw.Names()) == 2 {
			return true
		}
		testutil.HangUp(t)
		return false
	})
	if st, _ := g.gw.Supervisor().State("everything"); st.PID != pid {
		t.Fatalf("the unchanged server was restarted by the reload: %d → %d", pid, st.PID)
	}
	cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// No orphan: the child is gone once Run returns.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Fatalf("server pid %d outlived the gateway", pid)
	}
}
