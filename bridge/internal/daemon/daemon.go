// Package daemon is `browserbridge serve`: it owns the bridge's socket and
// HTTP listener and runs the host link and the MCP endpoints on them until
// its context ends.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"golang.org/x/sync/errgroup"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/gatewayserver"
	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcpserver"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
)

// Bridge is a running bridge. Start it with Start; Run waits for it.
type Bridge struct {
	cfg      *config.Config
	log      *slog.Logger
	links    *hostlink.Server
	mcp      *mcpserver.Server
	sessions *sessionlimit.Table
	st       *mcpserver.Streamable
	sse      *mcpserver.SSE
	sock     *ipc.Listener
	httpLn   net.Listener
	http     *http.Server
	metrics  *metrics.Registry
	started  time.Time
	relay    *relay.Client // nil without a relay config
	gw       *gateway.Gateway
	gwFile   string // where the gateway's servers come from, for hot reload
}

// Start takes the socket and the HTTP address; an error here (another
// bridge running, port taken, a non-loopback address without a token) is
// reported before anything is served.
func Start(cfg *config.Config, log *slog.Logger) (*Bridge, error) {
	if cfg.Gateway.PublicURL != "" {
		// The bridge's own routes (the browser's /mcp, its host link) have
		// no OAuth in front: serving them "publicly" would be a lie, and
		// ignoring the key would leave a person believing it works.
		return nil, fmt.Errorf("config: key \"gateway.public_url\" (%s): `browserbridge serve` is the local bridge and does not serve a public URL; "+
			"the public gateway is `browserbridge gateway --public-url URL` (docs/gateway.md, \"Public, with OAuth\"); "+
			"remove gateway.public_url from the config serve reads and pass --public-url to the gateway instead", cfg.Gateway.PublicURL)
	}
	sock, err := ipc.Listen(cfg.Socket)
	if err != nil {
		return nil, err
	}
	httpLn, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("listening for MCP clients on %s: %w (is another program using the port? set \"listen\" in the config)", cfg.Listen, err)
	}
	b := &Bridge{cfg: cfg, log: log, sock: sock, httpLn: httpLn, started: time.Now(), metrics: metrics.NewRegistry()}
	fail := func(err error) (*Bridge, error) {
		httpLn.Close()
		sock.Close()
		return nil, err
	}

	d := cfg.Durations()
	toolsCache, sessionDir := "", ""
	if dir, err := paths.StateDir(); err == nil {
		toolsCache = filepath.Join(dir, "tools.json")
		sessionDir = filepath.Join(dir, "sessions")
	}
	b.mcp = mcpserver.New(mcpserver.Options{Logger: log, Version: buildinfo.String(), BrowserWait: d.BrowserWait, ToolsCache: toolsCache})
	origins := []string{extension.Origin()}
	for _, id := range cfg.AllowedExtensions {
		origins = append(origins, "chrome-extension://"+id+"/")
	}
	b.links = hostlink.NewServer(hostlink.Options{
		Logger:         log,
		AllowedOrigins: origins,
		Version:        buildinfo.String(),
		MCPURL:         b.baseURL() + "/mcp",
		Handle:         b.handleBrowserMessage,
		LiveSessions:   b.mcp.LiveSessions,
		Control:        b.controlMethods(),
		OnChange: func() {
			b.mcp.BrowsersChanged()
			b.gw.RemotesChanged()
			if b.relay != nil {
				b.relay.BrowsersChanged()
			}
		},
		Status: func(st *protocol.StatusResult) {
			st.Socket = sock.Path()
			st.Listen = httpLn.Addr().String()
			st.MCPURLs = []string{b.baseURL() + "/mcp", b.baseURL() + "/sse"}
			if cfg.Log.File != "-" {
				st.LogFile = cfg.Log.File
			}
			if b.relay != nil {
				st.Relay = b.relay.Status()
				st.RelayServers = b.relay.ServerStatus()
			}
		},
	})
	b.mcp.Attach(b.links)

	// One session table for every endpoint: the caps are the bridge's, not
	// each endpoint's.
	b.sessions = sessionlimit.New(sessionlimit.Options{Max: cfg.MaxSessions, PerClient: cfg.MaxSessionsPerClient})
	hopts := mcpserver.HTTPOptions{SessionTimeout: d.SessionTimeout, MaxBodyBytes: cfg.MaxBodyBytes, PingInterval: d.SSEPingInterval, PingStyle: cfg.SSEPing,
		SessionDir: sessionDir, Sessions: b.sessions}
	b.st = b.mcp.NewStreamable(hopts)
	b.sse = b.mcp.NewSSE(hopts)
	b.gw, b.gwFile, err = gatewayserver.NewGateway(cfg, log, b.metrics, &gateway.BrowserRoutes{
		Streamable: b.st,
		SSE:        http.HandlerFunc(b.sse.Stream),
		Message:    http.HandlerFunc(b.sse.Message),
		Connect:    connectBrowser(b.mcp),
	}, remoteSource{b.links}, b.sessions)
	if err != nil {
		return fail(err)
	}
	b.relay = newRelay(cfg, log, b.links, b.gw) // the browsers' and the servers'

	mux := http.NewServeMux()
	mux.Handle("/mcp", b.st)
	mux.HandleFunc("/sse", b.sse.Stream)
	mux.HandleFunc("/message", b.sse.Message)
	mux.HandleFunc("GET /health", b.handleHealth)
	mux.HandleFunc("GET /tools", b.handleTools)
	mux.Handle("GET /metrics", gatewayserver.MetricsHandler(b.metrics, b.gw))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mcphttp.WriteError(w, http.StatusNotFound, nil, -32000, fmt.Sprintf("no route %s %s: MCP clients use /mcp (Streamable HTTP) or /sse (HTTP+SSE), and /servers/{name}/mcp for the stdio servers", r.Method, r.URL.Path))
	})

	guarded, err := gatewayserver.Guard(cfg, httpLn.Addr().String(), b.gw, log, b.instrument(gatewayserver.Routes(b.gw, mux)))
	if err != nil {
		return fail(err)
	}
	b.http = &http.Server{Handler: guarded, ReadHeaderTimeout: gatewayserver.HTTPReadHeaderTimeout, ReadTimeout: gatewayserver.HTTPReadTimeout, IdleTimeout: gatewayserver.HTTPIdleTimeout}
	return b, nil
}

