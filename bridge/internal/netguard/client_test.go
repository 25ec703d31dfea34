package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testCtx bounds a test that talks to sockets; the deadline only guards
// against a hang.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fakeResolver answers every A query for any name with addr, the way a
// rebinding attacker's name server answers for its public-looking name. It
// stands for a DNS server: the Go resolver talks to it over a pipe in DNS's
// TCP framing.
func fakeResolver(addr netip.Addr) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			client, server := net.Pipe()
			go serveDNS(server, addr)
			return client, nil
		},
	}
}

// serveDNS answers queries on c (2-byte length, then the message) until it
// is closed: an A record with addr for A queries, no records otherwise.
func serveDNS(c net.Conn, addr netip.Addr) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil || len(q) < 12 {
			return
		}
		end := 12 // the question: labels, then type and class
		for end < len(q) && q[end] != 0 {
			end += int(q[end]) + 1
		}
		end += 5
		if end > len(q) {
			return
		}
		qtype := binary.BigEndian.Uint16(q[end-4:])
		resp := append([]byte{q[0], q[1], 0x85, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, q[12:end]...)
		if qtype == 1 && addr.Is4() { // A
			resp[7] = 1
			a := addr.As4()
			resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
			resp = append(resp, a[:]...)
		}
		binary.BigEndian.PutUint16(n[:], uint16(len(resp)))
		if _, err := c.Write(append(n[:], resp...)); err != nil {
			return
		}
	}
}

// tlsServer is an httptest TLS server (certificate for example.com and
// 127.0.0.1) counting its requests, and the pool that trusts it.
func tlsServer(t *testing.T, h http.Handler) (*httptest.Server, *x509.CertPool, *atomic.Int64) {
	var hits atomic.Int64
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return ts, pool, &hits
}

func portOf(ts *httptest.Server) string {
	return strconv.Itoa(ts.Listener.Addr().(*net.TCPAddr).Port)
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })

// TestClientRefusesNameResolvingToLoopback: a public-looking name whose DNS
// answer is 127.0.0.1 passes CheckURL and is refused when connecting; the
// same request with the test allowance goes through, so it is the address
// check that refused it.
func TestClientRefusesNameResolvingToLoopback(t *testing.T) {
	ts, pool, hits := tlsServer(t, hello)
	url := "https://example.com:" + portOf(ts) + "/doc"
	cases := []struct {
		name    string
		allow   bool
		wantErr string
	}{
		{"refused", false, "Refused example.com: it resolves to 127.0.0.1, which is loopback."},
		{"allowed in tests", true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := hits.Load()
			client := NewClient(Options{AllowPrivateForTests: c.allow, RootCAs: pool, Resolver: fakeResolver(netip.MustParseAddr("127.0.0.1"))})
			defer client.CloseIdleConnections()
			req, _ := http.NewRequestWithContext(testCtx(t), "GET", url, nil)
			resp, err := client.Do(req)
			if c.wantErr != "" {
				if err == nil {
					resp.Body.Close()
					t.Fatal("the request went through")
				}
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v\nwant %s", err, c.wantErr)
				}
				if hits.Load() != before {
					t.Error("the server was reached")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body, err := ReadBody(resp, 1<<10)
			if err != nil || string(body) != "hello" {
				t.Fatalf("body %q, %v", body, err)
			}
		})
	}
}

// TestDialerRefusesLocalhost: the dialer alone, with the system's resolver,
// refuses what "localhost" resolves to.
func TestDialerRefusesLocalhost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := "localhost:" + strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:")

	c, err := NewDialer(Options{}).DialContext(testCtx(t), "tcp", addr)
	if err == nil {
		c.Close()
		t.Fatal("connected to localhost")
	}
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "it is loopback") {
		t.Fatalf("got %v; want a loopback refusal", err)
	}

	c, err = NewDialer(Options{AllowPrivateForTests: true}).DialContext(testCtx(t), "tcp4", addr)
	if err != nil {
		t.Fatalf("with the test allowance: %v", err)
	}
	c.Close()
}

func TestDialerRefusesOtherNetworks(t *testing.T) {
	_, err := NewDialer(Options{}).DialContext(testCtx(t), "udp", "8.8.8.8:53")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "only TCP is allowed") {
		t.Fatalf("got %v; want UDP refused", err)
	}
}

