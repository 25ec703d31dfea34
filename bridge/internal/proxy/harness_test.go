package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

const testSecret = "0123456789abcdef0123456789abcdef-test-secret"

// testProxy is a proxy on an httptest server.
type testProxy struct {
	srv  *Server
	hs   *httptest.Server
	keys *token.Keys
	url  string // ws://host:port
	// natsURL is the cluster's NATS, for the tests that play someone
	// else on it (clusterHTTPNodes sets it).
	natsURL string
	pub     string // the public URL when served by Run (runHTTPProxy); else hs's

	panicked atomic.Bool // a handler panicked (net/http recovered it)
}

// panicWatch is the HTTP server's error log: it notes recovered panics.
type panicWatch struct{ flag *atomic.Bool }

func (p panicWatch) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("panic")) {
		p.flag.Store(true)
		os.Stderr.Write(b)
	}
	return len(b), nil
}

func newTestProxy(tb testing.TB, opts Options) *testProxy {
	tb.Helper()
	keys, err := token.NewHS256([]byte(testSecret))
	if err != nil {
		tb.Fatal(err)
	}
	if opts.Keys == nil {
		opts.Keys = keys
	}
	srv, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	tp := &testProxy{srv: srv, hs: hs, keys: opts.Keys}
	hs.Config.ErrorLog = log.New(panicWatch{&tp.panicked}, "", 0)
	hs.Start()
	tp.url = "ws" + strings.TrimPrefix(hs.URL, "http")
	tb.Cleanup(func() {
		if tp.panicked.Load() {
			tb.Errorf("a handler panicked")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		hs.Close()
	})
	return tp
}

// internal answers GET path from tp's InternalHandler (/metrics, the
// whole /health), as an operator's private listener would.
func (tp *testProxy) internal(path string) *http.Response {
	rec := httptest.NewRecorder()
	tp.srv.InternalHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Result()
}

func (tp *testProxy) token(tb testing.TB, user string, kind token.Kind) string {
	tb.Helper()
	tok, err := tp.keys.MintFor(user, kind, time.Hour, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// tclient is a WebSocket client of the proxy: a reader goroutine sorts
// replies to waiting calls and everything else into notes.
type tclient struct {
	tb  testing.TB
	ws  *websocket.Conn
	wmu sync.Mutex

	mu      sync.Mutex
	waiters map[string]chan *relaywire.Message

	notes  chan *relaywire.Message // notifications, requests, unexpected replies
	raw    chan []byte             // every frame, if rawOn
	rawOn  bool
	done   chan struct{}
	endErr error // set before done is closed
}

func dial(tb testing.TB, url string, rawOn bool) *tclient {
	tb.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		tb.Fatalf("dial %s: %v", url, err)
	}
	c := &tclient{tb: tb, ws: ws, waiters: make(map[string]chan *relaywire.Message),
		notes: make(chan *relaywire.Message, 1<<16), done: make(chan struct{}), rawOn: rawOn}
	if rawOn {
		c.raw = make(chan []byte, 1<<16)
	}
	go c.readLoop()
	tb.Cleanup(func() { c.ws.Close() })
	return c
}

func (c *tclient) readLoop() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.endErr = err
			return
		}
		if c.rawOn {
			c.raw <- data
		}
		var m relaywire.Message
		if err := json.Unmarshal(data, &m); err != nil {
			c.tb.Errorf("client received invalid JSON %q: %v", data, err)
			continue
		}
		if m.ID != nil && m.Method == "" {
			c.mu.Lock()
			ch := c.waiters[string(m.ID)]
			delete(c.waiters, string(m.ID))
			c.mu.Unlock()
			if ch != nil {
				ch <- &m
				continue
			}
		}
		if c.rawOn && m.ID != nil {
			continue // a fake extension's requests: see fakeExt.serve
		}
		c.notes <- &m
	}
}

func (c *tclient) sendRaw(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

func (c *tclient) send(v any) {
	c.tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.tb.Fatal(err)
	}
	if err := c.sendRaw(b); err != nil {
		c.tb.Fatalf("send: %v", err)
	}
}

// start sends a request and returns the channel its reply will arrive on.
func (c *tclient) start(id any, method string, params any) chan *relaywire.Message {
	c.tb.Helper()
	rawID, _ := json.Marshal(id)
	ch := make(chan *relaywire.Message, 1)
	c.mu.Lock()
	c.waiters[string(rawID)] = ch
	c.mu.Unlock()
	msg := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(rawID), "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.send(msg)
	return ch
}

func (c *tclient) wait(ch chan *relaywire.Message) *relaywire.Message {
	c.tb.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		c.tb.Fatalf("no reply within 5 s")
	}
	return nil
}

