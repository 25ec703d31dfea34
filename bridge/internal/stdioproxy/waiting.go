package stdioproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// While no bridge answers, the proxy answers the client itself, so that a
// client started before the bridge shows a server that is connected and
// waiting rather than one that failed: initialize at once, lists that are
// empty (which is true: nothing is there yet), and calls with a tool error
// that says what to run. The bridge's tools come with
// notifications/tools/list_changed once it answers.
//
// Only the run loop (the goroutine that reads stdin) answers the client
// while waiting and ends the wait (bridgeArrived), so the client never gets
// list_changed before the answer to its initialize.

// defaultStartHint is Options.StartHint's zero value.
const defaultStartHint = "run `browserbridge start`"

// Methods the proxy answers itself while waiting.
const (
	methodPing              = "ping"
	methodToolsList         = "tools/list"
	methodToolsCall         = "tools/call"
	methodResourcesList     = "resources/list"
	methodResourceTemplates = "resources/templates/list"
	methodDiscover          = "server/discover"
	methodToolsListChanged  = "notifications/tools/list_changed"
)

// neverDeadline stands for "no deadline" where pause wants one.
const neverDeadline = 100 * 365 * 24 * time.Hour

// linkResult is what awaitBridge found: the first link to the bridge, or
// the refusal that makes waiting pointless.
type linkResult struct {
	link *link
	err  error
}

// firstAttempt tries the endpoint once. It reports whether the bridge
// answers (the link is then current); when it does not, the proxy is
// waiting from then on, and says so in the log. It fails only when the
// bridge refuses the proxy, or the proxy is closing.
func (p *proxy) firstAttempt() (bool, error) {
	l, _, err := p.connect(time.Now().Add(attemptTimeout))
	if err == nil {
		p.mu.Lock()
		p.cur = l
		p.mu.Unlock()
		return true, nil
	}
	if p.ctx.Err() != nil {
		return false, errClosing
	}
	var re *refusedError
	if errors.As(err, &re) {
		return false, err
	}
	p.mu.Lock()
	p.waiting = true
	p.lastDialErr = err
	p.mu.Unlock()
	p.log.Warn(fmt.Sprintf("no bridge answers at %s yet: %s; waiting for it (the client sees no tools until it answers)", p.opts.Endpoint, p.hint), "error", err)
	return false, nil
}

// awaitBridge tries the endpoint with backoff (up to retryMax between
// attempts) until the bridge answers or refuses the proxy, and delivers
// that on the channel it returns; nothing, if the proxy closes first. The
// link it delivers is not yet current: bridgeArrived makes it so.
func (p *proxy) awaitBridge() <-chan linkResult {
	found := make(chan linkResult, 1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		never := time.Now().Add(neverDeadline)
		for attempt := 0; ; attempt++ {
			if !p.pause(attempt, never) {
				return // closing
			}
			l, _, err := p.connect(time.Now().Add(attemptTimeout))
			if err == nil {
				found <- linkResult{link: l}
				return
			}
			if p.ctx.Err() != nil {
				return
			}
			var re *refusedError
			if errors.As(err, &re) {
				p.log.Error("the bridge refused the proxy", "url", p.opts.Endpoint, "error", err)
				found <- linkResult{err: err}
				return
			}
			p.mu.Lock()
			p.lastDialErr = err
			p.mu.Unlock()
			p.log.Debug("the bridge does not answer yet", "attempt", attempt+1, "error", err)
		}
	}()
	return found
}

