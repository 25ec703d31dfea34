package stdioproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// link is one connection to the bridge: an SDK Streamable HTTP client
// connection (one MCP session, in the eras that have them), its reader, and
// the standalone GET stream. A link is replaced, never repaired: when the
// bridge is lost, the next link gets a higher generation and a new session.
type link struct {
	gen    uint64
	conn   mcp.Connection
	ctx    context.Context // the link's lifetime: its reader and GET stream
	cancel context.CancelFunc
	// replayID is the id of the initialize the proxy replays on this link,
	// whose answer the reader hands to replayed instead of the client.
	replayID jsonrpc.ID
	replayed chan *jsonrpc.Response

	dead bool // guarded by proxy.mu
}

// failure says what a failed write means for the message and the link.
type failure int

const (
	// notSent: the bridge never got the message (connection refused, or its
	// session is gone); resend it on a new link.
	notSent failure = iota
	// lost: the connection broke after the message may have reached the
	// bridge.
	lost
	// refused: the bridge answered with an error; the link is fine.
	refused
	// busy: the bridge answered with a passing refusal (429, 5xx); the link
	// is fine.
	busy
	// broken: the connection is in a state that fails every message; the
	// bridge did not act on this one.
	broken
	// closing: the proxy is stopping.
	closing
)

// classify reads a Connection.Write error of the SDK's Streamable HTTP
// client: a 404 for the session is mcp.ErrSessionMissing (the bridge
// restarted or reaped the session); a failure to reach the bridge is a
// *url.Error; an HTTP error whose body is a JSON-RPC error carries it,
// and one that may pass (429, 5xx) carries the SDK's ErrRejected alone. For
// refused and busy, the error to give the client comes too.
func (p *proxy) classify(err error) (failure, *jsonrpc.Error) {
	if p.ctx.Err() != nil {
		return closing, nil
	}
	if errors.Is(err, mcp.ErrSessionMissing) {
		return notSent, nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		var oe *net.OpError
		if errors.As(ue.Err, &oe) && oe.Op == "dial" {
			return notSent, nil
		}
		return lost, nil
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		if we.Code != codeRejected {
			return refused, we
		}
		return busy, &jsonrpc.Error{Code: CodeBridgeUnavailable, Message: "the bridge did not take the request: " + err.Error()}
	}
	return broken, nil
}

// link returns the current link, connecting (with backoff) when there is
// none. *deadline bounds the wait; it is set to BridgeWait from now if zero.
func (p *proxy) link(deadline *time.Time) (*link, error) {
	p.mu.Lock()
	l, isClosing := p.cur, p.closing
	p.mu.Unlock()
	if l != nil {
		return l, nil
	}
	if isClosing || p.ctx.Err() != nil {
		return nil, errClosing
	}
	if deadline.IsZero() {
		*deadline = time.Now().Add(p.wait)
	}
	t := time.NewTimer(time.Until(*deadline))
	defer t.Stop()
	select {
	case p.dialing <- struct{}{}:
	case <-p.ctx.Done():
		return nil, errClosing
	case <-t.C:
		p.mu.Lock()
		last := p.lastDialErr
		p.mu.Unlock()
		if last == nil {
			last = errors.New("another attempt to reconnect is still under way")
		}
		return nil, p.noBridge(last)
	}
	defer func() { <-p.dialing }()
	p.mu.Lock()
	l = p.cur
	p.mu.Unlock()
	if l != nil {
		return l, nil
	}
	return p.dial(*deadline)
}

// dial connects until it succeeds, the bridge refuses the proxy, or the
// deadline passes. The caller holds the dialing token.
func (p *proxy) dial(deadline time.Time) (*link, error) {
	for attempt := 0; ; attempt++ {
		l, err := p.connect(deadline)
		if err == nil {
			p.mu.Lock()
			if p.closing {
				l.dead = true
				p.mu.Unlock()
				l.cancel()
				_ = l.conn.Close()
				return nil, errClosing
			}
			p.cur = l
			p.lastDialErr = nil
			replayed := p.initReq != nil
			p.mu.Unlock()
			if replayed {
				p.log.Info("reconnected to the bridge; session re-initialized", "session", l.conn.SessionID())
			}
			return l, nil
		}
		if p.ctx.Err() != nil {
			return nil, errClosing
		}
		var re *refusedError
		if errors.As(err, &re) {
			return nil, err
		}
		p.mu.Lock()
		if p.lastDialErr == nil || !errors.Is(err, context.DeadlineExceeded) {
			p.lastDialErr = err // a cut-short attempt says less than the one before
		}
		err = p.lastDialErr
		p.mu.Unlock()
		p.log.Debug("the bridge does not answer yet", "attempt", attempt+1, "error", err)
		if !p.pause(attempt, deadline) {
			return nil, p.noBridge(err)
		}
	}
}

// noBridge is the error for a bridge that did not answer in time.
func (p *proxy) noBridge(last error) error {
	return fmt.Errorf("%w at %s: run `browserbridge service start` or `browserbridge serve` (waited %v; last error: %v)",
		ErrNoBridge, p.opts.Endpoint, p.wait, last)
}

