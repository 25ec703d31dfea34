package connlimit

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// ceiling bounds every wait for something that must happen.
const ceiling = 30 * time.Second

func TestAddrKey(t *testing.T) {
	key := func(s string) string {
		a, err := net.ResolveTCPAddr("tcp", s)
		if err != nil {
			t.Fatal(err)
		}
		return AddrKey(a)
	}
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		{"one IPv4 address, two ports", "192.0.2.1:1000", "192.0.2.1:2000", true},
		{"two IPv4 addresses", "192.0.2.1:1000", "192.0.2.2:1000", false},
		{"IPv4-mapped IPv6 is IPv4", "[::ffff:192.0.2.1]:1000", "192.0.2.1:1000", true},
		{"one IPv6 /64", "[2001:db8:1:2::1]:1000", "[2001:db8:1:2:ffff::9]:1000", true},
		{"two IPv6 /64s", "[2001:db8:1:2::1]:1000", "[2001:db8:1:3::1]:1000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := key(tc.a) == key(tc.b); got != tc.same {
				t.Fatalf("AddrKey(%s) = %q, AddrKey(%s) = %q", tc.a, key(tc.a), tc.b, key(tc.b))
			}
		})
	}
}

// serve runs an HTTP server answering "ok" on a counted listener.
func serve(t *testing.T, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(Listen(ln, opts)) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// get sends GET / on a new connection and returns it with the answer; the
// connection stays open (keep-alive).
func get(t *testing.T, addr string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ceiling)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(ceiling))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, resp
}

func TestListenCapsEachAddress(t *testing.T) {
	refused := make(chan struct{}, 16)
	addr := serve(t, Options{MaxPerAddr: 2, Refused: func() { refused <- struct{}{} }})
	first, resp := get(t, addr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %s", resp.Status)
	}
	if _, resp := get(t, addr); resp.StatusCode != http.StatusOK {
		t.Fatalf("second: %s", resp.Status)
	}
	_, resp = get(t, addr)
	body, _ := io.ReadAll(resp.Body)
	var rpc struct {
		ID    any `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "10" ||
		json.Unmarshal(body, &rpc) != nil || rpc.Error.Code != -32000 || rpc.ID != nil ||
		!strings.Contains(rpc.Error.Message, "at most 2 may be open at once") {
		t.Fatalf("third: %s Retry-After %q %s", resp.Status, resp.Header.Get("Retry-After"), body)
	}
	select {
	case <-refused:
	case <-time.After(ceiling):
		t.Fatal("Refused was not called")
	}
	// Closing one gives its place back, once the server has seen it close.
	first.Close()
	testutil.WaitFor(t, "a closed connection's place to be given back", func() bool {
		c, resp := get(t, addr)
		c.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func TestListenExempt(t *testing.T) {
	addr := serve(t, Options{MaxPerAddr: 1, Exempt: func(a netip.Addr) bool { return a.IsLoopback() }})
	for i := range 4 {
		if _, resp := get(t, addr); resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d from an exempt peer: %s", i+1, resp.Status)
		}
	}
}
