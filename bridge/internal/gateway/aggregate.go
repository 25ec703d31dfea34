package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// AggregateClient is an in-process client of a server that is not a stdio
// child (the browser), for the aggregate endpoint.
type AggregateClient interface {
	// ListTools returns the server's tools as MCP tool objects.
	ListTools(ctx context.Context) ([]json.RawMessage, error)
	// CallTool calls a tool; params are tools/call params with the
	// server's own tool name. It returns the raw result.
	CallTool(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
	Close() error
}

// maxToolName is what clients accept: ^[a-zA-Z0-9_-]{1,64}$.
const maxToolName = 64

// aggregate serves /servers/all/mcp: every server's tools as
// {server}_{tool}, calls mapped back to the server and its tool name.
type aggregate struct {
	g   *Gateway
	gen atomic.Int64 // bumped when any server's tools may have changed

	mu       sync.Mutex
	sessions map[*Session]*aggSession
}

// aggSession is one aggregate session's view: the backend it uses on each
// server (shared, or its own child for per_session servers) and its
// catalog of names.
type aggSession struct {
	mu       sync.Mutex
	backends map[string]*backend
	browser  AggregateClient
	catalog  *catalog
	gen      int64
}

// catalog maps exposed names to where they go.
type catalog struct {
	tools  []json.RawMessage // as listed, renamed
	routes map[string]toolRoute
}

type toolRoute struct {
	server, tool string
	remote       bool // a remote server's, called through the browser
}

func newAggregate(g *Gateway) *aggregate {
	return &aggregate{g: g, sessions: make(map[*Session]*aggSession)}
}

func (a *aggregate) name() string { return AggregateRoute }

func (a *aggregate) state(s *Session) *aggSession {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[s]
}

func (a *aggregate) initResult() json.RawMessage {
	out, _ := json.Marshal(map[string]any{
		"protocolVersion": latestSessionVersion,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
		"serverInfo":      map[string]any{"name": "browserbridge-gateway", "title": "Browser Bridge: every server", "version": a.g.opts.Version},
		"instructions":    "The tools of every server on this gateway, named {server}_{tool}.",
	})
	return out
}

func (a *aggregate) open(ctx context.Context, s *Session, initParams json.RawMessage) (json.RawMessage, error) {
	as := &aggSession{backends: map[string]*backend{}}
	a.mu.Lock()
	a.sessions[s] = as
	a.mu.Unlock()
	return a.initResult(), nil
}

func (a *aggregate) discover(context.Context) (json.RawMessage, error) {
	return discoverResult(a.initResult())
}

// backend returns the session's backend on server name, attaching it on
// first use (a private one for per_session servers).
func (a *aggregate) backend(s *Session, as *aggSession, name string) (*backend, error) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if b := as.backends[name]; b != nil {
		return b, nil
	}
	srv := a.g.server(name)
	if srv == nil {
		return nil, fmt.Errorf("server %q is no longer configured", name)
	}
	b := srv.shared
	if srv.cfg.PerSession {
		b = newBackend(a.g, srv, true)
		b.privateInit = a.g.gatewayInit
	}
	b.attach(s)
	as.backends[name] = b
	return b, nil
}

