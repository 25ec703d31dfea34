package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// mcpConn is where the proxy's messages to one MCP client go: its
// WebSocket (*wsConn), or a Streamable HTTP session (*httpSession, which
// sorts them onto the right HTTP responses). Any goroutine may call its
// methods; none blocks for long (Send may wait for room in a WebSocket's
// queue, as wsconn.Conn.Send does).
type mcpConn interface {
	// Send queues a message for the client; false if it never will be
	// delivered (the client is gone).
	Send(msg []byte) bool
	// TrySend queues a message if that needs no waiting: for
	// notifications, never worth holding an extension's reader for.
	TrySend(msg []byte) bool
	// refuse answers a request the proxy refused with the error (counted
	// under reason; on a WebSocket, a strike).
	refuse(id []byte, e *relaywire.Error, reason string)
	// answer is refuse for a refusal that was not the client's fault.
	answer(id []byte, e *relaywire.Error, reason string)
}

var (
	_ mcpConn = (*wsConn)(nil)
	_ mcpConn = (*httpSession)(nil)
)

// mcpClient is one MCP client: a WebSocket connection (spec 001), or a
// Streamable HTTP session, which uses the same connections, forwarding,
// id mapping, progress, cancellation and detaching. user and id are set
// once, by the WebSocket's reader at mcp_handshake (an HTTP session is
// created with them); conn is guarded by mu (connect sets it, an extension
// leaving clears it).
type mcpClient struct {
	s *Server
	// c is where messages for the client go.
	c mcpConn
	// ws is the WebSocket of a spec 001 client, whose reader (handle)
	// strikes and closes it; nil for an HTTP session.
	ws     *wsConn
	id     string
	user   *user
	authed atomic.Bool

	mu   sync.Mutex
	conn *connection
	// orphaned: the client's extension went away (or the proxy is
	// stopping) and the client has not connected or disconnected since.
	// Its calls are refused -32002 meanwhile, through no fault of its own:
	// those refusals are not strikes.
	orphaned bool
	// remote is the client's connection to an extension on another node
	// of the cluster (cluster_link.go), instead of conn.
	remote *remoteConn
	// left: the client is gone; nothing may connect it again.
	left bool

	// link is set on a shadow: another node's client, here to reach one
	// of this node's extensions (cluster_link.go). Set once.
	link *shadowLink
}

// remoteLink returns the client's cross-node connection, or nil.
func (mc *mcpClient) remoteLink() *remoteConn {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.remote
}

// connectedTo returns the id of the extension the client is connected
// to, here or on another node; "" when it is not connected.
func (mc *mcpClient) connectedTo() string {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	switch {
	case mc.conn != nil:
		return mc.conn.ext.id
	case mc.remote != nil:
		return mc.remote.extID
	}
	return ""
}

func (mc *mcpClient) current() *connection {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.conn
}

// detached is called when the extension side ended cn: if cn is still the
// client's connection, it is cleared and the client told why.
func (mc *mcpClient) detached(cn *connection, reason string) {
	mc.mu.Lock()
	mine := mc.conn == cn
	if mine {
		mc.conn = nil
		mc.orphaned = true
	}
	mc.mu.Unlock()
	if mine && mc.link != nil {
		// A shadow: the client's node tells its client.
		mc.link.c.shadowDetached(mc, reason)
		return
	}
	if mine {
		mc.c.Send(relaywire.AppendNotification(nil, relaywire.MethodDisconnected, relaywire.MarshalParams(relaywire.DisconnectedParams{
			ConnectionID: cn.id, Reason: reason,
		})))
	}
}

// serveMCP runs one MCP client connection; with Options.HTTP, a request
// that is not a WebSocket upgrade is Streamable HTTP's.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if s.http != nil && !websocket.IsWebSocketUpgrade(r) {
		s.http.ServeHTTP(w, r)
		return
	}
	c := s.upgrade(w, r)
	if c == nil {
		return
	}
	go s.runMCP(c, r.RemoteAddr)
}