// pause sleeps before attempt+1, doubling from retryFirst up to retryMax,
// never past deadline. It returns false when the deadline has passed or
// the proxy is closing.
func (p *proxy) pause(attempt int, deadline time.Time) bool {
	left := time.Until(deadline)
	if left <= 0 {
		return false
	}
	d := retryFirst << min(attempt, 10)
	d = min(d, retryMax, left)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// connect makes one attempt at a new link. Without a cached initialize it
// only checks that the bridge answers; with one, it replays the client's
// initialize and notifications/initialized and opens the GET stream, so
// the link is ready for the client's requests.
func (p *proxy) connect(deadline time.Time) (*link, error) {
	actx, cancel := context.WithDeadline(p.ctx, earliest(deadline, time.Now().Add(attemptTimeout)))
	defer cancel()
	p.mu.Lock()
	init, initialized := p.initReq, p.initialized
	p.gen++
	gen := p.gen
	p.mu.Unlock()

	if init == nil {
		if err := p.probe(actx); err != nil {
			return nil, err
		}
		return p.newLink(gen, jsonrpc.ID{})
	}
	replayID, _ := jsonrpc.MakeID(replayIDPrefix + strconv.FormatUint(gen, 10))
	l, err := p.newLink(gen, replayID)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*link, error) {
		p.mu.Lock()
		l.dead = true
		p.mu.Unlock()
		l.cancel()
		p.closeConn(l)
		return nil, err
	}
	replay := &jsonrpc.Request{ID: replayID, Method: methodInitialize, Params: init.Params}
	if err := l.conn.Write(actx, replay); err != nil {
		if kind, we := p.classify(err); kind == refused { // busy is worth another try
			return fail(&refusedError{what: "initialize", msg: we.Message})
		}
		return fail(fmt.Errorf("initialize: %w", err))
	}
	var resp *jsonrpc.Response
	select {
	case resp = <-l.replayed:
	case <-l.ctx.Done():
		return fail(errors.New("the connection broke during initialize"))
	case <-actx.Done():
		return fail(fmt.Errorf("initialize: %w", actx.Err()))
	}
	if resp.Error != nil {
		var we *jsonrpc.Error
		if errors.As(resp.Error, &we) {
			return fail(&refusedError{what: "initialize", msg: we.Message})
		}
		return fail(fmt.Errorf("initialize: %w", resp.Error))
	}
	p.onInitialize(l, nil, resp.Result)
	if initialized {
		n := &jsonrpc.Request{Method: methodInitialized, Params: json.RawMessage("{}")}
		if err := l.conn.Write(actx, n); err != nil {
			return fail(fmt.Errorf("notifications/initialized: %w", err))
		}
	}
	return l, nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// refusedError means the bridge answered but refused the proxy (a wrong
// token, a Host it does not accept): retrying will not help.
type refusedError struct {
	what string // "the connection" or the request refused
	msg  string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("the bridge refused %s: %s", e.what, e.msg)
}

// probe checks that something answers HTTP at the endpoint. Any answer will
// do, except 401 and 403: those are the bridge refusing this proxy.
func (p *proxy) probe(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.opts.Endpoint, nil)
	if err != nil {
		return err
	}
	// Without text/event-stream, no server starts a stream for this GET.
	req.Header.Set("Accept", "application/json")
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyMax))
	msg := strings.TrimSpace(string(body))
	if m, err := jsonrpc.DecodeMessage(body); err == nil {
		if r, ok := m.(*jsonrpc.Response); ok && r.Error != nil {
			msg = r.Error.Error()
		}
	}
	if msg == "" {
		msg = "no reason given"
	}
	return &refusedError{what: fmt.Sprintf("the proxy at %s (HTTP %s)", p.opts.Endpoint, resp.Status), msg: msg}
}

