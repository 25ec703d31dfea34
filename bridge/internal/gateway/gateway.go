// Package gateway serves local stdio MCP servers (and the browser) to MCP
// clients over HTTP: /servers/{name}/mcp (Streamable HTTP, every era the
// local endpoints serve), /servers/{name}/sse (legacy HTTP+SSE), the
// aliases /{name}/sse and {name}.{prefix}.{domain}, and /servers/all/mcp,
// every server's tools under one endpoint.
//
// Each server runs as one child process shared by every session (package
// stdio supervises it). The gateway initializes the child itself and replays
// the result to each session; it gives every forwarded request an id of its
// own, so replies, progress and cancellations reach exactly the session they
// belong to; server→client requests (sampling, elicitation, roots) go to
// the session whose call caused them. docs/gateway.md tells the rules.
package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// Reserved route names: no configured server may take them.
const (
	BrowserRoute   = "browser"
	AggregateRoute = "all"
)

// DefaultAggregateTimeout is Options.AggregateTimeout when it is 0.
const DefaultAggregateTimeout = 2 * time.Second

// Options configure a Gateway. Zero values are documented.
type Options struct {
	// Servers are the configured stdio servers (from stdio.ParseServers).
	Servers map[string]stdio.ServerConfig
	// Stdio configures the supervisor of their processes.
	Stdio stdio.Options
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics receives the gateway's series; nil makes a private registry.
	Metrics *metrics.Registry
	// Version is reported as the aggregate endpoint's server version.
	Version string
	// SessionTimeout, ReplayBytes, MaxBodyBytes and PingInterval are the
	// session engine's (mcphttp.ServerOptions, zero values included): idle
	// sessions reaped after 30 minutes, 64 KiB kept for Last-Event-ID
	// resumption, 4 MiB bodies, a keep-alive every 30 s.
	SessionTimeout time.Duration
	ReplayBytes    int
	MaxBodyBytes   int64
	PingInterval   time.Duration
	// HostPrefix and HostDomain turn on host-based routing: a request to
	// {name}.{HostPrefix}.{HostDomain} goes to server name at /mcp, /sse
	// and /message. Empty HostDomain: off.
	HostPrefix, HostDomain string
	// AggregateTimeout is how long /servers/all/mcp waits for each
	// server's tool list: a server that has not answered by then is left
	// out of that list (logged, and named in Health) and rejoins when it
	// answers. 0 means 2 s.
	AggregateTimeout time.Duration
	// Browser serves /servers/browser/…; nil: no browser route.
	Browser *BrowserRoutes
	// Remote reaches the browser's remote MCP servers; nil: none.
	Remote RemoteSource
	// Sessions admits the sessions of every route and of the aggregate;
	// share the bridge's table so that its caps bound all endpoints
	// together. nil: a table of the gateway's own, with the defaults of
	// package sessionlimit.
	Sessions *sessionlimit.Table
}

// BrowserRoutes are the bridge's own MCP endpoints, served as the
// "browser" server: the browser is just another server on the gateway.
type BrowserRoutes struct {
	Streamable http.Handler
	SSE        http.Handler // GET: the legacy stream; its endpoint event names /message
	Message    http.Handler
	// Connect opens an in-process client session for the aggregate
	// endpoint; nil leaves the browser out of it.
	Connect func(ctx context.Context) (AggregateClient, error)
}

func (o *Options) defaults() {
	if o.AggregateTimeout <= 0 {
		o.AggregateTimeout = DefaultAggregateTimeout
	}
	if o.HostPrefix == "" {
		o.HostPrefix = "mcp"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = metrics.NewRegistry()
	}
	if o.Sessions == nil {
		o.Sessions = sessionlimit.New(sessionlimit.Options{})
	}
}

// Gateway serves the stdio servers. Create it with New, start it with
// Start, mount Handler, stop it with Shutdown.
type Gateway struct {
	opts        Options
	log         *slog.Logger
	sup         *stdio.Supervisor
	m           *gatewayMetrics
	gatewayInit json.RawMessage // the gateway's initialize params to children
	srvReqSeq   atomic.Int64
	agg         *aggregate
	remote      *remotes // nil without Options.Remote
	stop        chan struct{}
	stopOnce    sync.Once

	engine *mcphttp.Server // every route's sessions

	mu      sync.RWMutex
	servers map[string]*serverEntry
}

