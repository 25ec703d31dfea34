package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// authID is the id of the proxy's authenticate request: the first (and only)
// request the proxy makes on an extension's connection.
const authID = relaywire.PrefixProxy + "1"

// extension is one authenticated extension connection.
type extension struct {
	s    *Server
	c    *wsConn
	id   string
	name string
	user *user

	mu     sync.Mutex
	conns  map[string]*connection // MCP connections to it, by connection id
	closed bool
}

// connection joins an MCP client to an extension; its id prefixes the ids
// of the requests forwarded through it.
type connection struct {
	id  string
	mcp *mcpClient
	ext *extension

	mu      sync.Mutex
	pending map[string]time.Time // mapped ids in flight → when forwarded
	closed  bool
}

// add records a forwarded request; it returns an error to send instead when
// the connection is closed or the id is already in flight.
func (cn *connection) add(mapped string, now time.Time) *relaywire.Error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.closed {
		return relaywire.Errorf(relaywire.CodeExtensionGone, "the extension disconnected")
	}
	if _, dup := cn.pending[mapped]; dup {
		return relaywire.Errorf(relaywire.CodeDuplicateID, "a request with this id is still in flight on this connection")
	}
	cn.pending[mapped] = now
	cn.ext.s.inflight.Add(1)
	return nil
}

// inFlight reports whether the request with the mapped id is in flight.
func (cn *connection) inFlight(mapped []byte) bool {
	cn.mu.Lock()
	_, ok := cn.pending[string(mapped)]
	cn.mu.Unlock()
	return ok
}

// take removes a request from those in flight; whoever takes it answers it.
func (cn *connection) take(mapped []byte) (time.Time, bool) {
	cn.mu.Lock()
	t, ok := cn.pending[string(mapped)]
	if ok {
		delete(cn.pending, string(mapped))
	}
	cn.mu.Unlock()
	if ok {
		cn.ext.s.inflight.Add(-1)
	}
	return t, ok
}

// close marks the connection closed and answers every request in flight
// with the error (unless tell is false: the client is gone).
func (cn *connection) close(code int, msg string, tell bool) {
	cn.mu.Lock()
	pending := cn.pending
	cn.pending, cn.closed = nil, true
	cn.mu.Unlock()
	s := cn.ext.s
	s.inflight.Add(-int64(len(pending)))
	if len(pending) == 0 {
		return
	}
	reason := "client_gone"
	if tell {
		reason = "extension_gone"
		if code == relaywire.CodeShuttingDown {
			reason = "shutdown"
		}
	}
	s.m.failed.With(reason).Add(float64(len(pending)))
	if !tell {
		return
	}
	e := &relaywire.Error{Code: code, Message: msg}
	for mapped := range pending {
		_, orig, _ := relaywire.UnmapID(mapped)
		cn.mcp.c.Send(relaywire.AppendError(nil, orig, e))
	}
}

// peers returns the number of MCP connections to e.
func (e *extension) peers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.conns)
}

// sendStatus tells the extension how many MCP connections it has.
func (e *extension) sendStatus() {
	e.c.Send(statusMessage(true, e.peers(), e.s.opts.Now()))
}

func statusMessage(connected bool, peers int, now time.Time) []byte {
	return relaywire.AppendNotification(nil, relaywire.MethodStatus, relaywire.MarshalParams(relaywire.StatusParams{
		Connected: connected, PeerCount: peers, Timestamp: relaywire.Timestamp(now),
	}))
}

// detachAll ends every MCP connection to e: their calls in flight are
// answered with code and msg, and each client gets `disconnected` with the
// reason.
func (e *extension) detachAll(code int, msg, reason string) {
	e.mu.Lock()
	conns := e.conns
	e.conns = make(map[string]*connection)
	e.mu.Unlock()
	for _, cn := range conns {
		cn.close(code, msg, true)
		cn.mcp.detached(cn, reason)
	}
}

// serveExtension runs one extension connection: authenticate, then replies.
func (s *Server) serveExtension(w http.ResponseWriter, r *http.Request) {
	c := s.upgrade(w, r)
	if c == nil {
		return
	}
	go s.runExtension(c, r.RemoteAddr)
}

// runExtension is the reader of one extension connection.
func (s *Server) runExtension(c *wsConn, remote string) {
	defer s.finish(c)
	s.m.conns.With("extension").Inc()
	defer s.m.conns.With("extension").Dec()
	c.lim = newBucket(s.opts.extRate())

	h := &extHandler{s: s, c: c}
	c.Send(relaywire.AppendRequest(nil, authID, relaywire.MethodAuthenticate, json.RawMessage("{}")))
	t := time.AfterFunc(s.opts.AuthTimeout, func() {
		if !h.authed.Load() {
			s.m.authFail.With("extension").Inc()
			c.Close(websocket.ClosePolicyViolation, "authentication failed: no answer to authenticate in time")
		}
	})
	err := c.ReadLoop(h.handle, func(n int64) {
		c.refuse(nil, tooBigError(n, s.opts.MaxMessageSize), "too_big")
	})
	t.Stop()
	if h.ext != nil {
		h.leave()
	}
	s.log.Debug("extension connection ended", "remote", remote, "err", err)
}