// runMCP is the reader of one mcp connection.
func (s *Server) runMCP(c *wsConn, remote string) {
	defer s.finish(c)
	s.m.conns.With("mcp").Inc()
	defer s.m.conns.With("mcp").Dec()
	mc := &mcpClient{s: s, c: c, ws: c}
	t := time.AfterFunc(s.opts.AuthTimeout, func() {
		if !mc.authed.Load() {
			s.m.authFail.With("mcp").Inc()
			c.Close(websocket.ClosePolicyViolation, "authentication failed: no mcp_handshake in time")
		}
	})
	err := c.ReadLoop(mc.handle, func(n int64) {
		c.refuse(nil, tooBigError(n, s.opts.MaxMessageSize), "too_big")
	})
	t.Stop()
	mc.leave()
	s.log.Debug("mcp connection ended", "remote", remote, "err", err)
}

// leave runs when the client's connection ended.
func (mc *mcpClient) leave() {
	s := mc.s
	mc.mu.Lock()
	mc.left = true
	mc.mu.Unlock()
	mc.dropConnection(false)
	if mc.user != nil {
		s.mu.Lock()
		s.releaseUserLocked(mc.user, sideMCP)
		s.mu.Unlock()
		s.nMCP.Add(-1)
	}
}

// dropConnection ends the client's connection to its extension, if any,
// answering its calls in flight when tell is set. It reports the
// connection ended, or nil.
func (mc *mcpClient) dropConnection(tell bool) *connection {
	mc.mu.Lock()
	cn, rc := mc.conn, mc.remote
	mc.conn, mc.remote = nil, nil
	mc.mu.Unlock()
	if rc != nil {
		rc.close(tell)
		return nil
	}
	if cn == nil {
		return nil
	}
	e := cn.ext
	e.mu.Lock()
	_, attached := e.conns[cn.id]
	delete(e.conns, cn.id)
	e.mu.Unlock()
	cn.close(relaywire.CodeExtensionGone, "the client disconnected from the extension before it answered", tell)
	if attached {
		e.sendStatus()
	}
	return cn
}

func (mc *mcpClient) handle(data []byte) {
	s, c := mc.s, mc.ws
	now := time.Now()
	var msg relaywire.Message // on the stack: Decode allocates nothing
	m := &msg
	kind, perr := m.Decode(data)
	if perr != nil {
		c.refuse(m.ID, perr, "invalid")
		return
	}
	if !c.lim.Allow(now) {
		mc.rateLimited(m, kind, "rate limit exceeded: more than %.0f messages per second on this connection", s.opts.ConnRate)
		return
	}
	if mc.user != nil && !mc.user.lim.Allow(now) {
		mc.rateLimited(m, kind, "rate limit exceeded: more than %.0f messages per second for this user", s.opts.UserRate)
		return
	}
	if kind == relaywire.KindReply {
		// An answer to an extension's request ("ext:…") goes back to it.
		if mc.user != nil && mc.routeReply(m) {
			return
		}
		// The proxy itself never asks MCP clients anything.
		s.m.dropped.With("mcp_reply").Inc()
		if c.strike(now) {
			c.Close(websocket.ClosePolicyViolation, "too many unexpected replies")
		}
		return
	}
	if kind == relaywire.KindRequest && isReservedID(m.ID) {
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeInvalidRequest, `invalid id: ids starting with %q or %q are reserved for the proxy and extensions`, relaywire.PrefixProxy, relaywire.PrefixExt), "reserved_id")
		return
	}
	if m.Method == relaywire.MethodHandshake {
		if kind == relaywire.KindRequest {
			mc.handshake(m)
		}
		return
	}
	if mc.user == nil {
		if kind == relaywire.KindRequest {
			c.refuse(m.ID, relaywire.Errorf(relaywire.CodeNotAuthenticated, "not authenticated: send %s first", relaywire.MethodHandshake), "unauthenticated")
		}
		return
	}
	m.Client = nil // the proxy's to say (HTTP sessions), never a client's
	switch m.Method {
	case relaywire.MethodListExtensions, relaywire.MethodConnect, relaywire.MethodDisconnect:
		if kind != relaywire.KindRequest {
			s.m.dropped.With("control_notification").Inc()
			return
		}
		switch m.Method {
		case relaywire.MethodListExtensions:
			mc.listExtensions(m)
		case relaywire.MethodConnect:
			mc.connect(m)
		default:
			mc.disconnect(m)
		}
		return
	case relaywire.MethodSessionEnded:
		// The client's session of that key is over (`browserbridge
		// connect` exiting): to its browser as an HTTP session's end is
		// (relay.md). A key is no secret of anyone's, and only this
		// user's browser hears it.
		if kind == relaywire.KindRequest {
			c.refuse(m.ID, relaywire.Errorf(relaywire.CodeInvalidRequest, "%s is a notification: send it without an id", m.Method), "method")
			return
		}
		var p relaywire.SessionEndedParams
		if json.Unmarshal(m.Params, &p) != nil || !relaywire.ValidClientKey(p.Key) {
			s.m.dropped.With("session_ended").Inc()
			return
		}
		mc.forward(m, kind, now)
		return
	case relaywire.MethodAuthenticate, relaywire.MethodAuthenticated, relaywire.MethodStatus, relaywire.MethodDisconnected:
		if kind == relaywire.KindRequest {
			c.refuse(m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound, "method %q not found: the proxy sends it, MCP clients do not", m.Method), "method")
		}
		return
	}
	if strings.HasPrefix(m.Method, "rpc.") {
		if kind == relaywire.KindRequest {
			c.refuse(m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound, "method %q not found: rpc.* methods are reserved by JSON-RPC", m.Method), "method")
		}
		return
	}
	mc.forward(m, kind, now)
}

