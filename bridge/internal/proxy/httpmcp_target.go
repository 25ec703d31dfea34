package proxy

import (
	"context"
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

// Streamable HTTP for the proxy's endpoints is mcphttp's session engine
// (docs/protocol.md, "One session engine"): each endpoint is a Target
// (epTarget) whose sessions are mcpClients (httpSession). What the proxy
// adds goes in through the engine's hooks: bodies read within the body
// budget (bodybudget.go) and parsed by relaywire's parser, the one the
// WebSocket side uses, with its id rules (Decode); each message under the
// session's and the user's rates (Gate); session ids that name their
// cluster node (IDPrefix); sessions found only by their user (Owner); the
// user's cap on MCP clients, WebSocket clients included, at Open.

// callerKey holds, in a request's context, whom it comes from.
type callerKey struct{}

// caller is whom a request comes from: the proxy user, and the browser
// its ?browser= asks for.
type caller struct{ user, browser string }

func callerFrom(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

func userFrom(ctx context.Context) string { return callerFrom(ctx).user }

// newEngine makes the session engine of the HTTP endpoints.
func (h *httpEndpoint) newEngine() *mcphttp.Server {
	opts := mcphttp.ServerOptions{
		Versions:       mcphttp.StreamableVersions,
		SessionTimeout: h.opts.SessionTimeout,
		ReplayBytes:    h.opts.ReplayBytes,
		PingInterval:   h.opts.PingInterval,
		Name:           "this proxy",
		Owner:          func(r *http.Request) string { return userFrom(r.Context()) },
		ReadBody:       h.readBody,
		Decode:         decodeClientMessage,
		Logger:         h.s.log,
	}
	if c := h.s.opts.Cluster; c != nil {
		opts.IDPrefix = c.Node + "." // which node holds it (cluster_http.go)
	}
	return mcphttp.NewServer(opts)
}

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
	// ?browser= as on the bridge; but an OAuth client that checks the
	// resource metadata against its URL (RFC 9728) needs /browsers/ID/mcp.
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, caller{user: user, browser: r.URL.Query().Get("browser")}))
	h.engine.ServeStreamable(w, r, epTarget{h: h, ep: ep})
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

// decodeClientMessage is the engine's Decode: relaywire's parser, and its
// rules for the ids of client requests.
func decodeClientMessage(body []byte) (*mcphttp.Message, int, error) {
	var m relaywire.Message
	kind, perr := m.Decode(body)
	out := &mcphttp.Message{JSONRPC: "2.0", ID: m.ID, Method: m.Method, Params: m.Params, Result: m.Result, Error: m.Error}
	if perr != nil {
		return out, perr.Code, errors.New(perr.Message)
	}
	if kind == relaywire.KindRequest {
		if isReservedID(m.ID) {
			return out, relaywire.CodeInvalidRequest,
				fmt.Errorf("invalid id: ids starting with %q or %q are reserved for the proxy and extensions", relaywire.PrefixProxy, relaywire.PrefixExt)
		}
		if e := relaywire.CheckClientID(m.ID); e != nil {
			return nil, e.Code, errors.New(e.Message)
		}
	}
	return out, 0, nil
}

// relayMessage is m as the relay machinery takes it.
func relayMessage(m *mcphttp.Message) *relaywire.Message {
	return &relaywire.Message{JSONRPC: "2.0", ID: m.ID, Method: m.Method, Params: m.Params, Result: m.Result, Error: m.Error}
}

// epTarget is an endpoint as the engine's Target; its sessions' State is
// their *httpSession, made at Open.
type epTarget struct {
	h  *httpEndpoint
	ep endpoint
}

var (
	_ mcphttp.Target = epTarget{}
	_ mcphttp.Busy   = epTarget{}
	_ mcphttp.Gate   = epTarget{}
)

// Name is the endpoint's path: a session is found on its own endpoint only.
func (t epTarget) Name() string { return t.ep.path() }

// sessionOf is the proxy's side of an engine session; nil before Open.
func sessionOf(hs *mcphttp.Session) *httpSession {
	ss, _ := hs.State.(*httpSession)
	return ss
}

