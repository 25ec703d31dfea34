package proxy

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// httpSession is the proxy's side of one session of the engine
// (httpmcp_target.go): a Streamable HTTP session or one stateless request
// of the 2026-07-28 era. It is the mcpConn of its mcpClient: what the
// relay machinery sends the client (answers, progress, list_changed,
// disconnected) arrives in Send and is sorted onto the HTTP response it
// belongs to: an answer onto the POST of its request, progress onto the
// POST of the request it is about (by its progress token, which MCP makes
// unique among a client's requests in flight), anything else onto the
// session's GET stream.
//
// Its mutex is a leaf: held briefly, never while calling into the
// mcpClient, whose methods may call Send back.
type httpSession struct {
	hs        *mcphttp.Session
	h         *httpEndpoint
	mc        *mcpClient
	ep        endpoint
	server    string // ep.server: "" on a browser endpoint
	stateless bool
	client    string            // clientInfo.name of initialize (httpmcp_client.go)
	lim       *httpguard.Bucket // the session's rate (Options.ConnRate)

	mu       sync.Mutex
	waiting  map[string]*pendingCall // the client's requests forwarded and not yet answered, by id (JSON text)
	progress map[string]mcphttp.Sink // progress token (JSON text) → the stream of its request
	browser  string                  // the extension select_browser (or ?browser=) chose; "" for the default
	named    string                  // its name, when select_browser chose it
	listen   *listener               // a stateless request's subscriptions/listen stream, if it is one
	reached  map[string]struct{}     // the browsers (extension ids) its tools/calls went to: told when it ends
	closed   bool
}

// notification handles a client notification: on the browser endpoint,
// initialized is the session's own; the rest (cancellations above all) go
// the way a WebSocket client's do.
func (ss *httpSession) notification(m *relaywire.Message) {
	if m.Method == "notifications/initialized" && ss.server == "" {
		return
	}
	if ss.mc.connectedTo() == "" {
		ss.h.s.m.dropped.With("http_not_connected").Inc()
		return
	}
	ss.mc.forward(m, relaywire.KindNotification, time.Now())
}

// request serves a client request (the engine answers ping and a second
// initialize); the answer reaches sink.
func (ss *httpSession) request(m *relaywire.Message, sink mcphttp.Sink) {
	if ss.server != "" {
		ss.forward(m, sink)
		return
	}
	ss.browserRequest(m, sink)
}

// pendingCall is a forwarded request: where its answer goes.
type pendingCall struct {
	sink  mcphttp.Sink
	token string // its progress token, if it registered one
	// argumentErrorsAsResult: a browser tools/call in a session of
	// 2025-11-25 or later, where the browser's refusal of bad arguments
	// reaches the client as a tool error (mcphttp.ArgumentErrorAsResult).
	argumentErrorsAsResult bool
}

// Send takes a message the relay machinery has for the client.
func (ss *httpSession) Send(msg []byte) bool {
	ss.deliver(msg)
	return !ss.isClosed()
}

// TrySend is Send: delivering never waits (a POST's or the GET stream's
// queue takes it, or it is dropped).
func (ss *httpSession) TrySend(msg []byte) bool { return ss.Send(msg) }

// refuse answers a request the proxy refused. Over HTTP there are no
// strikes: every request costs its sender a round trip, and the rates
// bound them.
func (ss *httpSession) refuse(id []byte, e *relaywire.Error, reason string) {
	ss.answer(id, e, reason)
}

func (ss *httpSession) answer(id []byte, e *relaywire.Error, reason string) {
	ss.h.s.m.refused.With(reason).Inc()
	ss.deliver(relaywire.AppendError(nil, id, e))
}

