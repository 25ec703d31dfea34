package gateway

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
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// Streamable HTTP and legacy HTTP+SSE, written for a pass-through: the
// messages are relayed as raw bytes, so the SDK's typed server (which
// answers every method itself) does not fit here. docs/gateway.md lists
// what each era gets.

// admit takes a place for the new session s in the session table, where
// it counts with the bridge's own sessions; s is then being served (never
// evicted) until the caller's s.end(). Without a place, admit answers the
// refusal (429 for this client's cap, 503 for the bridge's, Retry-After,
// a JSON-RPC error) and reports false.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, s *Session, id json.RawMessage, client string) bool {
	adm, err := g.opts.Sessions.Admit(sessionlimit.ClientKey(peerHost(r), "", client), s.close)
	if err == nil {
		s.mu.Lock()
		s.adm = adm
		s.mu.Unlock()
		if s.begin() {
			return true
		}
		// Evicted before it began: another initialize of the same client
		// took its place in that instant.
		adm.Release()
		err = &sessionlimit.Refusal{Status: http.StatusServiceUnavailable, RetryAfter: sessionlimit.DefaultRetryAfter,
			Message: "the session was ended to make room for another session of this client as it opened; try again"}
	}
	var ref *sessionlimit.Refusal
	if !errors.As(err, &ref) {
		ref = &sessionlimit.Refusal{Status: http.StatusServiceUnavailable, RetryAfter: sessionlimit.DefaultRetryAfter, Message: err.Error()}
	}
	w.Header().Set("Retry-After", ref.RetryAfterSeconds())
	mcphttp.WriteError(w, ref.Status, id, rpccode.Unavailable, ref.Message)
	return false
}

// clientName is clientInfo.name of initialize params, or "".
func clientName(params json.RawMessage) string {
	var p struct {
		ClientInfo struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
	}
	_ = json.Unmarshal(params, &p)
	return p.ClientInfo.Name
}

// peerHost is the client's address without its port: one client makes
// connections from many ports.
func peerHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// childRetryAfter is the Retry-After of a refusal for want of a
// per-session process: one frees up when any session of the server ends.
const childRetryAfter = 5 * time.Second

// writeOpenError answers a request that could not open its session on the
// server: 503 with Retry-After when the server runs its limit of
// per-session processes, else a JSON-RPC error saying why the server is
// down (its child crashed, cannot start, or was removed).
func writeOpenError(w http.ResponseWriter, id json.RawMessage, err error) {
	if errors.Is(err, stdio.ErrTooManyChildren) {
		w.Header().Set("Retry-After", strconv.Itoa(int(childRetryAfter/time.Second)))
		mcphttp.WriteError(w, http.StatusServiceUnavailable, id, rpccode.Unavailable, err.Error())
		return
	}
	mcphttp.WriteError(w, http.StatusOK, id, rpccode.Unavailable, err.Error())
}

// readBody reads a posted message within the size limit. A body without
// Content-Type passes (the gateway relays for any client); one with
// another type than application/json is refused.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Header.Get("Content-Type") != "" && !mcphttp.CheckContentType(w, r) {
		return nil, false
	}
	return mcphttp.ReadBody(w, r, g.opts.MaxBodyBytes)
}

// readMessage reads and parses a posted message, answering bad input.
func (g *Gateway) readMessage(w http.ResponseWriter, r *http.Request) (*envelope, bool) {
	body, ok := g.readBody(w, r)
	if !ok {
		return nil, false
	}
	e, code, err := parseMessage(body)
	if err != nil {
		var id json.RawMessage
		if e != nil && validID(e.ID) {
			id = e.ID
		}
		mcphttp.WriteError(w, http.StatusBadRequest, id, code, err.Error())
		return nil, false
	}
	return e, true
}

func (g *Gateway) serveStreamable(w http.ResponseWriter, r *http.Request, t target) {
	if !mcphttp.CheckVersion(w, r, nil, mcphttp.Versions) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		g.post(w, r, t)
	case http.MethodGet:
		g.getStream(w, r, t)
	case http.MethodDelete:
		sid := r.Header.Get(mcphttp.HeaderSessionID)
		s := g.lookupSession(sid, t.name())
		if s == nil {
			mcphttp.WriteError(w, http.StatusNotFound, nil, rpccode.SessionNotFound, fmt.Sprintf("session %q not found on %q: it has ended or never existed", sid, t.name()))
			return
		}
		s.close()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest, "Streamable HTTP takes POST (messages), GET (the session's stream) and DELETE (end the session)")
	}
}

