package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
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
	// kind is relaywire.ExtensionKindBrowser or ExtensionKindServer; server
	// is a server extension's name on its gateway ("" for a browser).
	kind, server string
	since        time.Time // when it authenticated
	// node is set on a stand-in for an extension of another node of the
	// cluster (clusterNode.remoteExtensions): it has no connection here.
	node string
	// claimed is the id this node claimed for it in the cluster (claimID),
	// released when it leaves; "" if none.
	claimed string
	// replace: a server extension that asked to take its server name
	// over from the bridge holding it (servername.go).
	replace bool
	// ended is set when a server extension no longer holds its server
	// name (another bridge took it over, or held it first): it is being
	// closed, and no new session goes to it.
	ended atomic.Bool

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
	asks    map[string]struct{}  // the extension's requests to this client ("ext:…") awaiting its answer
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
// with the error (unless tell is false: the client is gone). The
// extension's requests to the client are answered too, and a server
// extension is told the connection ended (connection_closed), so that it
// ends that client's session.
func (cn *connection) close(code int, msg string, tell bool) {
	cn.mu.Lock()
	pending, asks := cn.pending, cn.asks
	cn.pending, cn.asks, cn.closed = nil, nil, true
	cn.mu.Unlock()
	s := cn.ext.s
	cn.endForExtension(asks, code, tell)
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
		code, msg, reason := code, msg, reason
		if cn.mcp.link != nil && code == relaywire.CodeShuttingDown {
			// Another node's client: its own proxy is not stopping,
			// the extension's node is, which is the extension gone.
			code, msg, reason = relaywire.CodeExtensionGone, "the proxy node that holds the extension is shutting down", relaywire.ReasonExtensionGone
		}
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
	if !c.lim.Allow(now) {
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
		h.request(m)
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
	case m.RequestID != nil || m.ConnectionID != "":
		h.routedNotification(m)
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
	kind, err := relaywire.CheckKind(res.Kind, res.Server)
	if err != nil {
		fail(err.Error())
		return
	}
	if res.AccessToken == "" {
		fail("accessToken is missing")
		return
	}
	if res.Replace && kind != relaywire.ExtensionKindServer {
		fail(`replace is given only with kind "server"`)
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
	claims, err := s.keys.Load().Verify(res.AccessToken, token.KindExtension, s.opts.Now())
	if err == nil {
		err = s.checkRevoked(claims)
	}
	if err != nil {
		fail(err.Error())
		return
	}
	// since without a monotonic reading: it is compared with other
	// nodes' (servername.go), which have none.
	e := &extension{s: s, c: c, name: name, kind: kind, server: res.Server, replace: res.Replace, since: time.Now().Round(0), conns: make(map[string]*connection)}
	if s.cluster != nil {
		// The stable id, unless a browser of the same name holds it on
		// another node: claimed in the cluster, so that two at once on
		// two nodes cannot both take it.
		e.id = s.cluster.claimID(claims.Subject, stableID(relaywire.PrefixExtension, claims.Subject, name))
		e.claimed = e.id
	}
	u, err := s.acquireUser(claims.Subject, sideExtension, e)
	var taken *serverNameTaken
	switch {
	case errors.As(err, &taken):
		s.m.connRefused.With("server_name").Inc()
		s.log.Info("server extension refused: another bridge of the user holds the server name",
			"user", claims.Subject, "server", e.server, "refused", name, "holder", taken.holder.name,
			"holder_extension", taken.holder.id, "holder_node", s.nodeOf(taken.holder), "holder_since", taken.holder.since)
		tellServerNameTaken(c, e.server, taken.holder, taken.Error(), false)
		return
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
	s.log.Info("extension authenticated", "user", u.id, "extension", e.id, "name", name, "kind", kind, "server", e.server)
	if kind == relaywire.ExtensionKindServer {
		// The registrations e replaces end (before e hears it is
		// authenticated, so that what it serves next is its own); so
		// does e, if presence brought another node's holder since it
		// was checked.
		s.settleServerName(u.id, e.server)
	}
	c.Send(relaywire.AppendNotification(nil, relaywire.MethodAuthenticated, relaywire.MarshalParams(relaywire.AuthenticatedParams{
		UserID: u.id, ExtensionID: e.id,
	})))
	if kind == relaywire.ExtensionKindBrowser {
		for _, p := range s.ended.take(e.id) { // sessionend.go
			c.Send(sessionEndedMsg(p))
		}
		if s.cluster != nil { // kept cluster-wide (cluster_ended.go)
			for _, p := range s.cluster.takeEnded(u.id, e.id) {
				c.Send(sessionEndedMsg(p))
			}
		}
	}
	e.sendStatus()
}

// leave forgets the extension and tells its MCP clients.
func (h *extHandler) leave() {
	s, e := h.s, h.ext
	s.mu.Lock()
	delete(e.user.exts, e.id)
	s.releaseUserLocked(e.user, sideExtension)
	s.mu.Unlock()
	if s.cluster != nil {
		s.cluster.extensionDown(e)
	}
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.detachAll(relaywire.CodeExtensionGone, "the extension disconnected before answering", relaywire.ReasonExtensionGone)
	s.nExt.Add(-1)
}

// Server extensions and requests from extensions to clients
// (docs/relay.md, "Server extensions" and "Requests to clients").

// request handles a request from the extension: pairing_code, which the
// proxy answers, or a request for one client, routed like progress.
func (h *extHandler) request(m *relaywire.Message) {
	c := h.c
	switch {
	case h.ext == nil:
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeNotAuthenticated, "not authenticated: answer %s first", relaywire.MethodAuthenticate), "unauthenticated")
	case m.Method == relaywire.MethodPairingCode:
		h.pairingCode(m)
	case m.RequestID != nil || m.ConnectionID != "":
		h.ask(m)
	default:
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound,
			"method %q not found: the proxy answers only %s from extensions, and a request for a client needs a top-level requestId (a call in flight) or connectionId",
			m.Method, relaywire.MethodPairingCode), "ext_request")
	}
}

