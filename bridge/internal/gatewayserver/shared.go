package gatewayserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// ShutdownGrace bounds how long HTTP requests may take to finish on stop.
const ShutdownGrace = 3 * time.Second

// Timeouts of the HTTP server (the bridge's and the gateway's; see
// docs/limits.md, "Connections"). HTTPReadTimeout bounds reading one
// request, headers and body: net/http clears the read deadline once the
// body has been read, so it cuts a trickled body but never a GET or SSE
// stream (or a POST answered as a stream). HTTPIdleTimeout closes a
// keep-alive connection that sends no next request. No WriteTimeout: it
// would cut those streams.
const (
	HTTPReadHeaderTimeout = 10 * time.Second
	HTTPReadTimeout       = 30 * time.Second
	HTTPIdleTimeout       = 2 * time.Minute
)

// NewGateway builds the stdio gateway from the config's servers; browser
// is nil when the gateway runs alone (`browserbridge gateway`). Its
// sessions count in sessions, the bridge's table (nil: a table of the
// gateway's own, with the config's caps).
func NewGateway(cfg *config.Config, log *slog.Logger, reg *metrics.Registry, browser *gateway.BrowserRoutes, remote gateway.RemoteSource, sessions *sessionlimit.Table) (*gateway.Gateway, string, error) {
	servers, file, err := cfg.Servers()
	if err != nil {
		return nil, "", err
	}
	d := cfg.Durations()
	if sessions == nil {
		sessions = sessionlimit.New(sessionlimit.Options{Max: cfg.MaxSessions, PerClient: cfg.MaxSessionsPerClient})
	}
	gw, err := gateway.New(gateway.Options{
		Servers:          servers,
		Stdio:            stdio.Options{MaxPrivate: cfg.Gateway.MaxChildren},
		Logger:           log,
		Metrics:          reg,
		Version:          buildinfo.String(),
		SessionTimeout:   d.SessionTimeout,
		MaxBodyBytes:     cfg.MaxBodyBytes,
		PingInterval:     d.SSEPingInterval,
		HostPrefix:       cfg.Gateway.HostPrefix,
		HostDomain:       cfg.Gateway.HostDomain,
		AggregateTimeout: cfg.Gateway.AggregateWait(),
		Browser:          browser,
		Remote:           remote,
		Sessions:         sessions,
	})
	if err != nil {
		return nil, "", fmt.Errorf("stdio gateway: %w", err)
	}
	return gw, file, nil
}

// Routes puts the gateway in front of next: host-based routing
// ({name}.{prefix}.{domain}), /servers/, and the /{name}/sse aliases.
func Routes(gw *gateway.Gateway, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := gw.HostRoute(r.Host); name != "" {
			gw.ServeHost(w, r, name)
			return
		}
		if len(r.URL.Path) >= len("/servers/") && r.URL.Path[:len("/servers/")] == "/servers/" || gw.Alias(r.URL.Path) {
			gw.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Guard wraps h in the HTTP guard cfg describes, for the listener at addr.
func Guard(cfg *config.Config, addr string, gw *gateway.Gateway, log *slog.Logger, h http.Handler) (http.Handler, error) {
	rate, burst := cfg.Rate()
	loopRate, loopBurst := cfg.LoopbackRate()
	return httpguard.New(httpguard.Options{
		ListenAddr:            addr,
		AllowedHosts:          cfg.AllowedHosts,
		HostSuffixes:          hostSuffixes(gw),
		AllowedOrigins:        cfg.AllowedOrigins,
		Token:                 cfg.Token,
		MaxBodyBytes:          cfg.MaxBodyBytes,
		RatePerSecond:         rate,
		Burst:                 burst,
		LoopbackRatePerSecond: loopRate,
		LoopbackBurst:         loopBurst,
		MaxWait:               cfg.RateWaitDuration(),
		TrustedProxies:        cfg.TrustedProxyPrefixes(),
		Logger:                log,
	}, h)
}

// hostSuffixes are the hosts the guard must let through for host-based
// routing.
func hostSuffixes(gw *gateway.Gateway) []string {
	if s := gw.HostSuffix(); s != "" {
		return []string{s}
	}
	return nil
}

// WatchServers reloads the gateway when its servers file changes (if
// gateway.watch) or on SIGHUP, until ctx ends. A bad edit is logged and
// changes nothing: the running servers stay as they were.
//
// reloaded (nil: none) is called after each reload that took effect: the
// relay then offers the servers added and withdraws the removed at once.
func WatchServers(ctx context.Context, cfg *config.Config, gw *gateway.Gateway, file string, log *slog.Logger, reloaded func()) {
	reload := func(why string) {
		servers, err := reloadedServers(cfg)
		if err != nil {
			log.Error("servers not reloaded: the configuration has an error", "trigger", why, "file", file, "err", err)
			return
		}
		if _, err := gw.Reload(servers); err != nil {
			log.Error("servers not reloaded", "trigger", why, "file", file, "err", err)
			return
		}
		if reloaded != nil {
			reloaded()
		}
	}
	if file != "" && cfg.Gateway.WatchEnabled() {
		go stdio.WatchFile(ctx, file, 0, func([]byte) { reload("file changed") })
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload("SIGHUP")
		}
	}
}

// reloadedServers reads the servers again from where cfg took them.
func reloadedServers(cfg *config.Config) (map[string]stdio.ServerConfig, error) {
	if cfg.ServersFile() == "" && cfg.Path != "" {
		// Inline servers: the whole config file is read again, strictly.
		fresh, err := config.Load(cfg.Path)
		if err != nil {
			return nil, err
		}
		if fresh.ServersFile() != "" {
			return nil, fmt.Errorf("%s: gateway.servers_file was added; restart the bridge to move the servers", cfg.Path)
		}
		servers, _, err := fresh.Servers()
		return servers, err
	}
	servers, _, err := cfg.Servers()
	return servers, err
}

// MetricsHandler refreshes the gateway's per-server gauges before writing.
func MetricsHandler(reg *metrics.Registry, gw *gateway.Gateway) http.Handler {
	h := reg.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gw.UpdateGauges()
		h.ServeHTTP(w, r)
	})
}
