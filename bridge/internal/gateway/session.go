package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// Streamable HTTP and legacy HTTP+SSE are mcphttp's session engine; the
// gateway is its Target (route), which relays the messages as raw bytes
// to a server, the aggregate or a remote server. docs/gateway.md lists
// what each era gets.

// A Session is the gateway's side of one MCP client session (the
// engine's): its target, its private backend, the capabilities its client
// declared and its requests in flight at the servers.
type Session struct {
	*mcphttp.Session
	g    *Gateway
	t    target
	b    *backend        // a per_session server's private backend, else nil
	caps map[string]bool // client capabilities: sampling, elicitation, roots

	mu       sync.Mutex
	inflight map[inflightKey]int64 // client request id → gateway id, per backend
}

type inflightKey struct {
	b  *backend
	id string
}

// target is what a route serves: one server, every server at once (the
// aggregate), or a remote server of the browser. route makes it the
// engine's mcphttp.Target.
type target interface {
	// name is the route's name for messages and metrics.
	name() string
	// open attaches a new session and returns the initialize result.
	open(ctx context.Context, s *Session, initParams json.RawMessage) (json.RawMessage, error)
	// request handles a client request; the answer reaches sink.
	request(ctx context.Context, s *Session, e *mcphttp.Message, sink mcphttp.Sink)
	// notification handles a client notification.
	notification(s *Session, e *mcphttp.Message)
	// response handles a client's answer to a server→client request.
	response(s *Session, e *mcphttp.Message) error
	// close detaches the session.
	close(s *Session)
	// discover answers server/discover (2026-07-28).
	discover(ctx context.Context) (json.RawMessage, error)
}

// route is a target served by the session engine: the engine's sessions
// carry the gateway's (Session) as their State.
type route struct{ t target }

var (
	_ mcphttp.Target = route{}
	_ mcphttp.Busy   = route{}
)

// newState makes the gateway's side of a session the engine makes.
func (g *Gateway) newState(hs *mcphttp.Session) any {
	return &Session{Session: hs, g: g, t: hs.Target().(route).t, caps: map[string]bool{}, inflight: make(map[inflightKey]int64, 1)}
}

// stateOf is the gateway's side of an engine session.
func stateOf(hs *mcphttp.Session) *Session { return hs.State.(*Session) }

func (r route) Name() string { return r.t.name() }

// Open opens the session on its target: a stateful one gets the target's
// initialize result with the negotiated version.
func (r route) Open(ctx context.Context, hs *mcphttp.Session, params json.RawMessage) (json.RawMessage, error) {
	s := stateOf(hs)
	if hs.Stateless {
		_, err := r.t.open(ctx, s, nil)
		return nil, openError(err)
	}
	s.readCaps(params)
	res, err := r.t.open(ctx, s, params)
	if err != nil {
		return nil, openError(err)
	}
	out, err := setField(res, "protocolVersion", hs.Version)
	if err != nil {
		return nil, fmt.Errorf("the server's initialize result is not an object: %w", err)
	}
	return out, nil
}

// childRetryAfter is the Retry-After of a refusal for want of a
// per-session process: one frees up when any session of the server ends.
const childRetryAfter = 5 * time.Second

// openError makes the server's want of a per-session process a refusal
// (503, Retry-After); other errors say why the server is down (its child
// crashed, cannot start, or was removed).
func openError(err error) error {
	if errors.Is(err, stdio.ErrTooManyChildren) {
		return &mcphttp.Refusal{Status: http.StatusServiceUnavailable, RetryAfter: childRetryAfter, Code: rpccode.Unavailable, Message: err.Error()}
	}
	return err
}

func (r route) Request(ctx context.Context, hs *mcphttp.Session, m *mcphttp.Message, reply mcphttp.Sink) {
	r.t.request(ctx, stateOf(hs), m, reply)
}

func (r route) Notification(hs *mcphttp.Session, m *mcphttp.Message) {
	if m.Method == "notifications/initialized" { // the gateway's own, with each child
		return
	}
	r.t.notification(stateOf(hs), m)
}

func (r route) Response(hs *mcphttp.Session, m *mcphttp.Message) error {
	return r.t.response(stateOf(hs), m)
}

func (r route) Close(hs *mcphttp.Session) { r.t.close(stateOf(hs)) }

func (r route) Discover(ctx context.Context) (json.RawMessage, error) { return r.t.discover(ctx) }

// Busy reports whether a call of the session is in flight at a server.
func (r route) Busy(hs *mcphttp.Session) bool {
	s := stateOf(hs)
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight) > 0
}

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

// readCaps records the capabilities a client declared in initialize and
// the version it gets.
func (s *Session) readCaps(params json.RawMessage) {
	var p struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(params, &p)
	for k := range p.Capabilities {
		s.caps[k] = true
	}
	s.Version = mcphttp.Negotiate(p.ProtocolVersion, mcphttp.Versions)
}
