package mcphttp

import (
	"context"
	"errors"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// In-process clients: a client in the same process (the bridge's relay,
// serving its gateway's servers to the cloud proxy) reaches a Target
// through the session engine with no HTTP between: the same session
// table, admission, idle reaping and answers as an HTTP client, without
// headers to write or event streams to parse back.

// OpenLocal opens a stateful session on t for an in-process client with
// its initialize request m, admitted under the client key peer (and the
// client's name). It returns the session and the initialize answer; the
// session is nil when it did not open, and the answer says why.
func (srv *Server) OpenLocal(ctx context.Context, t Target, peer string, m *Message) (*Session, []byte) {
	s := srv.newSession(t, false)
	if err := srv.admitKey(s, sessionlimit.ClientKey(peer, "", ClientName(m.Params))); err != nil {
		return nil, openErrorBody(m.ID, err)
	}
	defer s.end()
	res, err := s.open(ctx, m.Params)
	if err != nil {
		return nil, openErrorBody(m.ID, err)
	}
	if !srv.add(s, "local") {
		s.Close()
		return nil, ErrorBody(m.ID, rpccode.Unavailable, srv.opts.Name+" is shutting down; try again in a moment")
	}
	return s, AppendResponse(nil, m.ID, res, nil)
}

// openErrorBody is the answer of a session that could not open.
func openErrorBody(id []byte, err error) []byte {
	var ref *Refusal
	if errors.As(err, &ref) {
		return ErrorBody(id, ref.Code, ref.Message)
	}
	return ErrorBody(id, rpccode.Unavailable, err.Error())
}

// Call passes message m of an in-process client to its session s (nil: a
// stateless request to t) as a POST would. For a request it returns the
// answer, after giving each message that came before it (notifications,
// server requests) to each on the caller's goroutine; nil if ctx ended
// first. A notification or a response returns nil at once. A session
// that has ended answers as an unknown Mcp-Session-Id does.
func (srv *Server) Call(ctx context.Context, s *Session, t Target, m *Message, each func(msg []byte)) []byte {
	if s == nil {
		if m.Kind() != KindRequest {
			return nil
		}
		var answer []byte
		var err error
		if s, answer, err = srv.openStateless(ctx, t, m); err != nil {
			return openErrorBody(m.ID, err)
		} else if answer != nil {
			return answer
		}
		defer s.Close()
	} else {
		if !s.begin() {
			return ErrorBody(m.ID, rpccode.SessionNotFound, notFoundMessage(s.t))
		}
		defer s.end()
	}
	if m.Kind() != KindRequest {
		s.handle(ctx, m, nil)
		return nil
	}
	var reply PostSink
	s.handle(ctx, m, &reply)
	return reply.Drain(ctx, m.ID, s.done, each)
}

// Listen gives each message of the session's own stream (those that ride
// on no request) to each, on the caller's goroutine, as a GET stream
// would carry them, until ctx ends or the session does. It reports false
// if the stream is taken already (one reader at a time).
func (s *Session) Listen(ctx context.Context, each func(msg []byte)) bool {
	if !s.begin() {
		return true
	}
	defer s.end()
	if !s.Out.Attach() {
		return false
	}
	defer s.Out.Detach()
	cursor := s.Out.LastSent()
	for {
		evs := s.Out.After(cursor)
		for _, e := range evs {
			each(e.Data)
			cursor = e.ID
		}
		if len(evs) > 0 {
			s.Out.MarkSent(cursor)
			s.touch()
		}
		if s.Out.Closed() {
			return true
		}
		select {
		case <-s.Out.Wake():
		case <-ctx.Done():
			return true
		case <-s.srv.stop:
			return true
		}
	}
}
