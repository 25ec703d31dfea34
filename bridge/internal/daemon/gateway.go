package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/mcpserver"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// newGateway builds the stdio gateway from the config's servers; browser
// is nil when the gateway runs alone (`browserbridge gateway`). Its
// sessions count in sessions, the bridge's table (nil: a table of the
// gateway's own, with the config's caps).
func newGateway(cfg *config.Config, log *slog.Logger, reg *metrics.Registry, browser *gateway.BrowserRoutes, remote gateway.RemoteSource, sessions *sessionlimit.Table) (*gateway.Gateway, string, error) {
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

// gatewayRoutes puts the gateway in front of next: host-based routing
// ({name}.{prefix}.{domain}), /servers/, and the /{name}/sse aliases.
func gatewayRoutes(gw *gateway.Gateway, next http.Handler) http.Handler {
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

// guard wraps h in the HTTP guard cfg describes, for the listener at addr.
func guard(cfg *config.Config, addr string, gw *gateway.Gateway, log *slog.Logger, h http.Handler) (http.Handler, error) {
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

// watchServers reloads the gateway when its servers file changes (if
// gateway.watch) or on SIGHUP, until ctx ends. A bad edit is logged and
// changes nothing: the running servers stay as they were.
//
// reloaded (nil: none) is called after each reload that took effect: the
// relay then offers the servers added and withdraws the removed at once.
func watchServers(ctx context.Context, cfg *config.Config, gw *gateway.Gateway, file string, log *slog.Logger, reloaded func()) {
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

// browserClient is the browser as the aggregate endpoint sees it: an
// in-process SDK client session on the bridge's own MCP server.
type browserClient struct {
	cs *mcp.ClientSession
	ss *mcp.ServerSession
}

func connectBrowser(s *mcpserver.Server) func(ctx context.Context) (gateway.AggregateClient, error) {
	return func(ctx context.Context) (gateway.AggregateClient, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.MCP().Connect(ctx, st, nil)
		if err != nil {
			return nil, fmt.Errorf("connecting to the browser tools: %w", err)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "browserbridge-gateway", Version: buildinfo.String()}, nil)
		cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			ss.Close()
			return nil, fmt.Errorf("connecting to the browser tools: %w", err)
		}
		return &browserClient{cs: cs, ss: ss}, nil
	}
}

func (b *browserClient) ListTools(ctx context.Context) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for t, err := range b.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

func (b *browserClient) CallTool(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	var p mcp.CallToolParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("tools/call params: %w", err)
	}
	res, err := b.cs.CallTool(ctx, &p)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

func (b *browserClient) Close() error {
	err := b.cs.Close()
	b.ss.Close()
	return err
}

// remoteSource reaches the remote MCP servers of the most recently active
// browser through its host link.
type remoteSource struct{ links *hostlink.Server }

// remoteCallTimeout bounds a remote tool call; the extension applies the
// remote server's own timeouts inside it.
const remoteCallTimeout = 5 * time.Minute

func (r remoteSource) List(ctx context.Context) ([]gateway.RemoteServer, error) {
	br, ok := r.links.Default()
	if !ok {
		return nil, errors.New("no browser is connected")
	}
	raw, err := br.Call(ctx, "", protocol.RemoteList, nil)
	if err != nil {
		return nil, fmt.Errorf("listing the remote servers of %s: %w", br.Info().Name, err)
	}
	var res struct {
		Servers []gateway.RemoteServer `json:"servers"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("the extension's remote.list: %w", err)
	}
	return res.Servers, nil
}

func (r remoteSource) Call(ctx context.Context, server string, params json.RawMessage) (json.RawMessage, error) {
	br, ok := r.links.Default()
	if !ok {
		return nil, errors.New("no browser is connected: remote servers are called by the browser")
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("tools/call params: %w", err)
	}
	p["server"], _ = json.Marshal(server)
	ctx, cancel := context.WithTimeout(ctx, remoteCallTimeout)
	defer cancel()
	raw, err := br.Call(ctx, "", protocol.RemoteCall, p)
	var rpcErr *jsonrpc2.Error
	if errors.As(err, &rpcErr) {
		return nil, errors.New(rpcErr.Message)
	}
	return raw, err
}