// internet stands for servers out on the internet, answering with h
// whatever host is asked; it records the URLs it was asked for. It lets a
// public server redirect to a private address without one on this machine.
type internet struct {
	h    http.Handler
	mu   sync.Mutex
	seen []string
}

func (n *internet) RoundTrip(r *http.Request) (*http.Response, error) {
	n.mu.Lock()
	n.seen = append(n.seen, r.URL.String())
	n.mu.Unlock()
	rec := httptest.NewRecorder()
	n.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func TestClientRedirects(t *testing.T) {
	redirects := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-private":
			http.Redirect(w, r, "https://10.0.0.1/admin", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "https://metadata.google.internal/computeMetadata/v1/", http.StatusFound)
		case "/to-mapped":
			http.Redirect(w, r, "https://[::ffff:127.0.0.1]/", http.StatusMovedPermanently)
		case "/to-http":
			http.Redirect(w, r, "http://public.example/doc", http.StatusFound)
		case "/to-javascript":
			w.Header().Set("Location", "javascript:alert(1)")
			w.WriteHeader(http.StatusFound)
		case "/hop1", "/hop2", "/hop3":
			next := map[string]string{"/hop1": "/hop2", "/hop2": "/hop3", "/hop3": "/doc"}[r.URL.Path]
			http.Redirect(w, r, next, http.StatusFound)
		case "/hop0":
			http.Redirect(w, r, "/hop1", http.StatusFound)
		case "/doc":
			io.WriteString(w, "the document")
		}
	})
	cases := []struct {
		name    string
		path    string
		wantErr string // "" means the document arrives
		seen    int    // requests that reached the internet
	}{
		{"to a private address", "/to-private", "Refused the redirect target https://10.0.0.1/admin: it points at a private network address (10.0.0.0/8).", 1},
		{"to a metadata name", "/to-metadata", "it points at a cloud metadata service", 1},
		{"to mapped loopback", "/to-mapped", "loopback", 1},
		{"https to http", "/to-http", "Refused the redirect to http://public.example/doc: it would leave https for plain http.", 1},
		{"to javascript", "/to-javascript", "only https URLs are allowed, not javascript:", 1},
		{"three redirects", "/hop1", "", 4},
		{"four redirects", "/hop0", "it would be redirect number 4, and at most 3 are followed", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inet := &internet{h: redirects}
			client := newClient(Options{}, inet)
			req, _ := http.NewRequestWithContext(testCtx(t), "GET", "https://public.example"+c.path, nil)
			resp, err := client.Do(req)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				body, _ := ReadBody(resp, 100)
				if string(body) != "the document" {
					t.Errorf("body %q", body)
				}
			} else {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("followed; want %s", c.wantErr)
				}
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v\nwant %s", err, c.wantErr)
				}
			}
			if len(inet.seen) != c.seen {
				t.Errorf("requests sent: %q; want %d", inet.seen, c.seen)
			}
		})
	}
}

// TestClientRedirectOverSockets: the same checks with a real server and
// transport, under the test allowance (which still refuses metadata and
// leaving https).
func TestClientRedirectOverSockets(t *testing.T) {
	var plain string
	ts, pool, _ := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metadata":
			http.Redirect(w, r, "https://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/down":
			http.Redirect(w, r, plain, http.StatusFound)
		}
	}))
	plainTS := httptest.NewServer(hello)
	t.Cleanup(plainTS.Close)
	plain = plainTS.URL + "/"
	cases := []struct{ path, want string }{
		{"/metadata", "Refused the redirect target https://169.254.169.254/latest/meta-data/: it points at the cloud metadata address 169.254.169.254."},
		{"/down", "it would leave https for plain http"},
	}
	client := NewClient(Options{AllowPrivateForTests: true, RootCAs: pool})
	defer client.CloseIdleConnections()
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(testCtx(t), "GET", ts.URL+c.path, nil)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("followed")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
		})
	}
}

func TestClientNoRedirects(t *testing.T) {
	inet := &internet{h: http.RedirectHandler("https://elsewhere.example/", http.StatusFound)}
	resp, err := newClient(Options{MaxRedirects: -1}, inet).Get("https://public.example/doc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || len(inet.seen) != 1 {
		t.Fatalf("status %d after %q; want the 302 itself", resp.StatusCode, inet.seen)
	}
}

