package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// initTimeout bounds the gateway's own initialize handshake with a child.
const initTimeout = 30 * time.Second

// errStarting is wrapped by ready's error when its caller gave up while
// the child was still being started and initialized.
var errStarting = errors.New("still starting (no answer to initialize yet)")

// A backend is one child process seen from the gateway: the shared child of
// a server, used by every session of that server, or the private child of
// one session (per_session). It owns the id space towards the child: every
// request a client sends is forwarded with a fresh numeric id, so replies
// are routed by a map lookup and two clients using the same ids never meet.
//
// The child is initialized by the gateway itself; sessions get the cached
// initialize result, so a child is handshaken once, not once per client.
type backend struct {
	g       *Gateway
	srv     *serverEntry
	private bool
	// privateInit is the initialize params of a private child's session,
	// passed through so the child sees its real client.
	privateInit json.RawMessage

	mu       sync.Mutex
	conn     *stdio.Conn // the child in use; nil before start and after exit
	starting *startAttempt
	init     json.RawMessage // the child's initialize result
	nextID   int64
	calls    map[int64]*call    // forwarded requests by gateway id
	srvReqs  map[string]*srvReq // server→client requests by the id clients see
	sessions map[*Session]struct{}
	subs     map[string]map[*Session]struct{} // resources/subscribe by uri
	dead     bool                             // private child gone, or server removed

	askers map[string]bool // "method tool": tools seen making server requests
	asks   []*ask          // server requests whose asker is not known yet

	toolsMu    sync.Mutex
	tools      []json.RawMessage // the child's tools (for the aggregate); nil: not fetched
	toolsGen   int               // bumped by invalidateTools
	toolsFetch *toolsFetch       // the fetch under way, if any
}

// startAttempt is one start of the child, shared by every caller of ready
// that finds it under way.
type startAttempt struct {
	done chan struct{}
	err  error // set before done is closed
}

// call is a client request forwarded to the child.
type call struct {
	gid    int64
	conn   *stdio.Conn
	sess   *Session        // nil for the gateway's own requests
	id     json.RawMessage // the client's id
	token  json.RawMessage // the client's progress token, if any
	method string
	params json.RawMessage // as the client sent them
	sink   mcphttp.Sink    // Send never blocks: the child's reader, which serves every session, calls it
	start  time.Time
}

// srvReq is a request from the child to a client (sampling, elicitation,
// roots) waiting for that client's answer.
type srvReq struct {
	childID json.RawMessage
	conn    *stdio.Conn
	sess    *Session
}

func newBackend(g *Gateway, srv *serverEntry, private bool) *backend {
	return &backend{
		g: g, srv: srv, private: private,
		calls:    make(map[int64]*call),
		srvReqs:  make(map[string]*srvReq),
		sessions: make(map[*Session]struct{}),
		subs:     make(map[string]map[*Session]struct{}),
	}
}

// ready returns the running child, starting and initializing it first if
// needed. A shared child that is down (backoff, failing) gives an error at
// once that says why, rather than a wait.
//
// The start runs on its own, bounded by initTimeout rather than by ctx: a
// caller that gives up (the aggregate's short budget, a client that left)
// does not abort the handshake for the others waiting on it.
func (b *backend) ready(ctx context.Context) (*stdio.Conn, json.RawMessage, error) {
	for {
		b.mu.Lock()
		if b.dead {
			b.mu.Unlock()
			if b.private {
				return nil, nil, fmt.Errorf("this session's own %q process has exited; start a new session", b.srv.name)
			}
			return nil, nil, fmt.Errorf("stdio server %q was removed from the configuration", b.srv.name)
		}
		if b.conn != nil {
			select {
			case <-b.conn.Done():
			default:
				c, init := b.conn, b.init
				b.mu.Unlock()
				return c, init, nil
			}
		}
		a := b.starting
		if a == nil {
			a = &startAttempt{done: make(chan struct{})}
			b.starting = a
			go b.runStart(a)
		}
		b.mu.Unlock()
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("stdio server %q: %w: %w", b.srv.name, errStarting, ctx.Err())
		}
		if a.err != nil {
			return nil, nil, a.err
		}
	}
}