// New checks the servers and prepares the gateway; no process starts yet.
func New(opts Options) (*Gateway, error) {
	opts.defaults()
	for name := range opts.Servers {
		if err := checkName(name); err != nil {
			return nil, err
		}
	}
	opts.Stdio.Logger = opts.Logger
	sup, err := stdio.NewSupervisor(opts.Servers, opts.Stdio)
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		opts: opts, log: opts.Logger, sup: sup, m: newGatewayMetrics(opts.Metrics),
		servers: make(map[string]*serverEntry),
		stop:    make(chan struct{}),
	}
	g.engine = mcphttp.NewServer(mcphttp.ServerOptions{
		Sessions:       opts.Sessions,
		SessionTimeout: opts.SessionTimeout,
		ReplayBytes:    opts.ReplayBytes,
		MaxBodyBytes:   opts.MaxBodyBytes,
		PingInterval:   opts.PingInterval,
		AnyContentType: true, // the gateway relays for any client
		Name:           "this gateway",
		NewState:       g.newState,
		Opened: func(s *mcphttp.Session, transport string) {
			g.m.transport.With(s.Target().Name(), transport).Inc()
		},
		Logger: opts.Logger,
	})
	g.gatewayInit, _ = json.Marshal(map[string]any{
		"protocolVersion": mcphttp.VersionLatestSession,
		// Sampling and elicitation are routed to the client whose call
		// asked; roots are per client, so only private children get them
		// (from their own client's initialize).
		"capabilities": map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}},
		"clientInfo":   map[string]any{"name": "browserbridge-gateway", "version": opts.Version},
	})
	for name, cfg := range opts.Servers {
		cfg.Name = name
		g.servers[name] = g.newServerEntry(cfg)
	}
	g.agg = newAggregate(g)
	if opts.Remote != nil {
		g.remote = newRemotes(g, opts.Remote)
	}
	return g, nil
}

func checkName(name string) error {
	if name == BrowserRoute || name == AggregateRoute {
		return fmt.Errorf("mcpServers.%s: the name %q is reserved (/servers/%s/ is the gateway's own route); pick another", name, name, name)
	}
	return nil
}

// Start starts the supervisor (boot servers start now).
func (g *Gateway) Start() {
	g.sup.Start()
	if g.remote != nil {
		go g.remote.run()
		g.RemotesChanged()
	}
}

// Supervisor is the supervisor of the children, for status reports.
func (g *Gateway) Supervisor() *stdio.Supervisor { return g.sup }

// PersistSessions makes the gateway's Streamable HTTP sessions survive a
// restart: recorded in store, re-opened (each per-session child started
// again with its client's initialize) when their client comes back, for
// the subject owner names only (mcphttp.Server.Persist). Call it before
// serving.
func (g *Gateway) PersistSessions(store mcphttp.SessionStore, owner func(*http.Request) string) {
	g.engine.Persist(store, owner)
}

// Shutdown ends every session and stops every child (process groups).
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.stopOnce.Do(func() { close(g.stop) })
	g.engine.Close()
	return g.sup.Shutdown(ctx)
}

// Reload applies a new server configuration: only the servers whose entries
// changed are restarted; sessions on the others never notice. Sessions of a
// removed server are ended.
func (g *Gateway) Reload(servers map[string]stdio.ServerConfig) (stdio.ReloadResult, error) {
	for name := range servers {
		if err := checkName(name); err != nil {
			return stdio.ReloadResult{}, err
		}
	}
	res, err := g.sup.Reload(servers)
	if err != nil {
		return res, err
	}
	g.mu.Lock()
	removed := map[string]bool{}
	for _, name := range res.Removed {
		if srv := g.servers[name]; srv != nil {
			srv.shared.markRemoved()
			delete(g.servers, name)
		}
		removed[name] = true
	}
	for _, name := range append(append([]string{}, res.Restarted...), res.Updated...) {
		if srv := g.servers[name]; srv != nil {
			cfg := servers[name]
			cfg.Name = name
			srv.cfg, srv.filter = cfg, newToolFilter(cfg.Tools)
		}
	}
	for _, name := range res.Added {
		cfg := servers[name]
		cfg.Name = name
		g.servers[name] = g.newServerEntry(cfg)
	}
	g.mu.Unlock()
	g.engine.Sessions(func(s *mcphttp.Session) {
		if removed[s.Target().Name()] {
			s.Close()
		}
	})
	if len(res.Added)+len(res.Removed)+len(res.Restarted)+len(res.Updated) > 0 {
		g.toolsChanged()
	}
	g.log.Info("gateway configuration reloaded", "added", res.Added, "removed", res.Removed, "restarted", res.Restarted, "updated", res.Updated, "unchanged", len(res.Unchanged))
	return res, nil
}