// ask delivers an extension's request to the client its requestId (a call
// of this extension in flight) or connectionId (a connection to it) names,
// with its id and params unchanged; the client's answer comes back through
// mcpClient.routeReply to this extension only. What cannot be delivered is
// answered to the extension at once, so that nothing waits for nobody.
func (h *extHandler) ask(m *relaywire.Message) {
	s, c := h.s, h.c
	id, ok := relaywire.IDString(m.ID)
	if !ok || !strings.HasPrefix(id, relaywire.PrefixExt) || len(m.ID) > relaywire.MaxIDBytes {
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeInvalidRequest,
			"a request for a client needs a string id starting with %q (spec 001), of at most %d bytes", relaywire.PrefixExt, relaywire.MaxIDBytes), "ext_request")
		return
	}
	if relaywire.IsControlMethod(m.Method) || strings.HasPrefix(m.Method, "rpc.") || strings.HasPrefix(m.Method, "notifications/") {
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound, "method %q cannot be sent to a client as a request", m.Method), "ext_request")
		return
	}
	cn := h.route(m)
	if cn == nil {
		// Often a race (the call was answered a moment ago), so no strike.
		c.answer(m.ID, relaywire.Errorf(relaywire.CodeNoRoute,
			"the request was not delivered: requestId names no call of this extension in flight, or connectionId no connection to it"), "ask_no_route")
		return
	}
	if err := cn.addAsk(id); err != nil {
		c.refuse(m.ID, err, "ask_refused")
		return
	}
	if !cn.mcp.c.TrySend(relaywire.AppendRequestRawID(nil, m.ID, m.Method, m.Params)) {
		cn.takeAsk(id)
		c.answer(m.ID, relaywire.Errorf(relaywire.CodeRateLimited, "the client's send queue is full: the request was not delivered"), "queue_full")
		return
	}
	s.m.notified.Inc()
}

