package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/wsconn"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// RemoteOptions configure a Remote.
type RemoteOptions struct {
	// URL is the proxy's base URL (ws:// or wss://, with or without a
	// trailing slash) or its MCP endpoint (…/mcp), as relaywire.EndpointURL
	// reads it; check it with that before NewRemote. Token is an access
	// token of kind mcp. Both required.
	URL, Token string
	// ExtensionID is the extension to connect to; "" means the one
	// connected before a reconnect, else the first listed.
	ExtensionID string
	// Logger; nil discards.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the reconnect delay (defaults 250 ms
	// and 10 s).
	MinBackoff, MaxBackoff time.Duration
	// ReadyWait is how long a call waits for the link to the browser to be
	// (re)established before failing. Default 30 s.
	ReadyWait time.Duration
	// OnReady is called, on its own goroutine, after each connect to an
	// extension.
	OnReady func(relaywire.ConnectResult)
	// OnNotification is called on the connection's reader for each
	// notification from the extension side (the proxy's own status and
	// disconnected excepted): notifications/progress of a call in flight,
	// notifications/tools/list_changed. It must not block for long: replies
	// wait behind it (which keeps a call's progress ahead of its result).
	OnNotification func(method string, params json.RawMessage)
	// Dialer; nil means a default one with a 10 s handshake.
	Dialer *websocket.Dialer
	// PingPeriod is how often the Remote pings the proxy; a connection
	// silent for twice as long is dropped. Default 25 s.
	PingPeriod time.Duration
}

// ErrDropped fails calls in flight when the connection to the proxy drops.
var ErrDropped = errors.New("the connection to the proxy dropped before the browser answered; the action may or may not have happened")

// Remote is the MCP role of spec 001: it connects to the proxy's /mcp, performs
// mcp_handshake, list_extensions and connect, forwards calls, and does it
// all again after the proxy restarts or the extension leaves.
type Remote struct {
	opts RemoteOptions
	log  *slog.Logger
	next atomic.Int64

	mu      sync.Mutex
	cur     *rconn // the connection, once connected to an extension
	ready   chan struct{}
	conn    relaywire.ConnectResult
	lastErr string

	refused    chan struct{} // closed when the proxy refused the token: Run has stopped
	refusedErr error
}

// NewRemote returns a Remote; Run connects it.
func NewRemote(opts RemoteOptions) *Remote {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 250 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	if opts.ReadyWait <= 0 {
		opts.ReadyWait = 30 * time.Second
	}
	if opts.PingPeriod <= 0 {
		opts.PingPeriod = defaultPingPeriod
	}
	if opts.Dialer == nil {
		opts.Dialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, Proxy: http.ProxyFromEnvironment}
	}
	opts.URL = strings.TrimRight(opts.URL, "/")
	return &Remote{opts: opts, log: opts.Logger.With("component", "relay-remote"), ready: make(chan struct{}), refused: make(chan struct{})}
}

// Refused returns a channel closed once the proxy refused the token (the
// wrong kind, expired, signed with another key): the token is fixed for
// the Remote's life, so Run stops instead of asking again forever, and
// RefusedErr says why.
func (r *Remote) Refused() <-chan struct{} { return r.refused }

// RefusedErr is why the proxy refused the token, once Refused is closed.
func (r *Remote) RefusedErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refusedErr
}

// authRefusal reports whether err is the proxy's refusal of the token in
// mcp_handshake (relaywire.MsgAuthFailed).
func authRefusal(err error) bool {
	var re *relaywire.Error
	return errors.As(err, &re) && re.Code == relaywire.CodeServerError && strings.HasPrefix(re.Message, relaywire.MsgAuthFailed)
}

// Connected returns the current connection to an extension, if any.
func (r *Remote) Connected() (relaywire.ConnectResult, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conn, r.cur != nil
}

// LastError says why the last attempt failed.
func (r *Remote) LastError() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// Ready returns a channel closed while connected to an extension.
func (r *Remote) Ready() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready
}

func (r *Remote) setReady(c *rconn, res relaywire.ConnectResult) {
	r.mu.Lock()
	r.cur, r.conn, r.lastErr = c, res, ""
	close(r.ready)
	r.mu.Unlock()
}

func (r *Remote) setNotReady(c *rconn, why string) {
	r.mu.Lock()
	if r.cur == c && c != nil || c == nil {
		if r.cur != nil {
			r.ready = make(chan struct{})
		}
		r.cur = nil
	}
	if why != "" {
		r.lastErr = why
	}
	r.mu.Unlock()
}