// markRemoved makes the backend refuse new work; its child is stopped by
// the supervisor.
func (b *backend) markRemoved() {
	b.mu.Lock()
	b.dead = true
	b.mu.Unlock()
}

func (g *Gateway) server(name string) *serverEntry {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.servers[name]
}

// Names returns the configured server names, sorted.
func (g *Gateway) Names() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	names := make([]string, 0, len(g.servers))
	for n := range g.servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ServerHealth is one server in /health.
type ServerHealth struct {
	stdio.State
	Sessions int `json:"sessions"`
	InFlight int `json:"in_flight"`
	// LeftOut is set while the server is missing from the aggregate's
	// tool list (/servers/all/mcp): it did not answer in time, or is down.
	LeftOut *LeftOut `json:"aggregate_left_out,omitempty"`
}

// LeftOut says why the last aggregate tool list went without a server.
type LeftOut struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// leftOut records why server name was missing from an aggregate list
// ("" clears it: it was listed).
func (g *Gateway) leftOut(name, why string) {
	srv := g.server(name)
	if srv == nil {
		return
	}
	if why == "" {
		srv.leftOut.Store(nil)
		return
	}
	lo := &LeftOut{Reason: why, Since: time.Now()}
	if prev := srv.leftOut.Load(); prev != nil && prev.Reason == why {
		lo.Since = prev.Since
	}
	srv.leftOut.Store(lo)
}

// Health reports every server truthfully: its supervisor state (pid,
// restarts, last exit, last stderr lines) and its sessions.
func (g *Gateway) Health() []ServerHealth {
	counts := g.sessionCounts()
	var out []ServerHealth
	for _, st := range g.sup.States() {
		// During a reload the supervisor knows a new server a moment
		// before its route exists: report what a client can reach.
		srv := g.server(st.Name)
		if srv == nil {
			continue
		}
		out = append(out, ServerHealth{State: st, Sessions: counts[st.Name], InFlight: srv.shared.inFlight(), LeftOut: srv.leftOut.Load()})
	}
	return out
}

// PublicHealth is Health without the servers' stderr lines, for /health,
// which answers without the token: a server may print what only the
// token's holder should read. GET /servers/ (behind the token) has them.
func (g *Gateway) PublicHealth() []ServerHealth {
	out := g.Health()
	for i := range out {
		out[i].LastStderr = nil
	}
	return out
}

func (g *Gateway) sessionCounts() map[string]int {
	counts := map[string]int{}
	g.engine.Sessions(func(s *mcphttp.Session) { counts[s.Target().Name()]++ })
	return counts
}

// Sessions reports the open sessions of every route.
func (g *Gateway) Sessions() int {
	n := 0
	g.engine.Sessions(func(*mcphttp.Session) { n++ })
	return n
}

// UpdateGauges refreshes the per-server gauges; call it before /metrics
// is written.
func (g *Gateway) UpdateGauges() {
	counts := g.sessionCounts()
	for _, st := range g.sup.States() {
		up := 0.0
		if st.Status == stdio.StatusRunning {
			up = 1
		}
		g.m.up.With(st.Name).Set(up)
		g.m.restarts.With(st.Name).Set(float64(st.Restarts))
		g.m.sessions.With(st.Name).Set(float64(counts[st.Name]))
		if srv := g.server(st.Name); srv != nil {
			g.m.inflight.With(st.Name).Set(float64(srv.shared.inFlight()))
		}
	}
	g.m.sessions.With(AggregateRoute).Set(float64(counts[AggregateRoute]))
}

// routeFor resolves a route name to its target; nil if unknown.
func (g *Gateway) routeFor(name string) target {
	if name == AggregateRoute {
		return g.agg
	}
	if srv := g.server(name); srv != nil {
		return serverTarget{srv}
	}
	if g.remote != nil {
		if _, ok := g.remote.get(name); ok {
			return remoteTarget{g.remote, name}
		}
	}
	return nil
}

