package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
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
	closed   bool // no backend may be attached any more
	backends map[string]*backend
	browser  AggregateClient
	catalog  *catalog
	gen      int64
}

// catalog maps exposed names to where they go.
type catalog struct {
	tools    []json.RawMessage // as listed, renamed
	routes   map[string]toolRoute
	complete bool      // every server answered
	built    time.Time // when it was built
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
		"protocolVersion": mcphttp.VersionLatestSession,
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
	if !s.Stateless {
		go a.prefetch(s, as)
	}
	return a.initResult(), nil
}

// prefetch starts every server's tool list as the session opens: a server
// that starts slowly (npx fetching a package) gets the time the client
// takes to send tools/list on top of the budget.
func (a *aggregate) prefetch(s *Session, as *aggSession) {
	ctx, cancel := context.WithTimeout(context.Background(), toolsFetchTimeout)
	defer cancel()
	for _, name := range a.g.Names() {
		if b, err := a.backend(s, as, name); err == nil {
			go func() { _, _ = b.toolList(ctx) }()
		}
	}
}

func (a *aggregate) discover(context.Context) (json.RawMessage, error) {
	return discoverResult(a.initResult(), "browserbridge-gateway")
}

// backend returns the session's backend on server name, attaching it on
// first use (a private one for per_session servers).
func (a *aggregate) backend(s *Session, as *aggSession, name string) (*backend, error) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if b := as.backends[name]; b != nil {
		return b, nil
	}
	if as.closed {
		return nil, fmt.Errorf("the aggregate session has ended")
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

// catalogRetry is how long a catalog that misses a server is reused
// before the missing servers are asked again (a server that answers late
// rejoins at once, by list_changed).
const catalogRetry = 30 * time.Second

// listed is one server's part of a catalog.
type listed struct {
	server string
	tools  []json.RawMessage
	err    error
	remote bool
}

// catalogFor builds (or reuses) the session's catalog. Every server is
// asked at once, each within the aggregate budget: one that does not
// answer in time is left out (logged, and shown in /health), and the
// others' tools are listed without waiting for it.
func (a *aggregate) catalogFor(ctx context.Context, s *Session, as *aggSession) (*catalog, error) {
	gen := a.gen.Load()
	as.mu.Lock()
	if c := as.catalog; c != nil && as.gen == gen && (c.complete || time.Since(c.built) < catalogRetry) {
		as.mu.Unlock()
		return c, nil
	}
	as.mu.Unlock()

	budget := a.g.opts.AggregateTimeout
	lctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	names := a.g.Names()
	parts := make([]listed, len(names)+1)
	var wg sync.WaitGroup
	if br := a.g.opts.Browser; br != nil && br.Connect != nil {
		wg.Go(func() { parts[len(names)] = a.browserTools(lctx, as) })
	}
	for i, name := range names {
		wg.Go(func() {
			parts[i] = listed{server: name}
			b, err := a.backend(s, as, name)
			if err == nil {
				parts[i].tools, err = b.toolList(lctx)
			}
			parts[i].err = err
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		// The client left: nothing to build, and no server to blame.
		return nil, ctx.Err()
	}

	var entries []listed
	var missing, failures []string
	for _, p := range parts {
		switch {
		case p.server == "":
			continue // no browser route
		case p.err != nil:
			why := p.err.Error()
			switch {
			case errors.Is(p.err, errStarting):
				why = fmt.Sprintf("no answer to initialize within %s", budget)
			case errors.Is(p.err, context.DeadlineExceeded):
				why = fmt.Sprintf("no answer to tools/list within %s", budget)
			}
			missing = append(missing, p.server)
			failures = append(failures, fmt.Sprintf("%s: %s", p.server, why))
			a.g.leftOut(p.server, why)
		default:
			entries = append(entries, p)
			a.g.leftOut(p.server, "")
		}
	}
	if a.g.remote != nil {
		for _, r := range a.g.remote.list() {
			entries = append(entries, listed{server: r.Name, tools: r.Tools, remote: true})
		}
	}
	if len(missing) > 0 {
		// One server down or hung must not hide the others' tools.
		a.g.log.Warn("aggregate tool list is missing servers", "servers", missing, "failures", failures)
	}
	c := buildCatalog(entries)
	c.complete, c.built = len(missing) == 0, time.Now()
	as.mu.Lock()
	as.catalog, as.gen = c, gen
	as.mu.Unlock()
	return c, nil
}

// browserTools lists the browser's tools through the session's in-process
// client, connecting it on first use.
func (a *aggregate) browserTools(ctx context.Context, as *aggSession) listed {
	out := listed{server: BrowserRoute}
	as.mu.Lock()
	cl := as.browser
	as.mu.Unlock()
	if cl == nil {
		var err error
		if cl, err = a.g.opts.Browser.Connect(ctx); err != nil {
			out.err = err
			return out
		}
		as.mu.Lock()
		if as.browser == nil {
			as.browser = cl
		} else {
			_ = cl.Close()
			cl = as.browser
		}
		as.mu.Unlock()
	}
	out.tools, out.err = cl.ListTools(ctx)
	return out
}

// buildCatalog names the listed tools {server}_{tool} (remote servers'
// mcp_{server}_{tool}), collisions resolved in a stable order.
func buildCatalog(parts []listed) *catalog {
	type entry struct {
		label, server, tool string
		raw                 json.RawMessage
		remote              bool
	}
	var entries []entry
	for _, p := range parts {
		label := p.server
		if p.remote {
			label = "mcp_" + p.server // spec 002
		}
		for _, t := range p.tools {
			entries = append(entries, entry{label, p.server, toolNameOf(t), t, p.remote})
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].label != entries[j].label {
			return entries[i].label < entries[j].label
		}
		return entries[i].tool < entries[j].tool
	})
	c := &catalog{routes: make(map[string]toolRoute, len(entries))}
	for _, e := range entries {
		name := uniqueToolName(e.label, e.tool, c.routes)
		c.routes[name] = toolRoute{e.server, e.tool, e.remote}
		renamed, err := setField(e.raw, "name", name)
		if err != nil {
			continue
		}
		c.tools = append(c.tools, renamed)
	}
	if c.tools == nil {
		c.tools = []json.RawMessage{}
	}
	return c
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

// toolsFetch is one fetch of a child's tool list, shared by every caller
// that finds it under way.
type toolsFetch struct {
	done      chan struct{}
	tools     []json.RawMessage // set before done is closed
	err       error
	abandoned bool // a caller stopped waiting; guarded by toolsMu
}

// toolsFetchTimeout bounds one fetch of a child's tools in the background,
// long after the callers' budget: a slow server still joins the aggregate
// (its sessions are told list_changed) when it answers.
const toolsFetchTimeout = initTimeout

// toolList returns the child's tools (all pages), filtered, cached until
// the child says its list changed or is restarted. It waits at most until
// ctx ends; the fetch goes on without it.
func (b *backend) toolList(ctx context.Context) ([]json.RawMessage, error) {
	b.toolsMu.Lock()
	if b.tools != nil {
		cached := b.tools
		b.toolsMu.Unlock()
		return cached, nil
	}
	f := b.toolsFetch
	if f == nil {
		f = &toolsFetch{done: make(chan struct{})}
		b.toolsFetch = f
		go b.fetchTools(f, b.toolsGen)
	}
	b.toolsMu.Unlock()
	select {
	case <-f.done:
		return f.tools, f.err
	case <-ctx.Done():
		b.toolsMu.Lock()
		f.abandoned = true
		b.toolsMu.Unlock()
		if !b.running() {
			return nil, fmt.Errorf("stdio server %q: %w: %w", b.srv.name, errStarting, ctx.Err())
		}
		return nil, ctx.Err()
	}
}

// running reports whether the backend has an initialized child.
func (b *backend) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		return false
	}
	select {
	case <-b.conn.Done():
		return false
	default:
		return true
	}
}

// fetchTools runs one fetch; gen is the cache generation it fills.
func (b *backend) fetchTools(f *toolsFetch, gen int) {
	ctx, cancel := context.WithTimeout(context.Background(), toolsFetchTimeout)
	defer cancel()
	go func() {
		select {
		case <-b.g.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tools, err := b.fetchToolsNow(ctx)
	b.toolsMu.Lock()
	f.tools, f.err = tools, err
	if b.toolsFetch == f {
		b.toolsFetch = nil
	}
	late := false
	if err == nil && b.toolsGen == gen {
		b.tools = tools
		late = f.abandoned
	}
	b.toolsMu.Unlock()
	close(f.done)
	if late {
		// An aggregate list went without this server: its sessions learn
		// that the list is now complete.
		b.g.log.Info("stdio server answered tools/list late; it rejoins the aggregate", "server", b.srv.name)
		b.g.toolsChanged()
	}
}

// fetchToolsNow asks the child for every page of its tools.
func (b *backend) fetchToolsNow(ctx context.Context) ([]json.RawMessage, error) {
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
	return all, nil
}

func (b *backend) invalidateTools() {
	b.toolsMu.Lock()
	b.tools = nil
	b.toolsGen++
	b.toolsFetch = nil // a fetch under way fills an old generation
	b.toolsMu.Unlock()
	b.g.agg.gen.Add(1)
}

func (a *aggregate) request(ctx context.Context, s *Session, e *mcphttp.Message, sink mcphttp.Sink) {
	as := a.state(s)
	if as == nil {
		sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InternalError, "the aggregate session is not open"), true)
		return
	}
	switch e.Method {
	case "tools/list":
		c, err := a.catalogFor(ctx, s, as)
		if err != nil {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InternalError, err.Error()), true)
			return
		}
		res, _ := json.Marshal(map[string]any{"tools": c.tools})
		sink.Send(mcphttp.AppendResponse(nil, e.ID, res, nil), true)
	case "tools/call":
		var p map[string]json.RawMessage
		var name string
		if json.Unmarshal(e.Params, &p) != nil || json.Unmarshal(p["name"], &name) != nil || name == "" {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InvalidParams, "tools/call needs params.name, the tool to call"), true)
			return
		}
		c, err := a.catalogFor(ctx, s, as)
		if err != nil {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InternalError, err.Error()), true)
			return
		}
		rt, ok := c.routes[name]
		if !ok {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InvalidParams, fmt.Sprintf("no tool %q on the aggregate endpoint: tools/list names them {server}_{tool}", name)), true)
			return
		}
		p["name"], _ = json.Marshal(rt.tool)
		params, _ := json.Marshal(p)
		if rt.remote {
			remoteTarget{a.g.remote, rt.server}.request(ctx, s, &mcphttp.Message{JSONRPC: "2.0", ID: e.ID, Method: e.Method, Params: params}, sink)
			return
		}
		if rt.server == BrowserRoute {
			a.callBrowser(ctx, as, e.ID, params, sink)
			return
		}
		b, err := a.backend(s, as, rt.server)
		if err != nil {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.Unavailable, err.Error()), true)
			return
		}
		fwd := *e
		fwd.Params = params
		b.forward(ctx, s, &fwd, sink)
	default:
		sink.Send(mcphttp.ErrorBody(e.ID, rpccode.MethodNotFound, fmt.Sprintf("method %q is not served by the aggregate endpoint, which serves tools only; use /servers/{name}/mcp for the rest", e.Method)), true)
	}
}

