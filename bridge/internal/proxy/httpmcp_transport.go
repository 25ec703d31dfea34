package proxy

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// Streamable HTTP for the proxy's endpoints: sessions (2025-03-26,
// 2025-06-18, 2025-11-25) and stateless requests (2026-07-28), with the
// rules every MCP endpoint of the project shares (mcphttp). Messages are
// read with relaywire's parser, the one the WebSocket side uses, and travel
// as raw bytes.

// serve serves a request to the endpoint ep from a person the bearer
// check let through.
func (h *httpEndpoint) serve(w http.ResponseWriter, r *http.Request, ep endpoint) {
	user, err := h.userOf(authserver.GrantFrom(r.Context()))
	if err != nil {
		h.s.m.authFail.With("mcp_http").Inc()
		mcphttp.WriteError(w, http.StatusForbidden, nil, relaywire.CodeServerError, sentenceOf(err))
		return
	}
	if h.s.isClosing() {
		w.Header().Set("Retry-After", "5")
		mcphttp.WriteError(w, http.StatusServiceUnavailable, nil, relaywire.CodeShuttingDown, "The proxy is shutting down; try again in a moment.")
		return
	}
	if !mcphttp.CheckVersion(w, r, nil, mcphttp.StreamableVersions) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, user, ep)
	case http.MethodGet:
		h.get(w, r, user, ep)
	case http.MethodDelete:
		ss := h.lookup(r.Header.Get(mcphttp.HeaderSessionID), user, ep)
		if ss == nil {
			sessionNotFound(w, nil)
			return
		}
		ss.close()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest,
			r.Method+" is not a Streamable HTTP method: POST sends messages, GET opens the session's stream, DELETE ends the session")
	}
}

// sentenceOf makes an error's text a sentence.
func sentenceOf(err error) string {
	msg := err.Error()
	if msg == "" {
		return msg
	}
	if c := msg[0]; c >= 'a' && c <= 'z' {
		msg = string(c-'a'+'A') + msg[1:]
	}
	if msg[len(msg)-1] != '.' {
		msg += "."
	}
	return msg
}

func sessionNotFound(w http.ResponseWriter, id json.RawMessage) {
	mcphttp.WriteError(w, http.StatusNotFound, id, rpccode.SessionNotFound,
		"session not found: it ended or expired (or is not yours); initialize a new session")
}

func (h *httpEndpoint) post(w http.ResponseWriter, r *http.Request, user string, ep endpoint) {
	if !mcphttp.CheckPOSTAccept(w, r) || !mcphttp.CheckContentType(w, r) {
		return
	}
	body, r := h.readBody(w, r, user)
	if r == nil {
		return
	}
	defer releaseBody(r)
	var m relaywire.Message
	kind, perr := m.Decode(body)
	if perr != nil {
		mcphttp.WriteError(w, http.StatusBadRequest, m.ID, perr.Code, perr.Message)
		return
	}
	if kind == relaywire.KindRequest {
		if isReservedID(m.ID) {
			mcphttp.WriteError(w, http.StatusBadRequest, m.ID, relaywire.CodeInvalidRequest,
				fmt.Sprintf("invalid id: ids starting with %q or %q are reserved for the proxy and extensions", relaywire.PrefixProxy, relaywire.PrefixExt))
			return
		}
		if e := relaywire.CheckClientID(m.ID); e != nil {
			mcphttp.WriteError(w, http.StatusBadRequest, nil, e.Code, e.Message)
			return
		}
	}
	sid := r.Header.Get(mcphttp.HeaderSessionID)
	switch {
	case sid != "":
		ss := h.lookup(sid, user, ep)
		if ss == nil || !ss.begin() {
			sessionNotFound(w, m.ID)
			return
		}
		defer ss.end()
		ss.serve(w, r, &m, kind)
	case kind == relaywire.KindRequest && m.Method == "initialize":
		h.initialize(w, r, user, ep, &m)
	case mcphttp.IsStatelessRequest(r.Header, m.Params):
		if msg := mcphttp.CheckStandardHeaders(r.Header, kind == relaywire.KindRequest, m.Method, m.Params); msg != "" {
			mcphttp.WriteError(w, http.StatusBadRequest, m.ID, rpccode.InvalidRequest, msg)
			return
		}
		h.stateless(w, r, user, ep, &m, kind)
	default:
		mcphttp.WriteError(w, http.StatusBadRequest, m.ID, rpccode.InvalidRequest,
			"missing "+mcphttp.HeaderSessionID+" header: send initialize first (or, in the 2026-07-28 era, put the protocol version in params._meta)")
	}
}