// Open makes the session an MCP client of its user. The browser endpoint
// answers initialize itself; a server's endpoint forwards it to the server,
// whose answer it is (after a restart, the client's original initialize
// re-initializes the server).
func (t epTarget) Open(ctx context.Context, hs *mcphttp.Session, params json.RawMessage) (json.RawMessage, error) {
	h, ep, user := t.h, t.ep, userFrom(ctx)
	if !h.exists(user, ep) {
		return nil, endpointNotFound(ep)
	}
	ss, err := h.open(hs, user, ep)
	if err != nil {
		return nil, err
	}
	if ss.browser == "" && ep.server == "" {
		// select_browser's choice before a restart, else ?browser=.
		if ss.restoreNote(); ss.browser == "" {
			ss.browser = callerFrom(ctx).browser
		}
	}
	hs.State = ss
	if hs.Stateless {
		return nil, nil
	}
	ss.client = clientInfoName(params)
	h.s.log.Debug("http session opened", "user", user, "endpoint", ep.String())
	if ep.server != "" {
		return ss.initializeServer(ctx, params)
	}
	hs.Version = mcphttp.Negotiate(requestedVersion(params), mcphttp.StreamableVersions)
	// Connected from the start when a browser is there, so that its
	// list_changed reaches the session's stream.
	_ = ss.connect()
	return browserInitResult(hs.Version), nil
}

// initializeID is the id of the initialize a server's session forwards
// (the client's own is answered by the engine).
var initializeID = json.RawMessage(`"initialize"`)

