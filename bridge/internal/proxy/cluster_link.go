package proxy

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// Cross-node connections (docs/relay.md, "Cluster"). The client's node
// keeps a remoteConn: it passes the client's messages to the extension's
// node unchanged and tracks the client's calls in flight, so that it can
// answer them itself if that node or NATS goes away. The extension's node
// keeps a shadow mcpClient (link set) joined to the extension by an
// ordinary connection: it maps ids, checks what is in flight, routes
// progress and requests to the client, and its messages to the client go
// back over NATS.
//
// Subjects: PREFIX.n.NODE.u.USERKEY.x.CONN carries a client's messages to
// the extension's node, PREFIX.n.NODE.u.USERKEY.c.CONN the messages for the
// client back to its node, PREFIX.n.NODE.u.USERKEY.attach the requests
// that make a connection. Each node subscribes to PREFIX.n.NODE.> alone.

// Control messages (sealed with the message: cluster_seal.go).
const (
	opDetach   = "detach"   // client's node → extension's node: the client left the connection
	opDetached = "detached" // extension's node → client's node: the extension side ended it

	// Bb-Reason of a detach: the client disconnected (spec 001's
	// disconnect), or it is gone.
	detachDisconnect = "disconnect"
	detachGone       = "gone"
)

// mailboxLimit bounds what waits for one slow connection (its client not
// reading, or its extension's queue full) before it is dropped: the
// node's one NATS reader never waits for anyone.
const mailboxLimit = 4096

// attachTimeout bounds a connect across nodes.
const attachTimeout = 5 * time.Second

type attachRequest struct {
	User   string `json:"user"`
	Ext    string `json:"ext"`
	Conn   string `json:"conn"`
	Client string `json:"client"`
	Node   string `json:"node"`
}

type attachReply struct {
	Name  string           `json:"name,omitempty"`
	Peers int              `json:"peers,omitempty"`
	Error *relaywire.Error `json:"error,omitempty"`
}

// boxItem is one message waiting in a mailbox.
type boxItem struct {
	data   []byte
	op     string // "" for a message, else opDetach or opDetached
	reason string
	strike bool
}

// mailbox runs the messages of one connection in order on a goroutine
// started when the first arrives and ending when none is left, so that
// one slow connection holds up only itself.
type mailbox struct {
	mu      sync.Mutex
	q       []boxItem
	running bool
}

// put queues it for run; fast, if set, may deliver it at once when nothing
// waits before it. False when the mailbox is full.
func (b *mailbox) put(it boxItem, fast func([]byte) bool, run func(boxItem)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running && len(b.q) == 0 && fast != nil && fast(it.data) {
		return true
	}
	if len(b.q) >= mailboxLimit {
		return false
	}
	b.q = append(b.q, it)
	if !b.running {
		b.running = true
		go b.drain(run)
	}
	return true
}

func (b *mailbox) drain(run func(boxItem)) {
	for {
		b.mu.Lock()
		if len(b.q) == 0 {
			b.running = false
			b.q = nil
			b.mu.Unlock()
			return
		}
		it := b.q[0]
		b.q[0] = boxItem{}
		b.q = b.q[1:]
		b.mu.Unlock()
		run(it)
	}
}

func (c *clusterNode) subject(node, uk, kind, conn string) string {
	var b strings.Builder
	b.Grow(len(c.opts.Prefix) + len(node) + len(uk) + len(conn) + 12)
	b.WriteString(c.opts.Prefix)
	b.WriteString(".n.")
	b.WriteString(node)
	b.WriteString(".u.")
	b.WriteString(uk)
	b.WriteByte('.')
	b.WriteString(kind)
	if conn != "" {
		b.WriteByte('.')
		b.WriteString(conn)
	}
	return b.String()
}

func (c *clusterNode) publish(subject string, data []byte, op, reason string, strike bool) error {
	if c.down.Load() {
		return nats.ErrConnectionReconnecting
	}
	return c.nc.Publish(subject, c.sealMessage(subject, data, op, reason, strike))
}

