package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/jsonscan"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/nativemsg/rpcstream"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// BrowserHeader carries the ?browser= choice of the endpoint URL to the
// tool handlers (the transports copy the query parameter into it).
const BrowserHeader = "X-Browserbridge-Browser"

// Keys the bridge adds to the _meta of what it sends the extension and of
// the results it returns.
const (
	metaSession = "browserbridge/session" // {id, client}: whose call this is (tab groups)
	metaBrowser = "browserbridge/browser" // {id, name, version}: who answered
)

// linkSession is an MCP session as the host link and the browsers know it,
// whichever transport carries it (a live Streamable HTTP session owns
// one; a legacy SSE session gets one at its first call; a stateless
// request makes one per call): the prefix of its link ids, which the
// extension keys the session's tab group on, the pinned browser, and its
// calls in flight.
type linkSession struct {
	id        string // the prefix of its link ids: local-<id>:<n>
	client    string // clientInfo.name, for the tab group's title
	stateless bool
	next      atomic.Uint64
	meta      json.RawMessage // {"client":…,"id":"local-<id>"}, the browserbridge/session _meta of its calls

	mu      sync.Mutex
	browser string        // chosen with select_browser; "" = default
	active  int           // calls in flight
	drained chan struct{} // closed when active drops to 0, if someone waits
	// persist, if set, saves the session's record after a change of what
	// it keeps (the pinned browser): live sessions outlive the bridge
	// process through their records.
	persist func()
}

// newLinkID returns a session's part of its link ids: 130 random bits
// (crypto/rand.Text), so that no session, in this bridge process or any
// other, ever gets the id of another and with it the other's tab group.
func newLinkID() string { return rand.Text() }

func newLinkSession(id, client string, stateless bool) *linkSession {
	meta, _ := json.Marshal(sessionMeta{Client: client, ID: protocol.IDPrefixLocal + id})
	return &linkSession{id: id, client: client, stateless: stateless, meta: meta}
}

// sessionMeta is the browserbridge/session _meta of a call (fields in the
// order a map would have them, as the extension always got them).
type sessionMeta struct {
	Client string `json:"client"`
	ID     string `json:"id"`
}

// begin and end bracket a call, so that the end of the session can wait
// for its calls (as the SDK does for those it runs) before the browsers
// are told.
func (ls *linkSession) begin() {
	ls.mu.Lock()
	ls.active++
	ls.mu.Unlock()
}

func (ls *linkSession) end() {
	ls.mu.Lock()
	ls.active--
	if ls.active == 0 && ls.drained != nil {
		close(ls.drained)
		ls.drained = nil
	}
	ls.mu.Unlock()
}

// idle returns a channel closed once no call is in flight.
func (ls *linkSession) idle() <-chan struct{} {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.active == 0 {
		return closedChan
	}
	if ls.drained == nil {
		ls.drained = make(chan struct{})
	}
	return ls.drained
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (ls *linkSession) setBrowser(id string) {
	ls.mu.Lock()
	ls.browser = id
	persist := ls.persist
	ls.mu.Unlock()
	if persist != nil {
		persist()
	}
}

// setPersist makes each change of what the session keeps save its record.
func (ls *linkSession) setPersist(persist func()) {
	ls.mu.Lock()
	ls.persist = persist
	ls.mu.Unlock()
}

func (ls *linkSession) chosen() string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.browser
}

var nonLabel = regexp.MustCompile(`[^A-Za-z0-9-]+`)

// linkOf returns the link state of req's MCP session, creating it at first use.
// A stateless (2026-07-28) request is its own session for the SDK; the
// bridge keys those by client name so that one client's calls share a tab
// group.
func (s *Server) linkOf(ss *mcp.ServerSession, req *mcp.CallToolRequest) *linkSession {
	client := ""
	if ci := req.ClientInfo(); ci != nil {
		client = ci.Name
	}
	stateless := ss == nil || ss.ID() == "" && isStateless(req)
	if stateless {
		label := nonLabel.ReplaceAllString(client, "-")
		if len(label) > 40 {
			label = label[:40]
		}
		// One counter for all stateless requests keeps their link ids unique.
		st := newLinkSession("c-"+label, client, true)
		st.next.Store(s.statelessNext.Add(1 << 20))
		return st
	}
	return s.statefulLink(ss, client)
}

// statefulLink returns the state of a session that has an SDK session
// of its own, creating it at first use.
func (s *Server) statefulLink(ss *mcp.ServerSession, client string) *linkSession {
	s.sessMu.Lock()
	st := s.sessions[ss]
	s.sessMu.Unlock()
	if st != nil {
		return st
	}
	return s.register(ss, newLinkSession(newLinkID(), client, false))
}