// Run keeps connecting until ctx ends.
func (r *Remote) Run(ctx context.Context) {
	attempt := 0
	for ctx.Err() == nil {
		connected, err := r.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			attempt = 0
		}
		attempt++
		r.setNotReady(nil, err.Error())
		if authRefusal(err) {
			r.mu.Lock()
			r.refusedErr = err
			r.mu.Unlock()
			close(r.refused)
			r.log.Error("the proxy refused the token; not retrying", "error", err)
			return
		}
		d := Backoff(r.opts.MinBackoff, r.opts.MaxBackoff, attempt)
		r.log.Warn("proxy connection ended; reconnecting", "error", err, "retry_in", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session runs one WebSocket: handshake, then connect to an extension
// (again after each `disconnected`), until the socket ends.
func (r *Remote) session(ctx context.Context) (connected bool, err error) {
	dialURL, err := relaywire.EndpointURL(r.opts.URL, relaywire.PathMCP)
	if err != nil {
		return false, fmt.Errorf("proxy URL: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	ws, resp, err := r.opts.Dialer.DialContext(dctx, dialURL, nil)
	cancel()
	if err != nil {
		return false, dialError(dialURL, resp, err)
	}
	c := newRconn(ctx, r, ws)
	defer c.close(ErrDropped)

	var hs relaywire.HandshakeResult
	if err := c.control(ctx, relaywire.MethodHandshake, relaywire.HandshakeParams{AccessToken: r.opts.Token}, &hs); err != nil {
		return false, fmt.Errorf("mcp_handshake: %w", err)
	}
	r.log.Info("authenticated with the proxy", "user", hs.UserID, "client", hs.MCPClientID)
	for {
		res, err := r.connectOnce(ctx, c)
		if err != nil {
			if c.ctx.Err() != nil {
				return connected, context.Cause(c.ctx)
			}
			r.setNotReady(c, err.Error())
			r.log.Info("no extension to connect to yet", "error", err)
			select {
			case <-time.After(r.opts.MinBackoff * 4):
				continue
			case <-c.ctx.Done():
				return connected, context.Cause(c.ctx)
			}
		}
		connected = true
		r.log.Info("connected to an extension", "extension", res.ExtensionID, "name", res.ExtensionName)
		r.setReady(c, res)
		if r.opts.OnReady != nil {
			go r.opts.OnReady(res)
		}
		select {
		case why := <-c.gone:
			r.setNotReady(c, why)
			r.log.Warn("the extension left", "reason", why)
		case <-c.ctx.Done():
			return connected, context.Cause(c.ctx)
		}
	}
}

// connectOnce lists the extensions and connects to the chosen one.
func (r *Remote) connectOnce(ctx context.Context, c *rconn) (relaywire.ConnectResult, error) {
	var list relaywire.ListExtensionsResult
	if err := c.control(ctx, relaywire.MethodListExtensions, struct{}{}, &list); err != nil {
		return relaywire.ConnectResult{}, fmt.Errorf("list_extensions: %w", err)
	}
	want := r.opts.ExtensionID
	if want == "" {
		r.mu.Lock()
		prev := r.conn.ExtensionID
		r.mu.Unlock()
		for _, e := range list.Extensions {
			if e.ID == prev && e.Connected {
				want = prev
			}
		}
		for _, e := range list.Extensions {
			if want == "" && e.Connected {
				want = e.ID
			}
		}
	}
	if want == "" {
		return relaywire.ConnectResult{}, errors.New("no browser of this user is connected to the proxy")
	}
	var res relaywire.ConnectResult
	err := c.control(ctx, relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: want}, &res)
	var rpcErr *relaywire.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == relaywire.CodeAlreadyConnected {
		// Left over from before a `disconnected` we raced with.
		_ = c.control(ctx, relaywire.MethodDisconnect, struct{}{}, nil)
		err = c.control(ctx, relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: want}, &res)
	}
	if err != nil {
		return res, fmt.Errorf("connect to %s: %w", want, err)
	}
	return res, nil
}

// Call forwards a request to the connected browser, waiting up to
// ReadyWait for the link to be (re)established.
func (r *Remote) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c, err := r.waitReady(ctx)
	if err != nil {
		return nil, err
	}
	return c.call(ctx, method, params)
}

// Notify sends a notification to the proxy on the connection of the
// moment and waits, within ctx, until the proxy has handled it (a
// list_extensions after it comes back: the proxy handles a connection's
// messages in order). False when no connection is up or it ended first.
func (r *Remote) Notify(ctx context.Context, method string, params any) bool {
	r.mu.Lock()
	c := r.cur
	r.mu.Unlock()
	if c == nil || c.ctx.Err() != nil || !c.send(relaywire.AppendNotification(nil, method, relaywire.MarshalParams(params))) {
		return false
	}
	_, err := c.call(ctx, relaywire.MethodListExtensions, struct{}{})
	return err == nil
}

func (r *Remote) waitReady(ctx context.Context) (*rconn, error) {
	t := time.NewTimer(r.opts.ReadyWait)
	defer t.Stop()
	for {
		r.mu.Lock()
		c, ready := r.cur, r.ready
		r.mu.Unlock()
		if c != nil && c.ctx.Err() != nil {
			r.setNotReady(c, context.Cause(c.ctx).Error())
			continue
		}
		if c != nil {
			return c, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			why := r.LastError()
			if why == "" {
				why = "still connecting"
			}
			return nil, fmt.Errorf("not connected to a browser through the proxy at %s after %s: %s", r.opts.URL, r.opts.ReadyWait, why)
		}
	}
}

// rconn is one WebSocket to /mcp: its readPump goroutine reads, the
// wsconn.Conn's writer writes.
type rconn struct {
	r      *Remote
	c      *wsconn.Conn
	ctx    context.Context
	cancel context.CancelCauseFunc
	gone   chan string // `disconnected` notifications

	mu      sync.Mutex
	pending map[string]chan *relaywire.Message
}

func newRconn(ctx context.Context, r *Remote, ws *websocket.Conn) *rconn {
	c := &rconn{r: r, c: wsconn.New(ws, connOptions(r.opts.PingPeriod)), gone: make(chan string, 4), pending: make(map[string]chan *relaywire.Message)}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	go c.readPump()
	context.AfterFunc(c.ctx, func() { c.c.Close(websocket.CloseNormalClosure, "") })
	return c
}

func (c *rconn) close(cause error) {
	c.cancel(cause)
	c.mu.Lock()
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

func (c *rconn) readPump() {
	err := c.c.ReadLoop(c.handle, nil)
	var ce *websocket.CloseError
	if errors.As(err, &ce) && ce.Text != "" {
		c.close(fmt.Errorf("%w (the proxy said: %s)", ErrDropped, ce.Text))
	} else {
		c.close(ErrDropped)
	}
}

// handle takes one message from the proxy.
func (c *rconn) handle(data []byte) {
	// Replies and notifications outlive the call, and Parse aliases.
	m, kind, perr := relaywire.Parse(bytes.Clone(data))
	if perr != nil {
		c.r.log.Warn("bad message from the proxy", "error", perr.Message)
		if m == nil || m.ID == nil {
			return
		}
		kind = relaywire.KindReply
		m.Error = relaywire.MarshalParams(relaywire.Errorf(relaywire.CodeInternalError, "the proxy sent an invalid reply: %s", perr.Message))
	}
	switch kind {
	case relaywire.KindReply:
		c.mu.Lock()
		ch := c.pending[string(m.ID)]
		delete(c.pending, string(m.ID))
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	case relaywire.KindNotification:
		switch m.Method {
		case relaywire.MethodDisconnected:
			var p relaywire.DisconnectedParams
			_ = json.Unmarshal(m.Params, &p)
			select {
			case c.gone <- p.Reason:
			default:
			}
		case relaywire.MethodStatus:
		default:
			if f := c.r.opts.OnNotification; f != nil {
				f(m.Method, m.Params)
			}
		}
	case relaywire.KindRequest:
		// MCP clients answer no requests (spec 001).
		c.send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound, "this MCP client serves no method %q", m.Method)))
	}
}

