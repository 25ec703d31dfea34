package mcphttp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// The Streamable HTTP server (and the legacy HTTP+SSE one), written for a
// pass-through: messages are relayed as raw bytes to a Target, which
// answers what it serves; the Server does what every endpoint does the
// same way: the header rules, the session table, the POST's answer, the
// GET stream, DELETE, the stateless era's one-request sessions and idle
// reaping. docs/protocol.md ("One session engine") draws it.

// A Target is what an endpoint serves to its sessions: a stdio server, the
// gateway's aggregate of them, a browser. The Server calls it with each
// session's messages; ping, initialize on an initialized session and
// server/discover it answers itself (the latter through Discover).
//
// Open is called once per session before anything else of it, Close once
// after everything else (a request still running when the session ends
// sees ctx or Session.Done end). The other methods may be called
// concurrently, for one session as for several.
type Target interface {
	// Name is the route's name, for messages and lookups: a session is
	// found only on the route it was opened on.
	Name() string
	// Open attaches a new session. A stateful one comes with the client's
	// initialize params and gets the initialize result the client is
	// answered with; a stateless one (Session.Stateless) with nil params,
	// its result unused. An error ends the session: a *Refusal (or a
	// *sessionlimit.Refusal) is answered with its status and Retry-After,
	// any other with a JSON-RPC error saying why the server is unavailable.
	// Open may pass the params to a backend and wait for its own answer
	// (ctx ends with the client's request); a session re-opened after a
	// restart (Persist) re-initializes its backend so, with the params the
	// client sent at first.
	Open(ctx context.Context, s *Session, initParams json.RawMessage) (json.RawMessage, error)
	// Request handles a client request; its answer, and the notifications
	// and server requests that come before it, reach reply. ctx ends when
	// the client stops waiting.
	Request(ctx context.Context, s *Session, m *Message, reply Sink)
	// Notification handles a client notification.
	Notification(s *Session, m *Message)
	// Response handles a client's answer to a server→client request.
	Response(s *Session, m *Message) error
	// Close detaches the session.
	Close(s *Session)
	// Discover answers server/discover (2026-07-28); ErrPassOn passes
	// it to Request instead. A *Refusal is answered with its status on a
	// stateless request, with its code and message in a session.
	Discover(ctx context.Context) (json.RawMessage, error)
}

// Busy may be implemented by a Target whose sessions have work of their
// own in flight (calls forwarded and not yet answered): a busy session is
// not idle, whatever its last use.
type Busy interface {
	Busy(s *Session) bool
}

// A Gate may be implemented by a Target that admits each posted message
// of a session (a rate limit): Admit is asked before the message is
// served, and an error (a *Refusal: 429 and a Retry-After, say) answers
// the POST instead. An initialize that opens a session is not asked.
type Gate interface {
	Admit(s *Session, m *Message) error
}

// ErrPassOn is what a Target's Discover returns when it does not answer
// server/discover itself: the request then goes to Request as any other
// (on a stateless request, after Open), for a backend that answers it.
var ErrPassOn = errors.New("mcphttp: server/discover is passed on to the target")

// A Sink takes the messages that answer one request: notifications and
// server requests (final false), then the response (final true), after
// which nothing more is taken. Send never blocks.
type Sink interface {
	Send(msg []byte, final bool)
}

// A Refusal is an error of Target.Open that refuses the session with an
// HTTP status, a Retry-After and a JSON-RPC error.
type Refusal struct {
	Status     int
	RetryAfter time.Duration // 0: no Retry-After
	Code       int
	Message    string
}

func (r *Refusal) Error() string { return r.Message }