// runStart performs one start attempt and reports it to its waiters.
func (b *backend) runStart(a *startAttempt) {
	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	go func() { // the gateway's shutdown ends the wait too
		select {
		case <-b.g.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	a.err = b.start(ctx)
	b.mu.Lock()
	b.starting = nil
	b.mu.Unlock()
	close(a.done)
}

// start gets a child from the supervisor and performs the handshake.
func (b *backend) start(ctx context.Context) error {
	var c *stdio.Conn
	var err error
	if b.private {
		c, err = b.g.sup.StartPrivate(ctx, b.srv.name)
	} else {
		c, err = b.g.sup.Conn(ctx, b.srv.name)
	}
	if err != nil {
		return err
	}
	b.mu.Lock()
	restarted := b.init != nil
	b.mu.Unlock()
	go b.read(c)
	params := b.privateInit
	if params == nil {
		params = b.g.gatewayInit
	}
	res, err := b.internalCall(ctx, c, "initialize", params)
	if err == nil {
		err = c.Send(appendNotification(nil, "notifications/initialized", nil))
	}
	if err != nil {
		if b.private {
			go c.Close()
		}
		return fmt.Errorf("initializing stdio server %q: %w", b.srv.name, err)
	}
	b.mu.Lock()
	if b.dead {
		// The private child's session ended (or the server was removed)
		// while the child started: nobody will stop it later.
		b.mu.Unlock()
		if b.private {
			go c.Close()
		}
		return fmt.Errorf("stdio server %q: the session ended while its process started", b.srv.name)
	}
	b.conn, b.init = c, res
	b.mu.Unlock()
	b.invalidateTools()
	if restarted {
		// The new process may offer other tools (a reload, an upgrade).
		b.broadcast(appendNotification(nil, "notifications/tools/list_changed", nil))
	}
	return nil
}

// chanSink is the sink of the gateway's own requests.
type chanSink chan []byte

func (s chanSink) Send(msg []byte, final bool) {
	if final {
		select {
		case s <- msg:
		default:
		}
	}
}

// internalCall sends a request of the gateway's own and returns its result.
func (b *backend) internalCall(ctx context.Context, c *stdio.Conn, method string, params json.RawMessage) (json.RawMessage, error) {
	ch := make(chanSink, 1)
	cl := &call{conn: c, method: method, sink: ch, start: time.Now()}
	b.mu.Lock()
	b.nextID++
	cl.gid = b.nextID
	b.calls[cl.gid] = cl
	b.mu.Unlock()
	if err := c.Send(appendRequest(nil, strconv.AppendInt(nil, cl.gid, 10), method, params)); err != nil {
		b.take(cl.gid)
		return nil, err
	}
	select {
	case msg := <-ch:
		var e mcphttp.Message
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, err
		}
		if e.Error != nil {
			return nil, fmt.Errorf("%s failed: %s", method, e.Error)
		}
		return e.Result, nil
	case <-ctx.Done():
		b.take(cl.gid)
		return nil, fmt.Errorf("%s: no answer: %w", method, ctx.Err())
	}
}

// take removes a call from those in flight; whoever takes it answers it.
func (b *backend) take(gid int64) *call {
	b.mu.Lock()
	cl := b.calls[gid]
	var resolved []resolvedAsk
	if cl != nil {
		delete(b.calls, gid)
		if cl.sess != nil {
			cl.sess.forget(b, cl.id)
		}
		if len(b.asks) > 0 {
			resolved = b.eliminateLocked(gid)
		}
	}
	b.mu.Unlock()
	b.deliverAsks(resolved)
	return cl
}

// forward sends a client request to the child; the reply reaches sink.
func (b *backend) forward(ctx context.Context, s *Session, e *mcphttp.Message, sink mcphttp.Sink) {
	c, _, err := b.ready(ctx)
	if err != nil {
		sink.Send(mcphttp.ErrorBody(e.ID, rpccode.Unavailable, err.Error()), true)
		return
	}
	params := e.Params
	token := mcphttp.MetaField(params, "progressToken")
	b.mu.Lock()
	b.nextID++
	gid := b.nextID
	b.mu.Unlock()
	gidRaw := strconv.AppendInt(make([]byte, 0, 20), gid, 10)
	if token != nil {
		// Progress tokens are the client's choice, so two clients may pick
		// the same one: the child sees the gateway id instead.
		if params, err = setMetaField(params, "progressToken", gidRaw); err != nil {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InvalidParams, err.Error()), true)
			return
		}
	}
	cl := &call{gid: gid, conn: c, sess: s, id: e.ID, token: token, method: e.Method, params: e.Params, sink: sink, start: time.Now()}
	b.mu.Lock()
	if !s.remember(b, e.ID, gid) {
		b.mu.Unlock()
		sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InvalidRequest, fmt.Sprintf("a request with id %s is already in flight in this session", e.ID)), true)
		return
	}
	b.calls[gid] = cl
	b.mu.Unlock()
	if err := c.Send(appendRequest(make([]byte, 0, 64+len(e.Method)+len(params)), gidRaw, e.Method, params)); err != nil {
		if b.take(gid) != nil {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.Unavailable, b.exitMessage(c, "before the request could be sent")), true)
		}
	}
}

