package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// RemoteServer is an MCP server whose tools are those of a browser reached
// through the proxy: `browserbridge connect` serves it over stdio. After
// every (re)connect it asks the browser for tools/list and updates its
// tools; tools/call is forwarded.
type RemoteServer struct {
	remote *Remote
	server *mcp.Server
	log    *slog.Logger

	refreshMu sync.Mutex  // one refresh at a time
	dirty     atomic.Bool // a refresh is due and not yet started

	mu     sync.Mutex
	tools  map[string][]byte // name → JSON, to see changes
	synced chan struct{}     // closed after the first tool list
	once   sync.Once

	clientKey string                 // relaywire.ClientMeta.Key of this process's calls
	calledAs  atomic.Pointer[string] // the client's name of the last call sent, nil before the first
	nextToken atomic.Uint64
	progMu    sync.Mutex
	progress  map[string]progressRoute // our progress token → the caller's
}

// progressRoute is where the progress of one call goes.
type progressRoute struct {
	ctx     context.Context // the call's
	session *mcp.ServerSession
	token   any // the client's own progress token
}

// NewRemoteServer returns the server and its Remote (not yet running: call
// Remote().Run).
func NewRemoteServer(opts RemoteOptions, version string) *RemoteServer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &RemoteServer{log: opts.Logger, tools: make(map[string][]byte), synced: make(chan struct{}), progress: make(map[string]progressRoute),
		clientKey: strings.ToLower(rand.Text())}
	user := opts.OnReady
	opts.OnReady = func(res relaywire.ConnectResult) {
		s.refresh()
		if user != nil {
			user(res)
		}
	}
	userNote := opts.OnNotification
	opts.OnNotification = func(method string, params json.RawMessage) {
		s.notification(method, params)
		if userNote != nil {
			userNote(method, params)
		}
	}
	s.remote = NewRemote(opts)
	s.server = mcp.NewServer(&mcp.Implementation{Name: "browserbridge-connect", Version: version}, &mcp.ServerOptions{
		Instructions: "Tools of a browser reached through a Browser Bridge cloud proxy.",
		Logger:       opts.Logger,
		// Tools come and go with the browser: say so even to a client that
		// initializes before the first tool list arrived.
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	return s
}

// notification handles a notification from the browser's side.
func (s *RemoteServer) notification(method string, params json.RawMessage) {
	switch method {
	case relaywire.MethodToolsListChanged:
		s.toolsChanged()
	case relaywire.MethodProgress:
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		key, _ := p.ProgressToken.(string)
		s.progMu.Lock()
		route, ok := s.progress[key]
		s.progMu.Unlock()
		if !ok {
			return // the call already ended
		}
		p.ProgressToken = route.token
		if err := route.session.NotifyProgress(route.ctx, &p); err != nil {
			s.log.Debug("forwarding progress", "error", err)
		}
	}
}

// toolsChanged refreshes the tools in the background; changes that come
// while a refresh is due are served by it.
func (s *RemoteServer) toolsChanged() {
	if s.dirty.Swap(true) {
		return
	}
	go s.refresh()
}

// EndSession tells the browser that this process's session is over (its
// client left), so that the session's tab group goes as a local session's
// does, instead of waiting, on this process's key, for a client that will
// not come back. Best effort within ctx: false if the browser was never
// called or could not be told (no connection to the proxy just then).
func (s *RemoteServer) EndSession(ctx context.Context) bool {
	name := s.calledAs.Load()
	if name == nil {
		return false // the browser has no session of ours
	}
	return s.remote.Notify(ctx, relaywire.MethodSessionEnded, relaywire.SessionEndedParams{Key: s.clientKey, Client: *name})
}

// Remote is the proxy connection.
func (s *RemoteServer) Remote() *Remote { return s.remote }

// MCP is the SDK server, for a transport.
func (s *RemoteServer) MCP() *mcp.Server { return s.server }

// Synced is closed once the browser's tools were listed the first time.
func (s *RemoteServer) Synced() <-chan struct{} { return s.synced }

// refresh fetches the browser's tools and updates the server's; the SDK
// tells the clients (notifications/tools/list_changed) if they changed.
func (s *RemoteServer) refresh() {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	s.dirty.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), s.remote.opts.ReadyWait)
	defer cancel()
	raw, err := s.remote.Call(ctx, "tools/list", struct{}{})
	if err != nil {
		s.log.Warn("listing the browser's tools", "error", err)
		return
	}
	var list struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		s.log.Warn("the browser's tools/list result is malformed", "error", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string][]byte, len(list.Tools))
	for _, t := range list.Tools {
		var tool mcp.Tool
		if json.Unmarshal(t, &tool) != nil || tool.Name == "" {
			continue
		}
		next[tool.Name] = t
		if old, ok := s.tools[tool.Name]; ok && bytes.Equal(old, t) {
			continue
		}
		s.addTool(&tool)
	}
	var gone []string
	for name := range s.tools {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.server.RemoveTools(gone...)
	}
	s.tools = next
	s.once.Do(func() { close(s.synced) })
}

