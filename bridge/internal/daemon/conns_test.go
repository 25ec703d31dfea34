package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gatewayserver"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// connCeiling bounds every wait for something that must happen: generous,
// so that a busy machine is slow, not failing.
const connCeiling = 30 * time.Second

// The bridge's HTTP server carries the timeouts that bound what an idle
// or slow connection may hold, and no write timeout (it would cut
// streams); gatewayserver's TestHTTPServerTimeouts checks the gateway's.
func TestHTTPServerTimeouts(t *testing.T) {
	e := newEnv(t)
	b, err := Start(e.config(), testutil.Logger(t, "bridge"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.httpLn.Close()
	defer b.sock.Close()
	hs := b.http
	if hs.ReadHeaderTimeout != gatewayserver.HTTPReadHeaderTimeout || hs.ReadTimeout != gatewayserver.HTTPReadTimeout || hs.IdleTimeout != gatewayserver.HTTPIdleTimeout || hs.WriteTimeout != 0 {
		t.Fatalf("timeouts: header %v, read %v, idle %v, write %v", hs.ReadHeaderTimeout, hs.ReadTimeout, hs.IdleTimeout, hs.WriteTimeout)
	}
}

// shortTimeoutBridge runs a bridge whose HTTP server has the given read and
// idle timeouts instead of the defaults, so that the tests see them act.
func shortTimeoutBridge(t *testing.T, read, idle time.Duration, change func(*config.Config)) string {
	t.Helper()
	e := newEnv(t)
	cfg := e.config()
	if change != nil {
		change(cfg)
	}
	b, err := Start(cfg, testutil.Logger(t, "bridge"))
	if err != nil {
		t.Fatal(err)
	}
	b.http.ReadHeaderTimeout, b.http.ReadTimeout, b.http.IdleTimeout = read, read, idle
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return b.Addr()
}

func dialBridge(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reads c until the bridge closes it and reports how long
// that took; it fails the test if the bridge keeps it open for the
// ceiling.
func closedWithin(t *testing.T, c net.Conn, r io.Reader) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(connCeiling))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the bridge kept the connection open for %v", connCeiling)
	}
	return time.Since(start)
}

func TestBridgeIdleKeepAliveClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr := shortTimeoutBridge(t, 5*time.Second, idle, nil)
	c := dialBridge(t, addr)
	c.SetDeadline(time.Now().Add(connCeiling))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /health: %s (close %v)", resp.Status, resp.Close)
	}
	took := closedWithin(t, c, br)
	t.Logf("an idle keep-alive connection was closed %v after its answer (IdleTimeout %v)", took.Round(time.Millisecond), idle)
}

func TestBridgeTrickledBodyCut(t *testing.T) {
	const read = 500 * time.Millisecond
	addr := shortTimeoutBridge(t, read, time.Minute, nil)
	for _, path := range []string{"/mcp", "/message?sessionId=x", "/servers/all/mcp"} {
		t.Run(path, func(t *testing.T) {
			c := dialBridge(t, addr)
			head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" +
				"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{"
			if _, err := io.WriteString(c, head); err != nil {
				t.Fatal(err)
			}
			// One byte every 100 ms until the bridge cuts the connection:
			// without a body deadline that is never.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						c.SetWriteDeadline(time.Now().Add(time.Second))
						if _, err := c.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			took := closedWithin(t, c, c)
			t.Logf("a trickled body was cut after %v (ReadTimeout %v)", took.Round(time.Millisecond), read)
		})
	}
}

// Streams are not requests being read: the legacy SSE stream keeps
// sending its pings, and a Streamable HTTP GET stream stays open, five
// times as long as both timeouts.
func TestBridgeStreamsOutliveTimeouts(t *testing.T) {
	// Short enough to see, long enough that a busy machine still sends
	// each request within it.
	const short = time.Second
	const lived = 5 * short
	addr := shortTimeoutBridge(t, short, short, func(c *config.Config) { c.SSEPingInterval = "100ms" })
	base := "http://" + addr

	t.Run("legacy SSE", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), connCeiling)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /sse: %s", resp.Status)
		}
		sc := bufio.NewScanner(resp.Body)
		start, pings := time.Now(), 0
		for time.Since(start) < lived {
			if !sc.Scan() {
				t.Fatalf("the SSE stream ended after %v (%d pings): %v", time.Since(start).Round(time.Millisecond), pings, sc.Err())
			}
			if sc.Text() == "event: ping" {
				pings++
			}
		}
		if pings == 0 {
			t.Fatal("no pings on the SSE stream")
		}
		t.Logf("the SSE stream lived %v with %d pings (timeouts %v)", lived, pings, short)
	})

	t.Run("Streamable HTTP GET", func(t *testing.T) {
		sess := session(t, base+"/mcp", nil)
		c := dialBridge(t, addr)
		c.SetDeadline(time.Now().Add(connCeiling))
		head := "GET /mcp HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\n"
		for k, v := range sess {
			head += k + ": " + v + "\r\n"
		}
		if _, err := io.WriteString(c, head+"\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("GET /mcp: %s %s", resp.Status, resp.Header.Get("Content-Type"))
		}
		time.Sleep(lived) // a lower bound, not a race
		// Still open: a read waits (and times out) rather than meeting the
		// end of the stream.
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = io.Copy(io.Discard, resp.Body)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("the GET stream ended within %v: %v", lived, err)
		}
	})
}
