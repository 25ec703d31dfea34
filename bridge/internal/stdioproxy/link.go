package stdioproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// link is one stretch of time during which the bridge answers: its
// session (in the eras that have them) and the standalone GET stream. A
// link is replaced, never repaired: when the bridge goes away, the next
// link gets a higher generation, and the same session unless the bridge
// said it no longer has it.
type link struct {
	gen    uint64
	ctx    context.Context // the link's lifetime: its GET stream
	cancel context.CancelFunc

	// Guarded by proxy.mu.
	sid         string // the session requests on this link belong to; "" for none
	dead        bool
	initialized bool // reinitialize sent notifications/initialized in sid
}

func (p *proxy) newLink(gen uint64, sid string) *link {
	ctx, cancel := context.WithCancel(p.ctx)
	return &link{gen: gen, ctx: ctx, cancel: cancel, sid: sid}
}

// sessionOf returns l's session.
func (p *proxy) sessionOf(l *link) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return l.sid
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
	p.mu.Lock()
	again := p.gen > 0
	p.mu.Unlock()
	// A bridge that just went away may still be stopping, and one that is
	// stopping has let its sessions go: the session would seem gone. A
	// moment's wait lets it finish.
	if again && !p.pause(0, deadline) {
		if p.ctx.Err() != nil {
			return nil, errClosing
		}
		return nil, p.noBridge(errors.New("the bridge went away"))
	}
	for attempt := 0; ; attempt++ {
		l, how, err := p.connect(deadline)
		if err == nil {
			p.mu.Lock()
			if p.closing {
				l.dead = true
				p.mu.Unlock()
				l.cancel()
				return nil, errClosing
			}
			p.cur = l
			p.lastDialErr = nil
			sid := l.sid
			p.mu.Unlock()
			if how != "" {
				p.log.Info("reconnected to the bridge; "+how, "session", sid)
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
	return fmt.Errorf("%w at %s: %s (waited %v; last error: %v)",
		ErrNoBridge, p.opts.Endpoint, p.hint, p.wait, last)
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

// connect makes one attempt at a new link, and says how it got it (""
// for the first). With a session, it reopens the session's GET stream:
// the bridge carries the session over its restarts, so the client keeps
// it, and with it its tab group. Only when the bridge answers that it no
// longer has the session does connect replay the client's initialize and
// notifications/initialized, for a new session. Before the client's
// initialize, and in the stateless era, it only checks that the bridge
// answers.
func (p *proxy) connect(deadline time.Time) (*link, string, error) {
	end := earliest(deadline, time.Now().Add(attemptTimeout))
	actx, cancel := context.WithDeadline(p.ctx, end)
	defer cancel()
	p.mu.Lock()
	init, initialized, sid := p.initReq, p.initialized, p.sid
	p.gen++
	gen := p.gen
	p.mu.Unlock()

	if sid != "" {
		// At least a moment: getStream takes 0 for no bound at all.
		l, err := p.resume(gen, sid, max(time.Until(end), time.Millisecond))
		if !errors.Is(err, mcp.ErrSessionMissing) {
			return l, "session resumed", err
		}
		p.log.Warn("the bridge no longer has the session; starting a new one", "session", sid, "error", err)
		p.forgetSession(sid)
	}
	if init == nil || mcphttp.IsStateless(p.protoVersion()) {
		if err := p.probe(actx); err != nil {
			return nil, "", err
		}
		return p.newLink(gen, ""), "", nil
	}
	l, err := p.reinitialize(actx, gen, init, initialized)
	return l, "session re-initialized", err
}

// resume opens the GET stream of session sid on a new link: the bridge's
// first request for the session since its restart, which makes it take
// the session up again. A *sessionGoneError means it no longer has it.
func (p *proxy) resume(gen uint64, sid string, timeout time.Duration) (*link, error) {
	l := p.newLink(gen, sid)
	resp, err := p.getStream(l.ctx, sid, "", timeout)
	var he *httpError
	switch {
	case err == nil:
		p.listenOn(l, sid, resp, nil)
		return l, nil
	case errors.Is(err, errNoStream):
		return l, nil // the bridge answers; the next request checks the session
	case errors.As(err, &he) && (he.code == http.StatusUnauthorized || he.code == http.StatusForbidden):
		l.cancel()
		return nil, &refusedError{what: fmt.Sprintf("the proxy at %s (HTTP %s)", p.opts.Endpoint, he.status), msg: he.msg}
	case errors.As(err, &he) && !he.transient():
		// It answers, with the session, but not with a stream yet (a 409
		// while the last one is let go): listen tries again.
		p.listenOn(l, sid, nil, err)
		return l, nil
	}
	l.cancel()
	return nil, err
}

// forgetSession drops session sid, which the bridge no longer has: the
// next link starts a new one.
func (p *proxy) forgetSession(sid string) {
	p.mu.Lock()
	if p.sid == sid {
		p.sid = ""
	}
	p.forgetServerCallsLocked(sid)
	p.mu.Unlock()
}

// forgetServerCallsLocked drops the bridge's requests of session sid,
// which ended: the client's answers to them have nowhere to go.
func (p *proxy) forgetServerCallsLocked(sid string) {
	for id, s := range p.serverCalls {
		if s == sid {
			delete(p.serverCalls, id)
		}
	}
}

// reinitialize replays the client's initialize (its answer goes nowhere)
// and, if the client sent it, notifications/initialized, for a new
// session on a new link.
func (p *proxy) reinitialize(ctx context.Context, gen uint64, init *jsonrpc.Request, initialized bool) (*link, error) {
	l := p.newLink(gen, "")
	fail := func(err error) (*link, error) {
		p.mu.Lock()
		l.dead = true
		p.mu.Unlock()
		l.cancel()
		return nil, err
	}
	replayID, _ := jsonrpc.MakeID(replayIDPrefix + strconv.FormatUint(gen, 10))
	resp, err := p.post(ctx, "", &jsonrpc.Request{ID: replayID, Method: methodInitialize, Params: init.Params})
	if err != nil {
		if kind, we := p.classify(err); kind == refused { // busy is worth another try
			return fail(&refusedError{what: "initialize", msg: we.Message})
		}
		return fail(fmt.Errorf("initialize: %w", err))
	}
	sid := resp.Header.Get(mcphttp.HeaderSessionID)
	answer, _, err := p.readReply(l, resp, replayID, "")
	switch {
	case err != nil:
		return fail(fmt.Errorf("initialize: %w", err))
	case answer == nil && ctx.Err() != nil:
		return fail(fmt.Errorf("initialize: %w", ctx.Err()))
	case answer == nil:
		return fail(errors.New("the connection broke during initialize"))
	case answer.Error != nil:
		var we *jsonrpc.Error
		if errors.As(answer.Error, &we) {
			return fail(&refusedError{what: "initialize", msg: we.Message})
		}
		return fail(fmt.Errorf("initialize: %w", answer.Error))
	}
	p.onInitialize(l, nil, answer.Result, sid)
	if initialized {
		n := &jsonrpc.Request{Method: methodInitialized, Params: json.RawMessage("{}")}
		resp, err := p.post(ctx, sid, n)
		if err != nil {
			return fail(fmt.Errorf("notifications/initialized: %w", err))
		}
		resp.Body.Close()
		p.mu.Lock()
		l.initialized = true
		p.mu.Unlock()
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
	req.Header.Set("Accept", mcphttp.ContentTypeJSON)
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		resp.Body.Close()
		return nil
	}
	var he *httpError
	if err := failed(resp, ""); errors.As(err, &he) {
		return &refusedError{what: fmt.Sprintf("the proxy at %s (HTTP %s)", p.opts.Endpoint, he.status), msg: he.msg}
	}
	return err
}

// fromBridge passes one message from link l to the client. Answers come
// on their call's stream (readReply); one that comes elsewhere is passed
// on if its request is still pending.
func (p *proxy) fromBridge(l *link, msg jsonrpc.Message) {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		if pc := p.takeID(m.ID); pc != nil {
			p.toClient(m)
			return
		}
		p.log.Debug("dropped an answer nobody waits for", "id", m.ID.Raw())
	case *jsonrpc.Request:
		if m.IsCall() {
			p.mu.Lock()
			p.serverCalls[m.ID] = l.sid
			p.mu.Unlock()
		}
		p.toClient(m)
	}
}

// onInitialize handles a successful initialize on l: the client's own
// (req set: it is remembered for replays) or a replay (req nil). It notes
// the protocol version and the session sid names (from the answer's
// Mcp-Session-Id), and opens the GET stream before anything else happens
// on the session, so no server notification is missed.
func (p *proxy) onInitialize(l *link, req *jsonrpc.Request, result json.RawMessage, sid string) {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(result, &r)
	p.setProtoVersion(r.ProtocolVersion)
	p.mu.Lock()
	if sid != "" {
		l.sid, p.sid = sid, sid
	}
	if req != nil {
		p.initReq = req
	}
	p.mu.Unlock()
	if req != nil {
		p.log.Info("session initialized", "session", sid, "protocol", r.ProtocolVersion)
	}
	p.openStream(l)
}

// breakLink retires link l. If the cause is a 404 for the session, the
// session goes with it; otherwise the next link carries on with it. Calls
// in flight learn their fate from their own streams. If l was the current
// link of a session the client initialized, a reconnect starts at once, so
// that server notifications keep coming.
func (p *proxy) breakLink(l *link, cause error) {
	ended := errors.Is(cause, mcp.ErrSessionMissing)
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
	sid := l.sid
	if ended && sid != "" && p.sid == sid {
		p.sid = ""
	}
	if ended {
		p.forgetServerCallsLocked(sid)
	}
	isClosing := p.closing
	reconnect := current && !isClosing && p.initReq != nil
	p.mu.Unlock()

	l.cancel()
	if isClosing {
		return
	}
	switch {
	case current && ended:
		p.log.Warn("the bridge ended the session", "session", sid, "error", cause)
	case current:
		p.log.Warn("lost the connection to the bridge; keeping the session", "session", sid, "error", cause)
	default:
		p.log.Debug("a connection attempt failed", "error", cause)
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

// endSession ends session sid on the bridge (DELETE), bounded by
// deleteTimeout: the proxy is stopping, and a bridge that is away has
// nothing to end.
func (p *proxy) endSession(sid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), deleteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, p.opts.Endpoint, nil)
	if err != nil {
		return
	}
	req.Header.Set(mcphttp.HeaderSessionID, sid)
	resp, err := p.http.Do(req)
	if err != nil {
		p.log.Debug("could not end the session", "session", sid, "error", err)
		return
	}
	resp.Body.Close()
}