// refuseUnlessOrphaned refuses a request that found no extension: a strike,
// unless the client's extension went away under it (see orphaned).
func (mc *mcpClient) refuseUnlessOrphaned(id []byte, e *relaywire.Error, reason string) {
	mc.mu.Lock()
	orphaned := mc.orphaned
	mc.mu.Unlock()
	if orphaned {
		mc.c.answer(id, e, reason)
		return
	}
	mc.c.refuse(id, e, reason)
}

// isReservedID is relaywire.IsReservedID, with idBytes's fast path.
func isReservedID(raw json.RawMessage) bool {
	if len(raw) == 0 || raw[0] != '"' {
		return false
	}
	s, ok := idBytes(raw)
	return ok && (bytes.HasPrefix(s, []byte(relaywire.PrefixProxy)) || bytes.HasPrefix(s, []byte(relaywire.PrefixExt)))
}

func (mc *mcpClient) rateLimited(m *relaywire.Message, kind relaywire.Kind, format string, rate float64) {
	c := mc.ws
	if kind == relaywire.KindRequest {
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeRateLimited, format, rate), "rate")
		return
	}
	mc.s.m.refused.With("rate").Inc()
	if c.strike(time.Now()) {
		c.Close(websocket.ClosePolicyViolation, "too many messages: rate limit exceeded")
	}
}

func (mc *mcpClient) reply(id json.RawMessage, result any) {
	mc.c.Send(relaywire.AppendResult(nil, id, relaywire.MarshalParams(result)))
}

func (mc *mcpClient) handshake(m *relaywire.Message) {
	s, c := mc.s, mc.ws
	if mc.user != nil {
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeInvalidRequest, "already authenticated: send %s once per connection", relaywire.MethodHandshake), "handshake_twice")
		return
	}
	var p relaywire.HandshakeParams
	if m.Params != nil && json.Unmarshal(m.Params, &p) != nil || p.AccessToken == "" {
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeInvalidParams, "invalid params: %s needs params.accessToken (a string)", relaywire.MethodHandshake), "params")
		return
	}
	claims, err := s.keys.Load().Verify(p.AccessToken, token.KindMCP, s.opts.Now())
	if err != nil {
		s.m.authFail.With("mcp").Inc()
		s.log.Info("mcp client refused", "reason", err)
		c.Send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeServerError, "%s: %v", relaywire.MsgAuthFailed, err)))
		c.Close(websocket.ClosePolicyViolation, "authentication failed: "+err.Error())
		return
	}
	u, err := s.acquireMCPClient(claims.Subject)
	switch {
	case errors.Is(err, errUserLimit):
		s.m.connRefused.With("per_user_mcp").Inc()
		s.log.Info("mcp client refused", "user", claims.Subject, "reason", "per-user limit", "limit", s.opts.MaxMCPPerUser)
		msg := fmt.Sprintf("too many MCP connections for this user: at most %d at once; close one and retry", s.opts.MaxMCPPerUser)
		c.Send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeServerError, "%s", msg)))
		c.Close(websocket.ClosePolicyViolation, msg)
		return
	case err != nil:
		c.Send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeShuttingDown, "the proxy is shutting down")))
		c.Close(websocket.CloseGoingAway, relaywire.ReasonShuttingDown)
		return
	}
	mc.user, mc.id = u, newID(relaywire.PrefixMCPClient)
	mc.authed.Store(true)
	s.nMCP.Add(1)
	s.m.accepted.With("mcp").Inc()
	mc.reply(m.ID, relaywire.HandshakeResult{Authenticated: true, UserID: u.id, MCPClientID: mc.id})
}