// deliver sorts one message for the client (see httpSession).
func (ss *httpSession) deliver(msg []byte) {
	s := ss.h.s
	var m relaywire.Message
	kind, perr := m.Decode(msg)
	if perr != nil {
		s.m.dropped.With("http_invalid").Inc() // the proxy built it: never
		return
	}
	switch kind {
	case relaywire.KindReply:
		ss.mu.Lock()
		p := ss.waiting[string(m.ID)]
		if p != nil {
			delete(ss.waiting, string(m.ID))
			if p.token != "" {
				delete(ss.progress, p.token)
			}
		}
		ss.mu.Unlock()
		if p == nil {
			s.m.dropped.With("http_unknown_id").Inc()
			return
		}
		if p.argumentErrorsAsResult && len(m.Error) > 0 {
			msg = argumentErrorAsResult(&m, msg)
		}
		p.sink.Send(msg, true)
	case relaywire.KindNotification:
		switch {
		case m.Method == relaywire.MethodProgress:
			tok := progressTokenOf(m.Params, false)
			ss.mu.Lock()
			sink := ss.progress[tok]
			ss.mu.Unlock()
			if sink == nil || tok == "" {
				s.m.dropped.With("http_progress_unrouted").Inc()
				return
			}
			sink.Send(msg, false)
		case isListChanged(m.Method):
			ss.notify(msg)
		case m.Method == relaywire.MethodDisconnected:
			// The extension left (calls in flight were answered just
			// before): what the session offers changed with it.
			if ss.server == "" {
				ss.notify(toolsChangedMsg)
			}
		case m.Method == relaywire.MethodStatus:
			// Peer counts are spec 001's news for WebSocket clients.
		default:
			// A server's notification for this client (a log message,
			// resources/updated): as its requests.
			ss.toClient(msg)
		}
	default:
		// A server's request to the client (sampling, elicitation,
		// roots), which the client answers with a POST (serve).
		ss.toClient(msg)
	}
}

// toClient puts a message from the extension for the client on the
// stream of the client's request when exactly one is in flight (then the
// message most likely belongs to it, and a client without a GET stream,
// or a stateless one, still gets it), else on the session's GET stream.
// The relay drops which call it was about; a client reads messages from
// every stream of its session alike.
func (ss *httpSession) toClient(msg []byte) {
	var sink mcphttp.Sink
	ss.mu.Lock()
	if len(ss.waiting) == 1 {
		for _, p := range ss.waiting {
			sink = p.sink
		}
	}
	ss.mu.Unlock()
	if sink != nil {
		sink.Send(msg, false)
		return
	}
	if ss.stateless {
		ss.h.s.m.dropped.With("http_unrouted").Inc()
		return
	}
	ss.hs.Notify(msg)
}

var toolsChangedMsg = relaywire.AppendNotification(nil, relaywire.MethodToolsListChanged, nil)

// notify queues a message for the session's GET stream. A stateless
// request has none: a subscriptions/listen request's stream takes
// tools/list_changed (marked with its subscription's id), others nothing.
func (ss *httpSession) notify(msg []byte) {
	if !ss.stateless {
		ss.hs.Notify(msg)
		return
	}
	ss.mu.Lock()
	l := ss.listen
	ss.mu.Unlock()
	var m relaywire.Message
	if l == nil || func() bool { _, err := m.Decode(msg); return err != nil }() || m.Method != relaywire.MethodToolsListChanged {
		return
	}
	l.sink.Send(relaywire.AppendNotification(nil, m.Method, withSubscriptionID(m.Params, l.id)), false)
}

// listener is a subscriptions/listen request (2026-07-28): the stream its
// notifications go on, and its id, which marks each of them.
type listener struct {
	sink mcphttp.Sink
	id   json.RawMessage
}