// bridgeArrived ends the wait with link l, the first to the bridge, and
// tells the client to list the tools again if it was answered meanwhile.
// It returns false when l cannot serve the client (it broke already, or
// the client initialized after the attempt that made l began, so l has no
// session for it): the caller waits again.
func (p *proxy) bridgeArrived(l *link) bool {
	p.mu.Lock()
	if l.dead || p.closing || (p.initReq != nil && l.sid == "" && !mcphttp.IsStateless(p.protoVersion())) {
		l.dead = true
		p.mu.Unlock()
		l.cancel()
		return false
	}
	// The client's notifications/initialized may have come after l's
	// session was initialized.
	sendInitialized := p.initialized && l.sid != "" && !l.initialized
	p.cur = l
	p.waiting = false
	p.lastDialErr = nil
	tell := p.answered
	sid := l.sid
	p.mu.Unlock()
	if sendInitialized {
		n := &jsonrpc.Request{Method: methodInitialized, Params: json.RawMessage("{}")}
		if err := p.writeShort(l, n); err != nil {
			// The reconnect that follows replays it, in a new session.
			p.breakLink(l, err)
		}
	}
	p.log.Info("the bridge answers at "+p.opts.Endpoint+"; forwarding stdio to it", "session", sid)
	if tell {
		p.toClient(&jsonrpc.Request{Method: methodToolsListChanged, Params: json.RawMessage("{}")})
	}
	return true
}

// answerWhileWaiting answers msg from the client itself if no bridge has
// answered yet, and reports whether it did (or dropped msg, which expects
// no answer).
func (p *proxy) answerWhileWaiting(msg jsonrpc.Message) bool {
	p.mu.Lock()
	waiting := p.waiting
	p.mu.Unlock()
	if !waiting {
		return false
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		// An answer to a request the bridge never made.
		return true
	}
	if !req.IsCall() {
		if req.Method == methodInitialized {
			p.mu.Lock()
			p.initialized = true
			p.mu.Unlock()
		}
		return true // the bridge has nothing to be told yet
	}
	p.toClient(p.localAnswer(req))
	return true
}

// localAnswer is the proxy's own answer to req while no bridge answers.
func (p *proxy) localAnswer(req *jsonrpc.Request) *jsonrpc.Response {
	var result any
	switch req.Method {
	case methodInitialize:
		var params struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if len(req.Params) == 0 || json.Unmarshal(req.Params, &params) != nil {
			return errorResponse(req.ID, jsonrpc.CodeInvalidParams, "initialize: params must be an object with protocolVersion, capabilities and clientInfo")
		}
		p.mu.Lock()
		again := p.initReq != nil
		if !again {
			p.initReq = req // initialized with the bridge when it comes
			p.answered = true
		}
		p.mu.Unlock()
		if again {
			return errorResponse(req.ID, rpccode.InvalidRequest, "the session is initialized already")
		}
		version := mcphttp.Negotiate(params.ProtocolVersion, mcphttp.Versions)
		p.setProtoVersion(version)
		p.log.Info("answered the client's initialize while waiting for the bridge", "protocol", version)
		result = &mcp.InitializeResult{
			ProtocolVersion: version,
			Capabilities: &mcp.ServerCapabilities{
				Tools:     &mcp.ToolCapabilities{ListChanged: true},
				Resources: &mcp.ResourceCapabilities{},
			},
			ServerInfo: &mcp.Implementation{Name: "browserbridge", Title: "Browser Bridge", Version: p.serverVersion()},
		}
	case methodPing:
		result = struct{}{}
	case methodToolsList:
		result = map[string]any{"tools": []any{}}
	case methodResourcesList:
		result = map[string]any{"resources": []any{}}
	case methodResourceTemplates:
		result = map[string]any{"resourceTemplates": []any{}}
	case methodToolsCall:
		result = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: p.notRunning()}}, IsError: true}
	case methodDiscover:
		// A client of the stateless era falls back to initialize, which
		// the proxy can answer.
		return errorResponse(req.ID, rpccode.MethodNotFound, "server/discover is not available until the bridge answers: use initialize")
	default:
		return errorResponse(req.ID, CodeBridgeUnavailable, p.notRunning())
	}
	data, err := json.Marshal(result)
	if err != nil {
		return errorResponse(req.ID, jsonrpc.CodeInternalError, err.Error())
	}
	return &jsonrpc.Response{ID: req.ID, Result: data}
}

// notRunning says that the bridge is not running and how to start it.
func (p *proxy) notRunning() string {
	return fmt.Sprintf("Browser Bridge is not running (nothing answers at %s): %s. Its tools appear here once it runs.", p.opts.Endpoint, p.hint)
}

func (p *proxy) serverVersion() string {
	if p.opts.Version != "" {
		return p.opts.Version
	}
	return "dev"
}
