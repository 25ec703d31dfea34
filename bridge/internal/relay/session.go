package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/wsconn"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// metaSession is the _meta key naming whose call a tools/call is
// (docs/protocol.md); the extension keys its tab groups on it.
const metaSession = "browserbridge/session"

// defaultPingPeriod is how often the relay's connections ping the proxy
// unless told otherwise (Options.PingPeriod, RemoteOptions.PingPeriod).
const defaultPingPeriod = 25 * time.Second

// connOptions are the options of a connection to the proxy that pings it
// every ping: one silent for two periods is dropped. A message may be as
// large as the proxy's hard limit (four times relaywire.MaxMessageSize).
func connOptions(ping time.Duration) *wsconn.Options {
	return &wsconn.Options{
		PingPeriod:     ping,
		PongWait:       2 * ping,
		MaxMessageSize: 4 * relaywire.MaxMessageSize,
		ReadLimit:      4 * relaywire.MaxMessageSize,
	}
}

// reasonDropped is told to the browser for calls cut off by a drop.
const reasonDropped = "the relay connection to the proxy dropped; the caller was told the call failed"

// session is one WebSocket connection to the proxy: run's goroutine reads,
// the wsconn.Conn's writer writes.
type session struct {
	a   *agent
	c   *wsconn.Conn
	log *slog.Logger

	ctx    context.Context // ends when the connection does
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // forwarded calls
	authed atomic.Bool

	// gw holds a server extension's gateway sessions; nil for a browser's.
	gw *gwConns

	nextCall atomic.Int64

	// taken is the proxy's server_name_taken, which precedes its closing
	// a server extension's connection: why it ended.
	taken atomic.Pointer[relaywire.ServerNameTakenParams]

	mu       sync.Mutex
	inflight map[string]struct{}                // mapped ids being forwarded
	progress map[string]json.RawMessage         // mapped id → the caller's progress token, while in flight
	conns    map[string]string                  // the browser's session ids seen (connection ids, client keys) → client name, for session.ended
	calls    map[string]chan *relaywire.Message // the relay's own requests to the proxy, by id
}

func newSession(ctx context.Context, a *agent, ws *websocket.Conn, log *slog.Logger) *session {
	s := &session{a: a, c: wsconn.New(ws, connOptions(a.c.opts.PingPeriod)), log: log, inflight: make(map[string]struct{}),
		progress: make(map[string]json.RawMessage), conns: make(map[string]string), calls: make(map[string]chan *relaywire.Message)}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	if a.server != "" {
		s.gw = newGWConns(s, a.c.opts.Servers, a.server)
	}
	return s
}

// run serves the connection until it ends and returns why.
func (s *session) run() error {
	// The bridge stopping, or the browser leaving, closes the connection.
	stop := context.AfterFunc(s.ctx, func() { s.c.Close(websocket.CloseGoingAway, "bridge relay closing") })
	defer stop()

	err := s.readError(s.c.ReadLoop(s.handle, nil))
	s.cancel(err)
	<-s.c.Done()
	s.wg.Wait() // forwarded calls have told the browser they were cut off
	switch {
	case s.gw != nil:
		s.gw.closeAll()
	case errors.Is(context.Cause(s.ctx), context.Canceled):
		// The bridge is stopping (or restarting), not the remote clients:
		// as for local sessions, their tabs stay for the next bridge, where
		// a client that comes back with its key finds them.
	default:
		s.endSessions()
	}
	return err
}

// handle takes one message from the proxy.
func (s *session) handle(data []byte) {
	// A request's params outlive the call (forward), and Parse aliases.
	m, kind, perr := relaywire.Parse(bytes.Clone(data))
	if perr != nil {
		s.log.Warn("bad message from the proxy", "error", perr.Message)
		if m != nil && m.ID != nil {
			s.send(relaywire.AppendError(nil, m.ID, perr))
		}
		return
	}
	switch kind {
	case relaywire.KindRequest:
		s.handleRequest(m)
	case relaywire.KindNotification:
		s.handleNotification(m)
	case relaywire.KindReply:
		s.reply(m)
	}
}