// metaSubscriptionID is the _meta key naming the subscriptions/listen
// request a notification belongs to.
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// withSubscriptionID returns params with _meta[metaSubscriptionID] set.
func withSubscriptionID(params json.RawMessage, id json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	_ = json.Unmarshal(params, &top)
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(top["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[metaSubscriptionID] = id
	top["_meta"] = relaywire.MarshalParams(meta)
	return relaywire.MarshalParams(top)
}

// progressTokenOf returns the progress token of a request's params
// (_meta.progressToken, request true) or of a progress notification's
// (progressToken), as its JSON text; "" for none.
func progressTokenOf(params json.RawMessage, request bool) string {
	if len(params) == 0 || !bytes.Contains(params, []byte("progressToken")) {
		return ""
	}
	var tok json.RawMessage
	if request {
		var p struct {
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		if json.Unmarshal(params, &p) != nil {
			return ""
		}
		tok = p.Meta.ProgressToken
	} else {
		var p struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		}
		if json.Unmarshal(params, &p) != nil {
			return ""
		}
		tok = p.ProgressToken
	}
	if len(tok) == 0 || string(tok) == "null" {
		return ""
	}
	return string(tok)
}

// forward sends a client request to the session's extension over its
// connection; the answer reaches sink (transformed by the sink's final
// function, if any). A request whose id is still in flight in the session
// is refused here: its answer would otherwise be taken for the first's.
func (ss *httpSession) forward(m *relaywire.Message, sink mcphttp.Sink) {
	key := string(m.ID)
	tok := progressTokenOf(m.Params, true)
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		sink.Send(mcphttp.ErrorBody(m.ID, rpccode.InternalError, "the session ended before the request could be forwarded"), true)
		return
	}
	if ss.waiting[key] != nil {
		ss.mu.Unlock()
		sink.Send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeDuplicateID, "a request with id %s is still in flight in this session", key)), true)
		return
	}
	p := &pendingCall{sink: sink, argumentErrorsAsResult: m.Method == "tools/call" && ss.server == "" &&
		ss.hs.Version >= mcphttp.VersionToolArgumentErrors}
	if tok != "" && ss.progress[tok] == nil {
		p.token = tok
		ss.progress[tok] = sink
	}
	ss.waiting[key] = p
	ss.mu.Unlock()
	if err := ss.connect(); err != nil {
		ss.settle(m.ID, relaywire.AppendError(nil, m.ID, err))
		return
	}
	// The browser names the session after its client (httpmcp_client.go);
	// a client-sent "client" member is never passed on.
	m.Client = nil
	if m.Method == "tools/call" && ss.server == "" {
		m.Client = relaywire.MarshalParams(ss.clientMeta(m))
		if !ss.stateless {
			ss.reachedBrowser(ss.mc.connectedTo())
		}
	}
	ss.mc.forward(m, relaywire.KindRequest, time.Now())
}

// reachedBrowser notes that a tools/call of the session went to the
// browser ext: the browser keeps a tab group for the session's key
// (httpmcp_client.go), which it is told to end with the session.
func (ss *httpSession) reachedBrowser(ext string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.reached == nil {
		ss.reached = make(map[string]struct{})
	}
	ss.reached[ext] = struct{}{}
}

// tellSessionEnded tells the browsers the session's calls went to that it
// ended for good (session_ended, sessionend.go), so that its tab group
// goes as a local session's does, on this node or on the cluster node that
// holds it now; one away now (its bridge restarting) is told when it is
// back, on this node or, in a cluster, any (cluster_ended.go). Not when
// the proxy stops: with --oauth-state the session carries on after the
// restart, and without, the browsers' relay connections end with the
// proxy, which ends their remote sessions anyway.
func (ss *httpSession) tellSessionEnded(reached map[string]struct{}) {
	s := ss.h.s
	if len(reached) == 0 || s.isClosing() {
		return
	}
	p := relaywire.SessionEndedParams{Key: sessionKey(ss.hs.ID), Client: ss.client}
	for ext := range reached {
		s.mu.Lock()
		e := ss.mc.user.exts[ext]
		s.mu.Unlock()
		switch {
		case e != nil:
			e.c.Send(sessionEndedMsg(p))
		case s.cluster != nil && s.cluster.tellEnded(ss.mc.user.id, ext, p):
			// On another node of the cluster: told there (cluster_link.go).
		case s.cluster != nil:
			// Away: kept where any node it comes back to finds it.
			s.cluster.keepAway(ss.mc.user.id, ext, p, true)
		case !s.ended.add(ext, p):
			s.log.Debug("a session's end is not kept for its browser, away: too many kept", "user", ss.mc.user.id, "extension", ext)
		}
	}
}

// argumentErrorAsResult is a browser's reply to a tools/call as a client
// of 2025-11-25 or later gets it: a refusal of the call's arguments becomes
// a tool error the model corrects its call from (SEP-1303); any other
// reply is msg as it came.
func argumentErrorAsResult(m *relaywire.Message, msg []byte) []byte {
	var e relaywire.Error
	if json.Unmarshal(m.Error, &e) != nil || !mcphttp.ArgumentErrorAsResult(mcphttp.VersionToolArgumentErrors, e.Code, e.Data) {
		return msg
	}
	return relaywire.AppendResult(nil, m.ID, toolErrorResult(mcphttp.ArgumentErrorText(e.Message)))
}