// receive is the node's one NATS reader. It never blocks: a message is
// opened (cluster_seal.go: what does not open is dropped and counted),
// checked against the link it names (its user must be the link's) and
// queued on that link's mailbox.
func (c *clusterNode) receive(msg *nats.Msg) {
	rest := strings.TrimPrefix(msg.Subject, c.inbox)
	// u.USERKEY.KIND[.CONN]
	parts := strings.SplitN(rest, ".", 4)
	if len(parts) < 3 || parts[0] != "u" {
		c.m.dropped.With("bad_subject").Inc()
		return
	}
	uk, kind := parts[1], parts[2]
	conn := ""
	if len(parts) == 4 {
		conn = parts[3]
	}
	if kind != "attach" && kind != "x" && kind != "c" && kind != "e" {
		c.m.dropped.With("bad_subject").Inc()
		return
	}
	it, err := c.openMessage("message", msg.Subject, msg.Data)
	if err != nil {
		return
	}
	switch kind {
	case "attach":
		go c.serveAttach(uk, msg, it.data)
	case "x":
		c.toExtension(uk, conn, it)
	case "c":
		c.toClient(uk, conn, it)
	case "e":
		c.serveEnded(uk, it.data)
	default:
		c.m.dropped.With("bad_subject").Inc()
	}
}

// The extension's node.

// shadowLink is the cluster side of a shadow mcpClient: where its messages
// to the client go (it is the shadow's mcpConn), and its mailbox.
type shadowLink struct {
	c        *clusterNode
	node     string // the client's node
	uk       string
	connID   string
	toClient string
	box      mailbox
	// muted: the client's node left the connection and answered its
	// client itself; nothing more goes back.
	muted atomic.Bool
}

func (l *shadowLink) Send(msg []byte) bool {
	if l.muted.Load() {
		return false
	}
	return l.c.publish(l.toClient, msg, "", "", false) == nil
}

func (l *shadowLink) TrySend(msg []byte) bool { return l.Send(msg) }

func (l *shadowLink) refuse(id []byte, e *relaywire.Error, reason string) {
	l.c.s.m.refused.With(reason).Inc()
	if l.muted.Load() {
		return
	}
	_ = l.c.publish(l.toClient, relaywire.AppendError(nil, id, e), "", "", true)
}

func (l *shadowLink) answer(id []byte, e *relaywire.Error, reason string) {
	l.c.s.m.refused.With(reason).Inc()
	if l.muted.Load() {
		return
	}
	_ = l.c.publish(l.toClient, relaywire.AppendError(nil, id, e), "", "", false)
}

var _ mcpConn = (*shadowLink)(nil)

// serveAttach connects another node's client to one of this node's
// extensions: a shadow client, joined by an ordinary connection.
func (c *clusterNode) serveAttach(uk string, msg *nats.Msg, data []byte) {
	var req attachRequest
	respond := func(r attachReply) error {
		b, _ := json.Marshal(r)
		return msg.Respond(c.ring.SealMessage(msg.Reply, nil, b))
	}
	fail := func(e *relaywire.Error) { _ = respond(attachReply{Error: e}) }
	if msg.Reply == "" || json.Unmarshal(data, &req) != nil || req.User == "" || !c.ring.IsUserKey(uk, req.User) ||
		!strings.HasPrefix(req.Conn, relaywire.PrefixConnection) || strings.ContainsAny(req.Conn, ".*> ") || !validNodeName.MatchString(req.Node) {
		c.m.dropped.With("bad_attach").Inc()
		fail(relaywire.Errorf(relaywire.CodeInvalidRequest, "invalid cluster attach request"))
		return
	}
	s := c.s
	if s.isClosing() {
		fail(relaywire.Errorf(relaywire.CodeShuttingDown, "the proxy node that holds the extension is shutting down"))
		return
	}
	s.mu.Lock()
	var e *extension
	u := s.users[req.User]
	if u != nil {
		e = u.exts[req.Ext] // only this user's extensions
	}
	s.mu.Unlock()
	if e == nil {
		fail(relaywire.Errorf(relaywire.CodeServerError, relaywire.MsgExtensionNotFound))
		return
	}
	link := &shadowLink{c: c, node: req.Node, uk: uk, connID: req.Conn, toClient: c.subject(req.Node, uk, "c", req.Conn)}
	sh := &mcpClient{s: s, c: link, link: link, id: req.Client, user: u}
	sh.authed.Store(true)
	cn := &connection{id: req.Conn, mcp: sh, ext: e, pending: make(map[string]time.Time)}
	sh.conn = cn
	c.mu.Lock()
	if _, dup := c.shadows[cn.id]; dup {
		c.mu.Unlock()
		fail(relaywire.Errorf(relaywire.CodeDuplicateID, "connection id already in use"))
		return
	}
	c.shadows[cn.id] = sh
	c.mu.Unlock()
	e.mu.Lock()
	_, taken := e.conns[cn.id]
	if e.closed || taken {
		e.mu.Unlock()
		c.forgetShadow(sh)
		fail(relaywire.Errorf(relaywire.CodeServerError, relaywire.MsgExtensionNotFound))
		return
	}
	e.conns[cn.id] = cn
	peers := len(e.conns)
	e.mu.Unlock()
	if err := respond(attachReply{Name: e.name, Peers: peers}); err != nil {
		// The client's node will not know of the connection.
		c.dropShadow(sh)
		return
	}
	e.sendStatus()
}