// readError says in a sentence why the connection ended.
func (s *session) readError(err error) error {
	if cause := context.Cause(s.ctx); cause != nil && s.ctx.Err() != nil {
		if errors.Is(cause, context.Canceled) {
			return errors.New("the bridge is closing the relay connection")
		}
		return cause
	}
	if p := s.taken.Load(); p != nil {
		return &nameTakenError{p: *p}
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		reason := ce.Text
		if rest, ok := strings.CutPrefix(reason, relaywire.CloseServerNameTaken); ok && ce.Code == websocket.ClosePolicyViolation && s.gw != nil {
			// The notification was lost: the close frame's part of it.
			return &nameTakenError{p: relaywire.ServerNameTakenParams{Server: s.a.server, Reason: rest}}
		}
		if reason == "" {
			reason = fmt.Sprintf("close code %d", ce.Code)
		}
		if ce.Code == websocket.ClosePolicyViolation && strings.HasPrefix(reason, "authentication failed") && !s.authed.Load() {
			return fmt.Errorf("%w: the proxy refused the relay token: %s", errAuth, reason)
		}
		return fmt.Errorf("the proxy closed the connection: %s", reason)
	}
	return fmt.Errorf("the connection to the proxy was lost: %v", err)
}

// nameTakenError ends a server extension's connection whose server name
// another bridge of the user holds at the proxy: its Error is the proxy's
// sentence.
type nameTakenError struct {
	p relaywire.ServerNameTakenParams
}

func (e *nameTakenError) Error() string { return e.p.Reason }

// send queues a message; it gives up when the connection ends (or the
// proxy stops reading: see wsconn.Conn.Send).
func (s *session) send(msg []byte) bool {
	return s.c.Send(msg)
}

// trySend queues a message if there is room: for notifications, which the
// host link's reader hands over and must not wait for.
func (s *session) trySend(msg []byte) bool {
	if s.c.TrySend(msg) {
		return true
	}
	s.log.Debug("dropped a notification to the proxy: the send queue is full or the connection closing")
	return false
}

func (s *session) handleRequest(m *relaywire.Message) {
	id, isString := relaywire.IDString(m.ID)
	switch {
	case isString && strings.HasPrefix(id, relaywire.PrefixProxy):
		if m.Method != relaywire.MethodAuthenticate {
			s.send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeMethodNotFound, "the bridge's relay does not serve proxy method %q", m.Method)))
			return
		}
		res := relaywire.AuthenticateResult{Name: s.a.name, AccessToken: s.a.c.opts.Token}
		if s.a.server != "" {
			res.Kind, res.Server = relaywire.ExtensionKindServer, s.a.server
			s.a.mu.Lock()
			res.Replace = s.a.c.opts.ReplaceServers && !s.a.replaced
			s.a.mu.Unlock()
		}
		s.send(relaywire.AppendResult(nil, m.ID, relaywire.MarshalParams(res)))
	case !isString || !strings.HasPrefix(id, relaywire.PrefixConnection):
		s.send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeInvalidRequest,
			"the bridge's relay forwards only requests with mapped ids \"conn-<connection>:<id>\", not %s", m.ID)))
	default:
		conn, _, ok := relaywire.UnmapID(id)
		if !ok {
			s.send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeInvalidRequest, "malformed mapped id %s", m.ID)))
			return
		}
		s.mu.Lock()
		if _, seen := s.conns[conn]; !seen {
			s.conns[conn] = ""
		}
		s.mu.Unlock()
		if s.gw != nil {
			c := s.gw.conn(conn, true)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.gw.request(id, c, m)
			}()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.forward(id, conn, m)
		}()
	}
}