// initializeServer forwards initialize to the session's server and waits
// for its answer: the result the client gets, or an error with the
// server's refusal. What the server sends before it goes on the session's
// stream.
func (ss *httpSession) initializeServer(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	sink := &mcphttp.PostSink{}
	ss.forward(&relaywire.Message{JSONRPC: "2.0", ID: initializeID, Method: "initialize", Params: params}, sink)
	reply := sink.Drain(ctx, initializeID, ss.hs.Done(), ss.hs.Notify)
	if reply == nil {
		return nil, ctx.Err()
	}
	var m relaywire.Message
	if _, perr := m.Decode(reply); perr != nil {
		return nil, fmt.Errorf("the server's answer to initialize could not be read: %s", perr.Message)
	}
	if m.Error != nil {
		var e relaywire.Error
		_ = json.Unmarshal(m.Error, &e)
		return nil, &mcphttp.Refusal{Status: http.StatusOK, Code: e.Code, Message: e.Message}
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(m.Result, &p)
	ss.hs.Version = p.ProtocolVersion
	return m.Result, nil
}

// requestedVersion is the protocolVersion an initialize asks for.
func requestedVersion(params json.RawMessage) string {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	return p.ProtocolVersion
}

func (t epTarget) Request(_ context.Context, hs *mcphttp.Session, m *mcphttp.Message, reply mcphttp.Sink) {
	sessionOf(hs).request(relayMessage(m), reply)
}

func (t epTarget) Notification(hs *mcphttp.Session, m *mcphttp.Message) {
	sessionOf(hs).notification(relayMessage(m))
}

// Response takes the answer to an extension's request ("ext:…"): to that
// extension, if it asked this client; dropped otherwise.
func (t epTarget) Response(hs *mcphttp.Session, m *mcphttp.Message) error {
	if !sessionOf(hs).mc.routeReply(relayMessage(m)) {
		t.h.s.m.dropped.With("mcp_reply").Inc()
	}
	return nil
}

func (t epTarget) Close(hs *mcphttp.Session) {
	if ss := sessionOf(hs); ss != nil {
		ss.close()
	}
}

// Discover answers server/discover: the browser endpoint's own; a
// server's endpoint forwards it to the server.
func (t epTarget) Discover(ctx context.Context) (json.RawMessage, error) {
	if !t.h.exists(userFrom(ctx), t.ep) {
		return nil, endpointNotFound(t.ep)
	}
	if t.ep.server != "" {
		return nil, mcphttp.ErrPassOn
	}
	return browserDiscoverResult(), nil
}

// Busy reports whether a call of the session is in flight at its
// extension.
func (t epTarget) Busy(hs *mcphttp.Session) bool {
	ss := sessionOf(hs)
	if ss == nil {
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.waiting) > 0
}

// Admit holds each message to the session's rate, then its user's.
// Over HTTP there are no strikes: every request costs its sender a round
// trip, and the rates bound them.
func (t epTarget) Admit(hs *mcphttp.Session, _ *mcphttp.Message) error {
	s, ss := t.h.s, sessionOf(hs)
	now := time.Now()
	rate, who := s.opts.ConnRate, "session"
	ok := ss.lim.Allow(now)
	if ok {
		rate, who = s.opts.UserRate, "user"
		ok = ss.mc.user.lim.Allow(now)
	}
	if ok {
		return nil
	}
	s.m.refused.With("rate").Inc()
	return &mcphttp.Refusal{Status: http.StatusTooManyRequests, RetryAfter: time.Second, Code: relaywire.CodeRateLimited,
		Message: fmt.Sprintf("rate limit exceeded: more than %.0f messages per second for this %s", rate, who)}
}

// open makes the engine's session hs of user on the endpoint ep an MCP
// client, counted among the user's; the error is a *mcphttp.Refusal.
func (h *httpEndpoint) open(hs *mcphttp.Session, user string, ep endpoint) (*httpSession, error) {
	s := h.s
	u, err := s.acquireMCPClient(user)
	switch {
	case errors.Is(err, errUserLimit):
		s.m.connRefused.With("per_user_mcp").Inc()
		s.log.Info("http session refused", "user", user, "reason", "per-user limit", "limit", s.opts.MaxMCPPerUser)
		return nil, &mcphttp.Refusal{Status: http.StatusTooManyRequests, RetryAfter: time.Minute, Code: relaywire.CodeServerError, Message: fmt.Sprintf(
			"too many MCP sessions for this user: at most %d at once, WebSocket connections included, and each in use "+
				"(a request in flight or a stream open); end one (DELETE) or wait for one to finish", s.opts.MaxMCPPerUser)}
	case err != nil:
		return nil, &mcphttp.Refusal{Status: http.StatusServiceUnavailable, RetryAfter: 5 * time.Second, Code: relaywire.CodeShuttingDown,
			Message: "the proxy is shutting down; try again in a moment"}
	}
	mc := &mcpClient{s: s, user: u, id: newID(relaywire.PrefixMCPClient)}
	ss := &httpSession{hs: hs, h: h, mc: mc, ep: ep, server: ep.server, stateless: hs.Stateless, lim: newBucket(s.opts.ConnRate),
		waiting: make(map[string]*pendingCall), progress: make(map[string]mcphttp.Sink), browser: ep.browser}
	mc.c = ss
	mc.authed.Store(true)
	s.nMCP.Add(1)
	s.m.accepted.With("mcp_http").Inc()
	s.m.conns.With("mcp_http").Inc()
	return ss, nil
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

// endpointNotFound refuses a request for a server or browser the user has
// not: the same words whether another user has one of that name or nobody
// has.
func endpointNotFound(ep endpoint) error {
	msg := fmt.Sprintf("no MCP server named %q of yours is connected to this proxy; a bridge relaying to it offers the servers of its gateway under their names", ep.server)
	if ep.server == "" {
		msg = fmt.Sprintf("no browser of yours with id %q is connected to this proxy; list_browsers at /mcp gives the ids", ep.browser)
	}
	return &mcphttp.Refusal{Status: http.StatusNotFound, Code: rpccode.InvalidRequest, Message: msg}
}

// evictIdlest ends the user's least recently used idle session (issue 33,
// item 9: a client that abandons its sessions must not lock its user out);
// false if every session of the user is in use. A session that comes into
// use between the choice and the end is passed over for the next.
func (h *httpEndpoint) evictIdlest(user string) bool {
	type candidate struct {
		hs   *mcphttp.Session
		used time.Time
	}
	var list []candidate
	h.engine.Sessions(func(hs *mcphttp.Session) {
		if ss := sessionOf(hs); ss != nil && ss.mc.user.id == user {
			list = append(list, candidate{hs: hs, used: hs.LastUsed()})
		}
	})
	slices.SortFunc(list, func(a, b candidate) int { return a.used.Compare(b.used) })
	for _, c := range list {
		if c.hs.EndIfIdle() {
			h.s.m.evicted.Inc()
			h.s.log.Info("idle http session ended to make room", "user", user, "idle", time.Since(c.used).Round(time.Second))
			return true
		}
	}
	return false
}

// browserArrived tells the user's HTTP sessions on the browser endpoint
// that have no browser (none was there, or theirs left) that their tools
// may have changed: their next tools/list connects to the newcomer.
func (h *httpEndpoint) browserArrived(user string) {
	var list []*httpSession
	h.engine.Sessions(func(hs *mcphttp.Session) {
		if ss := sessionOf(hs); ss != nil && ss.server == "" && ss.mc.user.id == user {
			list = append(list, ss)
		}
	})
	h.mu.Lock()
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
	var listens []*httpSession
	for ss := range h.listeners {
		listens = append(listens, ss)
	}
	h.mu.Unlock()
	h.engine.Sessions(func(hs *mcphttp.Session) { hs.Out.Close() })
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
func (ss *httpSession) subscribe(m *relaywire.Message, sink mcphttp.Sink) {
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
