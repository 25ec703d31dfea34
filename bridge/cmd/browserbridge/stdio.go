package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/cliflags"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/stdioproxy"
)

// runStdio serves the bridge's MCP tools on stdin/stdout, for clients that
// only start stdio servers (Claude Desktop's config):
//
//	{"mcpServers": {"browserbridge": {"command": "browserbridge", "args": ["stdio"]}}}
//
// Stdout carries only JSON-RPC messages; logs go to stderr. While no bridge
// answers, the client is answered meanwhile (no tools yet) and stderr says
// what to run.
func runStdio(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stdio", stderr)
	endpoint := fs.String("url", "", "the bridge's MCP endpoint (default: http://<listen>/mcp, from the config)")
	token := fs.String("token", "", "bearer token for the bridge (default: the config's token, or $"+config.EnvToken+")")
	cfgPath := fs.String("config", "", "config file (default: the per-user config.json, if present)")
	wait := fs.Duration("wait", 0, "how long a message waits for the bridge to come back after it went away (default 30s); at start, the client is answered while the bridge is awaited")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath, "", "")
	if err != nil {
		return err
	}
	if *endpoint == "" {
		*endpoint = mcpURL(cfg.Listen)
	} else if u, err := url.Parse(*endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cliflags.Usage(fmt.Sprintf("--url %q is not an http:// or https:// URL such as http://%s/mcp", *endpoint, config.DefaultListen))
	}
	if *token == "" {
		*token = cfg.Token // the config's, or $BROWSERBRIDGE_TOKEN (config.Defaults)
	}
	if *wait < 0 {
		return cliflags.Usage("--wait must not be negative")
	}
	// A client that closes our stdout must not kill us with SIGPIPE before
	// the session is closed.
	signal.Ignore(syscall.SIGPIPE)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel()}))
	return stdioproxy.Run(ctx, stdioproxy.Options{
		Endpoint:   *endpoint,
		Token:      *token,
		Stdin:      os.Stdin,
		Stdout:     stdout,
		Logger:     logger,
		BridgeWait: *wait,
		StartHint:  "run `" + startHint() + "`",
		Version:    buildinfo.String(),
	})
}

// mcpURL is the /mcp URL of a bridge listening on listen; a bridge on every
// interface is reached on loopback.
func mcpURL(listen string) string {
	if host, port, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1"
			if ip != nil && ip.To4() == nil {
				host = "::1"
			}
		}
		listen = net.JoinHostPort(host, port)
	}
	return "http://" + listen + "/mcp"
}