// forward calls the browser with the proxy's id unchanged and sends the
// reply back unchanged.
func (s *session) forward(id, conn string, m *relaywire.Message) {
	b := s.a.currentBrowser()
	if b == nil {
		why := "the browser is no longer connected to the bridge"
		if s.a.c.stopping.Load() {
			why = stoppingSentence
		}
		s.send(relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeExtensionGone, "%s", why)))
		return
	}
	s.mu.Lock()
	s.inflight[id] = struct{}{}
	s.mu.Unlock()
	s.a.mu.Lock()
	s.a.inflight++
	s.a.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.inflight, id)
		s.mu.Unlock()
		s.a.mu.Lock()
		s.a.inflight--
		s.a.mu.Unlock()
	}()

	var params any
	if m.Params != nil {
		p, token, rs := linkParams(m.Method, m.Params, m.Client, conn, id)
		params = p
		if rs.ID != "" {
			s.mu.Lock()
			s.conns[rs.ID] = rs.Client
			s.mu.Unlock()
		}
		if token != nil {
			s.mu.Lock()
			s.progress[id] = token
			s.mu.Unlock()
			defer func() {
				s.mu.Lock()
				delete(s.progress, id)
				s.mu.Unlock()
			}()
		}
	}
	res, err := b.Call(s.ctx, id, m.Method, params)
	if err != nil && s.ctx.Err() != nil {
		// The connection dropped: nobody can be answered through it (the
		// proxy fails the caller's request); tell the browser to stop.
		nctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = b.Notify(nctx, relaywire.MethodCancelled, map[string]any{"requestId": id, "reason": reasonDropped})
		cancel()
		return
	}
	if err != nil {
		s.send(relaywire.AppendError(nil, m.ID, jsonrpcError(m.Method, err, s.a.c.stopping.Load())))
		return
	}
	s.send(relaywire.AppendResult(nil, m.ID, res))
}

// remoteSession is the browserbridge/session _meta of a relayed tools/call:
// the relay names the session and marks it remote, so the extension
// applies the person's scope for remote clients (docs/protocol.md).
type remoteSession struct {
	Client string `json:"client"`
	ID     string `json:"id"`
	Remote bool   `json:"remote"`
}

// remoteClientName is a remote session's name when its client gave none.
const remoteClientName = "remote client"

// maxClientName bounds the client name shown in tab group titles.
const maxClientName = 60

// sessionOf is the browser's session for a relayed call of connection
// conn whose remote client is described by cm (relaywire.MetaClient): the
// client's own name, and, when it has a key, an id that stays the same
// across the connection's ends (a bridge restart), so the browser keeps
// its tabs; else the connection's id, as before keys existed.
func sessionOf(cm relaywire.ClientMeta, conn string) remoteSession {
	rs := remoteSession{Client: cleanName(cm.Name), ID: conn, Remote: true}
	if relaywire.ValidClientKey(cm.Key) {
		rs.ID = relaywire.PrefixConnection + "k" + cm.Key
	}
	return rs
}

// cleanName is a client's name fit for a tab group title: printable, at
// most maxClientName runes, remoteClientName if nothing is left.
func cleanName(name string) string {
	name = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, name))
	if r := []rune(name); len(r) > maxClientName {
		name = string(r[:maxClientName]) + "…"
	}
	if name == "" {
		return remoteClientName
	}
	return name
}

// linkParams returns the params of a relayed request as the browser gets
// them, the caller's progress token if it asked for progress, and for a
// tools/call the browser's session it is in. A tools/call gets that
// session (sessionOf: the remote client's name and, if it has one, key,
// from the proxy's client member (relaywire.Message.Client), else from
// _meta "browserbridge/client", which is taken out either way) as its
// _meta["browserbridge/session"], marked remote,
// replacing any the caller sent, so the extension groups the remote
// client's tabs as it does a local session's and knows it for a remote
// one. A _meta.progressToken is replaced by the request's id on the link
// (the mapped id), which the browser reports progress against, as for
// local calls (docs/protocol.md); the caller's token is put back on the
// way out (progressFromBrowser). Other params pass unchanged.
func linkParams(method string, params, client json.RawMessage, conn, id string) (json.RawMessage, json.RawMessage, remoteSession) {
	if method != "tools/call" && !bytes.Contains(params, []byte(`"_meta"`)) {
		return params, nil, remoteSession{}
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return params, nil, remoteSession{}
	}
	var meta map[string]json.RawMessage
	if raw, ok := p["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return params, nil, remoteSession{}
	}
	changed := false
	token := meta["progressToken"]
	if token != nil && string(token) != "null" {
		meta["progressToken"] = relaywire.AppendString(nil, id)
		changed = true
	} else {
		token = nil
	}
	var rs remoteSession
	if method == "tools/call" {
		if meta == nil {
			meta = make(map[string]json.RawMessage)
		}
		var cm relaywire.ClientMeta
		if raw, ok := meta[relaywire.MetaClient]; ok {
			_ = json.Unmarshal(raw, &cm) // a malformed one names no one
			delete(meta, relaywire.MetaClient)
		}
		if client != nil {
			cm = relaywire.ClientMeta{}
			_ = json.Unmarshal(client, &cm) // the proxy's word over the client's
		}
		rs = sessionOf(cm, conn)
		meta[metaSession] = relaywire.MarshalParams(rs)
		changed = true
	}
	if !changed {
		return params, nil, rs
	}
	p["_meta"] = relaywire.MarshalParams(meta)
	return relaywire.MarshalParams(p), token, rs
}

