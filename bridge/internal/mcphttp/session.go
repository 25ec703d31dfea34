package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
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
	// owner, persisted and recordedAt are the session's record
	// (persist.go): whom it was opened for, whether it is recorded, and
	// when its record's last use was last written (Unix ns).
	owner      string
	persisted  atomic.Bool
	recordedAt atomic.Int64
	// lease is its place in the admission table and its idle reaper
	// (lease.go), set as it is admitted; nil for a stateless session,
	// which lives for one request.
	lease *Lease

	mu     sync.Mutex
	closed bool
	done   chan struct{}
	// note is the Target's own state kept in the session's record
	// (Remember).
	note json.RawMessage
}

// Note is what the Target remembered of the session (Remember); in a
// session re-opened after a restart, its record's, already in Open.
func (s *Session) Note() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.note
}

// Remember keeps note, the Target's own state that a client chose in the
// session (the proxy's select_browser), with the session: in its record
// too when the server keeps records (Persist), so that the session
// re-opened after a restart has it back (Note) before its Open. It is
// written with every write of the record: keep it small.
func (s *Session) Remember(note json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.note = note
	if s.closed || !s.persisted.Load() {
		return // an unrecorded session's record, written later, takes it
	}
	s.srv.putRecordLocked(s, time.Now())
}

// Target is the target the session was opened on.
func (s *Session) Target() Target { return s.t }

// Done is closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.done }

// Notify queues a message that belongs to no request of the session
// (list_changed, a server request whose call has ended, log messages) on
// its stream.
func (s *Session) Notify(msg []byte) { s.Out.Push(msg) }

func (s *Session) touch() {
	if s.lease != nil {
		s.lease.Touch()
	}
}

// begin marks an HTTP request (or stream) of the session as being served,
// so that neither the reaper nor the admission table's eviction ends the
// session however long it takes. It reports false if the session has
// ended.
func (s *Session) begin() bool { return s.lease != nil && s.lease.Begin() }

// end undoes begin; the idle time counts from now.
func (s *Session) end() {
	s.lease.End()
	s.srv.refreshRecord(s)
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
	if s.lease != nil {
		s.lease.Release() // first: no request begins on it from now
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.finish()
}

// endedIdle is the lease's end: the session was idle for the session
// timeout, or was evicted to make room for another of its client.
func (s *Session) endedIdle() {
	s.srv.log.Info("idle session ended", "route", s.t.Name(), "session", s.ID)
	s.Close()
}

// LastUsed is when the session was last used: its last request ended, or
// its stream last carried a message.
func (s *Session) LastUsed() time.Time {
	if s.lease == nil {
		return time.Time{}
	}
	return s.lease.LastUsed()
}

// EndIfIdle ends the session unless it is in use (a request being served,
// its stream open, its Target Busy with it) or has ended, and reports
// whether it ended it: an endpoint making room for a new session of the
// same user. The check and the end are one step, as in reaping.
func (s *Session) EndIfIdle() bool { return s.lease != nil && s.lease.EndIfIdle() }

// inUse reports whether the session is in use between requests: its
// stream open or its Target Busy with it. With a request being served it
// is in use too (its lease is begun); the reaper and the admission
// table's eviction both pass over a session in use.
func (s *Session) inUse() bool {
	if s.Out.Streaming() {
		return true
	}
	b, ok := s.t.(Busy)
	return ok && b.Busy(s)
}

// finish releases what a closed session holds.
func (s *Session) finish() {
	s.t.Close(s)
	s.Out.Close()
	if !s.Stateless { // never in the table: no need for its write lock
		s.srv.drop(s)
		s.srv.forget(s)
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