func tooBigError(n, limit int64) *relaywire.Error {
	return relaywire.Errorf(relaywire.CodeInvalidRequest, "message of %d bytes exceeds the %d-byte limit", n, limit)
}

// extHandler is the reader's state of one extension connection.
type extHandler struct {
	s      *Server
	c      *wsConn
	authed atomic.Bool
	ext    *extension
}

func (h *extHandler) handle(data []byte) {
	s, c := h.s, h.c
	now := time.Now()
	if !c.lim.allow(now) {
		// An extension only answers; a flood of answers is abuse.
		s.m.dropped.With("rate").Inc()
		if c.strike(now) {
			c.Close(websocket.ClosePolicyViolation, "too many messages: rate limit exceeded")
		}
		return
	}
	var msg relaywire.Message // on the stack: Decode allocates nothing
	m := &msg
	kind, perr := m.Decode(data)
	if perr != nil {
		// A reply we are waiting for that is malformed still answers
		// its caller, so that no call hangs.
		if cn, mapped := h.pendingFor(m.ID); cn != nil {
			if _, ok := cn.take(mapped); ok {
				_, orig, _ := relaywire.UnmapIDBytes(mapped)
				s.m.failed.With("bad_reply").Inc()
				cn.mcp.c.Send(relaywire.AppendError(nil, orig, relaywire.Errorf(relaywire.CodeInternalError, "the extension sent an invalid reply: %s", perr.Message)))
			}
		}
		c.refuse(m.ID, perr, "invalid")
		return
	}
	switch kind {
	case relaywire.KindRequest:
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound, "method %q not found: extensions are passive and the proxy accepts no requests from them", m.Method), "ext_request")
		return
	case relaywire.KindNotification:
		h.notification(m)
		return
	}
	if !h.authed.Load() {
		if id, _ := idBytes(m.ID); string(id) == authID {
			h.authenticate(m)
		} else {
			s.m.dropped.With("unauthenticated").Inc()
		}
		return
	}
	cn, mapped := h.pendingFor(m.ID)
	if cn == nil {
		s.m.dropped.With("unknown_id").Inc()
		return
	}
	start, ok := cn.take(mapped)
	if !ok {
		s.m.dropped.With("unknown_id").Inc()
		return
	}
	_, orig, _ := relaywire.UnmapIDBytes(mapped)
	var out []byte
	if m.Result != nil {
		out = relaywire.AppendResult(make([]byte, 0, 48+len(orig)+len(m.Result)), orig, m.Result)
	} else if validError(m.Error) {
		out = relaywire.AppendErrorRaw(make([]byte, 0, 48+len(orig)+len(m.Error)), orig, m.Error)
	} else {
		s.m.failed.With("bad_reply").Inc()
		out = relaywire.AppendError(nil, orig, relaywire.Errorf(relaywire.CodeInternalError, "the extension sent a malformed error object"))
	}
	s.m.callTime.Observe(time.Since(start).Seconds())
	cn.mcp.c.Send(out)
}

// notification routes a notification from the extension (docs/relay.md,
// "Notifications"): the progress of a request in flight to the client that
// made it, a list_changed to every client connected to the extension;
// anything else is dropped. Notifications are never worth blocking the
// extension's reader for: one to a client whose queue is full is dropped.
func (h *extHandler) notification(m *relaywire.Message) {
	s := h.s
	if h.ext == nil {
		s.m.dropped.With("unauthenticated").Inc()
		return
	}
	switch {
	case m.RequestID != nil:
		if m.Method != relaywire.MethodProgress {
			s.m.dropped.With("ext_notification").Inc()
			return
		}
		// Only a request this extension was sent, of a connection to it,
		// still in flight: never another client's, never after the reply.
		cn, mapped := h.pendingFor(m.RequestID)
		if cn == nil || !cn.inFlight(mapped) {
			s.m.dropped.With("progress_not_in_flight").Inc()
			return
		}
		h.deliver(cn, relaywire.AppendNotification(nil, m.Method, m.Params))
	case isListChanged(m.Method):
		e := h.ext
		e.mu.Lock()
		conns := make([]*connection, 0, len(e.conns))
		for _, cn := range e.conns {
			conns = append(conns, cn)
		}
		e.mu.Unlock()
		msg := relaywire.AppendNotification(nil, m.Method, m.Params)
		for _, cn := range conns {
			h.deliver(cn, msg)
		}
	default:
		s.m.dropped.With("ext_notification").Inc()
	}
}

