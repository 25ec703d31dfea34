// Package gatewayserver is the stdio gateway served alone, for a server
// deployment (spec 003): `browserbridge gateway` and the
// browserbridge-gateway binary run it. It also holds what the bridge
// (package daemon) shares with it: building the gateway from the config,
// its routes, guard, hot reload, metrics and HTTP timeouts. It links no
// browser, MCP SDK, relay or host link, so that the gateway's own binary
// stays small (issue 19; bridge/internal/archtest holds it to that).
package gatewayserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/connlimit"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
)

// Gateway is `browserbridge gateway` (and browserbridge-gateway): the stdio gateway alone, for a server
// deployment (spec 003): no native-host socket and no browser, the same
// routes, guard, health and metrics as inside the bridge.
type Gateway struct {
	cfg     *config.Config
	log     *slog.Logger
	gw      *gateway.Gateway
	file    string
	ln      net.Listener
	http    *http.Server
	started time.Time
	// pub is the public gateway (gateway.public_url), nil when the
	// gateway is not public.
	pub *publicGateway
}

// Start takes the address; errors (port taken, no token beyond
// loopback, a bad servers file, a public URL without a way to sign in) are
// reported before anything is served. With gateway.public_url set, OAuth
// protects every MCP route instead of the token (public.go).
func Start(cfg *config.Config, log *slog.Logger) (*Gateway, error) {
	reg := metrics.NewRegistry()
	gw, file, err := NewGateway(cfg, log, reg, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	g := &Gateway{cfg: cfg, log: log, gw: gw, file: file, ln: ln, started: time.Now()}
	if cfg.Gateway.PublicURL != "" {
		return g.startPublic(reg)
	}
	if oauthConfigured(cfg) {
		log.Warn("the config's oauth section is used only with a public URL (--public-url or gateway.public_url); OAuth is off")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", g.handleHealth)
	mux.Handle("GET /metrics", MetricsHandler(reg, gw))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mcphttp.WriteError(w, http.StatusNotFound, nil, -32000, fmt.Sprintf("no route %s %s: servers are reached at /servers/{name}/mcp (Streamable HTTP), /servers/{name}/sse (HTTP+SSE) and /servers/all/mcp", r.Method, r.URL.Path))
	})
	guarded, err := Guard(cfg, ln.Addr().String(), gw, log, Routes(gw, mux))
	if err != nil {
		ln.Close()
		return nil, err
	}
	idle := cfg.Gateway.Idle()
	if idle == 0 {
		idle = HTTPIdleTimeout
	}
	g.http = &http.Server{Handler: guarded, ReadHeaderTimeout: HTTPReadHeaderTimeout, ReadTimeout: HTTPReadTimeout, IdleTimeout: idle}
	return g, nil
}

// startPublic finishes Start for a public gateway.
func (g *Gateway) startPublic(reg *metrics.Registry) (*Gateway, error) {
	pub, err := newPublicGateway(g.cfg, g.gw, g.log, http.HandlerFunc(g.handleHealth), MetricsHandler(reg, g.gw))
	if err != nil {
		g.ln.Close()
		return nil, err
	}
	h, err := pub.handler(g.cfg, g.ln.Addr().String())
	if err != nil {
		pub.Close()
		g.ln.Close()
		return nil, err
	}
	g.pub = pub
	g.ln = connlimit.Listen(g.ln, connlimit.Options{
		MaxPerAddr: g.cfg.Gateway.ConnsPerIP(),
		// A reverse proxy carries every client's connections: its own
		// limits bound them, and the guard counts each client behind it.
		Exempt:  trustedPeer(g.cfg.TrustedProxyPrefixes()),
		Refused: reg.NewCounter("browserbridge_gateway_connections_refused_total", "Connections refused for the per-address cap (gateway.max_conns_per_ip).").With().Inc,
	})
	idle := g.cfg.Gateway.Idle()
	if idle == 0 {
		idle = PublicIdleTimeout
	}
	g.http = &http.Server{Handler: h, ReadHeaderTimeout: HTTPReadHeaderTimeout, ReadTimeout: HTTPReadTimeout, IdleTimeout: idle}
	return g, nil
}

// PublicIdleTimeout is how long a public gateway keeps a keep-alive
// connection that sends no next request (gateway.idle_timeout), the
// proxy's: strangers' idle connections cost a descriptor and buffers each.
const PublicIdleTimeout = 60 * time.Second

// trustedPeer reports a peer in one of the trusted proxies' prefixes.
func trustedPeer(proxies []netip.Prefix) func(netip.Addr) bool {
	if len(proxies) == 0 {
		return nil
	}
	return func(a netip.Addr) bool {
		for _, p := range proxies {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
}

// oauthConfigured reports an oauth section that says something.
func oauthConfigured(cfg *config.Config) bool {
	o := cfg.OAuth
	return o.PasswordHash != "" || o.OIDC != nil || o.StateFile != nil
}

// Addr is the address actually bound.
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// Run serves until ctx ends, then ends every session and stops every child.
func (g *Gateway) Run(ctx context.Context) error {
	g.log.Info("gateway serving", "version", buildinfo.String(), "listen", g.Addr(), "servers", g.gw.Names(), "servers_file", g.file, "public_url", g.cfg.Gateway.PublicBase())
	g.gw.Start()
	eg, gctx := errgroup.WithContext(ctx)
	eg.Go(func() error { WatchServers(gctx, g.cfg, g.gw, g.file, g.log, nil); return nil })
	eg.Go(func() error {
		if err := g.http.Serve(g.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving HTTP: %w", err)
		}
		return nil
	})
	eg.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace+5*time.Second)
		defer cancel()
		if err := g.gw.Shutdown(sctx); err != nil {
			g.log.Warn("stdio servers did not all stop in time", "err", err)
		}
		if err := g.http.Shutdown(sctx); err != nil {
			g.http.Close()
		}
		return nil
	})
	err := eg.Wait()
	if g.pub != nil {
		if cerr := g.pub.Close(); cerr != nil {
			g.log.Warn("closing the OAuth state", "err", cerr)
		}
	}
	g.log.Info("gateway stopped", "error", err)
	return err
}

// Health is the body of the gateway's GET /health.
type Health struct {
	Status   string                 `json:"status"`
	Version  string                 `json:"version"`
	Uptime   float64                `json:"uptimeSeconds"`
	Sessions int                    `json:"sessions"`
	Servers  []gateway.ServerHealth `json:"servers"`
}

// handleHealth: "ok" when every server runs or waits for first use;
// ?strict=1 answers 503 when any is down (backoff or failing). A public
// gateway names the servers only to a local request (isLocal).
func (g *Gateway) handleHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, -32000, "/health answers GET")
		return
	}
	h := Health{Status: "ok", Version: buildinfo.String(), Uptime: time.Since(g.started).Seconds(), Sessions: g.gw.Sessions(), Servers: g.gw.PublicHealth()}
	if h.Servers == nil {
		h.Servers = []gateway.ServerHealth{}
	}
	for _, s := range h.Servers {
		if s.Status == "backoff" || s.Status == "failed" {
			h.Status = "degraded"
		}
	}
	code := http.StatusOK
	if h.Status != "ok" && r.URL.Query().Get("strict") == "1" {
		code = http.StatusServiceUnavailable
	}
	if g.pub != nil && !isLocal(r) {
		writeJSON(w, code, publicHealth{Status: h.Status, Version: h.Version, Uptime: h.Uptime, Sessions: h.Sessions})
		return
	}
	writeJSON(w, code, h)
}