func (mc *mcpClient) listExtensions(m *relaywire.Message) {
	list := []relaywire.ExtensionInfo{}
	for _, e := range mc.s.extensionsOf(mc.user.id, "") { // this node's and the cluster's, sorted
		list = append(list, e.info()) // kind and server tell a browser from a bridge's stdio server
	}
	mc.reply(m.ID, relaywire.ListExtensionsResult{Extensions: list})
}

func (mc *mcpClient) connect(m *relaywire.Message) {
	s, c := mc.s, mc.c
	var p relaywire.ConnectParams
	if m.Params == nil || json.Unmarshal(m.Params, &p) != nil || p.ExtensionID == "" {
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeInvalidParams, "invalid params: connect needs params.extension_id (a string from list_extensions)"), "params")
		return
	}
	a, err, reason := mc.attach(p.ExtensionID)
	switch {
	case err == nil:
	case reason == "not_found":
		mc.refuseUnlessOrphaned(m.ID, err, reason)
		return
	case reason == "extension_left":
		// The extension left between the lookup and now: not the
		// client's doing.
		c.answer(m.ID, err, "not_found")
		return
	default:
		c.refuse(m.ID, err, reason)
		return
	}
	mc.reply(m.ID, relaywire.ConnectResult{ConnectionID: a.connID, ExtensionID: a.extID, ExtensionName: a.extName})
	c.Send(statusMessage(true, a.peers, s.opts.Now()))
	a.tellExtension()
}

// attach connects mc to its user's extension extID: a new connection,
// through which its requests are then forwarded. On failure it returns
// the error to answer and the reason it is counted under: "shutdown",
// "not_found" (no such live extension of this user: another user's ids
// find nothing either), "extension_left" (it left while being attached),
// "already_connected"; across nodes also "cluster_down", "cluster_attach"
// and "client_left". The caller tells the extension its new peer count
// (a.tellExtension) once it has told the client. An extension of another
// node of the cluster is reached through it (cluster_link.go).
func (mc *mcpClient) attach(extID string) (attachment, *relaywire.Error, string) {
	s := mc.s
	if s.isClosing() {
		return attachment{}, relaywire.Errorf(relaywire.CodeShuttingDown, "the proxy is shutting down"), "shutdown"
	}
	s.mu.Lock()
	e := mc.user.exts[extID] // only this user's extensions
	s.mu.Unlock()
	if e == nil && s.cluster != nil {
		if p, ok := s.cluster.lookup(mc.user.id, extID); ok {
			return s.cluster.attachRemote(mc, p)
		}
		if s.cluster.down.Load() {
			return attachment{}, relaywire.Errorf(relaywire.CodeServerError,
				"%s on this proxy node, and the cluster's message bus (NATS) is unreachable now, so extensions on other nodes cannot be reached; try again in a moment",
				relaywire.MsgExtensionNotFound), "cluster_down"
		}
	}
	if e == nil {
		return attachment{}, relaywire.Errorf(relaywire.CodeServerError, relaywire.MsgExtensionNotFound), "not_found"
	}
	cn := &connection{id: newID(relaywire.PrefixConnection), mcp: mc, ext: e, pending: make(map[string]time.Time)}
	mc.mu.Lock()
	if mc.conn != nil || mc.remote != nil {
		mc.mu.Unlock()
		return attachment{}, relaywire.Errorf(relaywire.CodeAlreadyConnected, relaywire.MsgAlreadyConnected), "already_connected"
	}
	mc.conn = cn
	orphaned := mc.orphaned
	mc.mu.Unlock()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		mc.mu.Lock()
		mc.conn = nil
		mc.mu.Unlock()
		return attachment{}, relaywire.Errorf(relaywire.CodeServerError, relaywire.MsgExtensionNotFound), "extension_left"
	}
	if orphaned {
		mc.mu.Lock()
		mc.orphaned = false
		mc.mu.Unlock()
	}
	e.conns[cn.id] = cn
	peers := len(e.conns)
	e.mu.Unlock()
	return attachment{connID: cn.id, extID: e.id, extName: e.name, peers: peers, local: e}, nil, ""
}