// open makes a session of user on the endpoint ep, counted among the
// user's MCP clients. On refusal it answers w itself and returns nil.
func (h *httpEndpoint) open(w http.ResponseWriter, r *http.Request, id json.RawMessage, user string, ep endpoint, stateless bool) *httpSession {
	s := h.s
	u, err := s.acquireMCPClient(user)
	switch {
	case errors.Is(err, errUserLimit):
		s.m.connRefused.With("per_user_mcp").Inc()
		s.log.Info("http session refused", "user", user, "reason", "per-user limit", "limit", s.opts.MaxMCPPerUser)
		w.Header().Set("Retry-After", "60")
		mcphttp.WriteError(w, http.StatusTooManyRequests, id, relaywire.CodeServerError, fmt.Sprintf(
			"too many MCP sessions for this user: at most %d at once, WebSocket connections included, and each in use "+
				"(a request in flight or a stream open); end one (DELETE) or wait for one to finish", s.opts.MaxMCPPerUser))
		return nil
	case err != nil:
		w.Header().Set("Retry-After", "5")
		mcphttp.WriteError(w, http.StatusServiceUnavailable, id, relaywire.CodeShuttingDown, "the proxy is shutting down; try again in a moment")
		return nil
	}
	mc := &mcpClient{s: s, user: u, id: newID(relaywire.PrefixMCPClient)}
	ss := &httpSession{h: h, mc: mc, ep: ep, server: ep.server, stateless: stateless, lim: newBucket(s.opts.ConnRate),
		out: mcphttp.NewOutbox(h.opts.ReplayBytes), done: make(chan struct{}),
		waiting: make(map[string]*pendingCall), progress: make(map[string]*mcphttp.PostSink), lastUsed: time.Now(),
		browser: ep.browser}
	if ss.browser == "" && ep.server == "" {
		// As on the bridge; but an OAuth client that checks the resource
		// metadata against its URL (RFC 9728) needs /browsers/ID/mcp.
		ss.browser = r.URL.Query().Get("browser")
	}
	mc.c = ss
	mc.authed.Store(true)
	s.nMCP.Add(1)
	s.m.accepted.With("mcp_http").Inc()
	s.m.conns.With("mcp_http").Inc()
	return ss
}

// initialize opens a session: the endpoint's initialize result (on a
// server's endpoint, the server's own, forwarded), and the session's id in
// Mcp-Session-Id.
func (h *httpEndpoint) initialize(w http.ResponseWriter, r *http.Request, user string, ep endpoint, m *relaywire.Message) {
	if !h.exists(user, ep) {
		endpointNotFound(w, m.ID, ep)
		return
	}
	ss := h.open(w, r, m.ID, user, ep, false)
	if ss == nil {
		return
	}
	ss.id = rand.Text()
	ss.client = clientInfoName(m.Params)
	if ep.server == "" { // a server's endpoint answers with the server's own version
		ss.version = mcphttp.Negotiate(requestedVersion(m.Params), mcphttp.StreamableVersions)
	}
	if c := h.s.cluster; c != nil {
		ss.id = c.sessionIDPrefix() + ss.id // which node holds it (cluster_http.go)
	}
	ss.mu.Lock() // reap reads the timer under the lock
	ss.timer = time.AfterFunc(h.opts.SessionTimeout, ss.reap)
	ss.mu.Unlock()
	if !h.add(ss) {
		ss.close()
		w.Header().Set("Retry-After", "5")
		mcphttp.WriteError(w, http.StatusServiceUnavailable, m.ID, relaywire.CodeShuttingDown, "the proxy is shutting down; try again in a moment")
		return
	}
	ss.begin()
	defer ss.end()
	h.s.log.Debug("http session opened", "user", user, "endpoint", ep.String())
	w.Header().Set(mcphttp.HeaderSessionID, ss.id)
	if ep.server != "" {
		// The server answers initialize itself (the relay opens a session
		// of its gateway for the connection); no answer, no session.
		sink := &mcphttp.PostSink{}
		ss.forward(m, sink)
		releaseBody(r)
		if reply := sink.WriteTo(w, r, m.ID, ss.done); reply == nil || isErrorReply(reply) {
			ss.close()
		}
		return
	}
	// Connected from the start when a browser is there, so that its
	// list_changed reaches the session's stream.
	_ = ss.connect()
	w.Header().Set("Content-Type", mcphttp.ContentTypeJSON)
	_, _ = w.Write(relaywire.AppendResult(nil, m.ID, browserInitResult(ss.version)))
}