// toExtension queues a client's message for its shadow.
func (c *clusterNode) toExtension(uk, connID string, it boxItem) {
	c.mu.Lock()
	sh := c.shadows[connID]
	c.mu.Unlock()
	if sh == nil {
		c.m.dropped.With("unknown_connection").Inc()
		return
	}
	if sh.link.uk != uk {
		c.m.dropped.With("user_mismatch").Inc()
		return
	}
	it.strike = false // only the extension's node strikes a client
	if !sh.link.box.put(it, nil, func(it boxItem) { c.runShadow(sh, it) }) {
		// The extension is not keeping up with this client: its calls
		// are refused until the mailbox drains.
		c.m.dropped.With("mailbox_full").Inc()
		var m relaywire.Message
		if kind, perr := m.Decode(it.data); perr == nil && kind == relaywire.KindRequest {
			sh.c.answer(m.ID, relaywire.Errorf(relaywire.CodeRateLimited, "the extension is not keeping up with this client's requests: try again"), "mailbox_full")
		}
	}
}

func (c *clusterNode) runShadow(sh *mcpClient, it boxItem) {
	if it.op == opDetach {
		// The client's node answered its client's calls; the extension
		// is told as on one node: a disconnect, or a client gone.
		sh.link.muted.Store(true)
		sh.dropConnection(it.reason == detachDisconnect)
		c.forgetShadow(sh)
		return
	}
	var m relaywire.Message
	kind, perr := m.Decode(it.data)
	if perr != nil {
		c.m.dropped.With("invalid").Inc()
		return
	}
	switch kind {
	case relaywire.KindRequest, relaywire.KindNotification:
		sh.forward(&m, kind, time.Now())
	case relaywire.KindReply:
		if !sh.routeReply(&m) {
			c.m.dropped.With("reply").Inc()
		}
	}
}

// dropShadow ends a shadow's connection without telling the client (its
// node left it, or is gone) and forgets it.
func (c *clusterNode) dropShadow(sh *mcpClient) {
	sh.dropConnection(false)
	c.forgetShadow(sh)
}

func (c *clusterNode) forgetShadow(sh *mcpClient) {
	c.mu.Lock()
	if c.shadows[sh.link.connID] == sh {
		delete(c.shadows, sh.link.connID)
	}
	c.mu.Unlock()
}

// shadowDetached tells the client's node that the extension side ended the
// connection (after the calls in flight were answered through the link).
func (c *clusterNode) shadowDetached(sh *mcpClient, reason string) {
	c.forgetShadow(sh)
	_ = c.publish(sh.link.toClient, nil, opDetached, reason, false)
}

// The client's node.