// TestClientIgnoresProxyFromEnvironment: a proxy would connect for us,
// unchecked; the client goes straight to the server.
func TestClientIgnoresProxyFromEnvironment(t *testing.T) {
	ts, pool, hits := tlsServer(t, hello)
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	// A name, not 127.0.0.1: net/http never proxies loopback addresses.
	client := NewClient(Options{AllowPrivateForTests: true, RootCAs: pool, Resolver: fakeResolver(netip.MustParseAddr("127.0.0.1"))})
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://example.com:" + portOf(ts) + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatal("the server was not reached directly")
	}
}

func TestClientRefusesOldTLS(t *testing.T) {
	ts := httptest.NewUnstartedServer(hello)
	ts.TLS = &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	ts.StartTLS()
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	client := NewClient(Options{AllowPrivateForTests: true, RootCAs: pool})
	defer client.CloseIdleConnections()
	resp, err := client.Get(ts.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("spoke TLS 1.1")
	}
	if !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("got %v; want a TLS version failure", err)
	}
}

// TestClientResponseHeaderTimeout: a server that never answers is given
// up on (the handler blocks until the test ends).
func TestClientResponseHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	ts, pool, _ := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before tlsServer's ts.Close
	client := NewClient(Options{AllowPrivateForTests: true, RootCAs: pool, ResponseHeaderTimeout: 50 * time.Millisecond})
	defer client.CloseIdleConnections()
	resp, err := client.Get(ts.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("got an answer")
	}
	if !strings.Contains(err.Error(), "timeout awaiting response headers") {
		t.Fatalf("got %v; want the response header timeout", err)
	}
}

// errReader fails the test's expectation if it is read: the limit must
// be enforced from Content-Length alone.
type errReader struct{ read *bool }

func (e errReader) Read([]byte) (int, error) { *e.read = true; return 0, io.EOF }
func (e errReader) Close() error             { return nil }

func TestReadBody(t *testing.T) {
	const limit = 64 << 10
	cases := []struct {
		name    string
		body    string
		length  int64 // Content-Length; -1 unknown (chunked)
		wantErr bool
	}{
		{"empty", "", 0, false},
		{"at the limit", strings.Repeat("a", limit), limit, false},
		{"at the limit, chunked", strings.Repeat("a", limit), -1, false},
		{"one byte over, chunked", strings.Repeat("a", limit+1), -1, true},
		{"far over, chunked", strings.Repeat("a", 10*limit), -1, true},
		{"Content-Length lies low", strings.Repeat("a", limit+5), 10, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := &http.Response{Body: io.NopCloser(strings.NewReader(c.body)), ContentLength: c.length}
			got, err := ReadBody(resp, limit)
			if c.wantErr {
				if !errors.Is(err, ErrTooLarge) || err.Error() != "the response is larger than 64 KiB, the most accepted" {
					t.Fatalf("got %d bytes, %v; want the 64 KiB refusal", len(got), err)
				}
				return
			}
			if err != nil || string(got) != c.body {
				t.Fatalf("got %d bytes, %v; want %d", len(got), err, len(c.body))
			}
		})
	}
	t.Run("Content-Length over the limit is refused unread", func(t *testing.T) {
		var read bool
		_, err := ReadBody(&http.Response{Body: errReader{&read}, ContentLength: limit + 1}, limit)
		if !errors.Is(err, ErrTooLarge) || read {
			t.Fatalf("err %v, read %v", err, read)
		}
	})
}

// TestReadBodyOverSockets: a real server streaming past the limit.
func TestReadBodyOverSockets(t *testing.T) {
	ts, pool, _ := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 100 {
			w.Write(make([]byte, 1<<10))
			w.(http.Flusher).Flush()
		}
	}))
	client := NewClient(Options{AllowPrivateForTests: true, RootCAs: pool})
	defer client.CloseIdleConnections()
	resp, err := client.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBody(resp, 64<<10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v; want ErrTooLarge", err)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{64 << 10: "64 KiB", 1 << 20: "1 MiB", 1000: "1000 bytes", 1536: "1536 bytes"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
