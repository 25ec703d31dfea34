package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
)

// Gateway is `browserbridge gateway`: the stdio gateway alone, for a server
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
}

// StartGateway takes the address; errors (port taken, no token beyond
// loopback, a bad servers file) are reported before anything is served.
func StartGateway(cfg *config.Config, log *slog.Logger) (*Gateway, error) {
	reg := metrics.NewRegistry()
	gw, file, err := newGateway(cfg, log, reg, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	g := &Gateway{cfg: cfg, log: log, gw: gw, file: file, ln: ln, started: time.Now()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", g.handleHealth)
	mux.Handle("GET /metrics", metricsHandler(reg, gw))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpguard.WriteError(w, http.StatusNotFound, -32000, fmt.Sprintf("no route %s %s: servers are reached at /servers/{name}/mcp (Streamable HTTP), /servers/{name}/sse (HTTP+SSE) and /servers/all/mcp", r.Method, r.URL.Path))
	})
	guarded, err := guard(cfg, ln.Addr().String(), gw, log, gatewayRoutes(gw, mux))
	if err != nil {
		ln.Close()
		return nil, err
	}
	g.http = &http.Server{Handler: guarded, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout, IdleTimeout: httpIdleTimeout}
	return g, nil
}

// Addr is the address actually bound.
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// Run serves until ctx ends, then ends every session and stops every child.
func (g *Gateway) Run(ctx context.Context) error {
	g.log.Info("gateway serving", "version", buildinfo.String(), "listen", g.Addr(), "servers", g.gw.Names(), "servers_file", g.file)
	g.gw.Start()
	eg, gctx := errgroup.WithContext(ctx)
	eg.Go(func() error { watchServers(gctx, g.cfg, g.gw, g.file, g.log); return nil })
	eg.Go(func() error {
		if err := g.http.Serve(g.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving HTTP: %w", err)
		}
		return nil
	})
	eg.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace+5*time.Second)
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
	g.log.Info("gateway stopped", "error", err)
	return err
}

// GatewayHealth is the body of the gateway's GET /health.
type GatewayHealth struct {
	Status   string                 `json:"status"`
	Version  string                 `json:"version"`
	Uptime   float64                `json:"uptimeSeconds"`
	Sessions int                    `json:"sessions"`
	Servers  []gateway.ServerHealth `json:"servers"`
}

// handleHealth: "ok" when every server runs or waits for first use;
// ?strict=1 answers 503 when any is down (backoff or failing).
func (g *Gateway) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := GatewayHealth{Status: "ok", Version: buildinfo.String(), Uptime: time.Since(g.started).Seconds(), Sessions: g.gw.Sessions(), Servers: g.gw.PublicHealth()}
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
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(h)
}