// Links is the registry of connected browsers.
func (b *Bridge) Links() *hostlink.Server { return b.links }

// Relay is the cloud relay client, nil when no relay is configured.
func (b *Bridge) Relay() *relay.Client { return b.relay }

// Addr is the HTTP address actually bound (useful with port 0).
func (b *Bridge) Addr() string { return b.httpLn.Addr().String() }

func (b *Bridge) baseURL() string { return "http://" + b.httpLn.Addr().String() }

// callsDrainWait bounds how long a stopping bridge waits for the calls its
// closed links cut short to answer; they fail at once, so this is only
// for a machine too busy to run them.
const callsDrainWait = 2 * time.Second

// Run serves until ctx ends, then stops the HTTP server and the link and
// releases the socket. It returns nil after a clean stop.
func (b *Bridge) Run(ctx context.Context) error {
	b.log.Info("bridge serving", "version", buildinfo.String(), "socket", b.sock.Path(), "listen", b.Addr())
	g, gctx := errgroup.WithContext(ctx)
	b.gw.Start()
	var reloaded func()
	if b.relay != nil {
		reloaded = b.relay.ServersChanged
	}
	g.Go(func() error { gatewayserver.WatchServers(gctx, b.cfg, b.gw, b.gwFile, b.log, reloaded); return nil })
	// The browsers' links close only once the MCP server knows the bridge
	// is stopping, so that a call they cut short is answered with a
	// sentence naming the restart, not as a browser that went away.
	linkCtx, stopLinks := context.WithCancel(context.Background())
	defer stopLinks()
	g.Go(func() error { return b.links.Serve(linkCtx, b.sock) })
	g.Go(func() error { b.expireRecords(gctx); return nil })
	// The relay outlives the links too: its proxy connections carry the
	// answers of the relayed calls the links cut short.
	relayCtx, stopRelay := context.WithCancel(context.Background())
	defer stopRelay()
	if b.relay != nil {
		g.Go(func() error { b.relay.Run(relayCtx); return nil })
	}
	g.Go(func() error {
		if err := b.http.Serve(b.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving HTTP: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		b.mcp.Stopping()
		if b.relay != nil {
			b.relay.Stopping()
		}
		stopLinks()
		// Calls the closed links cut short answer before their sessions
		// close (a stream closed first would lose the answer), local and
		// relayed alike.
		wctx, wcancel := context.WithTimeout(context.Background(), callsDrainWait)
		b.mcp.WaitCalls(wctx)
		if b.relay != nil {
			b.relay.WaitCalls(wctx)
		}
		wcancel()
		stopRelay()
		// End MCP sessions first: their open GET and SSE streams would
		// otherwise hold Shutdown for its whole grace period. Streamable
		// HTTP sessions keep their records: the next bridge resumes them.
		b.st.Close()
		for ss := range b.mcp.MCP().Sessions() {
			_ = ss.Close()
		}
		sctx, cancel := context.WithTimeout(context.Background(), gatewayserver.ShutdownGrace)
		defer cancel()
		if err := b.gw.Shutdown(sctx); err != nil {
			b.log.Warn("stdio servers did not all stop in time", "err", err)
		}
		if err := b.http.Shutdown(sctx); err != nil {
			b.http.Close() // streams still open: cut them
		}
		b.sock.Close()
		return nil
	})
	err := g.Wait()
	b.log.Info("bridge stopped", "error", err)
	return err
}

// expireRecords drops, once a minute, the session records of a previous
// bridge process whose clients did not come back within the session
// timeout, so their tab groups are released.
func (b *Bridge) expireRecords(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.st.ExpireRecords()
		}
	}
}