// ServerOptions configure a Server. Zero values are documented.
type ServerOptions struct {
	// Versions are the protocol versions the endpoint speaks; nil means
	// Versions.
	Versions []string
	// Sessions admits every session opened, with its client key (peer
	// address and clientInfo.name); nil admits all.
	Sessions *sessionlimit.Table
	// SessionTimeout ends sessions idle this long (no request being
	// served, no stream open, not Busy); 0 means 30 minutes.
	SessionTimeout time.Duration
	// ReplayBytes bounds each session's delivered messages kept for
	// Last-Event-ID resumption; 0 means 64 KiB.
	ReplayBytes int
	// MaxBodyBytes bounds a request body; 0 means 4 MiB.
	MaxBodyBytes int64
	// PingInterval is the keep-alive period of open streams (an SSE
	// comment line); 0 means 30 s, negative turns it off.
	PingInterval time.Duration
	// AnyContentType lets a posted body without Content-Type pass (one
	// with another type than application/json is still refused): a
	// gateway relays for clients that send none.
	AnyContentType bool
	// Name is how messages name the endpoint ("this gateway"); "" means
	// "this endpoint".
	Name string
	// IDPrefix begins every session id the server makes: a cluster node's
	// name, so that a request for the session can be routed to the node
	// that holds it. "" means none.
	IDPrefix string
	// Owner, if set, names the authenticated subject of a request: a
	// session is then found only by requests of the subject that opened it
	// (another's id is not found, as an unknown one). Persist's owner,
	// when given, takes its place. Nil: anyone holding the id.
	Owner func(r *http.Request) string
	// ReadBody, if set, reads a posted body in place of the read bounded
	// by MaxBodyBytes (a budget of bytes in flight, say), answering w
	// itself when it refuses (ok false). release, if not nil, is called
	// once the message has been handed to the Target or refused: the body
	// is not needed while the answer comes.
	ReadBody func(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool)
	// Decode, if set, parses and checks a posted message in place of
	// ParseMessage (an endpoint's own parser and id rules). An error is
	// answered 400 with its JSON-RPC code, echoing the message's id when
	// m is not nil and its id valid.
	Decode func(body []byte) (m *Message, code int, err error)
	// NewState, if set, makes each session's State as the session is made,
	// before any message of it reaches its Target.
	NewState func(s *Session) any
	// Opened, if set, is told of each session that opened, with its
	// transport: "streamable" or "sse".
	Opened func(s *Session, transport string)
	// Logger; nil discards.
	Logger *slog.Logger
}