// requestedVersion is the protocolVersion an initialize asks for.
func requestedVersion(params json.RawMessage) string {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	return p.ProtocolVersion
}

// isErrorReply reports whether a JSON-RPC reply carries an error.
func isErrorReply(reply []byte) bool {
	var m relaywire.Message
	_, perr := m.Decode(reply)
	return perr != nil || m.Error != nil
}

// exists reports whether the user has what the endpoint serves now: a
// server of that name, a browser of that id (the browsers' endpoint is
// always there, with or without browsers).
func (h *httpEndpoint) exists(user string, ep endpoint) bool {
	switch {
	case ep.server != "":
		return h.s.serverExtension(user, ep.server) != nil
	case ep.browser != "":
		for _, e := range h.s.extensionsOf(user, relaywire.ExtensionKindBrowser) {
			if e.id == ep.browser {
				return true
			}
		}
		return false
	}
	return true
}

// endpointNotFound answers a request for a server or browser the user has
// not: the same words whether another user has one of that name or nobody
// has.
func endpointNotFound(w http.ResponseWriter, id json.RawMessage, ep endpoint) {
	msg := fmt.Sprintf("no MCP server named %q of yours is connected to this proxy; a bridge relaying to it offers the servers of its gateway under their names", ep.server)
	if ep.server == "" {
		msg = fmt.Sprintf("no browser of yours with id %q is connected to this proxy; list_browsers at /mcp gives the ids", ep.browser)
	}
	mcphttp.WriteError(w, http.StatusNotFound, id, rpccode.InvalidRequest, msg)
}

// stateless serves one 2026-07-28 request: a session that lives as long
// as the request (the browser is the default, or the endpoint's).
func (h *httpEndpoint) stateless(w http.ResponseWriter, r *http.Request, user string, ep endpoint, m *relaywire.Message, kind relaywire.Kind) {
	if kind != relaywire.KindRequest {
		// Nothing outlives the request a notification or answer could
		// be about.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !h.exists(user, ep) {
		endpointNotFound(w, m.ID, ep)
		return
	}
	if ep.server == "" && m.Method == "server/discover" {
		w.Header().Set("Content-Type", mcphttp.ContentTypeJSON)
		_, _ = w.Write(relaywire.AppendResult(nil, m.ID, browserDiscoverResult()))
		return
	}
	ss := h.open(w, r, m.ID, user, ep, true)
	if ss == nil {
		return
	}
	ss.version = mcphttp.VersionStateless
	defer ss.close()
	ss.begin()
	defer ss.end()
	ss.serve(w, r, m, kind)
}