// cancel forwards a client's notifications/cancelled for one of its
// requests, with the request id the child knows.
func (b *backend) cancel(s *Session, params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason,omitempty"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return
	}
	b.mu.Lock()
	gid, ok := s.lookup(b, p.RequestID)
	var c *stdio.Conn
	if cl := b.calls[gid]; ok && cl != nil {
		c = cl.conn
	}
	b.mu.Unlock()
	if c == nil {
		return
	}
	out, _ := json.Marshal(map[string]any{"requestId": gid, "reason": p.Reason})
	_ = c.Send(appendNotification(nil, "notifications/cancelled", out))
}

// answer forwards a client's response to a server→client request.
func (b *backend) answer(s *Session, e *mcphttp.Message) error {
	b.mu.Lock()
	r := b.srvReqs[idKey(e.ID)]
	if r != nil && r.sess == s {
		delete(b.srvReqs, idKey(e.ID))
	}
	b.mu.Unlock()
	if r == nil || r.sess != s {
		return fmt.Errorf("no request with id %s is waiting for this session's answer", e.ID)
	}
	return r.conn.Send(mcphttp.AppendResponse(nil, r.childID, e.Result, e.Error))
}

// read routes everything the child writes until it exits, then fails the
// calls still waiting on it.
func (b *backend) read(c *stdio.Conn) {
	for msg := range c.Incoming() {
		b.route(c, msg)
	}
	<-c.Done()
	b.childGone(c)
}

func (b *backend) route(c *stdio.Conn, msg []byte) {
	var e mcphttp.Message
	if err := json.Unmarshal(msg, &e); err != nil {
		b.g.log.Warn("stdio server wrote a line that is not a JSON-RPC message", "server", b.srv.name, "err", err, "bytes", len(msg))
		return
	}
	switch e.Kind() {
	case mcphttp.KindResponse:
		b.routeResponse(&e, msg)
	case mcphttp.KindRequest:
		b.routeRequest(c, &e)
	case mcphttp.KindNotification:
		b.routeNotification(&e, msg)
	default:
		b.g.log.Warn("stdio server wrote an invalid JSON-RPC message", "server", b.srv.name, "bytes", len(msg))
	}
}

func (b *backend) routeResponse(e *mcphttp.Message, raw []byte) {
	gid, err := strconv.ParseInt(string(e.ID), 10, 64)
	if err != nil {
		b.g.log.Warn("stdio server answered an id the gateway never sent", "server", b.srv.name, "id", string(e.ID))
		return
	}
	cl := b.take(gid)
	if cl == nil {
		return // cancelled, or its session ended
	}
	if cl.sess == nil {
		cl.sink.Send(raw, true)
		return
	}
	b.srv.metrics.answered(cl.method, e.Error != nil, time.Since(cl.start))
	result := e.Result
	if cl.method == "tools/list" && e.Error == nil && b.srv.filter != nil {
		result = b.srv.filter.apply(result)
	}
	cl.sink.Send(mcphttp.AppendResponse(make([]byte, 0, 48+len(cl.id)+len(result)+len(e.Error)), cl.id, result, e.Error), true)
}

