package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// ServerSource is the bridge's stdio gateway as the relay sees it: the
// names of its servers, and the route of each, which the relay reaches in
// this process through the session engine (mcphttp), as a local client of
// /servers/{name}/mcp would over HTTP. *gateway.Gateway is one.
type ServerSource interface {
	Names() []string
	Route(name string) (engine *mcphttp.Server, t mcphttp.Target, ok bool)
}

// A server extension (docs/relay.md, "Server extensions") forwards each
// MCP connection the proxy opens to it ("conn-<c>") to a session of its own
// on the gateway's route for the server, reached in this process: the
// gateway then gives that remote client what it gives a local client of
// /servers/{name}/mcp (the server's shared child, or a child of its own
// for a per_session server; its ids, progress tokens, cancellations and
// sampling or elicitation requests kept apart from every other session's).
// Requests go with the proxy's mapped id as their id, so a reply, and a
// cancellation naming it, need no further mapping. Progress and other
// notifications that ride on a request's answer go back about that request
// (requestId); those on the session's own stream, about its connection
// (connectionId). The server's requests to the client (sampling,
// elicitation, roots) go to the proxy as "ext:<n>" requests, and the
// client's answer is posted back to the session with the gateway's id.

// implicitInit opens a session for a client that sent no initialize (it
// called tools/list straight away, as `browserbridge connect` does a
// browser): it declares no capabilities, so the server asks it nothing.
var implicitInit = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"relay client"}}`)

// gwConns are the gateway sessions of one server extension's WebSocket.
type gwConns struct {
	s      *session
	src    ServerSource
	server string

	nextAsk atomic.Int64

	mu    sync.Mutex
	conns map[string]*gwConn // by connection id
	asks  map[string]*gwAsk  // by the "ext:<n>" id the proxy was sent
}

// gwConn is one proxy connection's gateway session.
type gwConn struct {
	id string

	mu      sync.Mutex
	sess    *mcphttp.Session // nil before initialize
	opening chan struct{}    // non-nil while initialize runs; closed after
	closed  bool
	stop    context.CancelFunc // ends the relay of the session's own stream
}

// gwAsk is a server request sent to the proxy, awaiting the client.
type gwAsk struct {
	conn *gwConn
	gid  json.RawMessage // the gateway's id of it
}

func newGWConns(s *session, src ServerSource, server string) *gwConns {
	return &gwConns{s: s, src: src, server: server, conns: make(map[string]*gwConn), asks: make(map[string]*gwAsk)}
}

// conn returns the connection's state, made on first use if create is
// set. The reader makes it as the request arrives, so that a
// connection_closed read after the request finds it and marks it closed,
// whenever the request's goroutine gets to it.
func (g *gwConns) conn(id string, create bool) *gwConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.conns[id]
	if c == nil && create {
		c = &gwConn{id: id}
		g.conns[id] = c
	}
	return c
}

// request forwards a request the proxy sent (mapped id id) on connection
// c to the connection's gateway session and sends the answer back.
func (g *gwConns) request(id string, c *gwConn, m *relaywire.Message) {
	s := g.s
	s.a.countInflight(1)
	defer s.a.countInflight(-1)
	var answer []byte
	switch {
	case m.Method == "initialize":
		answer = g.initialize(c, m)
	case mcphttp.MetaField(m.Params, mcphttp.MetaProtocolVersion) != nil:
		// The 2026-07-28 era: no session, the request stands alone.
		answer = g.call(c, nil, id, m)
	default:
		sess, err := g.session(c)
		if err != nil {
			answer = relaywire.AppendError(nil, m.ID, err)
			break
		}
		answer = g.call(c, sess, id, m)
	}
	if answer != nil {
		s.send(answer)
	}
}

// session returns the connection's gateway session: waiting for an
// initialize under way, or opening one with implicitInit.
func (g *gwConns) session(c *gwConn) (*mcphttp.Session, *relaywire.Error) {
	for {
		c.mu.Lock()
		switch {
		case c.sess != nil:
			sess := c.sess
			c.mu.Unlock()
			return sess, nil
		case c.opening != nil:
			wait := c.opening
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-g.s.ctx.Done():
				return nil, relaywire.Errorf(relaywire.CodeExtensionGone, "the relay connection to the proxy is closing")
			}
		}
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return nil, relaywire.Errorf(relaywire.CodeExtensionGone, "the client's connection to this server has ended")
		}
		res := g.initialize(c, &relaywire.Message{ID: json.RawMessage(`"relay-init"`), Method: "initialize", Params: implicitInit})
		c.mu.Lock()
		sess := c.sess
		c.mu.Unlock()
		if sess != nil { // this open's, or a concurrent one's
			return sess, nil
		}
		e := relaywire.Errorf(relaywire.CodeInternalError, "the gateway opened no session on %q", g.server)
		if m, _, perr := relaywire.Parse(res); perr == nil && m.Error != nil {
			_ = json.Unmarshal(m.Error, e)
		}
		return nil, e
	}
}

// initialize opens the connection's gateway session with the client's
// initialize (or implicitInit) and returns the answer for the proxy. A
// connection with a session already passes it on: the gateway refuses a
// second one, as it does for a local client.
func (g *gwConns) initialize(c *gwConn, m *relaywire.Message) []byte {
	c.mu.Lock()
	for c.opening != nil {
		wait := c.opening
		c.mu.Unlock()
		select {
		case <-wait:
		case <-g.s.ctx.Done():
			return nil
		}
		c.mu.Lock()
	}
	if c.closed {
		c.mu.Unlock()
		return relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeExtensionGone, "the client's connection to this server has ended"))
	}
	if sess := c.sess; sess != nil {
		c.mu.Unlock()
		id, _ := relaywire.IDString(m.ID)
		return g.call(c, sess, id, m)
	}
	done := make(chan struct{})
	c.opening = done
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.opening = nil
		c.mu.Unlock()
		close(done)
	}()

	engine, t, ok := g.src.Route(g.server)
	if !ok {
		return relaywire.AppendError(nil, m.ID, g.gone())
	}
	// The client key is the connection id: each remote client counts as
	// one client in the bridge's session table.
	sess, answer := engine.OpenLocal(g.s.ctx, t, c.id, &mcphttp.Message{JSONRPC: "2.0", ID: m.ID, Method: m.Method, Params: m.Params})
	reply, rerr := g.parseReply(answer)
	if rerr != nil {
		if sess != nil {
			sess.Close()
		}
		return relaywire.AppendError(nil, m.ID, rerr)
	}
	if sess == nil {
		return rebuildReply(m.ID, reply)
	}
	c.mu.Lock()
	if c.closed {
		// The client left while its session opened: end it.
		c.mu.Unlock()
		sess.Close()
		return rebuildReply(m.ID, reply)
	}
	ctx, stop := context.WithCancel(g.s.ctx)
	c.sess, c.stop = sess, stop
	c.mu.Unlock()
	g.s.wg.Add(1)
	go func() {
		defer g.s.wg.Done()
		// The session's own stream: notifications and server requests
		// that belong to no request of the client, about its connection.
		sess.Listen(ctx, func(msg []byte) { g.relay(c, "", msg) })
	}()
	return rebuildReply(m.ID, reply)
}

// gone says that the server's route is no longer on the gateway.
func (g *gwConns) gone() *relaywire.Error {
	return relaywire.Errorf(relaywire.CodeInternalError, "no server named %q on this bridge's gateway any more", g.server)
}

// call sends a request to the session sess (nil: stateless) and relays
// what comes before its answer about the request mapped (the proxy's id
// for it; "" for the relay's own initialize); it returns the answer.
func (g *gwConns) call(c *gwConn, sess *mcphttp.Session, mapped string, m *relaywire.Message) []byte {
	engine, t, ok := g.src.Route(g.server)
	if !ok {
		return relaywire.AppendError(nil, m.ID, g.gone())
	}
	answer := engine.Call(g.s.ctx, sess, t, &mcphttp.Message{JSONRPC: "2.0", ID: m.ID, Method: m.Method, Params: m.Params},
		func(msg []byte) { g.relay(c, mapped, msg) })
	if sess != nil && sess.Closed() {
		// The session ended (the server was removed or restarted, or the
		// session expired): the next request opens a new one.
		c.mu.Lock()
		if c.sess == sess {
			c.sess = nil
			if c.stop != nil {
				c.stop()
			}
		}
		c.mu.Unlock()
	}
	if answer == nil {
		return nil // the proxy connection dropped: nobody to answer
	}
	reply, rerr := g.parseReply(answer)
	if rerr != nil {
		return relaywire.AppendError(nil, m.ID, rerr)
	}
	return rebuildReply(m.ID, reply)
}

// parseReply reads the gateway's answer.
func (g *gwConns) parseReply(answer []byte) (*relaywire.Message, *relaywire.Error) {
	m, kind, perr := relaywire.Parse(answer)
	if perr != nil || kind != relaywire.KindReply {
		return nil, relaywire.Errorf(relaywire.CodeInternalError, "the gateway's answer is not a JSON-RPC reply")
	}
	return m, nil
}

// relay passes a message of the gateway session that is no answer to the
// proxy: about the request mapped, or else about the connection.
func (g *gwConns) relay(c *gwConn, mapped string, msg []byte) {
	m, kind, perr := relaywire.Parse(bytes.Clone(msg))
	if perr != nil {
		g.s.log.Warn("the gateway sent a message that is not JSON-RPC", "server", g.server, "error", perr.Message)
		return
	}
	switch kind {
	case relaywire.KindNotification:
		g.relayNotification(c, mapped, m)
	case relaywire.KindRequest:
		g.relayRequest(c, mapped, m)
	}
}

// relayNotification sends a notification of the gateway session to the
// proxy, about the request mapped, or else about the connection. A
// cancellation of one of the server's requests names it by the id the
// proxy was sent.
func (g *gwConns) relayNotification(c *gwConn, mapped string, m *relaywire.Message) {
	params := m.Params
	if m.Method == relaywire.MethodCancelled {
		var p relaywire.CancelledParams
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		ext := g.takeAskByGID(c, p.RequestID)
		if ext == "" {
			return
		}
		p.RequestID = relaywire.AppendString(nil, ext)
		params = relaywire.MarshalParams(p)
	}
	if mapped != "" {
		g.s.trySend(relaywire.AppendRequestNotification(nil, mapped, m.Method, params))
		return
	}
	g.s.trySend(relaywire.AppendConnectionNotification(nil, c.id, m.Method, params))
}

// relayRequest sends a request of the server's (sampling, elicitation,
// roots) to the proxy as "ext:<n>", about the request mapped or else the
// connection; the answer comes back through answer.
func (g *gwConns) relayRequest(c *gwConn, mapped string, m *relaywire.Message) {
	ext := relaywire.PrefixExt + strconv.FormatInt(g.nextAsk.Add(1), 10)
	g.mu.Lock()
	g.asks[ext] = &gwAsk{conn: c, gid: m.ID}
	g.mu.Unlock()
	msg := relaywire.AppendRoutedRequest(nil, ext, mapped, c.id, m.Method, m.Params)
	if !g.s.send(msg) {
		g.takeAsk(ext)
	}
}

func (g *gwConns) takeAsk(ext string) *gwAsk {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.asks[ext]
	delete(g.asks, ext)
	return a
}

// takeAskByGID forgets the request the gateway withdraws and returns the
// id the proxy knows it by ("" if none).
func (g *gwConns) takeAskByGID(c *gwConn, gid json.RawMessage) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	for ext, a := range g.asks {
		if a.conn == c && string(a.gid) == string(gid) {
			delete(g.asks, ext)
			return ext
		}
	}
	return ""
}

// answer posts a client's answer (or the proxy's refusal) of a server
// request back to the gateway session, with the gateway's id; it reports
// whether the id was one of the server's requests.
func (g *gwConns) answer(m *relaywire.Message) bool {
	ext, ok := relaywire.IDString(m.ID)
	if !ok {
		return false
	}
	a := g.takeAsk(ext)
	if a == nil {
		return false
	}
	var body []byte
	if m.Result != nil {
		body = relaywire.AppendResult(nil, a.gid, m.Result)
	} else {
		body = relaywire.AppendErrorRaw(nil, a.gid, m.Error)
	}
	a.conn.mu.Lock()
	sess := a.conn.sess
	a.conn.mu.Unlock()
	if sess == nil {
		return true
	}
	g.s.wg.Add(1)
	go func() {
		defer g.s.wg.Done()
		g.post(sess, body)
	}()
	return true
}

// notify passes a client's notification to its connection's session:
// notifications/cancelled names the request by the mapped id, which is
// the request's id in the session too.
func (g *gwConns) notify(conn string, m *relaywire.Message) {
	c := g.conn(conn, false)
	if c == nil {
		return
	}
	c.mu.Lock()
	sess := c.sess
	c.mu.Unlock()
	if sess == nil {
		return
	}
	g.post(sess, relaywire.AppendNotification(nil, m.Method, m.Params))
}

// post passes a message that gets no answer (a notification, a client's
// answer) to the session.
func (g *gwConns) post(sess *mcphttp.Session, body []byte) {
	m, _, err := mcphttp.ParseMessage(body)
	if err != nil {
		g.s.log.Debug("not passed to the gateway", "server", g.server, "error", err)
		return
	}
	if engine, t, ok := g.src.Route(g.server); ok {
		engine.Call(g.s.ctx, sess, t, m, nil)
	}
}

// closeConn ends the gateway session of a connection the proxy closed.
func (g *gwConns) closeConn(conn string) {
	g.mu.Lock()
	c := g.conns[conn]
	delete(g.conns, conn)
	for ext, a := range g.asks {
		if a.conn == c {
			delete(g.asks, ext) // the gateway refuses them as the session ends
		}
	}
	g.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	sess, stop := c.sess, c.stop
	c.sess, c.closed = nil, true
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	if sess != nil {
		sess.Close()
	}
}

// closeAll ends every session: the proxy connection is gone, and with it
// every client of this server extension.
func (g *gwConns) closeAll() {
	g.mu.Lock()
	ids := make([]string, 0, len(g.conns))
	for id := range g.conns {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	for _, id := range ids {
		g.closeConn(id)
	}
}

// rebuildReply writes the gateway's reply with the proxy's id.
func rebuildReply(id json.RawMessage, m *relaywire.Message) []byte {
	if m.Result != nil {
		return relaywire.AppendResult(nil, id, m.Result)
	}
	return relaywire.AppendErrorRaw(nil, id, m.Error)
}

// serverAgentName is what a server extension announces: the server's name
// and the bridge's, so that two bridges of a user offering a server of the
// same name stay apart (and each keeps its extension id across restarts).
func serverAgentName(server, host string) string {
	if host == "" {
		return server
	}
	return server + " (" + strings.TrimSpace(host) + ")"
}

// serverNameError says why a gateway server cannot be offered through
// the relay (its name breaks relaywire.CheckServerName), or nil.
func serverNameError(name string) error {
	if err := relaywire.CheckServerName(name); err != nil {
		return fmt.Errorf("not offered through the relay: %w", err)
	}
	return nil
}
