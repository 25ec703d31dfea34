package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// ceiling bounds every wait for something that must happen: generous, so
// that a busy machine is slow, not failing; each test polls up to it.
const ceiling = 30 * time.Second

// runProxy serves a proxy with Run on a loopback listener, as
// browserbridge-proxy serve does (the per-address count and the HTTP
// timeouts live there, not in Handler), and returns it as a testProxy.
func runProxy(t *testing.T, opts Options) *testProxy {
	t.Helper()
	keys, err := token.NewHS256([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	opts.Keys = keys
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, srv, ln)
	return &testProxy{srv: srv, keys: keys, url: "ws://" + ln.Addr().String()}
}

func (tp *testProxy) addr() string { return strings.TrimPrefix(tp.url, "ws://") }

// rawHTTP opens a TCP connection to the proxy.
func rawHTTP(t *testing.T, tp *testProxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", tp.addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// getHealth sends GET /health on c and reads the answer.
func getHealth(t *testing.T, c net.Conn, br *bufio.Reader) *http.Response {
	t.Helper()
	c.SetDeadline(time.Now().Add(ceiling))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: proxy\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp
}

// waitClosed reads c until the server closes it, and reports how long that
// took; it fails the test if the server keeps it open for the ceiling.
func waitClosed(t *testing.T, c net.Conn, br io.Reader) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(ceiling))
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the proxy kept the connection open for %v", ceiling)
	}
	return time.Since(start)
}

func TestIdleKeepAliveClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	tp := runProxy(t, Options{IdleTimeout: idle})
	c := rawHTTP(t, tp)
	br := bufio.NewReader(c)
	if resp := getHealth(t, c, br); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /health: %s", resp.Status)
	}
	// Kept alive after the answer, then closed for sending nothing more.
	took := waitClosed(t, c, br)
	t.Logf("an idle keep-alive connection was closed %v after its last answer (IdleTimeout %v)", took.Round(time.Millisecond), idle)
}

func TestTrickledBodyCut(t *testing.T) {
	const readTimeout = 500 * time.Millisecond
	tp := runProxy(t, Options{ReadTimeout: readTimeout})
	for _, tc := range []struct{ name, head string }{
		{"POST with a length", "POST /health HTTP/1.1\r\nHost: proxy\r\nContent-Length: 100000\r\n\r\n"},
		{"GET with a chunked body", "GET /health HTTP/1.1\r\nHost: proxy\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{"upgrade with a body", "GET /mcp HTTP/1.1\r\nHost: proxy\r\nContent-Length: 100000\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawHTTP(t, tp)
			if _, err := io.WriteString(c, tc.head); err != nil {
				t.Fatal(err)
			}
			// One byte every 100 ms until the proxy cuts the connection:
			// without a body deadline that is never.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				t := time.NewTicker(100 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						c.SetWriteDeadline(time.Now().Add(time.Second))
						if _, err := c.Write([]byte("1")); err != nil {
							return
						}
					}
				}
			}()
			took := waitClosed(t, c, c)
			t.Logf("a trickled body was cut after %v (ReadTimeout %v)", took.Round(time.Millisecond), readTimeout)
		})
	}
}

// A WebSocket lives on past the HTTP timeouts, and keeps forwarding.
func TestWebSocketsOutliveHTTPTimeouts(t *testing.T) {
	// Short enough to see, long enough that a busy machine still sends
	// each upgrade request within it.
	const short = time.Second
	tp := runProxy(t, Options{IdleTimeout: short, ReadTimeout: short})
	ext := tp.extension(t, "alice", "Chrome").ready(t)
	c := tp.mcp(t, "alice")
	connectTo(t, c, ext.id)
	if r := c.call(1, "tools/list", nil); r.Error != nil {
		t.Fatalf("first call: %s", r.Error)
	}
	// Five times both timeouts, idle: the time that must pass is what is
	// under test (a lower bound, not synchronisation).
	time.Sleep(5 * short)
	if r := c.call(2, "tools/list", nil); r.Error != nil {
		t.Fatalf("call after %v idle: %s", 5*short, r.Error)
	}
	select {
	case <-c.done:
		t.Fatalf("the client's WebSocket ended: %v", c.endErr)
	case <-ext.done:
		t.Fatalf("the extension's WebSocket ended: %v", ext.endErr)
	default:
	}
}

