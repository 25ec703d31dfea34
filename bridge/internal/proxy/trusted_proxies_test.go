package proxy

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// TestTrustedProxiesSeparateClients is issue 27's third finding: behind a
// TLS proxy every client came from the proxy's address and shared its
// limits. With --trusted-proxies, a request from the proxy (127.0.0.1
// here) counts under the client its X-Forwarded-For names, for the
// connection cap and the pairing attempts alike; the same header from any
// other peer (127.0.0.2, 127.0.0.3) is ignored.
func TestTrustedProxiesSeparateClients(t *testing.T) {
	const maxConns = 2
	tp := runHTTPProxy(t, Options{MaxConnsPerIP: maxConns, AuthTimeout: 4 * ceiling,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil)
	xff := func(client string) http.Header { return http.Header{"X-Forwarded-For": {"203.0.113.50, " + client}} }
	wantConnRefused := func(t *testing.T, from, client string) {
		t.Helper()
		ws, resp, err := wsDialFrom(from, tp.url+relaywire.PathMCP, xff(client))
		if err == nil {
			ws.Close()
			t.Fatalf("from %s for %s: upgraded past the cap of %d", from, client, maxConns)
		}
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("from %s for %s: %v %+v", from, client, err, resp)
		}
		body := readAll(resp)
		if !strings.Contains(body, fmt.Sprintf("too many connections from your address: at most %d", maxConns)) {
			t.Fatalf("from %s for %s: %q", from, client, body)
		}
	}
	open := func(t *testing.T, from, client string) {
		t.Helper()
		ws, resp, err := wsDialFrom(from, tp.url+relaywire.PathMCP, xff(client))
		if err != nil {
			t.Fatalf("from %s for %s: %v %+v", from, client, err, resp)
		}
		t.Cleanup(func() { ws.Close() })
	}

	t.Run("connections, through the trusted proxy", func(t *testing.T) {
		open(t, loopback(1), "198.51.100.1")
		open(t, loopback(1), "198.51.100.1")
		wantConnRefused(t, loopback(1), "198.51.100.1")
		// Another client behind the same proxy has its own places, though
		// the proxy now holds more connections than the cap.
		open(t, loopback(1), "198.51.100.2")
		open(t, loopback(1), "198.51.100.2")
	})
	t.Run("connections, the header from an untrusted peer", func(t *testing.T) {
		open(t, loopback(2), "198.51.100.3")
		open(t, loopback(2), "198.51.100.4")
		wantConnRefused(t, loopback(2), "198.51.100.5")
	})

	query := authorizeQuery(t, tp)
	// guess tries one wrong code from the peer on behalf of client, on a
	// fresh sign-in request (each takes 5 attempts), and returns the status.
	// One HTTP client per peer address, its keep-alive connection reused:
	// an untrusted peer's connections count against its cap of 2, and a
	// connection closed by the client may still be counted for a moment.
	clients := map[string]*http.Client{}
	guess := func(t *testing.T, from, client string) (int, string) {
		t.Helper()
		c := clients[from]
		if c == nil {
			c = httpClientFrom(from)
			c.Transport.(*http.Transport).MaxConnsPerHost = 1
			clients[from] = c
			t.Cleanup(c.CloseIdleConnections)
		}
		fields, err := signInPage(tp, c, xff(client), query)
		if err != nil {
			t.Fatalf("the sign-in page from %s for %s: %v", from, client, err)
		}
		fields["code"] = []string{randomGuess()}
		status, page, err := postSignIn(tp, c, xff(client), fields)
		if err != nil {
			t.Fatal(err)
		}
		return status, page
	}
	t.Run("pairing attempts, through the trusted proxy", func(t *testing.T) {
		for i := range DefaultPairingAttemptsPerIP {
			if status, page := guess(t, loopback(1), "198.51.100.7"); status == http.StatusTooManyRequests {
				t.Fatalf("guess %d of the first client: %d %.200s", i, status, page)
			}
		}
		if status, page := guess(t, loopback(1), "198.51.100.7"); status != http.StatusTooManyRequests || !strings.Contains(page, "from your network") {
			t.Fatalf("the first client past its limit: %d", status)
		}
		if status, page := guess(t, loopback(1), "198.51.100.8"); status == http.StatusTooManyRequests || !strings.Contains(page, "not known here") {
			t.Fatalf("a second client behind the same proxy: %d, want its own limit", status)
		}
	})
	t.Run("pairing attempts, the header from an untrusted peer", func(t *testing.T) {
		for i := range DefaultPairingAttemptsPerIP {
			if status, _ := guess(t, loopback(3), fmt.Sprintf("198.51.100.%d", 20+i)); status == http.StatusTooManyRequests {
				t.Fatalf("guess %d: %d", i, status)
			}
		}
		if status, page := guess(t, loopback(3), "198.51.100.99"); status != http.StatusTooManyRequests || !strings.Contains(page, "from your network") {
			t.Fatalf("a new X-Forwarded-For from an untrusted peer escaped its limit: %d", status)
		}
	})
}