// catalogFor builds (or reuses) the session's catalog.
func (a *aggregate) catalogFor(ctx context.Context, s *Session, as *aggSession) (*catalog, error) {
	gen := a.gen.Load()
	as.mu.Lock()
	if as.catalog != nil && as.gen == gen {
		c := as.catalog
		as.mu.Unlock()
		return c, nil
	}
	as.mu.Unlock()

	type entry struct {
		server, tool string
		raw          json.RawMessage
		remote       bool
	}
	var entries []entry
	var failures []string
	if br := a.g.opts.Browser; br != nil && br.Connect != nil {
		as.mu.Lock()
		cl := as.browser
		as.mu.Unlock()
		var err error
		if cl == nil {
			if cl, err = br.Connect(ctx); err == nil {
				as.mu.Lock()
				as.browser = cl
				as.mu.Unlock()
			}
		}
		if err == nil {
			var tools []json.RawMessage
			if tools, err = cl.ListTools(ctx); err == nil {
				for _, t := range tools {
					entries = append(entries, entry{BrowserRoute, toolNameOf(t), t, false})
				}
			}
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", BrowserRoute, err))
		}
	}
	for _, name := range a.g.Names() {
		b, err := a.backend(s, as, name)
		if err == nil {
			var tools []json.RawMessage
			if tools, err = b.toolList(ctx); err == nil {
				for _, t := range tools {
					entries = append(entries, entry{name, toolNameOf(t), t, false})
				}
			}
		}
		if err != nil {
			// One server down must not hide the others' tools.
			failures = append(failures, fmt.Sprintf("%s: %v", name, err))
		}
	}
	if a.g.remote != nil {
		for _, r := range a.g.remote.list() {
			for _, t := range r.Tools {
				entries = append(entries, entry{r.Name, toolNameOf(t), t, true})
			}
		}
	}
	if len(failures) > 0 {
		a.g.log.Warn("aggregate tool list is missing servers", "failures", failures)
	}
	// Remote servers' tools are named mcp_{server}_{tool} (spec 002).
	label := func(e entry) string {
		if e.remote {
			return "mcp_" + e.server
		}
		return e.server
	}
	sort.Slice(entries, func(i, j int) bool {
		if li, lj := label(entries[i]), label(entries[j]); li != lj {
			return li < lj
		}
		return entries[i].tool < entries[j].tool
	})
	c := &catalog{routes: make(map[string]toolRoute, len(entries))}
	for _, e := range entries {
		name := uniqueToolName(label(e), e.tool, c.routes)
		c.routes[name] = toolRoute{e.server, e.tool, e.remote}
		renamed, err := setField(e.raw, "name", name)
		if err != nil {
			continue
		}
		c.tools = append(c.tools, renamed)
	}
	as.mu.Lock()
	as.catalog, as.gen = c, gen
	as.mu.Unlock()
	return c, nil
}

func toolNameOf(t json.RawMessage) string {
	var n struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(t, &n)
	return n.Name
}

// normalizeToolName makes {server}_{tool} fit ^[a-zA-Z0-9_-]{1,64}$:
// other characters become '_', and a name too long keeps its start and
// gets a hash of the whole, so it stays unique and stable.
func normalizeToolName(server, tool string) string {
	raw := server + "_" + tool
	var b strings.Builder
	for _, r := range raw {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > maxToolName {
		sum := sha256.Sum256([]byte(raw))
		name = name[:maxToolName-9] + "_" + hex.EncodeToString(sum[:4])
	}
	return name
}

// uniqueToolName resolves collisions deterministically: entries come
// sorted by server and tool, and a later one gets _2, _3, ….
func uniqueToolName(server, tool string, taken map[string]toolRoute) string {
	base := normalizeToolName(server, tool)
	name := base
	for n := 2; ; n++ {
		if _, dup := taken[name]; !dup {
			return name
		}
		suffix := fmt.Sprintf("_%d", n)
		name = base[:min(len(base), maxToolName-len(suffix))] + suffix
	}
}

// toolList returns the child's tools (all pages), filtered, cached until
// the child says its list changed or is restarted.
func (b *backend) toolList(ctx context.Context) ([]json.RawMessage, error) {
	b.toolsMu.Lock()
	cached, gen := b.tools, b.toolsGen
	b.toolsMu.Unlock()
	if cached != nil {
		return cached, nil
	}
	// Fetched without the lock: starting the child invalidates the cache.
	c, _, err := b.ready(ctx)
	if err != nil {
		return nil, err
	}
	var all []json.RawMessage
	cursor := ""
	for page := 0; page < 100; page++ {
		params := json.RawMessage("{}")
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := b.internalCall(ctx, c, "tools/list", params)
		if err != nil {
			return nil, err
		}
		var r struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, fmt.Errorf("tools/list result: %w", err)
		}
		for _, t := range r.Tools {
			if b.srv.filter.allows(toolNameOf(t)) {
				all = append(all, t)
			}
		}
		if r.NextCursor == "" {
			break
		}
		cursor = r.NextCursor
	}
	if all == nil {
		all = []json.RawMessage{}
	}
	b.toolsMu.Lock()
	if b.toolsGen == gen {
		b.tools = all
	}
	b.toolsMu.Unlock()
	return all, nil
}

func (b *backend) invalidateTools() {
	b.toolsMu.Lock()
	b.tools = nil
	b.toolsGen++
	b.toolsMu.Unlock()
	b.g.agg.gen.Add(1)
}