// progressFromBrowser forwards the browser's notifications/progress for the
// relayed request whose mapped id is id, with the caller's own token, to
// the proxy, which delivers it to that caller. It reports false if no
// request in flight on this connection asked for progress with that id.
func (s *session) progressFromBrowser(id string, params json.RawMessage) bool {
	s.mu.Lock()
	token, ok := s.progress[id]
	s.mu.Unlock()
	if !ok {
		return false
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		s.log.Debug("dropped malformed progress from the browser", "id", id)
		return true
	}
	p["progressToken"] = token
	s.trySend(relaywire.AppendRequestNotification(nil, id, relaywire.MethodProgress, relaywire.MarshalParams(p)))
	return true
}

func (s *session) handleNotification(m *relaywire.Message) {
	switch m.Method {
	case relaywire.MethodAuthenticated:
		var p relaywire.AuthenticatedParams
		_ = json.Unmarshal(m.Params, &p)
		s.authed.Store(true)
		s.a.mu.Lock()
		s.a.extID, s.a.userID, s.a.attempt, s.a.noted = p.ExtensionID, p.UserID, 0, ""
		s.a.mu.Unlock()
		s.a.setState(StateConnected, "")
		s.log.Info("relay connected", "url", s.a.c.opts.URL, "extension", p.ExtensionID, "name", s.a.name)
	case relaywire.MethodStatus:
		var p relaywire.StatusParams
		_ = json.Unmarshal(m.Params, &p)
		s.a.mu.Lock()
		s.a.peers = p.PeerCount
		s.a.mu.Unlock()
	case relaywire.MethodCancelled:
		if s.gw != nil {
			// The mapped id names the request in its gateway session too.
			var p relaywire.CancelledParams
			if json.Unmarshal(m.Params, &p) == nil {
				if id, ok := relaywire.IDString(p.RequestID); ok {
					if conn, _, ok := relaywire.UnmapID(id); ok {
						s.gw.notify(conn, m)
					}
				}
			}
			return
		}
		s.cancelled(m.Params)
	case relaywire.MethodServerNameTaken:
		var p relaywire.ServerNameTakenParams
		if s.gw != nil && json.Unmarshal(m.Params, &p) == nil && p.Reason != "" {
			s.taken.Store(&p) // the proxy closes the connection next
		}
	case relaywire.MethodSessionEnded:
		if s.gw == nil {
			s.sessionEnded(m.Params)
		}
	case relaywire.MethodConnectionClosed:
		if s.gw != nil {
			var p relaywire.ConnectionClosedParams
			if json.Unmarshal(m.Params, &p) == nil && p.ConnectionID != "" {
				s.gw.closeConn(p.ConnectionID)
			}
		}
	default:
		if s.gw != nil && m.ConnectionID != "" && strings.HasPrefix(m.Method, "notifications/") {
			// A client's notification, with its connection (a proxy that
			// names it): to that client's session.
			s.gw.notify(m.ConnectionID, m)
			return
		}
		s.log.Debug("ignored a notification from the proxy", "method", m.Method)
	}
}

// reply takes a reply from the proxy: to one of the relay's own requests
// (pairing_code), or a client's answer to a server's request.
func (s *session) reply(m *relaywire.Message) {
	if id, ok := relaywire.IDString(m.ID); ok {
		s.mu.Lock()
		ch := s.calls[id]
		delete(s.calls, id)
		s.mu.Unlock()
		if ch != nil {
			ch <- m
			return
		}
	}
	if s.gw != nil && s.gw.answer(m) {
		return
	}
	s.log.Debug("ignored a reply from the proxy", "id", string(m.ID))
}