// route finds the connection an extension's message is for: that of the
// call in flight its requestId names (and connectionId, if also given, must
// agree), else the connection its connectionId names; always one of this
// extension's. nil if none.
func (h *extHandler) route(m *relaywire.Message) *connection {
	if m.RequestID != nil {
		cn, mapped := h.pendingFor(m.RequestID)
		if cn == nil || !cn.inFlight(mapped) || (m.ConnectionID != "" && m.ConnectionID != cn.id) {
			return nil
		}
		return cn
	}
	e := h.ext
	e.mu.Lock()
	cn := e.conns[m.ConnectionID]
	e.mu.Unlock()
	return cn
}

// routedNotification delivers a notification about one call (requestId)
// or one connection (connectionId) to that client alone, params unchanged
// and the routing field removed. Progress needs requestId (it is about a
// call); notifications/cancelled must name a request of this extension
// that the client has not answered yet (the extension withdraws it).
// Anything else is dropped and counted.
func (h *extHandler) routedNotification(m *relaywire.Message) {
	s := h.s
	if !strings.HasPrefix(m.Method, "notifications/") {
		s.m.dropped.With("ext_notification").Inc()
		return
	}
	if m.Method == relaywire.MethodProgress && m.RequestID == nil {
		s.m.dropped.With("progress_not_in_flight").Inc()
		return
	}
	cn := h.route(m)
	if cn == nil {
		reason := "notification_no_route"
		if m.Method == relaywire.MethodProgress {
			reason = "progress_not_in_flight"
		}
		s.m.dropped.With(reason).Inc()
		return
	}
	if m.Method == relaywire.MethodCancelled {
		var p relaywire.CancelledParams
		id, ok := "", false
		if json.Unmarshal(m.Params, &p) == nil {
			id, ok = relaywire.IDString(p.RequestID)
		}
		if !ok || !strings.HasPrefix(id, relaywire.PrefixExt) || !cn.takeAsk(id) {
			s.m.dropped.With("ext_cancel_unknown").Inc()
			return
		}
	}
	h.deliver(cn, relaywire.AppendNotification(nil, m.Method, m.Params))
}

// addAsk records an extension's request to the client; an error to send
// back when its id is already waiting or too many are.
func (cn *connection) addAsk(id string) *relaywire.Error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	switch {
	case cn.closed:
		return relaywire.Errorf(relaywire.CodeNoRoute, "the client's connection has ended")
	case len(cn.asks) >= relaywire.MaxAsksPerConnection:
		return relaywire.Errorf(relaywire.CodeRateLimited, "%d requests already wait for this client's answers; the limit is %d", len(cn.asks), relaywire.MaxAsksPerConnection)
	}
	if _, dup := cn.asks[id]; dup {
		return relaywire.Errorf(relaywire.CodeDuplicateID, "a request with this id already waits for this client's answer")
	}
	if cn.asks == nil {
		cn.asks = make(map[string]struct{})
	}
	cn.asks[id] = struct{}{}
	return nil
}

// takeAsk removes a waiting request; false if it was not waiting.
func (cn *connection) takeAsk(id string) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if _, ok := cn.asks[id]; !ok {
		return false
	}
	delete(cn.asks, id)
	return true
}

// endForExtension tells the extension that cn ended: its requests to the
// client are answered with an error, and a server extension gets
// connection_closed. Nothing is sent to an extension that is leaving.
func (cn *connection) endForExtension(asks map[string]struct{}, code int, tell bool) {
	e := cn.ext
	e.mu.Lock()
	gone := e.closed
	e.mu.Unlock()
	if gone || (len(asks) == 0 && e.kind != relaywire.ExtensionKindServer) {
		return
	}
	reason := relaywire.ReasonClientDisconnected
	switch {
	case !tell:
		reason = relaywire.ReasonClientGone
	case code == relaywire.CodeShuttingDown:
		reason = relaywire.ReasonShuttingDown
	}
	for id := range asks {
		e.c.Send(relaywire.AppendError(nil, relaywire.AppendString(nil, id),
			relaywire.Errorf(relaywire.CodeExtensionGone, "the client left before answering (%s)", reason)))
	}
	if e.kind == relaywire.ExtensionKindServer {
		e.c.Send(relaywire.AppendNotification(nil, relaywire.MethodConnectionClosed,
			relaywire.MarshalParams(relaywire.ConnectionClosedParams{ConnectionID: cn.id, Reason: reason})))
	}
}

