//go:build linux

package gatewayserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// The public gateway's connections: at most gateway.max_conns_per_ip from
// one address, idle ones closed after gateway.idle_timeout, a trusted
// proxy's exempt. Connections are real sockets dialled from 127.0.0.n
// (Linux answers on all of 127.0.0.0/8), which the gateway counts as it
// would clients on the internet.

// connsWait bounds every wait here: generous, so a busy machine is slow,
// not failing.
const connsWait = time.Minute

// runPublic runs a public gateway with cfg's extra settings and returns its
// address.
func runPublic(t *testing.T, edit func(*config.Config)) string {
	t.Helper()
	cfg := newEnv(t).config()
	cfg.MCPServers = json.RawMessage(`{"memory": {"command": "/bin/false"}}`)
	watch := false
	cfg.Gateway = config.Gateway{PublicURL: publicBase, Watch: &watch}
	cfg.OAuth.Password = testPassword
	memory := config.MemoryState
	cfg.OAuth.StateFile = &memory
	if edit != nil {
		edit(cfg)
	}
	g, err := Start(cfg, testutil.Logger(t, "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway Run: %v", err)
		}
	})
	return g.Addr()
}

// healthFrom opens a connection from 127.0.0.n, sends GET /health on it
// and returns it, still open, with the answer's status (0: the gateway
// closed it without one).
func healthFrom(t *testing.T, addr string, n int) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(n))}, Timeout: connsWait}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(connsWait))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: mcp.example.test\r\n\r\n"); err != nil {
		return c, nil, 0
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return c, r, 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
		t.Errorf("a 429 without Retry-After")
	}
	return c, r, resp.StatusCode
}

// TestPublicGatewayConnsPerAddress: 1,000 keep-alive connections from one
// address, each with one request answered. The gateway keeps the first 256
// (gateway.max_conns_per_ip's default) and answers the rest 429, closing
// them, so its descriptors stay bounded; a connection from another address
// is served all the while.
func TestPublicGatewayConnsPerAddress(t *testing.T) {
	const flood = 1000
	addr := runPublic(t, nil)
	fds0, rss0 := openFDs(t), rssKiB(t)
	var kept, refused, closed int
	var held []net.Conn
	for range flood {
		c, _, status := healthFrom(t, addr, 2)
		switch status {
		case http.StatusOK:
			kept++
			held = append(held, c)
		case http.StatusTooManyRequests:
			refused++
			c.Close()
		default:
			closed++
			c.Close()
		}
	}
	if _, _, status := healthFrom(t, addr, 3); status != http.StatusOK {
		t.Fatalf("another address during the flood: %d", status)
	}
	fds1, rss1 := openFDs(t), rssKiB(t)
	// This process holds both ends: the test's own kept connections (and
	// the one from 127.0.0.3) and the gateway's.
	t.Logf("%d keep-alive connections from one address: %d kept, %d refused with 429, %d closed unanswered; "+
		"descriptors %d → %d (%d of them the test's own), RSS %d → %d KiB (both ends)",
		flood, kept, refused, closed, fds0, fds1, len(held)+1, rss0, rss1)
	if kept != config.DefaultMaxConnsPerIP || refused+closed != flood-kept {
		t.Fatalf("%d kept, %d refused, %d closed; want %d kept", kept, refused, closed, config.DefaultMaxConnsPerIP)
	}
	if gateway := fds1 - fds0 - len(held) - 1; gateway > config.DefaultMaxConnsPerIP+16 {
		t.Fatalf("the gateway holds %d more descriptors, for a cap of %d connections", gateway, config.DefaultMaxConnsPerIP)
	}
}

// TestPublicGatewayIdleAndExempt: an idle keep-alive connection is closed
// after gateway.idle_timeout and gives its place back; a trusted proxy's
// connections are not counted.
func TestPublicGatewayIdleAndExempt(t *testing.T) {
	addr := runPublic(t, func(c *config.Config) {
		c.Gateway.MaxConnsPerIP = 2
		c.Gateway.IdleTimeout = "500ms"
		c.TrustedProxies = []string{"127.0.0.9"}
	})
	var idle []*bufio.Reader
	for range 2 {
		_, r, status := healthFrom(t, addr, 2)
		if status != http.StatusOK {
			t.Fatalf("under the cap: %d", status)
		}
		idle = append(idle, r)
	}
	if _, _, status := healthFrom(t, addr, 2); status != http.StatusTooManyRequests {
		t.Fatalf("over a cap of 2: %d, want 429", status)
	}
	// The gateway closes the idle ones: each read ends.
	for i, r := range idle {
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("idle connection %d: %v, want it closed by the gateway", i, err)
		}
	}
	testutil.WaitFor(t, "the idle connections' places to be given back", func() bool {
		c, _, status := healthFrom(t, addr, 2)
		c.Close()
		return status == http.StatusOK
	})
	for i := range 6 {
		if _, _, status := healthFrom(t, addr, 9); status != http.StatusOK {
			t.Fatalf("connection %d from the trusted proxy: %d", i+1, status)
		}
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func rssKiB(t *testing.T) int {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}