func (mc *mcpClient) disconnect(m *relaywire.Message) {
	mc.dropConnection(true)
	mc.mu.Lock()
	mc.orphaned = false
	mc.mu.Unlock()
	mc.reply(m.ID, relaywire.DisconnectResult{Disconnected: true})
	mc.c.Send(statusMessage(false, 0, mc.s.opts.Now()))
}

func (mc *mcpClient) forward(m *relaywire.Message, kind relaywire.Kind, now time.Time) {
	s, c := mc.s, mc.c
	cn := mc.current()
	if cn == nil {
		if rc := mc.remoteLink(); rc != nil {
			rc.forward(m, kind)
			return
		}
		if kind == relaywire.KindRequest {
			mc.refuseUnlessOrphaned(m.ID, relaywire.Errorf(relaywire.CodeNotConnected, "not connected to an extension: call %s first (method %q was not forwarded)", relaywire.MethodConnect, m.Method), "not_connected")
		}
		return
	}
	if m.ConnectionID != "" && m.ConnectionID != cn.id {
		if kind == relaywire.KindRequest {
			c.refuse(m.ID, relaywire.Errorf(relaywire.CodeInvalidParams, "connectionId %q is not this client's connection (%s)", m.ConnectionID, cn.id), "connection_id")
		}
		return
	}
	if kind == relaywire.KindNotification {
		if m.Method == relaywire.MethodCancelled {
			mc.cancel(cn, m)
			return
		}
		cn.forwardNotification(m.Method, m.Params)
		return
	}
	if s.isClosing() {
		c.refuse(m.ID, relaywire.Errorf(relaywire.CodeShuttingDown, "the proxy is shutting down; %q was not forwarded", m.Method), "shutdown")
		return
	}
	if err := relaywire.CheckClientID(m.ID); err != nil {
		c.refuse(m.ID, err, "invalid")
		return
	}
	mapped := relaywire.MapID(cn.id, m.ID)
	if err := cn.add(mapped, now); err != nil {
		if err.Code == relaywire.CodeExtensionGone {
			c.answer(m.ID, err, "extension_gone") // it left a moment ago
		} else {
			c.refuse(m.ID, err, "add")
		}
		return
	}
	s.m.forwarded.Inc()
	out := relaywire.AppendRequest(make([]byte, 0, 80+len(mapped)+len(m.Method)+len(m.Params)+len(m.Client)), mapped, m.Method, m.Params)
	if m.Client != nil {
		out = relaywire.AppendClient(out, m.Client) // set by the HTTP sessions only (handle drops a client's)
	}
	if !cn.ext.c.Send(out) {
		if _, ok := cn.take([]byte(mapped)); ok {
			s.m.failed.With("extension_gone").Inc()
			c.Send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeExtensionGone, "the extension disconnected before the request could be sent")))
		}
	}
}

// cancelCall tells the extension that the client gave up the call id
// (its HTTP session ended), on this node or another.
func (mc *mcpClient) cancelCall(id json.RawMessage, reason string) {
	params := relaywire.MarshalParams(map[string]any{"requestId": id, "reason": reason})
	m := &relaywire.Message{Method: relaywire.MethodCancelled, Params: params}
	if cn := mc.current(); cn != nil {
		mc.cancel(cn, m)
	} else if rc := mc.remoteLink(); rc != nil {
		rc.forward(m, relaywire.KindNotification)
	}
}

// cancel forwards a notifications/cancelled with the client's requestId
// mapped to the id the extension knows, exactly as the request was mapped
// (MapID: the id's JSON text, so 1 and "1" stay apart). A cancellation of an
// id that is not in flight on this connection (never sent, already
// answered, another client's) is dropped: the extension never hears of it.
func (mc *mcpClient) cancel(cn *connection, m *relaywire.Message) {
	s := mc.s
	var p map[string]json.RawMessage
	if json.Unmarshal(m.Params, &p) != nil || p == nil || relaywire.CheckID(p["requestId"]) != nil || relaywire.CheckClientID(p["requestId"]) != nil {
		s.m.dropped.With("bad_cancel").Inc()
		return
	}
	mapped := relaywire.MapID(cn.id, p["requestId"])
	if !cn.inFlight([]byte(mapped)) {
		s.m.dropped.With("cancel_not_in_flight").Inc()
		return
	}
	p["requestId"] = relaywire.AppendString(nil, mapped)
	cn.ext.c.Send(relaywire.AppendNotification(nil, relaywire.MethodCancelled, relaywire.MarshalParams(p)))
}