// remoteConn is a client's connection to an extension on another node.
type remoteConn struct {
	c            *clusterNode
	mc           *mcpClient
	id, node, uk string
	extID        string
	toExt        string
	ready        chan struct{} // closed when the attach is answered

	mu       sync.Mutex
	inflight map[string]time.Time // the client's ids (JSON text) of calls forwarded
	closed   bool
	box      mailbox
}

// attachRemote connects mc to its user's extension p on another node.
func (c *clusterNode) attachRemote(mc *mcpClient, p presenceEntry) (attachment, *relaywire.Error, string) {
	if c.down.Load() {
		return attachment{}, relaywire.Errorf(relaywire.CodeServerError, "the extension is on another proxy node and the cluster's message bus (NATS) is unreachable now; try again"), "cluster_down"
	}
	uk := c.ring.UserKey(mc.user.id)
	rc := &remoteConn{c: c, mc: mc, id: newID(relaywire.PrefixConnection), node: p.Node, uk: uk,
		extID: p.ID, ready: make(chan struct{}), inflight: make(map[string]time.Time)}
	rc.toExt = c.subject(p.Node, uk, "x", rc.id)
	mc.mu.Lock()
	if mc.conn != nil || mc.remote != nil {
		mc.mu.Unlock()
		return attachment{}, relaywire.Errorf(relaywire.CodeAlreadyConnected, relaywire.MsgAlreadyConnected), "already_connected"
	}
	if mc.left {
		mc.mu.Unlock()
		return attachment{}, relaywire.Errorf(relaywire.CodeNotConnected, "the client has left"), "client_left"
	}
	mc.remote = rc // claimed now; requests wait for ready
	orphaned := mc.orphaned
	mc.mu.Unlock()
	c.mu.Lock()
	c.remote[rc.id] = rc
	c.mu.Unlock()

	body, _ := json.Marshal(attachRequest{User: mc.user.id, Ext: p.ID, Conn: rc.id, Client: mc.id, Node: c.opts.Node})
	var reply attachReply
	attachSubject := c.subject(p.Node, uk, "attach", "")
	msg, err := c.nc.Request(attachSubject, c.sealMessage(attachSubject, body, "", "", false), attachTimeout)
	if err == nil {
		var plain []byte
		if plain, err = c.ring.OpenMessage("attach_reply", msg.Subject, msg.Data); err == nil {
			err = json.Unmarshal(plain, &reply)
		}
	}
	undo := func() {
		rc.mu.Lock()
		rc.closed = true
		rc.mu.Unlock()
		c.forgetRemote(rc)
		mc.mu.Lock()
		if mc.remote == rc {
			mc.remote = nil
		}
		mc.mu.Unlock()
		close(rc.ready)
	}
	switch {
	case err != nil:
		undo()
		return attachment{}, relaywire.Errorf(relaywire.CodeServerError, "the proxy node that holds the extension did not answer (%v); try again", err), "cluster_attach"
	case reply.Error != nil:
		undo()
		if reply.Error.Message == relaywire.MsgExtensionNotFound {
			return attachment{}, reply.Error, "extension_left"
		}
		return attachment{}, reply.Error, "cluster_attach"
	}
	mc.mu.Lock()
	left := mc.left || mc.remote != rc
	if !left && orphaned {
		mc.orphaned = false
	}
	mc.mu.Unlock()
	close(rc.ready)
	if left {
		rc.close(false)
		return attachment{}, relaywire.Errorf(relaywire.CodeNotConnected, "the client has left"), "client_left"
	}
	return attachment{connID: rc.id, extID: p.ID, extName: reply.Name, peers: reply.Peers}, nil, ""
}

func (c *clusterNode) forgetRemote(rc *remoteConn) {
	c.mu.Lock()
	if c.remote[rc.id] == rc {
		delete(c.remote, rc.id)
	}
	c.mu.Unlock()
}

