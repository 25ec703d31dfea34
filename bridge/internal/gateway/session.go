package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// A Session is one MCP client session on a gateway route: a Streamable HTTP
// session (Mcp-Session-Id), a legacy SSE stream, or one stateless request
// of the 2026-07-28 era. Its target is a server or the aggregate.
type Session struct {
	id        string
	g         *Gateway
	t         target
	b         *backend        // a per_session server's private backend, else nil
	caps      map[string]bool // client capabilities: sampling, elicitation, roots
	version   string
	stateless bool
	// initStarted and ready guard the legacy transport, where initialize
	// arrives on a stream that already exists.
	initStarted, ready atomic.Bool
	out                *mcphttp.Outbox // messages with no request to ride on
	lastUsed           atomic.Int64

	mu       sync.Mutex
	inflight map[inflightKey]int64 // client request id → gateway id, per backend
	active   int                   // HTTP requests and streams of the session being served
	adm      *sessionlimit.Session // its place in the session table; nil for stateless ones
	closed   bool
	done     chan struct{}
}

// begin marks an HTTP request (or stream) of the session as being served,
// so that neither the reaper nor the session table's eviction ends the
// session however long it takes (an aggregate tools/list waits for every
// server without any call being in flight). It reports false if the
// session has ended.
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
	s.mu.Lock()
	s.active--
	adm := s.adm
	s.mu.Unlock()
	if adm != nil {
		adm.End()
	}
}

type inflightKey struct {
	b  *backend
	id string
}

// target is what a route serves: one server, or every server at once.
type target interface {
	// name is the route's name for messages and metrics.
	name() string
	// open attaches a new session and returns the initialize result.
	open(ctx context.Context, s *Session, initParams json.RawMessage) (json.RawMessage, error)
	// request handles a client request; the answer reaches sink.
	request(ctx context.Context, s *Session, e *envelope, sink sink)
	// notification handles a client notification.
	notification(s *Session, e *envelope)
	// response handles a client's answer to a server→client request.
	response(s *Session, e *envelope) error
	// close detaches the session.
	close(s *Session)
	// discover answers server/discover (2026-07-28).
	discover(ctx context.Context) (json.RawMessage, error)
}

func (g *Gateway) newSession(t target, stateless bool) *Session {
	s := &Session{
		g: g, t: t, stateless: stateless,
		caps:     map[string]bool{},
		out:      mcphttp.NewOutbox(g.opts.ReplayBytes),
		inflight: make(map[inflightKey]int64, 1),
		done:     make(chan struct{}),
	}
	if !stateless {
		// A stateless session lives for one request and is never looked
		// up: it needs no id, and each of the SDK client's calls would
		// otherwise read the system's random source.
		s.id = rand.Text()
	}
	s.touch()
	return s
}

func (s *Session) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

// remember records a forwarded request; false if its id is in flight
// already. Called with b.mu held (lock order: backend, then session).
func (s *Session) remember(b *backend, id json.RawMessage, gid int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := inflightKey{b, idKey(id)}
	if _, dup := s.inflight[k]; dup {
		return false
	}
	s.inflight[k] = gid
	return true
}

func (s *Session) forget(b *backend, id json.RawMessage) {
	s.mu.Lock()
	delete(s.inflight, inflightKey{b, idKey(id)})
	s.mu.Unlock()
}

func (s *Session) lookup(b *backend, id json.RawMessage) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gid, ok := s.inflight[inflightKey{b, idKey(id)}]
	return gid, ok
}

// notify queues a message that belongs to no request of the session
// (list_changed, a server request whose call has ended, log messages).
func (s *Session) notify(msg []byte) { s.out.Push(msg) }

// readCaps records the capabilities a client declared in initialize.
func (s *Session) readCaps(params json.RawMessage) {
	var p struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(params, &p)
	for k := range p.Capabilities {
		s.caps[k] = true
	}
	s.version = mcphttp.Negotiate(p.ProtocolVersion, mcphttp.Versions)
}

// initialize opens the session on its target and returns the initialize
// result the client gets: the target's, with the negotiated version.
func (s *Session) initialize(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	s.readCaps(params)
	res, err := s.t.open(ctx, s, params)
	if err != nil {
		return nil, err
	}
	out, err := setField(res, "protocolVersion", s.version)
	if err != nil {
		s.t.close(s)
		return nil, fmt.Errorf("the server's initialize result is not an object: %w", err)
	}
	s.ready.Store(true)
	return out, nil
}

// handle processes one client message; requests are answered through sink.
func (s *Session) handle(ctx context.Context, e *envelope, sink sink) {
	s.touch()
	switch e.kind() {
	case kindRequest:
		switch e.Method {
		case "initialize":
			sink.send(mcphttp.ErrorBody(e.ID, rpccode.InvalidRequest, "this session is already initialized; start a new session to initialize again"), true)
		case "ping":
			sink.send(appendResponse(nil, e.ID, json.RawMessage("{}"), nil), true)
		case "server/discover":
			res, err := s.t.discover(ctx)
			if err != nil {
				sink.send(mcphttp.ErrorBody(e.ID, rpccode.Unavailable, err.Error()), true)
				return
			}
			sink.send(appendResponse(nil, e.ID, res, nil), true)
		default:
			s.t.request(ctx, s, e, sink)
		}
	case kindNotification:
		switch e.Method {
		case "notifications/initialized":
		default:
			s.t.notification(s, e)
		}
	case kindResponse:
		if err := s.t.response(s, e); err != nil {
			s.g.log.Info("client answer not delivered", "route", s.t.name(), "id", string(e.ID), "err", err)
		}
	}
}

// close ends the session once.
func (s *Session) close() {
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

// closeIfIdle ends the session if it was last used before cutoff (unix
// nanoseconds) and nothing of it runs: no request being served, no call
// in flight, no stream open. The check and the end are one step, so a
// request that begins meanwhile finds the session either alive or gone.
func (s *Session) closeIfIdle(cutoff int64) bool {
	streaming := s.out.Streaming()
	s.mu.Lock()
	if s.closed || streaming || s.active > 0 || len(s.inflight) > 0 || s.lastUsed.Load() >= cutoff {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.finish()
	return true
}

// finish releases what a closed session holds.
func (s *Session) finish() {
	s.t.close(s)
	s.out.Close()
	if !s.stateless { // never in the table: no need for its write lock
		s.g.dropSession(s)
	}
	s.mu.Lock()
	adm := s.adm
	s.mu.Unlock()
	if adm != nil {
		adm.Release()
	}
}

func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