// Run starts a bridge and serves until ctx ends.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	b, err := Start(cfg, log)
	if err != nil {
		return err
	}
	return b.Run(ctx)
}

// Health is the body of GET /health.
type Health struct {
	Status   string                 `json:"status"`
	Version  string                 `json:"version"`
	Uptime   float64                `json:"uptimeSeconds"`
	Hosts    int                    `json:"hosts"`
	Browsers []protocol.BrowserInfo `json:"browsers"`
	Sessions map[string]int         `json:"sessions"`
	Tools    int                    `json:"tools"`
	// Servers are the stdio gateway's servers, each reported truthfully.
	Servers []gateway.ServerHealth `json:"servers"`
	// RemoteServers are the browser's remote MCP servers (state, message).
	RemoteServers []gateway.RemoteServer `json:"remote_servers"`
}

// handleHealth reports the bridge; ?strict=1 answers 503 when no browser
// is connected, for monitors that mean "can a client use it now".
func (b *Bridge) handleHealth(w http.ResponseWriter, r *http.Request) {
	st := b.links.Status()
	total := 0
	for range b.mcp.MCP().Sessions() {
		total++
	}
	sse := int(b.sse.Sessions())
	h := Health{
		Status: "ok", Version: st.Version, Uptime: time.Since(b.started).Seconds(),
		Hosts: st.Hosts, Browsers: st.Browsers,
		Sessions: map[string]int{"streamable": max(total-sse, 0), "sse": sse, "gateway": b.gw.Sessions()},
		Tools:    len(b.mcp.ToolList()),
		Servers:  b.gw.PublicHealth(),

		RemoteServers: b.gw.RemoteHealth(),
	}
	if h.Servers == nil {
		h.Servers = []gateway.ServerHealth{}
	}
	code := http.StatusOK
	if len(st.Browsers) == 0 {
		h.Status = "no_browser"
		if r.URL.Query().Get("strict") == "1" {
			code = http.StatusServiceUnavailable
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(h)
}

func (b *Bridge) handleTools(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"tools": b.mcp.ToolList()})
}

// logDecision logs an entry of the extension's audit trail: what the
// person's policy decided about a tool call. Calls it allowed are Debug
// (there is one per call); every other decision is Info.
func (b *Bridge) logDecision(br *hostlink.Browser, req *jsonrpc2.Request) {
	var e protocol.AuditEntry
	if req.Params == nil || json.Unmarshal(*req.Params, &e) != nil {
		b.log.Warn("an audit.decision the bridge cannot read", "browser", br.ID())
		return
	}
	level := slog.LevelInfo
	if e.Decision == "allowed" || e.Decision == "" {
		level = slog.LevelDebug
	}
	b.log.Log(context.Background(), level, "tool call decision", "browser", br.ID(), "client", e.Client, "remote", e.Remote,
		"session", e.Session, "tool", e.Tool, "site", e.Site, "decision", e.Decision, "why", e.Why,
		"outcome", e.Outcome, "error", e.Error, "ms", e.Ms)
}

// handleBrowserMessage takes the extension's remote.changed and the
// relay's progress; everything else is the MCP server's.
func (b *Bridge) handleBrowserMessage(ctx context.Context, br *hostlink.Browser, req *jsonrpc2.Request) (any, error) {
	if req.Method == protocol.AuditDecision {
		b.logDecision(br, req)
		return nil, nil
	}
	if req.Method == protocol.RelayStatus {
		return b.relayStatus(br), nil
	}
	if req.Method == protocol.RemoteChanged {
		if def, ok := b.links.Default(); ok && def == br {
			b.gw.RemotesChanged()
		}
		return nil, nil
	}
	// Progress of a relayed call belongs to the relay (a nil client takes
	// nothing); list_changed goes to both.
	if b.relay.HandleBrowserMessage(br, req) {
		return nil, nil
	}
	return b.mcp.HandleBrowserMessage(ctx, br, req)
}
