package mcphttp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// Legacy HTTP+SSE (2024-11-05): a GET stream that is the session, and
// POSTs answered 202 whose answers ride on the stream.

// ServeSSE serves the legacy transport's GET: the session lives as long as
// this stream; its first event names where to POST (messagePath).
func (srv *Server) ServeSSE(w http.ResponseWriter, r *http.Request, t Target, messagePath string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest, "GET opens the event stream; messages go to POST "+messagePath+"?sessionId=…")
		return
	}
	s := srv.newSession(t, false)
	// The same client key as the bridge's own /sse: a legacy client sends
	// no clientInfo before its stream is open.
	if !srv.admit(w, r, s, nil, "legacy-sse") {
		return
	}
	defer s.end() // a connected stream is never evicted
	s.Out.Attach()
	if !srv.add(s, "sse") {
		s.Close()
		w.Header().Set("Retry-After", "5")
		WriteError(w, http.StatusServiceUnavailable, nil, rpccode.Unavailable, srv.opts.Name+" is shutting down; try again in a moment")
		return
	}
	defer s.Close()
	endpoint := messagePath + "?sessionId=" + url.QueryEscape(s.ID)
	srv.pump(w, r, s, 0, string(AppendEvent(nil, Event{Name: "endpoint", Data: []byte(endpoint)})))
}

// outboxSink sends everything to the session's stream (legacy SSE).
type outboxSink struct{ s *Session }

func (o outboxSink) Send(msg []byte, _ bool) { o.s.Out.Push(msg) }

// legacyInitTimeout bounds a legacy session's initialize, which runs off
// its POST: a gateway's handshake with a starting child (30 s), and some.
const legacyInitTimeout = 35 * time.Second

// ServeMessage serves the legacy transport's POST: 202 at once, the answer
// on the session's stream.
func (srv *Server) ServeMessage(w http.ResponseWriter, r *http.Request, t Target) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest, "POST a JSON-RPC message here; GET the sse endpoint for the stream")
		return
	}
	sid := r.URL.Query().Get("sessionId")
	s := srv.Lookup(sid, t.Name())
	if s == nil {
		WriteError(w, http.StatusNotFound, nil, rpccode.SessionNotFound, fmt.Sprintf("SSE session %q not found on %q: open the stream again", sid, t.Name()))
		return
	}
	m, release, ok := srv.readMessage(w, r)
	if !ok {
		return
	}
	release() // parsed: the body is the message's now
	w.WriteHeader(http.StatusAccepted)
	sink := outboxSink{s}
	if m.Method == "initialize" && m.Kind() == KindRequest {
		// The answer may need the server started: off the POST.
		go func() {
			if !s.initStarted.CompareAndSwap(false, true) {
				sink.Send(ErrorBody(m.ID, rpccode.InvalidRequest, "this session is already initialized"), true)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), legacyInitTimeout)
			defer cancel()
			s.Init = m.Params
			res, err := s.t.Open(ctx, s, m.Params)
			if err != nil {
				sink.Send(ErrorBody(m.ID, rpccode.Unavailable, err.Error()), true)
				return
			}
			s.ready.Store(true)
			sink.Send(AppendResponse(nil, m.ID, res, nil), true)
		}()
		return
	}
	if !s.ready.Load() && m.Kind() == KindRequest && m.Method != "ping" {
		sink.Send(ErrorBody(m.ID, rpccode.InvalidRequest, "send initialize first"), true)
		return
	}
	// The request may have to wait for the server: never hold the POST.
	go s.handle(context.Background(), m, sink)
}
