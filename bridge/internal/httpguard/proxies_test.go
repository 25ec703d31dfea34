package httpguard

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// remoteRecorder stands for the handlers behind the guard that count
// clients by address (the gateway's per-client session caps, the
// authorization server's sign-in limits): it answers with the RemoteAddr
// and ClientIP it was given.
var remoteRecorder = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "%s %s", r.RemoteAddr, ClientIP(r))
})

func prefixes(t *testing.T, list ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestTrustedProxies(t *testing.T) {
	// Caddy in a container network and on this machine, and an inner
	// load balancer on an IPv6 ULA.
	trusted := []string{"127.0.0.1/32", "::1/128", "172.16.0.0/12", "fd00::/8"}
	longChain := []string{"203.0.113.7"}
	for i := 30; i >= 1; i-- {
		longChain = append(longChain, fmt.Sprintf("172.16.1.%d", i))
	}
	for _, tc := range []struct {
		name    string
		trusted []string // nil: trusted above
		remote  string
		xff     []string // the X-Forwarded-For lines, in order
		want    string   // the address the handler is given as the client
	}{
		// Spoofing: only a trusted peer's header is read.
		{name: "untrusted peer's header ignored", remote: "198.51.100.9:4000", xff: []string{"203.0.113.7"}, want: "198.51.100.9"},
		{name: "untrusted peer claiming a trusted proxy", remote: "198.51.100.9:4000", xff: []string{"203.0.113.7, 172.16.0.2"}, want: "198.51.100.9"},
		{name: "no proxies configured", trusted: []string{}, remote: "172.16.0.2:4000", xff: []string{"203.0.113.7"}, want: "172.16.0.2"},
		{name: "trusted peer without the header", remote: "172.16.0.2:4000", want: "172.16.0.2"},
		{name: "trusted peer, empty header", remote: "172.16.0.2:4000", xff: []string{""}, want: "172.16.0.2"},

		// Chains.
		{name: "one proxy", remote: "172.16.0.2:4000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "the client's own header before the proxy's entry", remote: "172.16.0.2:4000", xff: []string{"192.0.2.66, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "the client writes a trusted address", remote: "172.16.0.2:4000", xff: []string{"127.0.0.1, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "two trusted proxies", remote: "172.16.0.2:4000", xff: []string{"192.0.2.66, 203.0.113.7, 172.20.0.3"}, want: "203.0.113.7"},
		{name: "proxy on this machine", remote: "127.0.0.1:4000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "every hop trusted: the farthest", remote: "172.16.0.2:4000", xff: []string{"172.20.0.9, 172.20.0.3"}, want: "172.20.0.9"},
		{name: "a client on the proxy's own machine", remote: "127.0.0.1:4000", xff: []string{"127.0.0.1"}, want: "127.0.0.1"},
		{name: "several header lines, right-most last", remote: "172.16.0.2:4000", xff: []string{"192.0.2.66", "203.0.113.7, 172.20.0.3"}, want: "203.0.113.7"},
		{name: "several header lines, client in the first", remote: "172.16.0.2:4000", xff: []string{"203.0.113.7", "172.20.0.3"}, want: "203.0.113.7"},
		{name: "a chain longer than the hops read", remote: "172.16.0.2:4000", xff: []string{strings.Join(longChain, ", ")},
			want: fmt.Sprintf("172.16.1.%d", maxForwardedHops)},

		// IPv6.
		{name: "IPv6 client", remote: "172.16.0.2:4000", xff: []string{"2001:db8::7"}, want: "2001:db8::7"},
		{name: "IPv6 client in brackets with a port", remote: "172.16.0.2:4000", xff: []string{"[2001:db8::7]:4711"}, want: "2001:db8::7"},
		{name: "IPv6 client in brackets", remote: "172.16.0.2:4000", xff: []string{"[2001:db8::7]"}, want: "2001:db8::7"},
		{name: "IPv6 proxy", remote: "[fd00::2]:4000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "IPv6 loopback proxy", remote: "[::1]:4000", xff: []string{"2001:db8::7"}, want: "2001:db8::7"},
		{name: "IPv4-mapped peer", remote: "[::ffff:172.16.0.2]:4000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "IPv4-mapped client", remote: "172.16.0.2:4000", xff: []string{"::ffff:203.0.113.7"}, want: "203.0.113.7"},
		{name: "IPv4-mapped trusted prefix", trusted: []string{"::ffff:172.16.0.0/108"}, remote: "172.16.0.2:4000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "IPv4 client with a port", remote: "172.16.0.2:4000", xff: []string{"203.0.113.7:5000"}, want: "203.0.113.7"},

		// Malformed: the last hop that could be read.
		{name: "garbage", remote: "172.16.0.2:4000", xff: []string{"garbage"}, want: "172.16.0.2"},
		{name: "unknown", remote: "172.16.0.2:4000", xff: []string{"unknown"}, want: "172.16.0.2"},
		{name: "a host name", remote: "172.16.0.2:4000", xff: []string{"client.example"}, want: "172.16.0.2"},
		{name: "a zone", remote: "172.16.0.2:4000", xff: []string{"fe80::1%eth0"}, want: "172.16.0.2"},
		{name: "a trailing comma", remote: "172.16.0.2:4000", xff: []string{"203.0.113.7,"}, want: "172.16.0.2"},
		{name: "an empty entry", remote: "172.16.0.2:4000", xff: []string{"203.0.113.7,,172.20.0.3"}, want: "172.20.0.3"},
		{name: "garbage left of the client", remote: "172.16.0.2:4000", xff: []string{"garbage, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "garbage after a trusted hop", remote: "172.16.0.2:4000", xff: []string{"203.0.113.7, garbage, 172.20.0.3"}, want: "172.20.0.3"},
		{name: "a CIDR", remote: "172.16.0.2:4000", xff: []string{"203.0.113.0/24"}, want: "172.16.0.2"},
		{name: "a peer that is no address", remote: "pipe", xff: []string{"203.0.113.7"}, want: "pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := trusted
			if tc.trusted != nil {
				list = tc.trusted
			}
			h, err := New(Options{ListenAddr: "127.0.0.1:3456", TrustedProxies: prefixes(t, list...)}, remoteRecorder)
			if err != nil {
				t.Fatal(err)
			}
			r := request{method: http.MethodGet}.build()
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			remote, client, _ := strings.Cut(rec.Body.String(), " ")
			if client != tc.want {
				t.Fatalf("ClientIP = %q (RemoteAddr %q), want %q", client, remote, tc.want)
			}
			if client == tc.remote || strings.HasPrefix(tc.remote, "["+client+"]:") || strings.HasPrefix(tc.remote, client+":") {
				if remote != tc.remote {
					t.Fatalf("RemoteAddr = %q: the peer's own address was rewritten", remote)
				}
			} else if want := netip.AddrPortFrom(netip.MustParseAddr(tc.want), 0).String(); remote != want {
				t.Fatalf("RemoteAddr = %q, want %q", remote, want)
			}
		})
	}
}

// TestTrustedProxyRateLimit: behind a trusted proxy each client has a
// bucket of its own, and a client that invents X-Forwarded-For values,
// through the proxy or around it, stays in its own.
func TestTrustedProxyRateLimit(t *testing.T) {
	opts := Options{ListenAddr: "0.0.0.0:3456", Token: testToken, RatePerSecond: 1, Burst: 2,
		TrustedProxies: prefixes(t, "172.16.0.0/12")}
	g, _, _ := newTestGuard(t, opts, &nextHandler{})
	auth := "Bearer " + testToken
	send := func(remote, xff string) int {
		h := map[string]string{"Authorization": auth}
		if xff != "" {
			h["X-Forwarded-For"] = xff
		}
		return serve(g, remote, h, "/mcp").Code
	}
	const proxy = "172.16.0.2:4000"
	for i := range 2 {
		if c := send(proxy, "203.0.113.7"); c != http.StatusOK {
			t.Fatalf("client A's request %d through the proxy: %d", i+1, c)
		}
	}
	if c := send(proxy, "203.0.113.7"); c != http.StatusTooManyRequests {
		t.Fatalf("client A's third request in a burst of 2: %d, want 429", c)
	}
	// Another client through the same proxy has its own bucket.
	if c := send(proxy, "203.0.113.8"); c != http.StatusOK {
		t.Fatalf("client B through the same proxy: %d, want 200", c)
	}
	// Client A writing another address before the proxy's entry is still A.
	if c := send(proxy, "192.0.2.1, 203.0.113.7"); c != http.StatusTooManyRequests {
		t.Fatalf("client A with an invented X-Forwarded-For: %d, want 429", c)
	}
	// A client that reaches the gateway directly cannot name a bucket.
	for i, xff := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		want := http.StatusOK
		if i >= 2 {
			want = http.StatusTooManyRequests
		}
		if c := send("198.51.100.9:5000", xff); c != want {
			t.Fatalf("direct request %d with X-Forwarded-For %s: %d, want %d", i+1, xff, c, want)
		}
	}
}

func TestTrustedProxyLog(t *testing.T) {
	var buf bytes.Buffer
	h, err := New(Options{ListenAddr: "127.0.0.1:3456", TrustedProxies: prefixes(t, "127.0.0.1/32"),
		Logger: slog.New(slog.NewTextHandler(&buf, nil))}, &nextHandler{})
	if err != nil {
		t.Fatal(err)
	}
	r := request{headers: map[string]string{"X-Forwarded-For": "203.0.113.7", "Origin": "https://attacker.example"}}.build()
	r.RemoteAddr = "127.0.0.1:4000"
	h.ServeHTTP(httptest.NewRecorder(), r)
	for _, want := range []string{"remote=203.0.113.7:0", "via_proxy=127.0.0.1:4000"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q does not contain %q", buf.String(), want)
		}
	}
}