// serve serves one posted message of the session.
func (ss *httpSession) serve(w http.ResponseWriter, r *http.Request, m *relaywire.Message, kind relaywire.Kind) {
	s := ss.h.s
	now := time.Now()
	rate, who := s.opts.ConnRate, "session"
	ok := ss.lim.Allow(now)
	if ok {
		rate, who = s.opts.UserRate, "user"
		ok = ss.mc.user.lim.Allow(now)
	}
	if !ok {
		s.m.refused.With("rate").Inc()
		w.Header().Set("Retry-After", "1")
		mcphttp.WriteError(w, http.StatusTooManyRequests, m.ID, relaywire.CodeRateLimited,
			fmt.Sprintf("rate limit exceeded: more than %.0f messages per second for this %s", rate, who))
		return
	}
	switch kind {
	case relaywire.KindNotification:
		ss.notification(m)
		w.WriteHeader(http.StatusAccepted)
	case relaywire.KindReply:
		// The answer to an extension's request ("ext:…"): to that
		// extension, if it asked this client; dropped otherwise.
		if !ss.mc.routeReply(m) {
			s.m.dropped.With("mcp_reply").Inc()
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		sink := &mcphttp.PostSink{}
		ss.request(m, sink)
		releaseBody(r) // handed on: the body is not needed while the answer comes
		sink.WriteTo(w, r, m.ID, ss.done)
	}
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

// request serves a client request; the answer reaches sink.
func (ss *httpSession) request(m *relaywire.Message, sink *mcphttp.PostSink) {
	switch m.Method {
	case "initialize":
		sink.Send(mcphttp.ErrorBody(m.ID, rpccode.InvalidRequest, "this session is already initialized; start a new session to initialize again"), true)
	case "ping":
		sink.Send(relaywire.AppendResult(nil, m.ID, json.RawMessage("{}")), true)
	default:
		if ss.server != "" {
			ss.forward(m, sink)
			return
		}
		ss.browserRequest(m, sink)
	}
}

// get serves a session's own stream: messages that belong to no request
// (list_changed), numbered for Last-Event-ID.
func (h *httpEndpoint) get(w http.ResponseWriter, r *http.Request, user string, ep endpoint) {
	if !mcphttp.CheckGETAccept(w, r) {
		return
	}
	sid := r.Header.Get(mcphttp.HeaderSessionID)
	if sid == "" {
		mcphttp.WriteError(w, http.StatusBadRequest, nil, rpccode.InvalidRequest, "GET opens the stream of a session: send its "+mcphttp.HeaderSessionID+" header")
		return
	}
	ss := h.lookup(sid, user, ep)
	if ss == nil || !ss.begin() {
		sessionNotFound(w, nil)
		return
	}
	defer ss.end()
	from, ok := mcphttp.AttachGET(w, r, ss.out, "this session's stream is already open: one GET stream per session", "this session's stream")
	if !ok {
		return
	}
	defer ss.out.Detach()
	h.pump(w, r, ss, from)
}

// pump writes the session's outbox to its stream until the client
// leaves, the session ends or the proxy stops.
func (h *httpEndpoint) pump(w http.ResponseWriter, r *http.Request, ss *httpSession, cursor uint64) {
	fl, ok := w.(http.Flusher)
	if !ok {
		mcphttp.WriteError(w, http.StatusInternalServerError, nil, rpccode.InternalError, "streaming is not supported by this connection")
		return
	}
	mcphttp.SetStreamHeaders(w.Header())
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	ss.out.Pump(r.Context(), w, fl, cursor, h.opts.PingInterval, ss.done, nil)
}

// lookup finds the session sid of user on the endpoint ep; nil if there
// is none (another user's session, or another endpoint's, is none).
func (h *httpEndpoint) lookup(sid, user string, ep endpoint) *httpSession {
	if sid == "" {
		return nil
	}
	h.mu.Lock()
	ss := h.sessions[sid]
	h.mu.Unlock()
	if ss == nil || ss.mc.user.id != user || ss.ep != ep {
		return nil
	}
	return ss
}

// evictIdlest ends the user's least recently used idle session (issue 33,
// item 9: a client that abandons its sessions must not lock its user out);
// false if every session of the user is in use. A session that comes into
// use between the choice and the end is passed over for the next.
func (h *httpEndpoint) evictIdlest(user string) bool {
	type candidate struct {
		ss   *httpSession
		used time.Time
	}
	var list []candidate
	h.mu.Lock()
	for _, ss := range h.sessions {
		if ss.mc.user.id == user {
			list = append(list, candidate{ss: ss})
		}
	}
	h.mu.Unlock()
	for i := range list {
		list[i].used = list[i].ss.lastUse()
	}
	slices.SortFunc(list, func(a, b candidate) int { return a.used.Compare(b.used) })
	for _, c := range list {
		if c.ss.evictIfIdle() {
			h.s.m.evicted.Inc()
			h.s.log.Info("idle http session ended to make room", "user", user, "idle", time.Since(c.used).Round(time.Second))
			return true
		}
	}
	return false
}

// add registers a new session; false when the proxy is stopping.
func (h *httpEndpoint) add(ss *httpSession) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping {
		return false
	}
	h.sessions[ss.id] = ss
	return true
}

func (h *httpEndpoint) drop(ss *httpSession) {
	h.mu.Lock()
	if ss.id != "" && h.sessions[ss.id] == ss {
		delete(h.sessions, ss.id)
	}
	delete(h.listeners, ss)
	h.mu.Unlock()
}

// browserArrived tells the user's HTTP sessions on the browser endpoint
// that have no browser (none was there, or theirs left) that their tools
// may have changed: their next tools/list connects to the newcomer.
func (h *httpEndpoint) browserArrived(user string) {
	h.mu.Lock()
	var list []*httpSession
	for _, ss := range h.sessions {
		if ss.server == "" && ss.mc.user.id == user {
			list = append(list, ss)
		}
	}
	for ss := range h.listeners {
		if ss.mc.user.id == user {
			list = append(list, ss)
		}
	}
	h.mu.Unlock()
	for _, ss := range list {
		if ss.mc.connectedTo() == "" {
			ss.notify(toolsChangedMsg)
		}
	}
}

// stopStreams ends every session's GET stream and every
// subscriptions/listen (the proxy is shutting down: a stream would hold
// the HTTP server's shutdown), leaving the sessions' POSTs to be answered.
func (h *httpEndpoint) stopStreams() {
	h.mu.Lock()
	h.stopping = true
	list := make([]*httpSession, 0, len(h.sessions))
	for _, ss := range h.sessions {
		list = append(list, ss)
	}
	var listens []*httpSession
	for ss := range h.listeners {
		listens = append(listens, ss)
	}
	h.mu.Unlock()
	for _, ss := range list {
		ss.out.Close()
	}
	for _, ss := range listens {
		ss.mu.Lock()
		l := ss.listen
		ss.mu.Unlock()
		l.sink.Send(relaywire.AppendResult(nil, l.id, listenResult(l.id)), true)
	}
}

// subscribe serves subscriptions/listen (2026-07-28): the stream stays
// open, carrying tools/list_changed when asked for, until the client
// leaves or the proxy stops (then the result ends it).
func (ss *httpSession) subscribe(m *relaywire.Message, sink *mcphttp.PostSink) {
	var p struct {
		Notifications *struct {
			ToolsListChanged bool `json:"toolsListChanged"`
		} `json:"notifications"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.Notifications == nil {
		sink.Send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeInvalidParams, "subscriptions/listen needs params.notifications")), true)
		return
	}
	want := p.Notifications.ToolsListChanged
	agreed := map[string]any{}
	if want {
		agreed["toolsListChanged"] = true
	}
	sink.Send(relaywire.AppendNotification(nil, "notifications/subscriptions/acknowledged", relaywire.MarshalParams(map[string]any{
		"notifications": agreed, "_meta": map[string]json.RawMessage{metaSubscriptionID: m.ID}})), false)
	if !want {
		sink.Send(relaywire.AppendResult(nil, m.ID, listenResult(m.ID)), true)
		return
	}
	id := append(json.RawMessage(nil), m.ID...)
	ss.mu.Lock()
	ss.listen = &listener{sink: sink, id: id}
	ss.mu.Unlock()
	h := ss.h
	h.mu.Lock()
	stopping := h.stopping
	if !stopping {
		h.listeners[ss] = struct{}{}
	}
	h.mu.Unlock()
	if stopping {
		sink.Send(relaywire.AppendResult(nil, id, listenResult(id)), true)
		return
	}
	// Connected, so that the browser's list_changed and its leaving reach
	// this stream.
	_ = ss.connect()
}

// listenResult ends a subscriptions/listen stream.
func listenResult(id json.RawMessage) json.RawMessage {
	return relaywire.MarshalParams(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{metaSubscriptionID: id}})
}

// closeAll ends every session.
func (h *httpEndpoint) closeAll() {
	h.mu.Lock()
	list := make([]*httpSession, 0, len(h.sessions))
	for _, ss := range h.sessions {
		list = append(list, ss)
	}
	h.mu.Unlock()
	for _, ss := range list {
		ss.close()
	}
}