// Route is what the route name serves, for an in-process client (the
// relay): the session engine and its target; ok is false when there is
// no such route (the browser's is none: it is the bridge's own endpoint).
func (g *Gateway) Route(name string) (engine *mcphttp.Server, t mcphttp.Target, ok bool) {
	rt := g.routeFor(name)
	if rt == nil {
		return nil, nil, false
	}
	return g.engine, route{rt}, true
}

// ServeHTTP serves /servers/{name}/{mcp,sse,message} and the aliases
// /{name}/sse and /{name}/message. Mount it at "/servers/"; Alias tells
// whether a path is an alias the bridge should hand over too.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/servers/")
	if !ok {
		name, op, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		g.serveRoute(w, r, name, op, "/"+name)
		return
	}
	if rest == "" {
		g.serveList(w, r)
		return
	}
	name, op, _ := strings.Cut(rest, "/")
	g.serveRoute(w, r, name, op, "/servers/"+name)
}

// Alias reports whether path is /{name}/sse or /{name}/message of a
// configured server.
func (g *Gateway) Alias(path string) bool {
	name, op, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return ok && (op == "sse" || op == "message") && g.server(name) != nil
}

// HostRoute returns the server a Host header names under host-based
// routing ({name}.{prefix}.{domain}), or "".
func (g *Gateway) HostRoute(host string) string {
	if g.opts.HostDomain == "" {
		return ""
	}
	if h, _, ok := strings.Cut(host, ":"); ok && !strings.Contains(h, "]") {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	name, ok := strings.CutSuffix(host, "."+g.opts.HostPrefix+"."+g.opts.HostDomain)
	if !ok || name == "" || strings.Contains(name, ".") {
		return ""
	}
	return name
}

// HostSuffix is the host suffix host-based routing answers, or "".
func (g *Gateway) HostSuffix() string {
	if g.opts.HostDomain == "" {
		return ""
	}
	return g.opts.HostPrefix + "." + g.opts.HostDomain
}

// ServeHost serves a request that host-based routing sent to server name:
// /mcp, /sse and /message.
func (g *Gateway) ServeHost(w http.ResponseWriter, r *http.Request, name string) {
	g.serveRoute(w, r, name, strings.TrimPrefix(r.URL.Path, "/"), "")
}

func (g *Gateway) serveRoute(w http.ResponseWriter, r *http.Request, name, op, base string) {
	if name == BrowserRoute && g.opts.Browser != nil {
		br := g.opts.Browser
		switch op {
		case "mcp":
			br.Streamable.ServeHTTP(w, r)
			return
		case "sse":
			br.SSE.ServeHTTP(w, r)
			return
		case "message":
			br.Message.ServeHTTP(w, r)
			return
		}
	}
	t := g.routeFor(name)
	if t == nil {
		mcphttp.WriteError(w, http.StatusNotFound, nil, rpccode.InvalidRequest, fmt.Sprintf("no server named %q on this gateway; configured: %s", name, strings.Join(g.routeNames(), ", ")))
		return
	}
	switch op {
	case "mcp":
		g.engine.ServeStreamable(w, r, route{t})
	case "sse":
		if t == g.agg {
			mcphttp.WriteError(w, http.StatusNotFound, nil, rpccode.InvalidRequest, "the aggregate endpoint speaks Streamable HTTP only: use /servers/all/mcp")
			return
		}
		g.engine.ServeSSE(w, r, route{t}, base+"/message")
	case "message":
		g.engine.ServeMessage(w, r, route{t})
	default:
		mcphttp.WriteError(w, http.StatusNotFound, nil, rpccode.InvalidRequest, fmt.Sprintf("no route %s %s: a server is reached at %s/mcp (Streamable HTTP) or %s/sse (HTTP+SSE)", r.Method, r.URL.Path, base, base))
	}
}

func (g *Gateway) routeNames() []string {
	names := g.Names()
	if g.opts.Browser != nil {
		names = append([]string{BrowserRoute}, names...)
	}
	if g.remote != nil {
		for _, r := range g.remote.list() {
			if g.server(r.Name) == nil {
				names = append(names, r.Name)
			}
		}
	}
	return append(names, AggregateRoute)
}

// serveList answers GET /servers/ with the routes and their state.
func (g *Gateway) serveList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest, "GET /servers/ lists the servers")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"servers": g.Health(), "remote_servers": g.RemoteHealth(), "routes": g.routeNames()})
}