// capability names the client capability a server→client request needs.
func capability(method string) string {
	switch method {
	case "sampling/createMessage":
		return "sampling"
	case "elicitation/create":
		return "elicitation"
	case "roots/list":
		return "roots"
	}
	return ""
}

func (b *backend) routeNotification(e *mcphttp.Message, raw []byte) {
	switch e.Method {
	case "notifications/progress":
		tok := metaFieldTop(e.Params, "progressToken")
		gid, err := strconv.ParseInt(string(tok), 10, 64)
		if err != nil {
			return
		}
		b.mu.Lock()
		cl := b.calls[gid]
		b.mu.Unlock()
		if cl == nil || cl.sess == nil || cl.token == nil {
			return // its call has ended: progress belongs to nobody else
		}
		params, err := setField(e.Params, "progressToken", cl.token)
		if err != nil {
			return
		}
		cl.sink.Send(appendNotification(nil, e.Method, params), false)
	case "notifications/cancelled":
		// The child gives up on one of its requests to a client.
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason,omitempty"`
		}
		if json.Unmarshal(e.Params, &p) != nil {
			return
		}
		b.mu.Lock()
		var target *Session
		var id string
		for k, r := range b.srvReqs {
			if idKey(r.childID) == idKey(p.RequestID) {
				target, id = r.sess, k
				delete(b.srvReqs, k)
				break
			}
		}
		b.mu.Unlock()
		if target != nil {
			out, _ := json.Marshal(map[string]any{"requestId": json.RawMessage(id), "reason": p.Reason})
			target.Notify(appendNotification(nil, e.Method, out))
		}
	case "notifications/resources/updated":
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(e.Params, &p)
		b.mu.Lock()
		targets := make([]*Session, 0, len(b.subs[p.URI]))
		for s := range b.subs[p.URI] {
			targets = append(targets, s)
		}
		b.mu.Unlock()
		for _, s := range targets {
			s.Notify(raw)
		}
	case "notifications/tools/list_changed":
		b.invalidateTools()
		b.broadcast(raw)
		b.g.toolsChanged()
	default:
		// list_changed of prompts and resources, log messages: every
		// session of this child.
		b.broadcast(raw)
	}
}

// metaFieldTop reads a top-level field of params.
func metaFieldTop(params json.RawMessage, key string) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil {
		return nil
	}
	return top[key]
}

func (b *backend) broadcast(msg []byte) {
	b.mu.Lock()
	targets := make([]*Session, 0, len(b.sessions))
	for s := range b.sessions {
		targets = append(targets, s)
	}
	b.mu.Unlock()
	for _, s := range targets {
		s.Notify(msg)
	}
}

// exitMessage says why the child c is gone, for the errors calls get.
func (b *backend) exitMessage(c *stdio.Conn, when string) string {
	var why string
	var ee *stdio.ExitError
	if err := c.Err(); errors.As(err, &ee) {
		why = ee.Reason()
	} else if err != nil {
		why = err.Error()
	} else {
		why = "its connection closed"
	}
	msg := fmt.Sprintf("stdio server %q exited %s (%s)", b.srv.name, when, why)
	if b.private {
		return msg + "; this session's process is not restarted: start a new session"
	}
	if st, ok := b.g.sup.State(b.srv.name); ok && !st.NextStart.IsZero() {
		return msg + fmt.Sprintf("; it restarts in %s", time.Until(st.NextStart).Round(time.Millisecond))
	}
	return msg + "; it is being restarted"
}