func (a *aggregate) callBrowser(ctx context.Context, as *aggSession, id, params json.RawMessage, sink mcphttp.Sink) {
	as.mu.Lock()
	cl := as.browser
	as.mu.Unlock()
	if cl == nil {
		sink.Send(mcphttp.ErrorBody(id, rpccode.Unavailable, "the browser is not reachable from the aggregate endpoint"), true)
		return
	}
	go func() {
		res, err := cl.CallTool(ctx, params)
		if err != nil {
			sink.Send(mcphttp.ErrorBody(id, rpccode.InternalError, err.Error()), true)
			return
		}
		sink.Send(mcphttp.AppendResponse(nil, id, res, nil), true)
	}()
}

func (a *aggregate) backendsOf(s *Session) []*backend {
	as := a.state(s)
	if as == nil {
		return nil
	}
	return as.all()
}

func (a *aggregate) notification(s *Session, e *mcphttp.Message) {
	if e.Method == "notifications/cancelled" {
		for _, b := range a.backendsOf(s) {
			b.cancel(s, e.Params)
		}
	}
}

func (a *aggregate) response(s *Session, e *mcphttp.Message) error {
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
	as.mu.Lock()
	as.closed = true
	as.mu.Unlock()
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
		s.Notify(msg)
	}
}