// forward passes a client's request or notification on to the
// extension's node; requests are tracked until their answer comes back.
func (rc *remoteConn) forward(m *relaywire.Message, kind relaywire.Kind) {
	<-rc.ready
	mc, c := rc.mc, rc.c
	s := c.s
	if m.ConnectionID != "" && m.ConnectionID != rc.id {
		if kind == relaywire.KindRequest {
			mc.c.refuse(m.ID, relaywire.Errorf(relaywire.CodeInvalidParams, "connectionId %q is not this client's connection (%s)", m.ConnectionID, rc.id), "connection_id")
		}
		return
	}
	if kind == relaywire.KindNotification {
		if c.publish(rc.toExt, relaywire.AppendNotification(nil, m.Method, m.Params), "", "", false) != nil {
			c.m.dropped.With("publish").Inc()
		}
		return
	}
	if s.isClosing() {
		mc.c.refuse(m.ID, relaywire.Errorf(relaywire.CodeShuttingDown, "the proxy is shutting down; %q was not forwarded", m.Method), "shutdown")
		return
	}
	if err := relaywire.CheckClientID(m.ID); err != nil {
		mc.c.refuse(m.ID, err, "invalid")
		return
	}
	key := string(m.ID)
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		mc.c.answer(m.ID, relaywire.Errorf(relaywire.CodeExtensionGone, "the extension disconnected"), "extension_gone")
		return
	}
	if _, dup := rc.inflight[key]; dup {
		rc.mu.Unlock()
		mc.c.refuse(m.ID, relaywire.Errorf(relaywire.CodeDuplicateID, "a request with this id is still in flight on this connection"), "add")
		return
	}
	rc.inflight[key] = time.Now()
	rc.mu.Unlock()
	s.inflight.Add(1)
	c.m.forwarded.Inc()
	out := relaywire.AppendRequestRawID(make([]byte, 0, 64+len(m.ID)+len(m.Method)+len(m.Params)+len(m.Client)), m.ID, m.Method, m.Params)
	if m.Client != nil {
		out = relaywire.AppendClient(out, m.Client) // the extension's node passes it on
	}
	if err := c.publish(rc.toExt, out, "", "", false); err != nil {
		if _, ok := rc.take(key); ok {
			s.m.failed.With("cluster_publish").Inc()
			mc.c.Send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeExtensionGone, "the request could not be passed to the proxy node that holds the extension (%v)", err)))
		}
	}
}

// reply passes the client's answer to an extension's request ("ext:…") on.
func (rc *remoteConn) reply(m *relaywire.Message) {
	<-rc.ready
	if rc.c.publish(rc.toExt, clientAnswer(m), "", "", false) != nil {
		rc.c.m.dropped.With("publish").Inc()
	}
}

func (rc *remoteConn) take(key string) (time.Time, bool) {
	rc.mu.Lock()
	t, ok := rc.inflight[key]
	if ok {
		delete(rc.inflight, key)
	}
	rc.mu.Unlock()
	if ok {
		rc.c.s.inflight.Add(-1)
	}
	return t, ok
}

// toClient queues a message from the extension's node for the client. A
// reply is delivered only if its call is still tracked here: a call this
// node already answered (its node went away a moment ago) is not answered
// twice.
func (c *clusterNode) toClient(uk, connID string, it boxItem) {
	c.mu.Lock()
	rc := c.remote[connID]
	c.mu.Unlock()
	if rc == nil {
		c.m.dropped.With("unknown_connection").Inc()
		return
	}
	if rc.uk != uk {
		c.m.dropped.With("user_mismatch").Inc()
		return
	}
	if it.op == "" {
		var m relaywire.Message
		kind, perr := m.Decode(it.data)
		if perr != nil {
			c.m.dropped.With("invalid").Inc()
			return
		}
		if kind == relaywire.KindReply {
			start, ok := rc.take(string(m.ID))
			if !ok {
				c.m.dropped.With("reply_untracked").Inc()
				return
			}
			c.m.callTime.Observe(time.Since(start).Seconds())
		}
	}
	var fast func([]byte) bool
	if it.op == "" && !it.strike {
		fast = rc.mc.c.TrySend
	}
	if !rc.box.put(it, fast, rc.run) {
		// The client reads nothing: it is dropped as a slow consumer.
		c.m.dropped.With("mailbox_full").Inc()
		if ws := rc.mc.ws; ws != nil {
			ws.Close(1008, "too slow: the client does not read its messages")
		}
	}
}

