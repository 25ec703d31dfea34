package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// Remote MCP servers (Notion, Linear, …) are signed in to and called by the
// extension with the token the browser holds; the gateway only relays. They
// appear at /servers/{name}/mcp like the stdio servers (a stdio server of the
// same name wins) and in the aggregate as mcp_{name}_{tool}.

// RemoteSource reaches the remote servers through the browser.
type RemoteSource interface {
	// List returns the enabled remote servers with their state and tools.
	List(ctx context.Context) ([]RemoteServer, error)
	// Call runs tools/call on a remote server; params are tools/call params.
	Call(ctx context.Context, server string, params json.RawMessage) (json.RawMessage, error)
}

// RemoteServer is one remote server as the extension reports it.
type RemoteServer struct {
	Name    string            `json:"name"`
	Title   string            `json:"title,omitempty"`
	URL     string            `json:"url,omitempty"`
	State   string            `json:"state"`
	Message string            `json:"message,omitempty"`
	Tools   []json.RawMessage `json:"tools"`
}

// remoteListTimeout bounds one refresh of the remote list.
const remoteListTimeout = 10 * time.Second

// remotes is the gateway's view of the remote servers.
type remotes struct {
	g   *Gateway
	src RemoteSource

	mu      sync.Mutex
	servers map[string]RemoteServer
	err     string // why the last refresh failed, "" after a good one
	refresh chan struct{}
}

func newRemotes(g *Gateway, src RemoteSource) *remotes {
	return &remotes{g: g, src: src, servers: map[string]RemoteServer{}, refresh: make(chan struct{}, 1)}
}

// RemotesChanged asks for the remote list again (the extension said it
// changed, or a browser came or went). It does not wait.
func (g *Gateway) RemotesChanged() {
	if g.remote == nil {
		return
	}
	select {
	case g.remote.refresh <- struct{}{}:
	default:
	}
}

// run refreshes the list whenever asked, until the gateway stops.
func (r *remotes) run() {
	for {
		select {
		case <-r.g.stop:
			return
		case <-r.refresh:
		}
		ctx, cancel := context.WithTimeout(context.Background(), remoteListTimeout)
		list, err := r.src.List(ctx)
		cancel()
		r.apply(list, err)
	}
}

func (r *remotes) apply(list []RemoteServer, err error) {
	r.mu.Lock()
	if err != nil {
		// No browser, or it does not answer: its remote servers are gone
		// until it is back.
		r.err = err.Error()
		list = nil
	} else {
		r.err = ""
	}
	old := r.servers
	r.servers = make(map[string]RemoteServer, len(list))
	for _, s := range list {
		if s.Name == "" {
			continue
		}
		r.servers[s.Name] = s
	}
	var changed []string
	for name, s := range r.servers {
		if o, ok := old[name]; !ok || !sameTools(o.Tools, s.Tools) {
			changed = append(changed, name)
		}
	}
	for name := range old {
		if _, ok := r.servers[name]; !ok {
			changed = append(changed, name)
		}
	}
	r.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	r.g.toolsChanged()
	msg := appendNotification(nil, "notifications/tools/list_changed", nil)
	r.g.engine.Sessions(func(s *mcphttp.Session) {
		if slices.Contains(changed, s.Target().Name()) {
			s.Notify(msg)
		}
	})
}

func sameTools(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

func (r *remotes) get(name string) (RemoteServer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.servers[name]
	return s, ok
}

// list returns the remote servers sorted by name.
func (r *remotes) list() []RemoteServer {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RemoteServer, 0, len(r.servers))
	for _, s := range r.servers {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RemoteHealth reports the remote servers for /health.
func (g *Gateway) RemoteHealth() []RemoteServer {
	if g.remote == nil {
		return []RemoteServer{}
	}
	list := g.remote.list()
	for i := range list {
		// The tools are on /servers/{name}/mcp; a custom server's URL is
		// the user's business, not /health's (it answers without a token).
		list[i].Tools, list[i].URL = nil, ""
	}
	return list
}

// remoteTarget serves one remote server's route.
type remoteTarget struct {
	r      *remotes
	server string
}

func (t remoteTarget) name() string { return t.server }

func (t remoteTarget) initResult() json.RawMessage {
	s, _ := t.r.get(t.server)
	title := s.Title
	if title == "" {
		title = s.Name
	}
	out, _ := json.Marshal(map[string]any{
		"protocolVersion": mcphttp.VersionLatestSession,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
		"serverInfo":      map[string]any{"name": "remote/" + t.server, "title": title, "version": t.r.g.opts.Version},
		"instructions":    fmt.Sprintf("Tools of the remote MCP server %s, called by the browser with its own sign-in.", s.URL),
	})
	return out
}

func (t remoteTarget) open(context.Context, *Session, json.RawMessage) (json.RawMessage, error) {
	if _, ok := t.r.get(t.server); !ok {
		return nil, fmt.Errorf("remote server %q is not available: is the browser connected and the server enabled?", t.server)
	}
	return t.initResult(), nil
}

func (t remoteTarget) discover(context.Context) (json.RawMessage, error) {
	return discoverResult(t.initResult(), "remote/"+t.server)
}

func (t remoteTarget) request(ctx context.Context, s *Session, e *mcphttp.Message, sink mcphttp.Sink) {
	srv, ok := t.r.get(t.server)
	if !ok {
		sink.Send(mcphttp.ErrorBody(e.ID, rpccode.Unavailable, fmt.Sprintf("remote server %q is no longer available (browser gone or server disabled)", t.server)), true)
		return
	}
	switch e.Method {
	case "tools/list":
		tools := srv.Tools
		if tools == nil {
			tools = []json.RawMessage{}
		}
		res, _ := json.Marshal(map[string]any{"tools": tools})
		sink.Send(mcphttp.AppendResponse(nil, e.ID, res, nil), true)
	case "tools/call":
		go func() {
			res, err := t.r.src.Call(ctx, t.server, e.Params)
			if err != nil {
				sink.Send(mcphttp.ErrorBody(e.ID, rpccode.Unavailable, err.Error()), true)
				return
			}
			sink.Send(mcphttp.AppendResponse(nil, e.ID, res, nil), true)
		}()
	default:
		sink.Send(mcphttp.ErrorBody(e.ID, rpccode.MethodNotFound, fmt.Sprintf("method %q is not relayed to remote servers: only tools/list and tools/call", e.Method)), true)
	}
}

func (t remoteTarget) notification(*Session, *mcphttp.Message) {}

func (t remoteTarget) response(_ *Session, e *mcphttp.Message) error {
	return fmt.Errorf("remote servers send no requests; nothing waits for id %s", e.ID)
}

func (t remoteTarget) close(*Session) {}
