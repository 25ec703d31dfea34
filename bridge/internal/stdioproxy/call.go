package stdioproxy

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// call sends one client request until the bridge has it, then reads its
// answer (await).
func (p *proxy) call(pc *pendingCall) {
	req := pc.req
	var deadline time.Time
	for attempt := 0; ; attempt++ {
		l, err := p.link(&deadline)
		if err != nil {
			if !errors.Is(err, errClosing) {
				p.answer(pc, errorResponse(req.ID, CodeBridgeUnavailable, err.Error()))
			}
			return
		}
		sid := p.sessionOf(l)
		if req.Method == methodInitialize {
			sid = "" // an initialize starts a session, in none
		}
		// Under the call's context, which the client's cancellation ends:
		// closing the request is how a call of the stateless era is
		// cancelled.
		resp, err := p.post(pc.ctx, sid, req)
		if err == nil {
			p.await(pc, l, sid, resp)
			return
		}
		if pc.ctx.Err() != nil {
			return // cancelled by the client, or the proxy is closing
		}
		kind, rpcErr := p.classify(err)
		switch kind {
		case closing:
			return
		case notSent:
			p.breakLink(l, err)
		case lost:
			p.breakLink(l, err)
			p.answer(pc, errorResponse(req.ID, CodeInterrupted, msgInterrupted))
			return
		case refused, busy:
			p.log.Debug("the bridge refused a request", "method", req.Method, "error", err)
			p.answer(pc, &jsonrpc.Response{ID: req.ID, Error: rpcErr})
			return
		}
		p.log.Debug("resending a request", "method", req.Method, "attempt", attempt+1, "error", err)
		if deadline.IsZero() {
			deadline = time.Now().Add(p.wait)
		}
		if attempt > 0 && !p.pause(attempt, deadline) {
			p.answer(pc, errorResponse(req.ID, CodeBridgeUnavailable, p.noBridge(err).Error()))
			return
		}
	}
}

// await reads the answer to call pc, sent on link l in session sid, from
// the bridge's reply resp, and gives it to the client. When the reply's
// stream breaks before the answer (the bridge restarted, most likely) and
// the stream had an event id, the stream is resumed from there
// (Last-Event-ID) once the bridge is back, so the client gets the bridge's
// own answer; a bridge that restarted says in it that the call's outcome
// is unknown. Without an event id, the answer is lost for good: the client
// is told the call was interrupted.
func (p *proxy) await(pc *pendingCall, l *link, sid string, resp *http.Response) {
	id := pc.req.ID
	newSID := resp.Header.Get(mcphttp.HeaderSessionID) // an initialize's answer names its session
	answer, lastID, err := p.readReply(l, resp, id, "")
	var deadline time.Time
	stalls := 0
	for answer == nil {
		if pc.ctx.Err() != nil {
			return // answered meanwhile, cancelled by the client, or the proxy is closing
		}
		if err != nil {
			p.answer(pc, errorResponse(id, CodeBridgeUnavailable, err.Error()))
			return
		}
		if lastID == "" || sid == "" {
			p.log.Debug("a call's stream ended without its answer, and cannot be resumed", "id", id.Raw())
			p.answer(pc, errorResponse(id, CodeInterrupted, msgInterrupted))
			return
		}
		from := lastID
		var rerr error
		l, resp, rerr = p.resumeStream(pc, sid, lastID, &deadline)
		if rerr != nil {
			if pc.ctx.Err() == nil && !errors.Is(rerr, errClosing) {
				p.log.Info("could not resume a call's stream", "id", id.Raw(), "last_event_id", lastID, "error", rerr)
				p.answer(pc, errorResponse(id, CodeInterrupted, msgInterrupted))
			}
			return
		}
		p.log.Debug("resumed a call's stream", "id", id.Raw(), "last_event_id", lastID)
		answer, lastID, err = p.readReply(l, resp, id, lastID)
		if answer != nil || lastID != from {
			stalls = 0
		} else if stalls++; stalls >= maxOtherFailures {
			// Nothing new came: a bridge that answers the resumption but
			// never the call must not be asked forever.
			p.answer(pc, errorResponse(id, CodeInterrupted, msgInterrupted))
			return
		}
	}
	if pc.req.Method == methodInitialize && answer.Error == nil {
		// Before the answer is taken, which lets the client's next
		// messages go: the session must be ready for them.
		p.onInitialize(l, pc.req, answer.Result, newSID)
	}
	p.answer(pc, answer)
}

// resumeStream asks the bridge for the rest of a call's stream, after event
// lastID, in session sid, waiting (up to BridgeWait from the first wait,
// kept in *deadline) for the bridge to come back. It fails when the
// session is gone or the bridge cannot resume the stream (a bridge that
// restarted resumes only streams that name their call).
func (p *proxy) resumeStream(pc *pendingCall, sid, lastID string, deadline *time.Time) (*link, *http.Response, error) {
	if deadline.IsZero() {
		*deadline = time.Now().Add(p.wait)
	}
	others := 0
	for {
		l, err := p.link(deadline)
		if err != nil {
			return nil, nil, err
		}
		if cur := p.sessionOf(l); cur != sid {
			return nil, nil, fmt.Errorf("the call's session ended (now %q)", cur)
		}
		// No bound on the answer's headers: a bridge that did not restart
		// holds the request until the call's answer is ready.
		resp, err := p.getStream(pc.ctx, sid, lastID, 0)
		if err == nil {
			return l, resp, nil
		}
		if pc.ctx.Err() != nil {
			return nil, nil, pc.ctx.Err()
		}
		switch {
		case errors.Is(err, mcp.ErrSessionMissing):
			p.breakLink(l, err)
			return nil, nil, err
		case isDialError(err):
			// The bridge is away: link waits for it.
			p.breakLink(l, err)
		default:
			var he *httpError
			// 409: the bridge has not yet seen the cut and still holds the
			// stream (the Go SDK: "stream ID conflicts with ongoing
			// stream"); asked again after a pause, it resumes it.
			if errors.As(err, &he) && !he.transient() && he.code != http.StatusConflict {
				return nil, nil, err // it answers, and does not have the stream
			}
			if others++; others >= maxOtherFailures {
				return nil, nil, err
			}
			if !errors.As(err, &he) {
				p.breakLink(l, err) // the connection broke: the bridge is going away
			}
			if !p.pause(others, *deadline) {
				return nil, nil, err
			}
		}
	}
}