// childGone ends every call and server request that was waiting on c.
func (b *backend) childGone(c *stdio.Conn) {
	msg := b.exitMessage(c, "before answering")
	b.mu.Lock()
	var failed []*call
	for gid, cl := range b.calls {
		if cl.conn == c {
			delete(b.calls, gid)
			if cl.sess != nil {
				cl.sess.forget(b, cl.id)
			}
			failed = append(failed, cl)
		}
	}
	for k, r := range b.srvReqs {
		if r.conn == c {
			delete(b.srvReqs, k)
		}
	}
	kept := b.asks[:0]
	for _, a := range b.asks {
		if a.c == c {
			a.timer.Stop()
			continue
		}
		kept = append(kept, a)
	}
	b.asks = kept
	if b.conn == c {
		b.conn = nil
		if b.private {
			b.dead = true
		}
	}
	b.mu.Unlock()
	for _, cl := range failed {
		if cl.sess != nil {
			b.srv.metrics.answered(cl.method, true, time.Since(cl.start))
			cl.sink.Send(mcphttp.ErrorBody(cl.id, rpccode.InternalError, msg), true)
		} else {
			cl.sink.Send(mcphttp.ErrorBody(nil, rpccode.InternalError, msg), true)
		}
	}
	if len(failed) > 0 {
		b.g.log.Warn("calls failed: stdio server exited", "server", b.srv.name, "calls", len(failed), "pid", c.PID())
	}
}

// attach and detach keep the backend's session set.
func (b *backend) attach(s *Session) {
	b.mu.Lock()
	b.sessions[s] = struct{}{}
	b.mu.Unlock()
}

// detach removes a session: its calls in flight are cancelled at the child
// (nobody will read their answers), its server requests refused, its
// subscriptions dropped.
func (b *backend) detach(s *Session) {
	b.mu.Lock()
	delete(b.sessions, s)
	type cancel struct {
		c   *stdio.Conn
		gid int64
	}
	var cancels []cancel
	var resolved []resolvedAsk
	// The session's own record of its calls (kept with b.calls under b.mu,
	// lock order backend then session), not a scan of every session's:
	// a stateless session detaches after each of its requests.
	s.mu.Lock()
	for k, gid := range s.inflight {
		if k.b != b {
			continue
		}
		delete(s.inflight, k)
		if cl := b.calls[gid]; cl != nil && cl.sess == s {
			delete(b.calls, gid)
			cancels = append(cancels, cancel{cl.conn, gid})
		}
	}
	s.mu.Unlock()
	for _, c := range cancels {
		resolved = append(resolved, b.eliminateLocked(c.gid)...)
	}
	var refused []*srvReq
	for k, r := range b.srvReqs {
		if r.sess == s {
			delete(b.srvReqs, k)
			refused = append(refused, r)
		}
	}
	var unsub []string
	for uri, set := range b.subs {
		if _, ok := set[s]; ok {
			delete(set, s)
			if len(set) == 0 {
				delete(b.subs, uri)
				unsub = append(unsub, uri)
			}
		}
	}
	conn, private := b.conn, b.private
	b.mu.Unlock()
	b.deliverAsks(resolved)
	for _, c := range cancels {
		out, _ := json.Marshal(map[string]any{"requestId": c.gid, "reason": "the client session ended"})
		_ = c.c.Send(appendNotification(nil, "notifications/cancelled", out))
	}
	for _, r := range refused {
		_ = r.conn.Send(mcphttp.ErrorBody(r.childID, rpccode.InternalError, "the client session this request went to has ended"))
	}
	if private {
		b.mu.Lock()
		b.dead = true
		b.mu.Unlock()
		if conn != nil {
			go conn.Close()
		}
		return
	}
	if conn != nil {
		for _, uri := range unsub {
			p, _ := json.Marshal(map[string]string{"uri": uri})
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
				defer cancel()
				_, _ = b.internalCall(ctx, conn, "resources/unsubscribe", p)
			}()
		}
	}
}

// subscribe records a session's interest in a resource; it reports whether
// the child must be told (the first subscriber).
func (b *backend) subscribe(s *Session, uri string, on bool) (tellChild bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	set := b.subs[uri]
	if on {
		if set == nil {
			set = make(map[*Session]struct{})
			b.subs[uri] = set
		}
		set[s] = struct{}{}
		return len(set) == 1
	}
	if set == nil {
		return false
	}
	delete(set, s)
	if len(set) == 0 {
		delete(b.subs, uri)
		return true
	}
	return false
}

// inFlight reports the calls waiting for the child.
func (b *backend) inFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}