// register keeps the link state of an SDK session until the session ends
// (a legacy SSE session's); it returns the state already kept if the
// session has one.
func (s *Server) register(ss *mcp.ServerSession, st *linkSession) *linkSession {
	kept := s.adopt(ss, st)
	if kept == st {
		go func() {
			_ = ss.Wait()
			s.forget(ss, st)
		}()
	}
	return kept
}

// adopt keeps the link state of an SDK session, for the tool handlers to
// find; the session's owner calls forget when it ends. It returns the
// state already kept if the session has one.
func (s *Server) adopt(ss *mcp.ServerSession, st *linkSession) *linkSession {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if old := s.sessions[ss]; old != nil {
		return old
	}
	s.sessions[ss] = st
	return st
}

// forget drops the link state of a session that ended and, once its calls
// have answered, tells the browsers.
func (s *Server) forget(ss *mcp.ServerSession, st *linkSession) {
	s.sessMu.Lock()
	delete(s.sessions, ss)
	s.sessMu.Unlock()
	<-st.idle() // the SDK waits for its calls; the fast path's are waited for here
	if s.stopping.Load() {
		// The bridge is stopping, not the session: a restarted bridge
		// resumes it from its record, with its tab group.
		return
	}
	s.sessionEnded(st)
}

// stoppingSentence answers a call that the bridge's own stop (for a
// restart, most often) cut short, in the process that stops.
const stoppingSentence = "Browser Bridge is restarting (or was stopped) while this call was running, so its answer was lost and the action may or may not have happened. " +
	"A restarted bridge carries the session on: check the page (read it again) before repeating the action."

// WaitCalls waits until no call of a stateful session is in flight, or
// ctx ends: a stopping bridge lets the calls its closed links cut short
// answer before it closes their sessions.
func (s *Server) WaitCalls(ctx context.Context) {
	s.sessMu.Lock()
	waits := make([]<-chan struct{}, 0, len(s.sessions))
	for _, st := range s.sessions {
		waits = append(waits, st.idle())
	}
	s.sessMu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return
		}
	}
}

// Stopping marks the server as shutting down: sessions that close from
// now on are not reported ended to the browsers (their records and tab
// groups stay for the next bridge process).
func (s *Server) Stopping() { s.stopping.Store(true) }

// LiveSessions lists the sessions the browsers should keep tab groups
// for: every stateful session, and those a previous bridge process
// recorded that have not come back yet (hello, docs/protocol.md).
func (s *Server) LiveSessions() []protocol.SessionRef {
	s.sessMu.Lock()
	out := make([]protocol.SessionRef, 0, len(s.sessions))
	for _, st := range s.sessions {
		out = append(out, protocol.SessionRef{ID: protocol.IDPrefixLocal + st.id, Client: st.client})
	}
	pending := s.pendingSessions
	s.sessMu.Unlock()
	if pending != nil {
		out = append(out, pending()...)
	}
	return out
}

// clientName is the clientInfo.name a stateful session initialized with.
func clientName(ss *mcp.ServerSession) string {
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
		return p.ClientInfo.Name
	}
	return ""
}

func isStateless(req *mcp.CallToolRequest) bool {
	return mcphttp.IsStateless(req.ProtocolVersion())
}

// chosenBrowserID is the browser a request asked for: ?browser= on the URL,
// else the session's select_browser choice, else "" for the default.
func (s *Server) chosenBrowserID(req *mcp.CallToolRequest) string {
	return s.browserFor(req.Session, req.Extra)
}

func (s *Server) browserFor(ss *mcp.ServerSession, extra *mcp.RequestExtra) string {
	if extra != nil && extra.Header != nil {
		if id := extra.Header.Get(BrowserHeader); id != "" {
			return id
		}
	}
	if ss == nil {
		return ""
	}
	s.sessMu.Lock()
	st := s.sessions[ss]
	s.sessMu.Unlock()
	if st == nil {
		return ""
	}
	return st.chosen()
}

// errNoBrowser explains a call that found no browser in time.
type errNoBrowser struct {
	wanted string
	waited time.Duration
}

func (e errNoBrowser) Error() string {
	if e.wanted != "" {
		return fmt.Sprintf("browser %q is not connected (waited %s for it). Call list_browsers to see the connected ones, or reopen that browser.", e.wanted, e.waited)
	}
	return fmt.Sprintf("no browser is connected to Browser Bridge (waited %s). Open the browser with the Browser Bridge extension loaded, or run `browserbridge doctor`.", e.waited)
}