func (rc *remoteConn) run(it boxItem) {
	mc := rc.mc
	if it.op == opDetached {
		reason := it.reason
		if reason == "" {
			reason = relaywire.ReasonExtensionGone
		}
		rc.fail("the extension disconnected before answering", reason)
		return
	}
	mc.c.Send(it.data)
	if it.strike && mc.ws != nil && mc.ws.strike(time.Now()) {
		mc.ws.Close(1008, "too many refused messages")
	}
}

// fail ends the connection from the extension's side (it left, its node
// went away, NATS did): the calls still tracked are answered with msg, the
// client gets `disconnected` with the reason.
func (rc *remoteConn) fail(msg, reason string) {
	rc.failWith(relaywire.CodeExtensionGone, msg, reason)
}

// failWith is fail with the calls' error code.
func (rc *remoteConn) failWith(code int, msg, reason string) {
	pending := rc.end()
	if pending == nil {
		return // ended already
	}
	mc, s := rc.mc, rc.c.s
	if len(pending) > 0 {
		why := "extension_gone"
		if code == relaywire.CodeShuttingDown {
			why = "shutdown"
		}
		s.m.failed.With(why).Add(float64(len(pending)))
	}
	e := relaywire.Errorf(code, "%s", msg)
	for id := range pending {
		mc.c.Send(relaywire.AppendError(nil, json.RawMessage(id), e))
	}
	mc.mu.Lock()
	mine := mc.remote == rc
	if mine {
		mc.remote = nil
		mc.orphaned = true
	}
	mc.mu.Unlock()
	if mine {
		mc.c.Send(relaywire.AppendNotification(nil, relaywire.MethodDisconnected, relaywire.MarshalParams(relaywire.DisconnectedParams{
			ConnectionID: rc.id, Reason: reason,
		})))
	}
}

// end marks the connection closed and returns its calls in flight (nil if
// it was closed already).
func (rc *remoteConn) end() map[string]time.Time {
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		return nil
	}
	rc.closed = true
	pending := rc.inflight
	rc.inflight = nil
	rc.mu.Unlock()
	rc.c.s.inflight.Add(-int64(len(pending)))
	rc.c.forgetRemote(rc)
	if pending == nil {
		pending = map[string]time.Time{}
	}
	return pending
}

// close ends the connection from the client's side (disconnect, or the
// client left): its calls in flight are answered if tell is set, and the
// extension's node is told to end its side.
func (rc *remoteConn) close(tell bool) {
	pending := rc.end()
	if pending == nil {
		return
	}
	s := rc.c.s
	if len(pending) > 0 {
		reason := "client_gone"
		if tell {
			reason = "extension_gone"
		}
		s.m.failed.With(reason).Add(float64(len(pending)))
	}
	if tell {
		e := relaywire.Errorf(relaywire.CodeExtensionGone, "the client disconnected from the extension before it answered")
		for id := range pending {
			rc.mc.c.Send(relaywire.AppendError(nil, json.RawMessage(id), e))
		}
	}
	why := detachGone
	if tell {
		why = detachDisconnect
	}
	if err := rc.c.publish(rc.toExt, nil, opDetach, why, false); err != nil {
		// The other node will drop its side when it sees this one's
		// NATS link or heartbeats gone.
		rc.c.m.dropped.With("publish").Inc()
	}
}

// shutdownClients ends this node's clients' connections to other nodes
// as a shutdown ends local ones: calls in flight answered -32007, then
// `disconnected` ("Proxy shutting down"); the other nodes drop their side.
func (c *clusterNode) shutdownClients() {
	rcs, _ := c.linksWith("")
	for _, rc := range rcs {
		rc.failWith(relaywire.CodeShuttingDown, "the proxy is shutting down", relaywire.ReasonShuttingDown)
		_ = c.publish(rc.toExt, nil, opDetach, detachGone, false)
	}
}

// attachment is what attach made: a connection to a local extension, or
// to one on another node.
type attachment struct {
	connID, extID, extName string
	peers                  int
	local                  *extension // nil for a remote one: its node told it
}