// call sends a request of the relay's own to the proxy ("ext:bridge-<n>")
// and waits for the reply; a reply with an error returns it as
// *relaywire.Error.
func (s *session) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := relaywire.PrefixExt + "bridge-" + strconv.FormatInt(s.nextCall.Add(1), 10)
	ch := make(chan *relaywire.Message, 1)
	s.mu.Lock()
	s.calls[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.calls, id)
		s.mu.Unlock()
	}()
	if !s.send(relaywire.AppendRequest(nil, id, method, relaywire.MarshalParams(params))) {
		return nil, errors.New("the relay connection to the proxy closed")
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			var e relaywire.Error
			if json.Unmarshal(m.Error, &e) != nil {
				return nil, fmt.Errorf("the proxy answered %s with a malformed error: %s", method, m.Error)
			}
			return nil, &e
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.ctx.Done():
		return nil, errors.New("the relay connection to the proxy closed before it answered")
	}
}

// cancelled passes an MCP client's cancellation to the browser. The proxy
// rewrites requestId to the mapped id of a request of that client in flight
// (docs/relay.md); a proxy that forwards the client's own id instead is
// still understood when exactly one call in flight has that original id
// (with several, the relay cannot tell whose and does nothing).
func (s *session) cancelled(params json.RawMessage) {
	var p relaywire.CancelledParams
	if json.Unmarshal(params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	var match []string
	s.mu.Lock()
	if id, ok := relaywire.IDString(p.RequestID); ok {
		if _, inflight := s.inflight[id]; inflight {
			match = append(match, id)
		}
	}
	if len(match) == 0 {
		for id := range s.inflight {
			if _, orig, ok := relaywire.UnmapID(id); ok && string(orig) == string(p.RequestID) {
				match = append(match, id)
			}
		}
	}
	s.mu.Unlock()
	if len(match) != 1 {
		s.log.Debug("ignored a cancellation of no call in flight", "requestId", string(p.RequestID))
		return
	}
	if b := s.a.currentBrowser(); b != nil {
		nctx, cancel := context.WithTimeout(s.ctx, time.Second)
		_ = b.Notify(nctx, relaywire.MethodCancelled, map[string]any{"requestId": match[0], "reason": p.Reason})
		cancel()
	}
}

// sessionEnded passes the proxy's session_ended on: the remote session of
// that key ended for good, and the browser ends it (session.ended), as it
// would a local one. The key may be of a session seen before this
// connection (before a restart of the bridge): the browser keeps the tab
// groups of keyed sessions across one.
func (s *session) sessionEnded(params json.RawMessage) {
	var p relaywire.SessionEndedParams
	if json.Unmarshal(params, &p) != nil || !relaywire.ValidClientKey(p.Key) {
		s.log.Debug("ignored a session_ended without a valid key", "params", string(params))
		return
	}
	rs := sessionOf(relaywire.ClientMeta{Name: p.Client, Key: p.Key}, "")
	s.mu.Lock()
	delete(s.conns, rs.ID)
	s.mu.Unlock()
	b := s.a.currentBrowser()
	if b == nil {
		return
	}
	nctx, cancel := context.WithTimeout(s.ctx, time.Second)
	defer cancel()
	_ = b.Notify(nctx, protocol.SessionEnded, map[string]string{"session": rs.ID, "client": rs.Client})
}

// endSessions tells the browser that the remote sessions seen on this
// connection are over: after a drop the proxy ends every MCP connection to
// this extension.
func (s *session) endSessions() {
	b := s.a.currentBrowser()
	if b == nil {
		return
	}
	s.mu.Lock()
	conns := make(map[string]string, len(s.conns))
	for c, name := range s.conns {
		conns[c] = name
	}
	s.mu.Unlock()
	for c, name := range conns {
		if name == "" {
			name = remoteClientName
		}
		nctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = b.Notify(nctx, protocol.SessionEnded, map[string]string{"session": c, "client": name})
		cancel()
	}
}