// waitBrowser returns the browser a call goes to, waiting up to BrowserWait
// for it to (re)connect.
func (s *Server) waitBrowser(ctx context.Context, wanted string) (*hostlink.Browser, error) {
	var timer *time.Timer
	start := time.Now()
	for {
		change := s.changed() // before looking, so no change is missed
		if s.links != nil {
			if wanted != "" {
				if b, ok := s.links.Browser(wanted); ok {
					return b, nil
				}
			} else if b, ok := s.links.Default(); ok {
				return b, nil
			}
		}
		if timer == nil {
			s.stats.WaitedCalls.Add(1)
			timer = time.NewTimer(s.opts.BrowserWait)
			defer timer.Stop()
		}
		select {
		case <-change:
		case <-timer.C:
			s.stats.TimedOut.Add(1)
			return nil, errNoBrowser{wanted: wanted, waited: time.Since(start).Round(time.Millisecond)}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// progressRoute is where a progress notification from the extension goes.
type progressRoute struct {
	ctx     context.Context // the call's, so the SDK puts it on the call's stream
	session *mcp.ServerSession
	token   any // the client's own progress token
}

// toolCall is a tools/call on its way to a browser, whichever path
// brought it (the SDK's handler or the Streamable HTTP fast path).
type toolCall struct {
	link     *linkSession       // whose call it is: link ids, tab group, pinned browser
	ss       *mcp.ServerSession // the SDK session progress goes back on; nil without progress
	header   http.Header        // the HTTP request's: ?browser= arrives in BrowserHeader
	name     string
	args     json.RawMessage
	progress any    // the client's progress token; nil for none
	version  string // the protocol version the call is answered in (eras.go)
}

// linkCallParams is what the extension gets for a tools/call (fields in
// the order a map would have them, as it always got them).
type linkCallParams struct {
	Meta      linkCallMeta    `json:"_meta"`
	Arguments json.RawMessage `json:"arguments"`
	Name      string          `json:"name"`
}

type linkCallMeta struct {
	Session       json.RawMessage `json:"browserbridge/session"`
	ProgressToken string          `json:"progressToken,omitempty"`
}

// encode is json.Marshal(p) without its second pass: Arguments and
// Session are valid JSON already (the client's request was decoded or
// checked with json.Valid, the session's _meta was encoded by
// json.Marshal), so they are copied as they are, where encoding/json
// would check and compact them again. TestLinkCallParamsEncode holds it
// to json.Marshal's meaning.
func (p *linkCallParams) encode() rpcstream.Encoded {
	args := p.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	b := make([]byte, 0, len(p.Meta.Session)+len(args)+len(p.Name)+len(p.Meta.ProgressToken)+80)
	b = append(b, `{"_meta":{"browserbridge/session":`...)
	b = append(b, p.Meta.Session...)
	if p.Meta.ProgressToken != "" {
		b = append(b, `,"progressToken":`...)
		b = rpcstream.AppendString(b, p.Meta.ProgressToken)
	}
	b = append(b, `},"arguments":`...)
	b = append(b, args...)
	b = append(b, `,"name":`...)
	b = rpcstream.AppendString(b, p.Name)
	return append(b, '}')
}

// browserInfoMeta is the browserbridge/browser _meta of a result.
type browserInfoMeta struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// callBrowserTool is the SDK's handler for the browser's tools.
func (s *Server) callBrowserTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s.stats.Calls.Add(1)
	c := toolCall{link: s.linkOf(req.Session, req), name: req.Params.Name, args: req.Params.Arguments, version: requestVersion(req)}
	if req.Extra != nil {
		c.header = req.Extra.Header
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		c.ss, c.progress = req.Session, tok
	}
	return s.forward(ctx, c)
}

// forward sends a tools/call to the browser the call is for and returns
// its result, with the answering browser in _meta. Callers count it in
// Stats.Calls.
func (s *Server) forward(ctx context.Context, c toolCall) (*mcp.CallToolResult, error) {
	ans, res, err := s.callBrowser(ctx, c)
	if ans.browser == nil {
		return res, err
	}
	return s.toolResult(c.name, ans), nil
}

// browserAnswer is a browser's result for a tools/call, as it came.
type browserAnswer struct {
	browser *hostlink.Browser // nil when there is no answer
	raw     json.RawMessage
}

// callBrowser sends a tools/call to the browser the call is for. It
// returns the browser's answer, or, when there is none (no browser, a
// failed call), the result or error the client gets instead, counted in
// the stats.
func (s *Server) callBrowser(ctx context.Context, c toolCall) (browserAnswer, *mcp.CallToolResult, error) {
	link := c.link
	if !link.stateless {
		link.begin()
		defer link.end()
	}
	// ?browser= on the URL, else the session's select_browser choice, else
	// the default browser.
	wanted := c.header.Get(BrowserHeader)
	if wanted == "" {
		wanted = link.chosen()
	}
	b, err := s.waitBrowser(ctx, wanted)
	if err != nil {
		s.stats.CallErrors.Add(1)
		if ctx.Err() != nil {
			return browserAnswer{}, nil, ctx.Err()
		}
		return browserAnswer{}, toolError(err.Error()), nil
	}
	id := protocol.IDPrefixLocal + link.id + ":" + strconv.FormatUint(link.next.Add(1), 10)

	params := &linkCallParams{Name: c.name, Arguments: c.args, Meta: linkCallMeta{Session: link.meta}}
	if len(params.Arguments) == 0 {
		params.Arguments = json.RawMessage("{}")
	}
	if c.progress != nil {
		// The extension reports progress against the link id, unique across
		// sessions; the client's token goes back on the way out.
		params.Meta.ProgressToken = id
		s.progMu.Lock()
		s.progress[id] = progressRoute{ctx: ctx, session: c.ss, token: c.progress}
		s.progMu.Unlock()
		defer func() {
			s.progMu.Lock()
			delete(s.progress, id)
			s.progMu.Unlock()
		}()
	}

	raw, err := b.Call(ctx, id, "tools/call", params.encode())
	if err != nil {
		res, err := s.callFailed(ctx, b, id, c.version, err)
		return browserAnswer{}, res, err
	}
	return browserAnswer{browser: b, raw: raw}, nil, nil
}

// toolResult decodes a browser's answer into the result the client gets,
// with the answering browser in _meta, counting it in Stats.CallErrors
// if it is one.
func (s *Server) toolResult(tool string, ans browserAnswer) *mcp.CallToolResult {
	res, err := decodeToolResult(ans.raw)
	if err != nil {
		s.stats.CallErrors.Add(1)
		return toolError(fmt.Sprintf("the browser's answer to %s was not a tool result: %v", tool, err))
	}
	if res.InputRequests != nil {
		// The SDK would ask the client and call the tool again, but the
		// extension has no way to receive the answers: refuse it plainly, on
		// every path alike.
		s.stats.CallErrors.Add(1)
		return toolError(fmt.Sprintf("the browser asked for input the client must give (inputRequests) in its answer to %s; Browser Bridge does not relay that", tool))
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[metaBrowser] = browserInfoOf(ans.browser)
	if res.IsError {
		s.stats.CallErrors.Add(1)
	}
	return res
}

// browserInfoOf is the browserbridge/browser _meta of a browser's results.
func browserInfoOf(b *hostlink.Browser) browserInfoMeta {
	id, name, version := b.Identity()
	return browserInfoMeta{ID: id, Name: name, Version: version}
}

// decodeToolResult decodes the browser's tools/call result. The common
// shape, text content and maybe isError, is read directly; anything else
// goes through the SDK's decoder (which allocates a 32 KiB buffer per
// value). Both give the same CallToolResult.
func decodeToolResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	if res, ok := decodeTextResult(raw); ok {
		return res, nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// decodeTextResult reads {"content":[{"type":"text","text":…}…],
// "isError":bool} (isError optional, keys in any order, each once); ok is
// false for anything else. raw must be valid JSON (it was decoded from
// the link's frame).
func decodeTextResult(raw []byte) (res *mcp.CallToolResult, ok bool) {
	res = &mcp.CallToolResult{Content: []mcp.Content{}}
	res.IsError, ok = scanTextResult(raw, func(text []byte) bool {
		var s string
		if plainString(text) {
			s = string(text[1 : len(text)-1])
		} else if json.Unmarshal(text, &s) != nil {
			return false
		}
		res.Content = append(res.Content, &mcp.TextContent{Text: s})
		return true
	})
	return res, ok
}

// scanTextResult checks that raw, valid JSON, is a tool result of text
// alone: {"content":[{"type":"text","text":…}…],"isError":bool}, isError
// optional, keys in any order, each once. It calls text with each text's
// string token, in order, once raw is known to have that shape up to its
// content, and stops at the first false. ok is false for any other shape
// or when text returned false.
func scanTextResult(raw []byte, text func(token []byte) bool) (isError, ok bool) {
	var content []byte
	var sawIsError bool
	ok = jsonscan.EachMember(raw, func(key, val []byte) bool {
		switch string(key) {
		case "content":
			return content == nil && setRaw(&content, val)
		case "isError":
			if sawIsError {
				return false
			}
			sawIsError = true
			switch string(val) {
			case "true":
				isError = true
				return true
			case "false":
				return true
			}
		}
		return false
	})
	if !ok || content == nil {
		return false, false
	}
	ok = jsonscan.EachElement(content, func(item []byte) bool {
		var typ, tok []byte
		ok := jsonscan.EachMember(item, func(key, val []byte) bool {
			switch string(key) {
			case "type":
				return typ == nil && setRaw(&typ, val)
			case "text":
				return tok == nil && len(val) > 0 && val[0] == '"' && setRaw(&tok, val)
			}
			return false
		})
		return ok && string(typ) == `"text"` && tok != nil && text(tok)
	})
	return isError, ok
}

// callFailed turns a failed link call into what the client should see.
func (s *Server) callFailed(ctx context.Context, b *hostlink.Browser, id, version string, err error) (*mcp.CallToolResult, error) {
	s.stats.CallErrors.Add(1)
	var rpcErr *jsonrpc2.Error
	switch {
	case ctx.Err() != nil:
		// The client cancelled (or went away): tell the extension to stop.
		s.stats.Cancelled.Add(1)
		nctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = b.Notify(nctx, "notifications/cancelled", map[string]any{"requestId": id, "reason": "the MCP client cancelled the call"})
		return nil, ctx.Err()
	case errors.Is(err, hostlink.ErrBrowserGone) && s.stopping.Load():
		// The bridge closed the link because it is stopping (a restart).
		s.stats.BrowserGone.Add(1)
		return toolError(stoppingSentence), nil
	case errors.Is(err, hostlink.ErrBrowserGone):
		s.stats.BrowserGone.Add(1)
		return toolError("The browser disconnected before answering, so the action may or may not have happened. " +
			"Check the page (read it again) before repeating the action."), nil
	case errors.As(err, &rpcErr):
		// Protocol-level refusals keep their JSON-RPC code (an unknown tool,
		// bad arguments before 2025-11-25); anything else is a failed tool run.
		if rpcErr.Code == jsonrpc2.CodeInvalidParams || rpcErr.Code == jsonrpc2.CodeMethodNotFound {
			return refusal(rpcErr, version)
		}
		return toolError(rpcErr.Message), nil
	}
	return toolError(fmt.Sprintf("calling the browser: %v", err)), nil
}

// sessionEnded tells every browser that a session is over, so the
// extension can close or ungroup its tabs (protocol: session.ended).
func (s *Server) sessionEnded(st *linkSession) {
	if s.links == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, b := range s.links.Browsers() {
		_ = b.Notify(ctx, protocol.SessionEnded, map[string]string{"session": protocol.IDPrefixLocal + st.id, "client": st.client})
	}
}

// closeSession ends the MCP session with the given link prefix
// ("local-<id>"), as the extension's popup asks with session.close.
func (s *Server) closeSession(prefix string) bool {
	s.sessMu.Lock()
	var target *mcp.ServerSession
	for ss, st := range s.sessions {
		if protocol.IDPrefixLocal+st.id == prefix {
			target = ss
		}
	}
	s.sessMu.Unlock()
	if target == nil {
		return false
	}
	_ = target.Close()
	return true
}

// HandleBrowserMessage handles what a browser sends the bridge besides the
// link's own methods: progress of a call, a change of its tools.
func (s *Server) HandleBrowserMessage(ctx context.Context, b *hostlink.Browser, req *jsonrpc2.Request) (any, error) {
	switch req.Method {
	case "notifications/progress":
		var p mcp.ProgressNotificationParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil {
			return nil, nil
		}
		key, _ := p.ProgressToken.(string)
		s.progMu.Lock()
		route, ok := s.progress[key]
		s.progMu.Unlock()
		if !ok || route.session == nil {
			return nil, nil // the call already ended
		}
		p.ProgressToken = route.token
		if err := route.session.NotifyProgress(route.ctx, &p); err != nil {
			s.log.Debug("forwarding progress", "error", err)
		}
		return nil, nil
	case protocol.SessionClose:
		var p struct {
			Session string `json:"session"`
		}
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil || p.Session == "" {
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: `session.close needs {"session": "local-<id>"}`}
		}
		if !s.closeSession(p.Session) {
			return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: fmt.Sprintf("no open MCP session %q", p.Session)}
		}
		return map[string]bool{"closed": true}, nil
	case "notifications/tools/list_changed":
		if def, ok := s.links.Default(); ok && def == b {
			go s.refreshTools(context.Background())
		}
		return nil, nil
	}
	if req.Notif {
		return nil, nil
	}
	return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: fmt.Sprintf("the bridge has no method %q", req.Method)}
}