func (g *Gateway) post(w http.ResponseWriter, r *http.Request, t target) {
	if !mcphttp.CheckPOSTAccept(w, r) {
		return
	}
	e, ok := g.readMessage(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	sid := r.Header.Get(mcphttp.HeaderSessionID)
	var s *Session
	switch {
	case sid != "":
		if s = g.lookupSession(sid, t.name()); s == nil || !s.begin() {
			mcphttp.WriteError(w, http.StatusNotFound, e.ID, rpccode.SessionNotFound, fmt.Sprintf("session %q not found on %q (it ended or expired): initialize a new session", sid, t.name()))
			return
		}
		defer s.end()
	case e.Method == "initialize" && e.kind() == kindRequest:
		s = g.newSession(t, false)
		if !g.admit(w, r, s, e.ID, clientName(e.Params)) {
			return
		}
		defer s.end()
		res, err := s.initialize(ctx, e.Params)
		if err != nil {
			s.close()
			writeOpenError(w, e.ID, err)
			return
		}
		g.addSession(s, "streamable")
		w.Header().Set(mcphttp.HeaderSessionID, s.id)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(appendResponse(nil, e.ID, res, nil))
		return
	case mcphttp.IsStatelessRequest(r.Header, e.Params):
		if msg := mcphttp.CheckStandardHeaders(r.Header, e.kind() == kindRequest, e.Method, e.Params); msg != "" {
			mcphttp.WriteError(w, http.StatusBadRequest, e.ID, rpccode.InvalidRequest, msg)
			return
		}
		g.stateless(w, r, t, e)
		return
	default:
		mcphttp.WriteError(w, http.StatusBadRequest, e.ID, rpccode.InvalidRequest, "missing "+mcphttp.HeaderSessionID+" header: send initialize first (or, in the 2026-07-28 era, put the protocol version in params._meta)")
		return
	}
	if e.kind() != kindRequest {
		s.handle(ctx, e, nil)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	ps := newPostSink()
	s.handle(ctx, e, ps)
	ps.writeTo(w, r, e.ID, s.done)
}

// stateless serves one 2026-07-28 request: a session that lives as long as
// the request; the client's leaving cancels it.
func (g *Gateway) stateless(w http.ResponseWriter, r *http.Request, t target, e *envelope) {
	ctx := r.Context()
	if e.kind() != kindRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s := g.newSession(t, true)
	s.version = mcphttp.VersionStateless
	if e.Method != "server/discover" {
		if _, err := t.open(ctx, s, nil); err != nil {
			writeOpenError(w, e.ID, err)
			return
		}
		defer s.close()
	}
	ps := newPostSink()
	s.handle(ctx, e, ps)
	ps.writeTo(w, r, e.ID, s.done)
}

// postSink carries one POST's answer: the response alone as
// application/json, or, when notifications or server requests come first,
// a text/event-stream of them ending with the response.
type postSink struct{ q mcphttp.ResponseQueue }

func newPostSink() *postSink { return &postSink{} }

func (p *postSink) send(msg []byte, final bool) { p.q.Send(msg, final) }

// writeTo writes the answer to the request id as it comes.
func (p *postSink) writeTo(w http.ResponseWriter, r *http.Request, id json.RawMessage, sessionDone <-chan struct{}) {
	streaming := false
	fl, _ := w.(http.Flusher)
	for {
		q, final := p.q.Take()
		if len(q) > 0 {
			if !streaming && final && len(q) == 1 {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", strconv.Itoa(len(q[0])))
				_, _ = w.Write(q[0])
				return
			}
			if !streaming {
				streaming = true
				h := w.Header()
				h.Set("Content-Type", "text/event-stream")
				h.Set("Cache-Control", "no-cache")
				w.WriteHeader(http.StatusOK)
			}
			for _, m := range q {
				if writeEvent(w, 0, m) != nil {
					return
				}
			}
			if fl != nil {
				fl.Flush()
			}
			if final {
				return
			}
		}
		select {
		case <-p.q.Wake():
		case <-r.Context().Done():
			return
		case <-sessionDone:
			// The session ended (DELETE, reload, shutdown) while the
			// request waited: say so rather than hang.
			p.send(mcphttp.ErrorBody(id, rpccode.InternalError, "the session ended before the server answered"), true)
			sessionDone = nil
		}
	}
}

// writeEvent writes one message of a stream as an event, with its id for
// Last-Event-ID when it has one (not 0).
func writeEvent(w io.Writer, id uint64, data []byte) error {
	e := mcphttp.Event{Name: "message", Data: data}
	if id > 0 {
		e.ID = strconv.FormatUint(id, 10)
	}
	return mcphttp.WriteEvent(w, e)
}

// getStream serves a session's own stream (Streamable HTTP GET): messages
// that belong to no request, numbered for Last-Event-ID resumption.
func (g *Gateway) getStream(w http.ResponseWriter, r *http.Request, t target) {
	if !mcphttp.CheckGETAccept(w, r) {
		return
	}
	sid := r.Header.Get(mcphttp.HeaderSessionID)
	if sid == "" {
		mcphttp.WriteError(w, http.StatusBadRequest, nil, rpccode.InvalidRequest, "GET needs the "+mcphttp.HeaderSessionID+" header of an initialized session")
		return
	}
	s := g.lookupSession(sid, t.name())
	if s == nil || !s.begin() {
		mcphttp.WriteError(w, http.StatusNotFound, nil, rpccode.SessionNotFound, fmt.Sprintf("session %q not found on %q (it ended or expired): initialize a new session", sid, t.name()))
		return
	}
	defer s.end()
	from, ok := mcphttp.AttachGET(w, r, s.out, "this session's stream is already open; one GET stream per session", "this gateway")
	if !ok {
		return
	}
	defer s.out.Detach()
	g.pump(w, r, s, from)
}

// pump writes the session's outbox to the stream until the client leaves
// or the session ends.
func (g *Gateway) pump(w http.ResponseWriter, r *http.Request, s *Session, from uint64, preface ...string) {
	fl, ok := w.(http.Flusher)
	if !ok {
		mcphttp.WriteError(w, http.StatusInternalServerError, nil, rpccode.InternalError, "streaming is not supported by this connection")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	for _, p := range preface {
		_, _ = io.WriteString(w, p)
	}
	fl.Flush()
	s.out.Pump(r.Context(), w, fl, from, g.opts.PingInterval, g.stop, s.touch)
}

// serveSSE serves the legacy transport's GET: the session lives as long as
// this stream; its first event names where to POST.
func (g *Gateway) serveSSE(w http.ResponseWriter, r *http.Request, t target, messagePath string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest, "GET opens the event stream; messages go to POST "+messagePath+"?sessionId=…")
		return
	}
	s := g.newSession(t, false)
	// The same client key as the bridge's own /sse: a legacy client sends
	// no clientInfo before its stream is open.
	if !g.admit(w, r, s, nil, "legacy-sse") {
		return
	}
	defer s.end() // a connected stream is never evicted
	s.out.Attach()
	g.addSession(s, "sse")
	defer s.close()
	endpoint := messagePath + "?sessionId=" + url.QueryEscape(s.id)
	g.pump(w, r, s, 0, string(mcphttp.AppendEvent(nil, mcphttp.Event{Name: "endpoint", Data: []byte(endpoint)})))
}

// outboxSink sends everything to the session's stream (legacy SSE).
type outboxSink struct{ s *Session }

func (o outboxSink) send(msg []byte, _ bool) { o.s.out.Push(msg) }

// serveMessage serves the legacy transport's POST: 202 at once, the answer
// on the session's stream.
func (g *Gateway) serveMessage(w http.ResponseWriter, r *http.Request, t target) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest, "POST a JSON-RPC message here; GET the sse endpoint for the stream")
		return
	}
	sid := r.URL.Query().Get("sessionId")
	s := g.lookupSession(sid, t.name())
	if s == nil {
		mcphttp.WriteError(w, http.StatusNotFound, nil, rpccode.SessionNotFound, fmt.Sprintf("SSE session %q not found on %q: open the stream again", sid, t.name()))
		return
	}
	e, ok := g.readMessage(w, r)
	if !ok {
		return
	}
	w.WriteHeader(http.StatusAccepted)
	sink := outboxSink{s}
	if e.Method == "initialize" && e.kind() == kindRequest {
		// The answer may need the child started: off the POST.
		go func() {
			if !s.initStarted.CompareAndSwap(false, true) {
				sink.send(mcphttp.ErrorBody(e.ID, rpccode.InvalidRequest, "this session is already initialized"), true)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), initTimeout+5*time.Second)
			defer cancel()
			res, err := s.initialize(ctx, e.Params)
			if err != nil {
				sink.send(mcphttp.ErrorBody(e.ID, rpccode.Unavailable, err.Error()), true)
				return
			}
			sink.send(appendResponse(nil, e.ID, res, nil), true)
		}()
		return
	}
	if !s.ready.Load() && e.kind() == kindRequest && e.Method != "ping" {
		sink.send(mcphttp.ErrorBody(e.ID, rpccode.InvalidRequest, "send initialize first"), true)
		return
	}
	// The request may have to wait for the child: never hold the POST.
	go s.handle(context.Background(), e, sink)
}