// stdioClientName is the clientInfo.name of the client that runs
// `browserbridge connect`, or the command's own name.
func stdioClientName(ss *mcp.ServerSession) string {
	if ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
			return p.ClientInfo.Name
		}
	}
	return "browserbridge connect"
}

func (s *RemoteServer) addTool(t *mcp.Tool) {
	defer func() {
		if r := recover(); r != nil { // the SDK panics on schemas it cannot use
			s.log.Warn("skipping a browser tool the SDK refused", "tool", t.Name, "error", r)
		}
	}()
	s.server.AddTool(t, s.call)
}

// call forwards tools/call to the browser.
func (s *RemoteServer) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params := map[string]any{"name": req.Params.Name}
	if len(req.Params.Arguments) > 0 {
		params["arguments"] = req.Params.Arguments
	} else {
		params["arguments"] = map[string]any{}
	}
	// The browser names the session after our client, on a key of this
	// process: its tabs stay across the bridge's restarts, as long as this
	// process (and so the client's session) lives.
	name := stdioClientName(req.Session)
	s.calledAs.Store(&name)
	meta := map[string]any{relaywire.MetaClient: relaywire.ClientMeta{Name: name, Key: s.clientKey}}
	params["_meta"] = meta
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		// Our own token, unique among this process's calls: the browser's
		// progress comes back with it (docs/relay.md), and goes to the
		// client with the client's.
		key := "progress-" + strconv.FormatUint(s.nextToken.Add(1), 10)
		meta["progressToken"] = key
		s.progMu.Lock()
		s.progress[key] = progressRoute{ctx: ctx, session: req.Session, token: tok}
		s.progMu.Unlock()
		defer func() {
			s.progMu.Lock()
			delete(s.progress, key)
			s.progMu.Unlock()
		}()
	}
	raw, err := s.remote.Call(ctx, "tools/call", params)
	if err != nil {
		var rpcErr *relaywire.Error
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &rpcErr) && mcphttp.ArgumentErrorAsResult(clientVersion(req.Session), rpcErr.Code, rpcErr.Data):
			return toolError(mcphttp.ArgumentErrorText(rpcErr.Message)), nil
		case errors.As(err, &rpcErr) && (rpcErr.Code == jsonrpc.CodeInvalidParams || rpcErr.Code == jsonrpc.CodeMethodNotFound):
			return nil, &jsonrpc.Error{Code: int64(rpcErr.Code), Message: rpcErr.Message}
		case errors.As(err, &rpcErr):
			return toolError(rpcErr.Message), nil
		}
		return toolError(err.Error()), nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return toolError(fmt.Sprintf("the browser's result is not an MCP CallToolResult: %v", err)), nil
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return &res, nil
}

// clientVersion is the protocol version the stdio client's session
// negotiated ("" before initialize, which the SDK does not let a call reach).
func clientVersion(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	if p := ss.InitializeParams(); p != nil {
		return mcphttp.Negotiate(p.ProtocolVersion, mcphttp.Versions)
	}
	return ""
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