func TestConnsPerIPCapped(t *testing.T) {
	const max = 3
	tp := runProxy(t, Options{MaxConnsPerIP: max})
	// Three connections of every kind: a WebSocket of each side and a
	// plain keep-alive one.
	ext := tp.extension(t, "alice", "Chrome").ready(t)
	c := tp.mcp(t, "alice")
	idle := rawHTTP(t, tp)
	idleR := bufio.NewReader(idle)
	if resp := getHealth(t, idle, idleR); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /health: %s", resp.Status)
	}

	t.Run("plain HTTP over the cap gets 429", func(t *testing.T) {
		over := rawHTTP(t, tp)
		resp := getHealth(t, over, bufio.NewReader(over))
		body, _ := io.ReadAll(resp.Body)
		want := fmt.Sprintf("too many connections from your address: at most %d may be open at once", max)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), want) || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("over the cap: %s %q Retry-After %q", resp.Status, body, resp.Header.Get("Retry-After"))
		}
		waitClosed(t, over, over)
	})
	t.Run("a WebSocket over the cap gets 429", func(t *testing.T) {
		d := websocket.Dialer{HandshakeTimeout: ceiling}
		ws, resp, err := d.Dial(tp.url+relaywire.PathMCP, nil)
		if err == nil {
			ws.Close()
			t.Fatal("a fourth connection was upgraded")
		}
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("dial over the cap: %v %+v", err, resp)
		}
	})
	// The three already open are untouched.
	connectTo(t, c, ext.id)
	if r := c.call(1, "tools/list", nil); r.Error != nil {
		t.Fatalf("call on an open WebSocket: %s", r.Error)
	}
	// Closing one gives its place back.
	idle.Close()
	testutil.WaitFor(t, "a closed connection's place to be given back", func() bool {
		again := rawHTTP(t, tp)
		defer again.Close()
		return getHealth(t, again, bufio.NewReader(again)).StatusCode == http.StatusOK
	})
	if n := tp.srv.m.connRefused.With("per_ip").Value(); n < 2 {
		t.Errorf("connections_refused_total{reason=per_ip} = %v, want at least 2", n)
	}
}

// handshakeRefused dials /mcp for user and expects the handshake to be
// refused for the per-user cap, with the sentence in the error and the
// close frame.
func handshakeRefused(t *testing.T, tp *testProxy, user string, max int) {
	t.Helper()
	c := dial(t, tp.url+relaywire.PathMCP, false)
	r := c.call("h", relaywire.MethodHandshake, relaywire.HandshakeParams{AccessToken: tp.token(t, user, token.KindMCP)})
	want := fmt.Sprintf("too many MCP connections for this user: at most %d at once", max)
	if code, msg := errCode(t, r); code != relaywire.CodeServerError || !strings.Contains(msg, want) {
		t.Fatalf("handshake over the cap: %d %q", code, msg)
	}
	if code, text := c.closed(); code != websocket.ClosePolicyViolation || !strings.Contains(text, want) {
		t.Fatalf("close over the cap: %d %q", code, text)
	}
}