// routeReply takes a reply from an MCP client and reports whether it was
// one to an extension's request (an "ext:…" id): it goes to the extension
// of the client's current connection if that extension's request with the
// id is waiting there, and is dropped (counted, never a strike) otherwise.
// Other replies are not its business (false). mcp.go's reader calls it
// first for every reply; the HTTP endpoint does the same for its clients'.
func (mc *mcpClient) routeReply(m *relaywire.Message) bool {
	s := mc.s
	id, ok := idBytes(m.ID)
	if !ok || !bytes.HasPrefix(id, []byte(relaywire.PrefixExt)) {
		return false
	}
	if rc := mc.remoteLink(); rc != nil {
		rc.reply(m) // the extension's node checks that it asked
		return true
	}
	cn := mc.current()
	if cn == nil || !cn.takeAsk(string(id)) {
		s.m.dropped.With("reply_not_asked").Inc()
		return true
	}
	cn.ext.c.Send(clientAnswer(m))
	return true
}

// clientAnswer is a client's answer to an extension's request as the
// extension gets it: the result or the error object as sent, or an error
// saying the client's was malformed.
func clientAnswer(m *relaywire.Message) []byte {
	switch {
	case m.Result != nil:
		return relaywire.AppendResult(nil, m.ID, m.Result)
	case validError(m.Error):
		return relaywire.AppendErrorRaw(nil, m.ID, m.Error)
	}
	return relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeInternalError, "the client sent a malformed error object"))
}

// What the MCP endpoints need to tell browsers from servers.

// info is e as list_extensions lists it.
func (e *extension) info() relaywire.ExtensionInfo {
	return relaywire.ExtensionInfo{ID: e.id, Name: e.name, Connected: true, Kind: e.kind, Server: e.server}
}

// extensionsOf returns the live extensions of a user of one kind (""
// for every kind), sorted by name then id. It takes Server.mu.
func (s *Server) extensionsOf(userID, kind string) []*extension {
	s.mu.Lock()
	var out []*extension
	if u := s.users[userID]; u != nil {
		for _, e := range u.exts {
			if kind == "" || e.kind == kind {
				out = append(out, e)
			}
		}
	}
	s.mu.Unlock()
	if s.cluster != nil {
		local := make(map[string]bool, len(out))
		for _, e := range out {
			local[e.id] = true
		}
		out = append(out, s.cluster.remoteExtensions(userID, kind, func(id string) bool { return local[id] })...)
	}
	slices.SortFunc(out, func(a, b *extension) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}

// serverExtension returns the user's server extension named server, or
// nil: of the registrations of the bridge that holds the name
// (servername.go), the one that authenticated last (the bridge's newest
// connection, while the proxy has not yet seen its old one drop). It
// takes Server.mu.
func (s *Server) serverExtension(userID, server string) *extension {
	var regs []serverReg
	for _, e := range s.extensionsOf(userID, relaywire.ExtensionKindServer) {
		if e.server == server && !e.ended.Load() {
			regs = append(regs, e.reg())
		}
	}
	holder, ok := holderOf(regs)
	if !ok {
		return nil
	}
	var found *extension
	for _, r := range regs {
		if r.name == holder.name && (found == nil || r.since.After(found.since)) {
			found = r.ext
		}
	}
	return found
}

// forwardNotification passes a client's notification on to the extension.
// A server extension gets it with the connection it came on (a top-level
// connectionId, as spec 001's MCP side routes requests), since what a
// client notifies (initialized, roots/list_changed) belongs to that
// client's session on the server; a browser gets it as before.
func (cn *connection) forwardNotification(method string, params json.RawMessage) {
	if cn.ext.kind == relaywire.ExtensionKindServer {
		cn.ext.c.Send(relaywire.AppendConnectionNotification(nil, cn.id, method, params))
		return
	}
	cn.ext.c.Send(relaywire.AppendNotification(nil, method, params))
}