// newLink opens an SDK client connection and starts its reader.
func (p *proxy) newLink(gen uint64, replayID jsonrpc.ID) (*link, error) {
	t := &mcp.StreamableClientTransport{
		Endpoint:   p.opts.Endpoint,
		HTTPClient: p.http,
		// A stream that breaks is not resumed: the bridge restarted, and
		// its event store went with it. The link is replaced instead.
		MaxRetries: -1,
		// The SDK opens the GET stream only for its own Client; the proxy
		// opens it itself (stream.go).
		DisableStandaloneSSE: true,
	}
	conn, err := t.Connect(p.ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(p.ctx)
	l := &link{gen: gen, conn: conn, ctx: ctx, cancel: cancel, replayID: replayID, replayed: make(chan *jsonrpc.Response, 1)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.readLink(l)
	}()
	return l, nil
}

// readLink passes the link's messages on until it fails or ends.
func (p *proxy) readLink(l *link) {
	for {
		msg, err := l.conn.Read(l.ctx)
		if err != nil {
			if l.ctx.Err() == nil {
				p.breakLink(l, fmt.Errorf("reading from the bridge: %w", err))
			}
			return
		}
		p.fromBridge(l, msg)
	}
}

// fromBridge passes one message from link l to the client: answers only
// to requests pending on l, the replayed initialize's answer to nobody.
func (p *proxy) fromBridge(l *link, msg jsonrpc.Message) {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		if l.replayID.IsValid() && m.ID == l.replayID {
			select {
			case l.replayed <- m:
			default:
			}
			return
		}
		if m.Error != nil {
			var we *jsonrpc.Error
			if !errors.As(m.Error, &we) {
				// Not from the wire: the SDK's stand-in for an answer lost
				// with the stream ("request terminated without response").
				p.log.Debug("a call's stream ended without its answer", "id", m.ID.Raw(), "error", m.Error)
				m = errorResponse(m.ID, CodeInterrupted, msgInterrupted)
			}
		}
		req, ok := p.peek(m.ID, l.gen)
		if !ok {
			p.log.Debug("dropped an answer nobody waits for", "id", m.ID.Raw())
			return
		}
		if req.Method == methodInitialize && m.Error == nil {
			// Before the answer is taken, which lets the client's next
			// messages go: the session must be ready for them.
			p.onInitialize(l, req, m.Result)
		}
		if _, ok := p.take(m.ID, l.gen); ok {
			p.toClient(m)
		}
	case *jsonrpc.Request:
		if m.IsCall() {
			p.mu.Lock()
			if !l.dead {
				p.serverCalls[m.ID] = l.gen
			}
			p.mu.Unlock()
		}
		p.toClient(m)
	}
}

// onInitialize handles a successful initialize on l: the client's own
// (req set: it is remembered for replays) or a replay (req nil). It notes
// the protocol version and opens the GET stream before anything else
// happens on the session, so no server notification is missed.
func (p *proxy) onInitialize(l *link, req *jsonrpc.Request, result json.RawMessage) {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(result, &r)
	p.setProtoVersion(r.ProtocolVersion)
	if req != nil {
		p.mu.Lock()
		p.initReq = req
		p.mu.Unlock()
		p.log.Info("session initialized", "session", l.conn.SessionID(), "protocol", r.ProtocolVersion)
	}
	p.openStream(l)
}

// breakLink retires link l. Requests the bridge took on it and has not
// answered get CodeInterrupted (those still being written learn their fate
// from how the write ends); its session is closed; and if it was the
// current link of a session the client initialized, a reconnect starts at
// once, so that server notifications keep coming.
func (p *proxy) breakLink(l *link, cause error) {
	p.mu.Lock()
	if l.dead {
		p.mu.Unlock()
		return
	}
	l.dead = true
	current := p.cur == l
	if current {
		p.cur = nil
	}
	isClosing := p.closing
	var interrupted []jsonrpc.ID
	if !isClosing {
		for id, pc := range p.pending {
			if pc.gen == l.gen && pc.sent {
				interrupted = append(interrupted, id)
				p.deletePendingLocked(id)
			}
		}
	}
	for id, gen := range p.serverCalls {
		if gen == l.gen {
			delete(p.serverCalls, id)
		}
	}
	reconnect := current && !isClosing && p.initReq != nil
	p.mu.Unlock()

	l.cancel()
	p.closeConn(l)
	if isClosing {
		return
	}
	if current {
		p.log.Warn("lost the connection to the bridge", "session", l.conn.SessionID(), "error", cause, "calls_interrupted", len(interrupted))
	} else {
		p.log.Debug("a connection attempt failed", "error", cause)
	}
	for _, id := range interrupted {
		p.toClient(errorResponse(id, CodeInterrupted, msgInterrupted))
	}
	if reconnect {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			var deadline time.Time
			if _, err := p.link(&deadline); err != nil && !errors.Is(err, errClosing) {
				p.log.Warn("the bridge did not come back; trying again at the client's next message", "error", err)
			}
		}()
	}
}

// closeConn closes l's connection in the background (a DELETE for a
// session the bridge may still have, bounded by the SDK).
func (p *proxy) closeConn(l *link) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = l.conn.Close()
	}()
}

// headerTransport adds the bearer token and the protocol version header
// the SDK's client connection leaves out when driven without an
// mcp.Client.
type headerTransport struct {
	base    http.RoundTripper
	host    string // the endpoint's host: the token goes nowhere else
	token   string
	version func() string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	auth := t.token != "" && req.URL.Host == t.host && req.Header.Get("Authorization") == ""
	version := ""
	if req.Header.Get(headerProtoVersion) == "" {
		// Requests in a session, and every request of the stateless era,
		// name the negotiated version. A new session's initialize does not.
		if v := t.version(); v != "" && (req.Header.Get(headerSessionID) != "" || v >= statelessVersion) {
			version = v
		}
	}
	if !auth && version == "" {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if auth {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	if version != "" {
		r.Header.Set(headerProtoVersion, version)
	}
	return t.base.RoundTrip(r)
}