func (o *ServerOptions) defaults() {
	if o.Versions == nil {
		o.Versions = Versions
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.ReplayBytes == 0 {
		o.ReplayBytes = 64 << 10
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.PingInterval == 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.Name == "" {
		o.Name = "this endpoint"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// A Server serves Streamable HTTP (ServeStreamable) and legacy HTTP+SSE
// (ServeSSE, ServeMessage) to Targets, keeping the sessions of every
// route in one table. Its methods are safe for concurrent use.
type Server struct {
	opts ServerOptions
	log  *slog.Logger
	stop chan struct{}

	mu       sync.RWMutex
	sessions map[string]*Session
	stopping bool
	persist  *persistence // nil: sessions end with the process (persist.go)
}

// NewServer returns a Server with no sessions.
func NewServer(opts ServerOptions) *Server {
	opts.defaults()
	return &Server{opts: opts, log: opts.Logger, stop: make(chan struct{}), sessions: make(map[string]*Session)}
}

// Close ends every session and every stream; sessions opened later are
// refused. It is safe to call twice.
func (srv *Server) Close() {
	srv.mu.Lock()
	if !srv.stopping {
		srv.stopping = true
		close(srv.stop)
	}
	list := make([]*Session, 0, len(srv.sessions))
	for _, s := range srv.sessions {
		list = append(list, s)
	}
	srv.mu.Unlock()
	srv.keepRecords(list)
	for _, s := range list {
		s.Close()
	}
}

// Sessions calls f with each session in the table (stateful and legacy
// SSE ones: a stateless request's session is in no table).
func (srv *Server) Sessions(f func(*Session)) {
	srv.mu.RLock()
	list := make([]*Session, 0, len(srv.sessions))
	for _, s := range srv.sessions {
		list = append(list, s)
	}
	srv.mu.RUnlock()
	for _, s := range list {
		f(s)
	}
}

// Lookup finds the session id of the route named route; nil if there is
// none (another route's session is none).
func (srv *Server) Lookup(id, route string) *Session {
	if id == "" {
		return nil
	}
	srv.mu.RLock()
	s := srv.sessions[id]
	srv.mu.RUnlock()
	if s == nil || s.t.Name() != route {
		return nil
	}
	return s
}

// add puts s in the table; false when the server is closing.
func (srv *Server) add(s *Session, transport string) bool {
	srv.mu.Lock()
	if srv.stopping {
		srv.mu.Unlock()
		return false
	}
	srv.sessions[s.ID] = s
	srv.mu.Unlock()
	if srv.opts.Opened != nil {
		srv.opts.Opened(s, transport)
	}
	return true
}

func (srv *Server) drop(s *Session) {
	srv.mu.Lock()
	if srv.sessions[s.ID] == s {
		delete(srv.sessions, s.ID)
	}
	srv.mu.Unlock()
}

func (srv *Server) newSession(t Target, stateless bool) *Session {
	s := &Session{t: t, srv: srv, Stateless: stateless, Out: NewOutbox(srv.opts.ReplayBytes), done: make(chan struct{})}
	if !stateless {
		// A stateless session lives for one request and is never looked
		// up: it needs no id, and each request would otherwise read the
		// system's random source.
		s.ID = srv.opts.IDPrefix + rand.Text()
	}
	if srv.opts.NewState != nil {
		s.State = srv.opts.NewState(s)
	}
	return s
}

// admit takes a place for the new session s in the admission table; s is
// then being served (never evicted) until the caller's s.end(). Without a
// place, admit answers the refusal (429 for this client's cap, 503 for
// the server's, Retry-After, a JSON-RPC error) and reports false.
func (srv *Server) admit(w http.ResponseWriter, r *http.Request, s *Session, id json.RawMessage, client string) bool {
	if err := srv.admitKey(s, ClientKey(r, client)); err != nil {
		WriteOpenError(w, id, err)
		return false
	}
	return true
}

// admitKey admits s under the client key key, starts its idle reaper and
// begins it: the caller ends it with s.end(). The error is a
// *sessionlimit.Refusal.
func (srv *Server) admitKey(s *Session, key string) error {
	lease, err := AdmitLease(srv.opts.Sessions, key, LeaseOptions{Timeout: srv.opts.SessionTimeout, End: s.endedIdle, InUse: s.inUse})
	if err != nil {
		return err
	}
	s.lease = lease
	return nil
}

// WriteOpenError answers a request whose session could not open: a
// refusal (a *Refusal, a *sessionlimit.Refusal) with its status and
// Retry-After, anything else as a JSON-RPC error saying why the server is
// unavailable.
func WriteOpenError(w http.ResponseWriter, id json.RawMessage, err error) {
	var ref *Refusal
	var lim *sessionlimit.Refusal
	switch {
	case errors.As(err, &ref):
		if ref.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(ref.RetryAfter.Round(time.Second)/time.Second))))
		}
		WriteError(w, ref.Status, id, ref.Code, ref.Message)
	case errors.As(err, &lim):
		w.Header().Set("Retry-After", lim.RetryAfterSeconds())
		WriteError(w, lim.Status, id, rpccode.Unavailable, lim.Message)
	default:
		WriteError(w, http.StatusOK, id, rpccode.Unavailable, err.Error())
	}
}

// ClientName is clientInfo.name of initialize params, or "": with the
// peer address, the admission key of a client (ClientKey).
func ClientName(params json.RawMessage) string {
	var p struct {
		ClientInfo struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
	}
	_ = json.Unmarshal(params, &p)
	return p.ClientInfo.Name
}

// ClientKey is the admission table's key of r's client named name
// (clientInfo.name): its address without the port, since one client makes
// connections from many ports.
func ClientKey(r *http.Request, name string) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return sessionlimit.ClientKey(host, "", name)
}

// readMessage reads and parses a posted message within the size limit,
// answering bad input itself. release gives the body back
// (ServerOptions.ReadBody); it is never nil and safe to call twice.
func (srv *Server) readMessage(w http.ResponseWriter, r *http.Request) (m *Message, release func(), ok bool) {
	release = func() {}
	if !(srv.opts.AnyContentType && r.Header.Get("Content-Type") == "") && !CheckContentType(w, r) {
		return nil, release, false
	}
	var body []byte
	if srv.opts.ReadBody != nil {
		var rel func()
		if body, rel, ok = srv.opts.ReadBody(w, r); !ok {
			return nil, release, false
		}
		if rel != nil {
			release = sync.OnceFunc(rel)
		}
	} else if body, ok = ReadBody(w, r, srv.opts.MaxBodyBytes); !ok {
		return nil, release, false
	}
	parse := ParseMessage
	if srv.opts.Decode != nil {
		parse = srv.opts.Decode
	}
	m, code, err := parse(body)
	if err != nil {
		release()
		var id json.RawMessage
		if m != nil && ValidID(m.ID) {
			id = m.ID
		}
		WriteError(w, http.StatusBadRequest, id, code, err.Error())
		return nil, release, false
	}
	return m, release, true
}

