package gateway

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// Server→client requests (sampling, elicitation, roots) carry no trace of
// the client request that caused them: over stdio the child just writes a
// request. The gateway finds the asker like this:
//
//  1. A private child (per_session) has one session: that one.
//  2. The candidates are the calls in flight, on this child, from sessions
//     whose client declared the capability the request needs. Calls sent
//     later cannot be the cause, so the set is fixed when the request
//     arrives.
//  3. One candidate: it, exactly. Its tool is remembered as one that asks.
//  4. Several: those of tools remembered as askers, if exactly one.
//  5. Else the request waits while candidates finish: a call that asks its
//     client something cannot finish before the answer, so the others drop
//     out (echoes take microseconds) until one is left. That is exact for
//     every tool that waits for its answer, and teaches the tool too.
//  6. If several are still running after askWait (two slow calls), or all
//     finished (a tool that does not wait for its answer), the oldest
//     remaining or last finished candidate gets it: a guess, counted in
//     /metrics; such servers belong in per_session mode.

// askWait bounds how long a server request waits for its asker to be the
// only candidate left.
const askWait = 2 * time.Second

type ask struct {
	c     *stdio.Conn
	e     *mcphttp.Message
	need  string
	cands map[int64]*call
	last  *call // the last candidate to finish
	timer *time.Timer
}

type resolvedAsk struct {
	a  *ask
	cl *call
	s  *Session
}

func (b *backend) routeRequest(c *stdio.Conn, e *mcphttp.Message) {
	if e.Method == "ping" {
		_ = c.Send(mcphttp.AppendResponse(nil, e.ID, json.RawMessage("{}"), nil))
		return
	}
	need := capability(e.Method)
	a := &ask{c: c, e: e, need: need, cands: map[int64]*call{}}
	b.mu.Lock()
	for gid, cl := range b.calls {
		if cl.sess != nil && (need == "" || cl.sess.caps[need]) {
			a.cands[gid] = cl
		}
	}
	var r resolvedAsk
	switch {
	case len(a.cands) == 1:
		for _, cl := range a.cands {
			b.learnLocked(e.Method, cl)
			r = resolvedAsk{a, cl, cl.sess}
		}
	case len(a.cands) == 0:
		r = resolvedAsk{a: a}
		if b.private {
			for s := range b.sessions {
				if need == "" || s.caps[need] {
					r.s = s
				}
			}
		}
	default:
		if cl := b.knownAskerLocked(e.Method, a.cands); cl != nil {
			r = resolvedAsk{a, cl, cl.sess}
			break
		}
		b.srv.metrics.ambiguous(e.Method)
		b.asks = append(b.asks, a)
		a.timer = time.AfterFunc(askWait, func() { b.askTimedOut(a) })
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.deliverAsks([]resolvedAsk{r})
}

func (b *backend) learnLocked(method string, cl *call) {
	if cl.method != "tools/call" {
		return
	}
	if b.askers == nil {
		b.askers = map[string]bool{}
	}
	b.askers[method+" "+toolNameOfCall(cl.params)] = true
}

// knownAskerLocked returns the only candidate whose tool is known to make
// this kind of request, or nil.
func (b *backend) knownAskerLocked(method string, cands map[int64]*call) *call {
	var found *call
	for _, cl := range cands {
		if cl.method == "tools/call" && b.askers[method+" "+toolNameOfCall(cl.params)] {
			if found != nil {
				return nil
			}
			found = cl
		}
	}
	return found
}

// eliminateLocked drops a finished call from the waiting requests'
// candidates and returns those now resolved.
func (b *backend) eliminateLocked(gid int64) []resolvedAsk {
	var out []resolvedAsk
	kept := b.asks[:0]
	for _, a := range b.asks {
		if cl, ok := a.cands[gid]; ok {
			delete(a.cands, gid)
			a.last = cl
			if len(a.cands) == 1 {
				for _, only := range a.cands {
					b.learnLocked(a.e.Method, only)
					out = append(out, resolvedAsk{a, only, only.sess})
				}
				a.timer.Stop()
				continue
			}
			if len(a.cands) == 0 {
				out = append(out, resolvedAsk{a, nil, cl.sess})
				a.timer.Stop()
				continue
			}
		}
		kept = append(kept, a)
	}
	for i := len(kept); i < len(b.asks); i++ {
		b.asks[i] = nil
	}
	b.asks = kept
	return out
}

func (b *backend) askTimedOut(a *ask) {
	b.mu.Lock()
	found := false
	for i, x := range b.asks {
		if x == a {
			b.asks = append(b.asks[:i], b.asks[i+1:]...)
			found = true
			break
		}
	}
	var best *call
	for _, cl := range a.cands {
		if best == nil || cl.gid < best.gid {
			best = cl
		}
	}
	b.mu.Unlock()
	if !found {
		return
	}
	r := resolvedAsk{a: a}
	if best != nil {
		r.cl, r.s = best, best.sess
	}
	b.deliverAsks([]resolvedAsk{r})
}

// deliverAsks sends resolved server requests to their sessions (or refuses
// them at the child when nobody can answer).
func (b *backend) deliverAsks(rs []resolvedAsk) {
	for _, r := range rs {
		e, c := r.a.e, r.a.c
		if r.s == nil || r.s.Closed() {
			why := fmt.Sprintf("no client session of %q that supports %s is waiting on this server", b.srv.name, e.Method)
			if r.a.need == "roots" && !b.private {
				why = fmt.Sprintf("roots are per client, and %q is shared by several: set \"per_session\": true for it", b.srv.name)
			}
			b.g.log.Info("server request not routed", "server", b.srv.name, "method", e.Method, "why", why)
			_ = c.Send(mcphttp.ErrorBody(e.ID, rpccode.MethodNotFound, why))
			continue
		}
		id := "bb-" + strconv.FormatInt(b.g.srvReqSeq.Add(1), 10)
		b.mu.Lock()
		b.srvReqs[strconv.Quote(id)] = &srvReq{childID: e.ID, conn: c, sess: r.s}
		// Still in flight: the request rides on the call's own stream.
		live := r.cl != nil && b.calls[r.cl.gid] == r.cl
		b.mu.Unlock()
		b.srv.metrics.serverRequest(e.Method)
		out := appendRequest(nil, json.RawMessage(strconv.Quote(id)), e.Method, e.Params)
		if live {
			r.cl.sink.Send(out, false)
		} else {
			r.s.Notify(out)
		}
	}
}

func toolNameOfCall(params json.RawMessage) string {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Name
}