// settle answers a forwarded request with msg, unless its answer came.
func (ss *httpSession) settle(id json.RawMessage, msg []byte) {
	ss.mu.Lock()
	p := ss.waiting[string(id)]
	if p != nil {
		delete(ss.waiting, string(id))
		if p.token != "" {
			delete(ss.progress, p.token)
		}
	}
	ss.mu.Unlock()
	if p != nil {
		p.sink.Send(msg, true)
	}
}

// connect returns the session's connection to its extension, connecting
// first if it has none (a session starts unconnected, and loses its
// connection when the extension leaves; the next request connects again,
// to the same browser or server if it is back).
func (ss *httpSession) connect() *relaywire.Error {
	if ss.mc.connectedTo() != "" {
		return nil
	}
	target, err := ss.target()
	if err != nil {
		return err
	}
	a, err, reason := ss.mc.attach(target)
	switch reason {
	case "":
		a.tellExtension()
		return nil
	case "already_connected": // another request of the session connected it
		if ss.mc.connectedTo() != "" {
			return nil
		}
		return relaywire.Errorf(relaywire.CodeNotConnected, "the connection to the extension ended while it was made; try again")
	case "not_found", "extension_left":
		if ss.server != "" {
			return serverGone(ss.server)
		}
		return relaywire.Errorf(relaywire.CodeNotConnected, "the browser %s left this proxy a moment ago; call list_browsers to see the connected ones", target)
	}
	return err
}

// target is the id of the extension the session's requests go to.
func (ss *httpSession) target() (string, *relaywire.Error) {
	if ss.server != "" {
		e := ss.h.s.serverExtension(ss.mc.user.id, ss.server)
		if e == nil {
			return "", serverGone(ss.server)
		}
		return e.id, nil
	}
	ss.mu.Lock()
	chosen, named := ss.browser, ss.named
	ss.mu.Unlock()
	browsers := ss.h.s.browsersOf(ss.mc.user)
	if chosen != "" {
		for _, e := range browsers {
			if e.id == chosen {
				return e.id, nil
			}
		}
		if ss.ep.browser != "" {
			return "", relaywire.Errorf(relaywire.CodeNotConnected, "your browser %s is not connected to this proxy now; try again when it is back", chosen)
		}
		if named != "" {
			chosen = named + " (" + chosen + ")"
		}
		// Never another browser in its place: the person chose this one.
		return "", relaywire.Errorf(relaywire.CodeNotConnected,
			"the browser %s chosen for this session is not connected to this proxy now (its bridge may still be reconnecting, after a restart of the proxy say): "+
				"try again in a moment, or call list_browsers to see the connected ones and select_browser another", chosen)
	}
	if len(browsers) == 0 {
		return "", relaywire.Errorf(relaywire.CodeNotConnected, noBrowserText)
	}
	return browsers[0].id, nil
}

const noBrowserText = "no browser of yours is connected to this proxy: open the browser with Browser Bridge on a machine " +
	"whose bridge relays to this proxy (relay.url), then try again"

func serverGone(name string) *relaywire.Error {
	return relaywire.Errorf(relaywire.CodeNotConnected, "your MCP server %q is not connected to this proxy now: its bridge (or the server) went away; try again when it is back", name)
}

func (ss *httpSession) isClosed() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.closed
}

// close ends the proxy's side of the session once (the engine's Close):
// its calls still in flight are cancelled at the extension (nobody will
// read their answers), its connection ends, its place among the user's MCP
// clients is given back.
func (ss *httpSession) close() {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return
	}
	ss.closed = true
	waiting, reached := ss.waiting, ss.reached
	ss.waiting, ss.progress = nil, nil
	ss.mu.Unlock()
	for id := range waiting {
		ss.mc.cancelCall(json.RawMessage(id), "the MCP client's session ended")
	}
	ss.mc.leave()
	ss.tellSessionEnded(reached)
	ss.h.mu.Lock()
	delete(ss.h.listeners, ss)
	ss.h.mu.Unlock()
	ss.h.s.m.conns.With("mcp_http").Dec()
}