func (a *aggregate) request(ctx context.Context, s *Session, e *envelope, sink sink) {
	as := a.state(s)
	if as == nil {
		sink.send(errorResponse(e.ID, codeInternal, "the aggregate session is not open"), true)
		return
	}
	switch e.Method {
	case "tools/list":
		c, err := a.catalogFor(ctx, s, as)
		if err != nil {
			sink.send(errorResponse(e.ID, codeInternal, err.Error()), true)
			return
		}
		res, _ := json.Marshal(map[string]any{"tools": c.tools})
		sink.send(appendResponse(nil, e.ID, res, nil), true)
	case "tools/call":
		var p map[string]json.RawMessage
		var name string
		if json.Unmarshal(e.Params, &p) != nil || json.Unmarshal(p["name"], &name) != nil || name == "" {
			sink.send(errorResponse(e.ID, codeInvalidParams, "tools/call needs params.name, the tool to call"), true)
			return
		}
		c, err := a.catalogFor(ctx, s, as)
		if err != nil {
			sink.send(errorResponse(e.ID, codeInternal, err.Error()), true)
			return
		}
		rt, ok := c.routes[name]
		if !ok {
			sink.send(errorResponse(e.ID, codeInvalidParams, fmt.Sprintf("no tool %q on the aggregate endpoint: tools/list names them {server}_{tool}", name)), true)
			return
		}
		p["name"], _ = json.Marshal(rt.tool)
		params, _ := json.Marshal(p)
		if rt.remote {
			remoteTarget{a.g.remote, rt.server}.request(ctx, s, &envelope{JSONRPC: "2.0", ID: e.ID, Method: e.Method, Params: params}, sink)
			return
		}
		if rt.server == BrowserRoute {
			a.callBrowser(ctx, as, e.ID, params, sink)
			return
		}
		b, err := a.backend(s, as, rt.server)
		if err != nil {
			sink.send(errorResponse(e.ID, codeUnavailable, err.Error()), true)
			return
		}
		fwd := *e
		fwd.Params = params
		b.forward(ctx, s, &fwd, sink)
	default:
		sink.send(errorResponse(e.ID, codeMethodNotFound, fmt.Sprintf("method %q is not served by the aggregate endpoint, which serves tools only; use /servers/{name}/mcp for the rest", e.Method)), true)
	}
}

func (a *aggregate) callBrowser(ctx context.Context, as *aggSession, id, params json.RawMessage, sink sink) {
	as.mu.Lock()
	cl := as.browser
	as.mu.Unlock()
	if cl == nil {
		sink.send(errorResponse(id, codeUnavailable, "the browser is not reachable from the aggregate endpoint"), true)
		return
	}
	go func() {
		res, err := cl.CallTool(ctx, params)
		if err != nil {
			sink.send(errorResponse(id, codeInternal, err.Error()), true)
			return
		}
		sink.send(appendResponse(nil, id, res, nil), true)
	}()
}

func (a *aggregate) backendsOf(s *Session) []*backend {
	as := a.state(s)
	if as == nil {
		return nil
	}
	return as.all()
}

func (a *aggregate) notification(s *Session, e *envelope) {
	if e.Method == "notifications/cancelled" {
		for _, b := range a.backendsOf(s) {
			b.cancel(s, e.Params)
		}
	}
}

func (a *aggregate) response(s *Session, e *envelope) error {
	for _, b := range a.backendsOf(s) {
		if b.answer(s, e) == nil {
			return nil
		}
	}
	return fmt.Errorf("no request with id %s is waiting for this session's answer", e.ID)
}

func (a *aggregate) close(s *Session) {
	a.mu.Lock()
	as := a.sessions[s]
	delete(a.sessions, s)
	a.mu.Unlock()
	if as == nil {
		return
	}
	for _, b := range as.all() {
		b.detach(s)
	}
	if as.browser != nil {
		_ = as.browser.Close()
	}
}

func (as *aggSession) all() []*backend {
	as.mu.Lock()
	defer as.mu.Unlock()
	out := make([]*backend, 0, len(as.backends))
	for _, b := range as.backends {
		out = append(out, b)
	}
	return out
}

// toolsChanged tells aggregate sessions that the catalog may differ now.
func (g *Gateway) toolsChanged() {
	g.agg.gen.Add(1)
	g.agg.mu.Lock()
	targets := make([]*Session, 0, len(g.agg.sessions))
	for s := range g.agg.sessions {
		targets = append(targets, s)
	}
	g.agg.mu.Unlock()
	msg := appendNotification(nil, "notifications/tools/list_changed", nil)
	for _, s := range targets {
		s.notify(msg)
	}
}