// tellExtension sends a local extension its new peer count.
func (a attachment) tellExtension() {
	if a.local != nil {
		a.local.sendStatus()
	}
}

// endedNotice is a session's end passed to the node of a browser its calls
// went to (subject PREFIX.n.NODE.u.USERKEY.e): the session lived on another
// node, whose HTTP side ended it (httpmcp_session.go, tellSessionEnded), or
// a node that kept it for the browser away saw the browser back there
// (Passed, cluster_ended.go).
type endedNotice struct {
	User      string `json:"user"`
	Extension string `json:"extension"`
	Key       string `json:"key"`
	Client    string `json:"client,omitempty"`
	Passed    bool   `json:"passed,omitempty"`
}

// tellEnded passes a session's end on to the live node that holds the
// user's browser ext; false when no other node holds it (or NATS did not
// take the message), and the caller keeps the notice.
func (c *clusterNode) tellEnded(user, ext string, p relaywire.SessionEndedParams) bool {
	pe, ok := c.lookup(user, ext)
	if !ok || pe.Kind != relaywire.ExtensionKindBrowser {
		return false
	}
	return c.passEnded(pe.Node, user, ext, p, false)
}

func (c *clusterNode) passEnded(node, user, ext string, p relaywire.SessionEndedParams, passed bool) bool {
	data, err := json.Marshal(endedNotice{User: user, Extension: ext, Key: p.Key, Client: p.Client, Passed: passed})
	if err != nil {
		return false
	}
	return c.publish(c.subject(node, c.ring.UserKey(user), "e", ""), data, "", "", false) == nil
}

// keepAway keeps a notice for the user's browser ext, away now, where any
// node it comes back to finds it (cluster_ended.go), or in this node's
// memory when the cluster's bucket cannot take it; then settles it unless
// it was passed on by a settle already. The keeps of a node run one at a
// time off the caller (a round trip to JetStream each), so that a burst
// of sessions ending for one browser does not race for its entry.
func (c *clusterNode) keepAway(user, ext string, p relaywire.SessionEndedParams, settle bool) {
	data, err := json.Marshal(endedNotice{User: user, Extension: ext, Key: p.Key, Client: p.Client, Passed: !settle})
	if err == nil && c.keepBox.put(boxItem{data: data}, nil, c.runKeep) {
		return
	}
	if !c.s.ended.add(ext, p) {
		c.s.log.Debug("a session's end is not kept for its browser, away: too many kept", "user", user, "extension", ext)
	}
}

func (c *clusterNode) runKeep(it boxItem) {
	var n endedNotice
	if json.Unmarshal(it.data, &n) != nil {
		return
	}
	p := relaywire.SessionEndedParams{Key: n.Key, Client: n.Client}
	switch {
	case c.keepEnded(n.User, n.Extension, p):
		if !n.Passed {
			c.settleKept(n.User, n.Extension)
		}
	case !c.s.ended.add(n.Extension, p):
		c.s.log.Debug("a session's end is not kept for its browser, away: too many kept", "user", n.User, "extension", n.Extension)
	}
}

// serveEnded tells this node's browser of another node's session end; a
// browser that left meanwhile is told when it is back on any node, as for
// a session of this node's own (cluster_ended.go).
func (c *clusterNode) serveEnded(uk string, data []byte) {
	var n endedNotice
	if json.Unmarshal(data, &n) != nil || n.User == "" || n.Extension == "" || n.Key == "" {
		c.m.dropped.With("bad_ended").Inc()
		return
	}
	if !c.ring.IsUserKey(uk, n.User) {
		c.m.dropped.With("user_mismatch").Inc()
		return
	}
	p := relaywire.SessionEndedParams{Key: n.Key, Client: n.Client}
	e := c.s.localExtension(n.User, n.Extension) // only this user's extensions
	switch {
	case e != nil && e.kind == relaywire.ExtensionKindBrowser:
		e.c.Send(sessionEndedMsg(p))
	case e != nil:
		c.m.dropped.With("bad_ended").Inc() // a server extension has no tab groups
	default:
		c.keepAway(n.User, n.Extension, p, !n.Passed)
	}
}
