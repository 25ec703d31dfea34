package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// ServerSource is the bridge's stdio gateway as the relay sees it: the
// names of its servers, and its handler, which serves each at
// /servers/{name}/mcp (Streamable HTTP). *gateway.Gateway is one.
type ServerSource interface {
	Names() []string
	http.Handler
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

// gatewayBase is the URL the in-process requests are made to; only its
// path matters to the gateway.
const gatewayBase = "http://bridge.relay.invalid/servers/"

// implicitInit opens a session for a client that sent no initialize (it
// called tools/list straight away, as `browserbridge connect` does a
// browser): it declares no capabilities, so the server asks it nothing.
var implicitInit = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"relay client"}}`)

// gwConns are the gateway sessions of one server extension's WebSocket.
type gwConns struct {
	s      *session
	src    ServerSource
	server string
	path   string // /servers/{name}/mcp, escaped

	nextAsk atomic.Int64

	mu    sync.Mutex
	conns map[string]*gwConn // by connection id
	asks  map[string]*gwAsk  // by the "ext:<n>" id the proxy was sent
}

// gwConn is one proxy connection's gateway session.
type gwConn struct {
	id string

	mu      sync.Mutex
	sid     string        // Mcp-Session-Id; "" before initialize
	version string        // the negotiated protocol version
	opening chan struct{} // non-nil while initialize runs; closed after
	closed  bool
	stop    context.CancelFunc // ends the session's GET stream
}

// gwAsk is a server request sent to the proxy, awaiting the client.
type gwAsk struct {
	conn *gwConn
	gid  json.RawMessage // the gateway's id of it
}

func newGWConns(s *session, src ServerSource, server string) *gwConns {
	return &gwConns{s: s, src: src, server: server, path: gatewayBase + url.PathEscape(server) + "/mcp",
		conns: make(map[string]*gwConn), asks: make(map[string]*gwAsk)}
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
		answer = g.call(c, "", "", id, m)
	default:
		sid, version, err := g.session(c)
		if err != nil {
			answer = relaywire.AppendError(nil, m.ID, err)
			break
		}
		answer = g.call(c, sid, version, id, m)
	}
	if answer != nil {
		s.send(answer)
	}
}

// session returns the connection's gateway session: waiting for an
// initialize under way, or opening one with implicitInit.
func (g *gwConns) session(c *gwConn) (sid, version string, err *relaywire.Error) {
	for {
		c.mu.Lock()
		switch {
		case c.sid != "":
			sid, version = c.sid, c.version
			c.mu.Unlock()
			return sid, version, nil
		case c.opening != nil:
			wait := c.opening
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-g.s.ctx.Done():
				return "", "", relaywire.Errorf(relaywire.CodeExtensionGone, "the relay connection to the proxy is closing")
			}
		}
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return "", "", relaywire.Errorf(relaywire.CodeExtensionGone, "the client's connection to this server has ended")
		}
		res := g.initialize(c, &relaywire.Message{ID: json.RawMessage(`"relay-init"`), Method: "initialize", Params: implicitInit})
		c.mu.Lock()
		sid, version = c.sid, c.version
		c.mu.Unlock()
		if sid != "" { // this open's, or a concurrent one's
			return sid, version, nil
		}
		e := relaywire.Errorf(relaywire.CodeInternalError, "the gateway opened no session on %q", g.server)
		if m, _, perr := relaywire.Parse(res); perr == nil && m.Error != nil {
			_ = json.Unmarshal(m.Error, e)
		}
		return "", "", e
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
	if c.sid != "" {
		sid, version := c.sid, c.version
		c.mu.Unlock()
		id, _ := relaywire.IDString(m.ID)
		return g.call(c, sid, version, id, m)
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

	resp, err := g.do(g.s.ctx, http.MethodPost, c, "", "", relaywire.AppendRequestRawID(nil, m.ID, m.Method, m.Params))
	if err != nil {
		return relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeInternalError, "the gateway could not open a session on %q: %v", g.server, err))
	}
	defer resp.Body.Close()
	reply, rerr := g.readReply(c, resp, m.ID, "")
	if rerr != nil {
		return relaywire.AppendError(nil, m.ID, rerr)
	}
	sid := resp.Header.Get(mcphttp.HeaderSessionID)
	if reply.Result == nil || sid == "" {
		return rebuildReply(m.ID, reply)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(reply.Result, &init)
	c.mu.Lock()
	if c.closed {
		// The client left while its session opened: end it.
		c.mu.Unlock()
		g.deleteSession(sid)
		return rebuildReply(m.ID, reply)
	}
	ctx, stop := context.WithCancel(g.s.ctx)
	c.sid, c.version, c.stop = sid, init.ProtocolVersion, stop
	c.mu.Unlock()
	g.s.wg.Add(1)
	go func() {
		defer g.s.wg.Done()
		g.listen(ctx, c, sid, init.ProtocolVersion)
	}()
	return rebuildReply(m.ID, reply)
}

// call posts a request to the session sid (none: stateless) and relays
// what comes back on its answer until the reply, which it returns.
func (g *gwConns) call(c *gwConn, sid, version, mapped string, m *relaywire.Message) []byte {
	resp, err := g.do(g.s.ctx, http.MethodPost, c, sid, version, relaywire.AppendRequestRawID(nil, m.ID, m.Method, m.Params))
	if err != nil {
		return relaywire.AppendError(nil, m.ID, relaywire.Errorf(relaywire.CodeInternalError, "the bridge could not reach its gateway: %v", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && sid != "" {
		// The session ended (the server was removed or restarted, or the
		// session expired): the next request opens a new one.
		c.mu.Lock()
		if c.sid == sid {
			c.sid = ""
			if c.stop != nil {
				c.stop()
			}
		}
		c.mu.Unlock()
	}
	reply, rerr := g.readReply(c, resp, m.ID, mapped)
	if rerr != nil {
		if g.s.ctx.Err() != nil {
			return nil // the proxy connection dropped: nobody to answer
		}
		return relaywire.AppendError(nil, m.ID, rerr)
	}
	return rebuildReply(m.ID, reply)
}

// readReply reads the gateway's answer to the request with id: a JSON
// body, or a stream of events ending with it, whose other messages are
// relayed about the request mapped (the proxy's id for it; "" for the
// relay's own initialize, whose stream carries nothing else).
func (g *gwConns) readReply(c *gwConn, resp *http.Response, id json.RawMessage, mapped string) (*relaywire.Message, *relaywire.Error) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" {
		body, err := io.ReadAll(io.LimitReader(resp.Body, 4*relaywire.MaxMessageSize))
		if err != nil {
			return nil, relaywire.Errorf(relaywire.CodeInternalError, "reading the gateway's answer: %v", err)
		}
		m, kind, perr := relaywire.Parse(body)
		if perr != nil || kind != relaywire.KindReply {
			return nil, relaywire.Errorf(relaywire.CodeInternalError, "the gateway answered HTTP %d without a JSON-RPC reply", resp.StatusCode)
		}
		return m, nil
	}
	r := mcphttp.NewSSEReader(resp.Body, 4*relaywire.MaxMessageSize)
	for {
		ev, err := r.Next()
		if err != nil {
			if g.s.ctx.Err() != nil {
				return nil, relaywire.Errorf(relaywire.CodeExtensionGone, "the relay connection to the proxy dropped")
			}
			return nil, relaywire.Errorf(relaywire.CodeInternalError, "the gateway's answer stream ended before the reply: %v", err)
		}
		if len(ev.Data) == 0 {
			continue
		}
		m, kind, perr := relaywire.Parse(bytes.Clone(ev.Data))
		if perr != nil {
			g.s.log.Warn("the gateway sent a message that is not JSON-RPC", "server", g.server, "error", perr.Message)
			continue
		}
		switch kind {
		case relaywire.KindReply:
			if string(m.ID) == string(id) {
				return m, nil
			}
		case relaywire.KindNotification:
			g.relayNotification(c, mapped, m)
		case relaywire.KindRequest:
			g.relayRequest(c, mapped, m)
		}
	}
}

// listen relays the session's own stream (GET): notifications and server
// requests that belong to no request of the client, about its connection.
func (g *gwConns) listen(ctx context.Context, c *gwConn, sid, version string) {
	resp, err := g.do(ctx, http.MethodGet, c, sid, version, nil)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		g.s.log.Debug("the gateway refused the session's stream", "server", g.server, "status", resp.StatusCode)
		return
	}
	r := mcphttp.NewSSEReader(resp.Body, 4*relaywire.MaxMessageSize)
	for {
		ev, err := r.Next()
		if err != nil {
			return
		}
		if len(ev.Data) == 0 {
			continue
		}
		m, kind, perr := relaywire.Parse(bytes.Clone(ev.Data))
		if perr != nil {
			continue
		}
		switch kind {
		case relaywire.KindNotification:
			g.relayNotification(c, "", m)
		case relaywire.KindRequest:
			g.relayRequest(c, "", m)
		}
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
	sid, version := a.conn.sid, a.conn.version
	a.conn.mu.Unlock()
	if sid == "" {
		return true
	}
	g.s.wg.Add(1)
	go func() {
		defer g.s.wg.Done()
		g.post(a.conn, sid, version, body)
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
	sid, version := c.sid, c.version
	c.mu.Unlock()
	if sid == "" {
		return
	}
	g.post(c, sid, version, relaywire.AppendNotification(nil, m.Method, m.Params))
}

// post sends a message that is answered 202 (a notification, an answer).
func (g *gwConns) post(c *gwConn, sid, version string, body []byte) {
	resp, err := g.do(g.s.ctx, http.MethodPost, c, sid, version, body)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		g.s.log.Debug("the gateway did not accept a message", "server", g.server, "status", resp.StatusCode)
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
	sid, stop := c.sid, c.stop
	c.sid, c.closed = "", true
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	if sid != "" {
		g.deleteSession(sid)
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

func (g *gwConns) deleteSession(sid string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := g.do(ctx, http.MethodDelete, nil, sid, "", nil)
	if err == nil {
		resp.Body.Close()
	}
}

// do makes one request to the gateway's route for the server. The client
// address is the connection id, so that each remote client counts as one
// client in the bridge's session table.
func (g *gwConns) do(ctx context.Context, method string, c *gwConn, sid, version string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.path, rd)
	if err != nil {
		return nil, err
	}
	req.RemoteAddr = "relay:0"
	if c != nil {
		req.RemoteAddr = c.id + ":0"
	}
	switch method {
	case http.MethodPost:
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	case http.MethodGet:
		req.Header.Set("Accept", "text/event-stream")
	}
	if sid != "" {
		req.Header.Set(mcphttp.HeaderSessionID, sid)
	}
	if version != "" {
		req.Header.Set(mcphttp.HeaderProtocolVersion, version)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return serveInProcess(g.src, req), nil
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