// call sends a request and waits for its reply.
func (c *tclient) call(id any, method string, params any) *relaywire.Message {
	c.tb.Helper()
	return c.wait(c.start(id, method, params))
}

// note waits for the next notification with the method.
func (c *tclient) note(method string) *relaywire.Message {
	c.tb.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-c.notes:
			if m.Method == method {
				return m
			}
		case <-deadline:
			c.tb.Fatalf("no %s notification within 5 s", method)
			return nil
		}
	}
}

// closed waits for the connection to end and returns the close frame's
// code and text (code 0 when it ended without one).
func (c *tclient) closed() (int, string) {
	c.tb.Helper()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		c.tb.Fatalf("connection still open after 5 s")
	}
	var ce *websocket.CloseError
	if errors.As(c.endErr, &ce) {
		return ce.Code, ce.Text
	}
	return 0, fmt.Sprint(c.endErr)
}

// fakeExt is a fake extension: it authenticates, then answers every
// forwarded request by echoing, with the same id, the method and the frame
// it received; methods named "hold" are never answered, "nope" gets -32601.
type fakeExt struct {
	*tclient
	id, user string
	seen     chan []byte             // raw requests received
	replies  chan *relaywire.Message // replies the proxy sent it (errors)
}

func (tp *testProxy) extension(tb testing.TB, user, name string) *fakeExt {
	tb.Helper()
	return tp.extensionWithToken(tb, name, tp.token(tb, user, token.KindExtension), user)
}

func (tp *testProxy) extensionWithToken(tb testing.TB, name, tok, user string) *fakeExt {
	tb.Helper()
	c := dial(tb, tp.url+relaywire.PathExtension, true)
	e := &fakeExt{tclient: c, user: user, seen: make(chan []byte, 1<<16), replies: make(chan *relaywire.Message, 100)}
	auth := <-c.raw
	var m relaywire.Message
	json.Unmarshal(auth, &m)
	if m.Method != relaywire.MethodAuthenticate || string(m.ID) != `"proxy:1"` {
		tb.Fatalf("first message to the extension: %s", auth)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": relaywire.AuthenticateResult{Name: name, AccessToken: tok}})
	return e
}

// ready waits for the authenticated notification and starts answering.
func (e *fakeExt) ready(tb testing.TB) *fakeExt {
	tb.Helper()
	n := e.note(relaywire.MethodAuthenticated)
	var p relaywire.AuthenticatedParams
	json.Unmarshal(n.Params, &p)
	if p.UserID != e.user || !strings.HasPrefix(p.ExtensionID, "ext-") {
		tb.Fatalf("authenticated params: %s", n.Params)
	}
	e.id = p.ExtensionID
	go e.serve()
	return e
}

func (e *fakeExt) serve() {
	for data := range e.raw {
		var m relaywire.Message
		if json.Unmarshal(data, &m) != nil || m.ID == nil {
			continue // notifications
		}
		if m.Method == "" {
			select {
			case e.replies <- &m:
			default:
			}
			continue
		}
		e.seen <- data
		switch m.Method {
		case "hold":
			continue
		case "nope":
			e.sendRaw(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound, "method %q not found", m.Method)))
			continue
		}
		res := relaywire.MarshalParams(map[string]any{"method": m.Method, "id": m.ID, "frame": string(data)})
		e.sendRaw(relaywire.AppendResult(nil, m.ID, res))
	}
}

// mcp dials /mcp and performs the handshake.
func (tp *testProxy) mcp(tb testing.TB, user string) *tclient {
	tb.Helper()
	c := dial(tb, tp.url+relaywire.PathMCP, false)
	r := c.call("h", relaywire.MethodHandshake, relaywire.HandshakeParams{AccessToken: tp.token(tb, user, token.KindMCP)})
	var res relaywire.HandshakeResult
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || !res.Authenticated || res.UserID != user {
		tb.Fatalf("handshake: %+v", r)
	}
	return c
}

// connectTo connects c to the extension and returns the connection id.
func connectTo(tb testing.TB, c *tclient, extID string) string {
	tb.Helper()
	r := c.call("c", relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: extID})
	var res relaywire.ConnectResult
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.ExtensionID != extID {
		tb.Fatalf("connect: %s %s", r.Result, r.Error)
	}
	return res.ConnectionID
}

// errCode returns the code of a reply's error, 0 for a result.
func errCode(tb testing.TB, m *relaywire.Message) (int, string) {
	tb.Helper()
	if m.Error == nil {
		return 0, ""
	}
	var e relaywire.Error
	if err := json.Unmarshal(m.Error, &e); err != nil {
		tb.Fatalf("bad error object %s", m.Error)
	}
	return e.Code, e.Message
}