// deliver queues a notification for cn's client, or drops it if the
// client's queue is full.
func (h *extHandler) deliver(cn *connection, msg []byte) {
	if cn.mcp.c.TrySend(msg) {
		h.s.m.notified.Inc()
		return
	}
	h.s.m.dropped.With("queue_full").Inc()
}

func isListChanged(method string) bool {
	switch method {
	case relaywire.MethodToolsListChanged, relaywire.MethodResourcesListChanged, relaywire.MethodPromptsListChanged:
		return true
	}
	return false
}

// pendingFor finds the connection a mapped id belongs to, among this
// extension's, and returns it with the mapped id's bytes (which may alias
// raw); nil if none.
func (h *extHandler) pendingFor(raw json.RawMessage) (*connection, []byte) {
	if h.ext == nil || raw == nil {
		return nil, nil
	}
	id, ok := idBytes(raw)
	if !ok {
		return nil, nil
	}
	connID, _, ok := relaywire.UnmapIDBytes(id)
	if !ok {
		return nil, nil
	}
	h.ext.mu.Lock()
	cn := h.ext.conns[string(connID)]
	h.ext.mu.Unlock()
	return cn, id
}

// idBytes returns the value of a string id, aliasing raw for the common
// case, a string of printable ASCII without escapes (mapped ids of numeric
// ids are); false for a number.
func idBytes(raw json.RawMessage) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		s, ok := relaywire.IDString(raw)
		return []byte(s), ok
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			s, ok := relaywire.IDString(raw)
			return []byte(s), ok
		}
	}
	return raw[1 : len(raw)-1], true
}

// validError reports whether raw is a JSON-RPC error object: an integer
// code and a string message.
func validError(raw json.RawMessage) bool {
	var e struct {
		Code    *json.Number `json:"code"`
		Message *string      `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Code == nil || e.Message == nil {
		return false
	}
	_, err := e.Code.Int64()
	return err == nil
}

// authenticate handles the reply to authenticate.
func (h *extHandler) authenticate(m *relaywire.Message) {
	s, c := h.s, h.c
	fail := func(reason string) {
		s.m.authFail.With("extension").Inc()
		s.log.Info("extension refused", "reason", reason)
		c.Close(websocket.ClosePolicyViolation, "authentication failed: "+reason)
	}
	if m.Error != nil {
		fail("the extension answered authenticate with an error")
		return
	}
	var res relaywire.AuthenticateResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		fail("the result of authenticate must be {name, accessToken}")
		return
	}
	if res.AccessToken == "" {
		fail("accessToken is missing")
		return
	}
	name := strings.TrimSpace(res.Name)
	if name == "" {
		fail("name is missing")
		return
	}
	if len(name) > 256 {
		name = name[:256]
	}
	claims, err := s.opts.Keys.Verify(res.AccessToken, token.KindExtension, s.opts.Now())
	if err != nil {
		fail(err.Error())
		return
	}
	e := &extension{s: s, c: c, name: name, conns: make(map[string]*connection)}
	u, err := s.acquireUser(claims.Subject, sideExtension, e)
	switch {
	case errors.Is(err, errUserLimit):
		s.m.connRefused.With("per_user_extension").Inc()
		s.log.Info("extension refused", "user", claims.Subject, "reason", "per-user limit", "limit", s.opts.MaxExtensionsPerUser)
		c.Close(websocket.ClosePolicyViolation, fmt.Sprintf(
			"too many extension connections for this user: at most %d at once; close one and retry", s.opts.MaxExtensionsPerUser))
		return
	case err != nil:
		c.Close(websocket.CloseGoingAway, relaywire.ReasonShuttingDown)
		return
	}
	h.ext = e
	h.authed.Store(true)
	s.nExt.Add(1)
	s.m.accepted.With("extension").Inc()
	s.log.Info("extension authenticated", "user", u.id, "extension", e.id, "name", name)
	c.Send(relaywire.AppendNotification(nil, relaywire.MethodAuthenticated, relaywire.MarshalParams(relaywire.AuthenticatedParams{
		UserID: u.id, ExtensionID: e.id,
	})))
	e.sendStatus()
}

// leave forgets the extension and tells its MCP clients.
func (h *extHandler) leave() {
	s, e := h.s, h.ext
	s.mu.Lock()
	delete(e.user.exts, e.id)
	s.releaseUserLocked(e.user, sideExtension)
	s.mu.Unlock()
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.detachAll(relaywire.CodeExtensionGone, "the extension disconnected before answering", relaywire.ReasonExtensionGone)
	s.nExt.Add(-1)
}
