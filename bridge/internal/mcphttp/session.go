package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// A Session is one MCP client session: a Streamable HTTP session
// (Mcp-Session-Id), a legacy SSE stream, or one stateless request of the
// 2026-07-28 era.
type Session struct {
	// ID is the Mcp-Session-Id; "" for a stateless request.
	ID string
	// Stateless marks a session that lives for one request.
	Stateless bool
	// Version is the negotiated protocol version: the Target's Open sets
	// it (Negotiate); VersionStateless for a stateless request.
	Version string
	// Init is the client's initialize params, as sent: what a backend
	// needs to be initialized again for this client.
	Init json.RawMessage
	// Out is the session's own stream: messages that ride on no request.
	Out *Outbox
	// State is the Target's own: ServerOptions.NewState's, or set by the
	// Target's Open (before Open, and after a failed one, it may be nil).
	State any

	t   Target
	srv *Server
	// initStarted and ready guard the legacy transport, where initialize
	// arrives on a stream that already exists.
	initStarted, ready atomic.Bool
	lastUsed           atomic.Int64
	// owner, persisted and recordedAt are the session's record
	// (persist.go): whom it was opened for, whether it is recorded, and
	// when its record's last use was last written (Unix ns).
	owner      string
	persisted  atomic.Bool
	recordedAt atomic.Int64

	mu     sync.Mutex
	active int                   // HTTP requests and streams of the session being served
	adm    *sessionlimit.Session // its place in the admission table; nil if none
	timer  *time.Timer           // the idle reaper; nil for a stateless session
	closed bool
	done   chan struct{}
}

// Target is the target the session was opened on.
func (s *Session) Target() Target { return s.t }

// Done is closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.done }

// Notify queues a message that belongs to no request of the session
// (list_changed, a server request whose call has ended, log messages) on
// its stream.
func (s *Session) Notify(msg []byte) { s.Out.Push(msg) }

func (s *Session) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

// begin marks an HTTP request (or stream) of the session as being served,
// so that neither the reaper nor the admission table's eviction ends the
// session however long it takes. It reports false if the session has
// ended.
func (s *Session) begin() bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.active++
	adm := s.adm
	s.mu.Unlock()
	if adm != nil {
		adm.Begin()
	}
	return true
}

// end undoes begin; the idle time counts from now.
func (s *Session) end() {
	s.touch()
	s.srv.refreshRecord(s)
	s.mu.Lock()
	s.active--
	adm := s.adm
	s.mu.Unlock()
	if adm != nil {
		adm.End()
	}
}

// Closed reports whether the session has ended.
func (s *Session) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close ends the session once: the Target's Close, its stream ended, its
// place in the tables given back.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.markClosedLocked()
	s.mu.Unlock()
	s.finish()
}

func (s *Session) markClosedLocked() {
	s.closed = true
	close(s.done)
	if s.timer != nil {
		s.timer.Stop()
	}
}

// LastUsed is when the session was last used: its last request ended, or
// its stream last carried a message.
func (s *Session) LastUsed() time.Time { return time.Unix(0, s.lastUsed.Load()) }

// EndIfIdle ends the session unless it is in use (a request being served,
// its stream open, its Target Busy with it) or has ended, and reports
// whether it ended it: an endpoint making room for a new session of the
// same user. The check and the end are one step, as in reaping.
func (s *Session) EndIfIdle() bool {
	busy := s.inUse()
	s.mu.Lock()
	if s.closed || busy || s.active > 0 {
		s.mu.Unlock()
		return false
	}
	s.markClosedLocked()
	s.mu.Unlock()
	s.finish()
	return true
}

// inUse reports whether the session is in use between requests: its
// stream open or its Target Busy with it. With a request being served it
// is in use too (begin); the reaper and the admission table's eviction
// both pass over a session in use.
func (s *Session) inUse() bool {
	if s.Out.Streaming() {
		return true
	}
	b, ok := s.t.(Busy)
	return ok && b.Busy(s)
}

// reap ends the session if it has been idle for the session timeout (no
// request being served, no stream open, not busy), else looks again when
// it could be. The check and the end are one step, so that a request
// beginning meanwhile finds the session either alive or gone.
func (s *Session) reap() {
	timeout := s.srv.opts.SessionTimeout
	busy := s.inUse()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	idle := time.Duration(time.Now().UnixNano() - s.lastUsed.Load())
	if busy || s.active > 0 || idle < timeout {
		s.timer.Reset(max(timeout-idle, min(timeout/4, time.Second)))
		s.mu.Unlock()
		return
	}
	s.markClosedLocked()
	s.mu.Unlock()
	s.srv.log.Info("idle session reaped", "route", s.t.Name(), "session", s.ID)
	s.finish()
}

// finish releases what a closed session holds.
func (s *Session) finish() {
	s.t.Close(s)
	s.Out.Close()
	if !s.Stateless { // never in the table: no need for its write lock
		s.srv.drop(s)
		s.srv.forget(s)
	}
	s.mu.Lock()
	adm := s.adm
	s.mu.Unlock()
	if adm != nil {
		adm.Release()
	}
}

// handle processes one client message; requests are answered through
// reply.
func (s *Session) handle(ctx context.Context, m *Message, reply Sink) {
	s.touch()
	switch m.Kind() {
	case KindRequest:
		switch m.Method {
		case "initialize":
			reply.Send(ErrorBody(m.ID, rpccode.InvalidRequest, "this session is already initialized; start a new session to initialize again"), true)
		case "ping":
			reply.Send(AppendResponse(nil, m.ID, json.RawMessage("{}"), nil), true)
		case "server/discover":
			res, err := s.t.Discover(ctx)
			if errors.Is(err, ErrPassOn) {
				s.t.Request(ctx, s, m, reply)
				return
			}
			if err != nil {
				reply.Send(openErrorBody(m.ID, err), true)
				return
			}
			reply.Send(AppendResponse(nil, m.ID, res, nil), true)
		default:
			s.t.Request(ctx, s, m, reply)
		}
	case KindNotification:
		s.t.Notification(s, m)
	case KindResponse:
		if err := s.t.Response(s, m); err != nil {
			s.srv.log.Info("client answer not delivered", "route", s.t.Name(), "id", string(m.ID), "err", err)
		}
	}
}

// open opens a stateful session on its target: the result the client
// gets, or the error Open gave (the session is then closed).
func (s *Session) open(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	s.Init = params
	res, err := s.t.Open(ctx, s, params)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.ready.Store(true)
	return res, nil
}