// ServeStreamable serves t over Streamable HTTP: POST (messages), GET (a
// session's stream) and DELETE (end a session).
func (srv *Server) ServeStreamable(w http.ResponseWriter, r *http.Request, t Target) {
	if !CheckVersion(w, r, nil, srv.opts.Versions) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		srv.post(w, r, t)
	case http.MethodGet:
		srv.getStream(w, r, t)
	case http.MethodDelete:
		sid := r.Header.Get(HeaderSessionID)
		s, _ := srv.find(r, sid, t)
		if s == nil {
			srv.writeNotFound(w, nil, t)
			return
		}
		s.Close()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest,
			r.Method+" is not a Streamable HTTP method: POST sends messages, GET opens the session's stream, DELETE ends the session")
	}
}

func (srv *Server) post(w http.ResponseWriter, r *http.Request, t Target) {
	if !CheckPOSTAccept(w, r) {
		return
	}
	m, release, ok := srv.readMessage(w, r)
	if !ok {
		return
	}
	defer release()
	ctx := r.Context()
	sid := r.Header.Get(HeaderSessionID)
	var s *Session
	switch {
	case sid != "":
		var err error
		if s, err = srv.find(r, sid, t); err != nil {
			WriteOpenError(w, m.ID, err)
			return
		}
		if s == nil || !s.begin() {
			srv.writeNotFound(w, m.ID, t)
			return
		}
		defer s.end()
	case m.Method == "initialize" && m.Kind() == KindRequest:
		srv.initialize(w, r, t, m)
		return
	case IsStatelessRequest(r.Header, m.Params):
		if msg := CheckStandardHeaders(r.Header, m.Kind() == KindRequest, m.Method, m.Params); msg != "" {
			WriteError(w, http.StatusBadRequest, m.ID, rpccode.InvalidRequest, msg)
			return
		}
		srv.stateless(w, r, t, m, release)
		return
	default:
		WriteError(w, http.StatusBadRequest, m.ID, rpccode.InvalidRequest, "missing "+HeaderSessionID+" header: send initialize first (or, in the 2026-07-28 era, put the protocol version in params._meta)")
		return
	}
	if !admitMessage(w, s, m) {
		return
	}
	if m.Kind() != KindRequest {
		s.handle(ctx, m, nil)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := PostSink{Ended: srv.endedMessage}
	s.handle(ctx, m, &reply)
	release() // handed on: the body is not needed while the answer comes
	reply.WriteTo(w, r, m.ID, s.done)
}

// admitMessage asks the session's Target, if it is a Gate, to admit m,
// answering the refusal itself.
func admitMessage(w http.ResponseWriter, s *Session, m *Message) bool {
	g, ok := s.t.(Gate)
	if !ok {
		return true
	}
	if err := g.Admit(s, m); err != nil {
		WriteOpenError(w, m.ID, err)
		return false
	}
	return true
}

// notFoundMessage answers a session id the route does not know: it ended,
// expired, never existed or belongs to someone else, which the answer does
// not tell apart.
func notFoundMessage(t Target) string {
	return fmt.Sprintf("session not found on %q: it ended or expired (or is not yours); initialize a new session", t.Name())
}

func (srv *Server) writeNotFound(w http.ResponseWriter, id json.RawMessage, t Target) {
	WriteError(w, http.StatusNotFound, id, rpccode.SessionNotFound, notFoundMessage(t))
}

// initialize opens a Streamable HTTP session: admitted, opened on t, in
// the table, its id in Mcp-Session-Id.
func (srv *Server) initialize(w http.ResponseWriter, r *http.Request, t Target, m *Message) {
	s := srv.newSession(t, false)
	s.owner = srv.ownerOf(r)
	if !srv.admit(w, r, s, m.ID, ClientName(m.Params)) {
		return
	}
	defer s.end()
	res, err := s.open(r.Context(), m.Params)
	if err != nil {
		WriteOpenError(w, m.ID, err)
		return
	}
	srv.record(s, r) // before add: the shutdown's keepRecords reads what it sets
	if !srv.add(s, "streamable") {
		s.Close()
		w.Header().Set("Retry-After", "5")
		WriteError(w, http.StatusServiceUnavailable, m.ID, rpccode.Unavailable, srv.opts.Name+" is shutting down; try again in a moment")
		return
	}
	w.Header().Set(HeaderSessionID, s.ID)
	w.Header().Set("Content-Type", ContentTypeJSON)
	_, _ = w.Write(AppendResponse(nil, m.ID, res, nil))
}

// stateless serves one 2026-07-28 request: a session that lives as long as
// the request; the client's leaving cancels it.
func (srv *Server) stateless(w http.ResponseWriter, r *http.Request, t Target, m *Message, release func()) {
	ctx := r.Context()
	if m.Kind() != KindRequest {
		// Nothing outlives the request a notification or answer could be
		// about.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s, answer, err := srv.openStateless(ctx, t, m)
	switch {
	case err != nil:
		WriteOpenError(w, m.ID, err)
		return
	case answer != nil:
		w.Header().Set("Content-Type", ContentTypeJSON)
		_, _ = w.Write(answer)
		return
	}
	defer s.Close()
	if !admitMessage(w, s, m) {
		return
	}
	var reply PostSink
	s.handle(ctx, m, &reply)
	release()
	reply.WriteTo(w, r, m.ID, s.done)
}

// openStateless opens the session of a stateless request m on t. A
// server/discover the Target answers itself is answered here (answer),
// with no session; an error is Open's (or Discover's).
func (srv *Server) openStateless(ctx context.Context, t Target, m *Message) (s *Session, answer []byte, err error) {
	if m.Method == "server/discover" {
		res, err := t.Discover(ctx)
		if !errors.Is(err, ErrPassOn) {
			if err != nil {
				return nil, nil, err
			}
			return nil, AppendResponse(nil, m.ID, res, nil), nil
		}
	}
	s = srv.newSession(t, true)
	s.Version = VersionStateless
	if _, err := t.Open(ctx, s, nil); err != nil {
		return nil, nil, err
	}
	return s, nil, nil
}

// getStream serves a session's own stream (Streamable HTTP GET): messages
// that belong to no request, numbered for Last-Event-ID resumption.
func (srv *Server) getStream(w http.ResponseWriter, r *http.Request, t Target) {
	if !CheckGETAccept(w, r) {
		return
	}
	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		WriteError(w, http.StatusBadRequest, nil, rpccode.InvalidRequest, "GET opens the stream of a session: send its "+HeaderSessionID+" header (initialize first)")
		return
	}
	s, err := srv.find(r, sid, t)
	if err != nil {
		WriteOpenError(w, nil, err)
		return
	}
	if s == nil || !s.begin() {
		srv.writeNotFound(w, nil, t)
		return
	}
	defer s.end()
	from, ok := AttachGET(w, r, s.Out, "this session's stream is already open; one GET stream per session", srv.opts.Name)
	if !ok {
		return
	}
	defer s.Out.Detach()
	srv.pump(w, r, s, from)
}

// pump writes the session's outbox to its stream until the client leaves,
// the session ends or the server closes.
func (srv *Server) pump(w http.ResponseWriter, r *http.Request, s *Session, from uint64, preface ...string) {
	fl, ok := w.(http.Flusher)
	if !ok {
		WriteError(w, http.StatusInternalServerError, nil, rpccode.InternalError, "streaming is not supported by this connection")
		return
	}
	h := w.Header()
	h.Set("Content-Type", ContentTypeSSE)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	for _, p := range preface {
		_, _ = io.WriteString(w, p)
	}
	fl.Flush()
	s.Out.Pump(r.Context(), w, fl, from, srv.opts.PingInterval, srv.stop, s.touch)
}