// send queues a message; it gives up when the connection ends (or the
// proxy stops reading: see wsconn.Conn.Send).
func (c *rconn) send(msg []byte) bool {
	return c.c.Send(msg)
}

// control makes a control call and decodes its result into out.
func (c *rconn) control(ctx context.Context, method string, params, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := c.call(ctx, method, params)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(res, out); err != nil {
		return fmt.Errorf("the proxy's answer to %s: %w", method, err)
	}
	return nil
}

// call sends a request with a fresh numeric id and waits for its reply. A
// reply with an error returns it as *relaywire.Error.
func (c *rconn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := strconv.FormatInt(c.r.next.Add(1), 10)
	ch := make(chan *relaywire.Message, 1)
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, context.Cause(c.ctx)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	raw, err := json.Marshal(params)
	if err != nil {
		c.forget(id)
		return nil, err
	}
	if !c.send(relaywire.AppendRequestRawID(nil, json.RawMessage(id), method, raw)) {
		c.forget(id)
		return nil, context.Cause(c.ctx)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, context.Cause(c.ctx)
		}
		if m.Error != nil {
			var e relaywire.Error
			if json.Unmarshal(m.Error, &e) != nil {
				return nil, fmt.Errorf("%s: the proxy sent a malformed error: %s", method, m.Error)
			}
			return nil, &e
		}
		return m.Result, nil
	case <-ctx.Done():
		c.forget(id)
		// Ask the browser to stop; its late reply is dropped.
		c.send(relaywire.AppendNotification(nil, relaywire.MethodCancelled,
			relaywire.MarshalParams(relaywire.CancelledParams{RequestID: json.RawMessage(id), Reason: "the MCP client cancelled the call"})))
		return nil, ctx.Err()
	}
}

func (c *rconn) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}