func TestPerUserCaps(t *testing.T) {
	t.Run("MCP clients", func(t *testing.T) {
		const max = 2
		tp := newTestProxy(t, Options{MaxMCPPerUser: max})
		first := tp.mcp(t, "alice")
		tp.mcp(t, "alice")
		handshakeRefused(t, tp, "alice", max)
		tp.mcp(t, "bob") // another user is not affected
		// One of alice's leaves: its place is free again.
		first.ws.Close()
		<-first.done
		testutil.WaitFor(t, "2 MCP clients after one left", func() bool { return tp.srv.nMCP.Load() == 2 })
		tp.mcp(t, "alice")
		if n := tp.srv.m.connRefused.With("per_user_mcp").Value(); n != 1 {
			t.Errorf("connections_refused_total{reason=per_user_mcp} = %v, want 1", n)
		}
	})
	t.Run("extensions", func(t *testing.T) {
		const max = 2
		tp := newTestProxy(t, Options{MaxExtensionsPerUser: max})
		first := tp.extension(t, "alice", "one").ready(t)
		tp.extension(t, "alice", "two").ready(t)
		third := tp.extension(t, "alice", "three")
		want := fmt.Sprintf("too many extension connections for this user: at most %d at once", max)
		if code, text := third.closed(); code != websocket.ClosePolicyViolation || !strings.Contains(text, want) {
			t.Fatalf("third extension: %d %q", code, text)
		}
		tp.extension(t, "bob", "one").ready(t)
		// alice's list shows the two that were let in.
		c := tp.mcp(t, "alice")
		var list relaywire.ListExtensionsResult
		json.Unmarshal(c.call(1, relaywire.MethodListExtensions, nil).Result, &list)
		if len(list.Extensions) != max {
			t.Fatalf("alice's extensions: %+v", list.Extensions)
		}
		first.ws.Close()
		testutil.WaitFor(t, "2 extensions after one left", func() bool { return tp.srv.nExt.Load() == 2 })
		tp.extension(t, "alice", "three").ready(t)
	})
}

// A client whose extension went away is refused -32002 for every call
// until it connects again: those refusals are the extension's doing, not
// the client's, and close nothing. A client that was never connected is
// still closed for the same flood.
func TestVanishedExtensionIsNoStrike(t *testing.T) {
	const strikes = 3
	const flood = 5 * strikes
	tp := newTestProxy(t, Options{Strikes: strikes})
	floodCalls := func(c *tclient, from int) {
		t.Helper()
		chans := make([]chan *relaywire.Message, 0, flood)
		for i := range flood {
			chans = append(chans, c.start(from+i, "tools/list", nil))
		}
		for _, ch := range chans {
			select {
			case r := <-ch:
				if code, _ := errCode(t, r); code != relaywire.CodeNotConnected {
					t.Fatalf("call after the extension left: %d", code)
				}
			case <-c.done:
				t.Fatalf("the proxy closed the client: %v", c.endErr)
			case <-time.After(ceiling):
				t.Fatal("no answer")
			}
		}
	}

	ext := tp.extension(t, "alice", "Chrome").ready(t)
	c := tp.mcp(t, "alice")
	connectTo(t, c, ext.id)
	ext.ws.Close()
	c.note(relaywire.MethodDisconnected)
	floodCalls(c, 100)
	// Connecting to the extension that is gone is no strike either.
	for i := range flood {
		r := c.call(200+i, relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: ext.id})
		if code, _ := errCode(t, r); code != relaywire.CodeServerError {
			t.Fatalf("connect to the extension that left: %d", code)
		}
	}
	if r := c.call(300, relaywire.MethodListExtensions, nil); r.Error != nil {
		t.Fatalf("the client after %d refusals: %s", 2*flood, r.Error)
	}

	// Back on a new extension, then disconnected by its own choice: from
	// now on a flood of calls is the client's doing again.
	again := tp.extension(t, "alice", "Chrome").ready(t)
	connectTo(t, c, again.id)
	c.call(400, relaywire.MethodDisconnect, nil)
	for i := range flood {
		if err := c.sendRaw(relaywire.AppendRequest(nil, fmt.Sprintf("late-%d", i), "tools/list", nil)); err != nil {
			break
		}
	}
	if code, text := c.closed(); code != websocket.ClosePolicyViolation || !strings.Contains(text, "too many refused messages") {
		t.Fatalf("a client flooding calls after its own disconnect: %d %q", code, text)
	}

	never := tp.mcp(t, "alice")
	for i := range flood {
		if err := never.sendRaw(relaywire.AppendRequest(nil, fmt.Sprintf("n-%d", i), "tools/list", nil)); err != nil {
			break
		}
	}
	if code, text := never.closed(); code != websocket.ClosePolicyViolation || !strings.Contains(text, "not connected to an extension") {
		t.Fatalf("a client never connected, flooding calls: %d %q", code, text)
	}
}

// serveUntilCleanup runs srv.Run on ln until the test ends, then stops it
// and checks that Run returned cleanly.
func serveUntilCleanup(t *testing.T, srv *Server, ln net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(ceiling):
			t.Errorf("Run did not return")
		}
	})
}
