package main

import (
	"os"
	"runtime/debug"

	"context"
	"io"

	"github.com/browserbridge/browserbridge/bridge/internal/cliflags"
	"github.com/browserbridge/browserbridge/bridge/internal/mcpserver"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/daemon"
	"github.com/browserbridge/browserbridge/bridge/internal/logging"
	"github.com/browserbridge/browserbridge/bridge/internal/service/runner"
)

// loadConfig reads the config and applies the flags that override it.
func loadConfig(path, listen, socket string, servers ...string) (*config.Config, error) {
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if len(servers) > 0 {
		if err := useServersFile(c, servers[0]); err != nil {
			return nil, err
		}
	}
	if listen != "" {
		c.Listen = listen
	}
	if socket != "" {
		c.Socket = socket
	}
	if err := c.Validate(); err != nil {
		return nil, cliflags.Usage(err.Error())
	}
	return c, nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	listen := fs.String("listen", "", "HTTP address for MCP clients (default "+config.DefaultListen+")")
	socket := fs.String("socket", "", "Unix socket for the native hosts (default: per-user, or $BROWSERBRIDGE_SOCKET)")
	cfgPath := fs.String("config", "", "config file (default: the per-user config.json, if present)")
	relayURL := fs.String("relay-url", "", "cloud proxy to register the browsers with (wss://…; overrides relay.url)")
	relayToken := fs.String("relay-token", "", "access token for the cloud proxy (kind extension; overrides relay.token)")
	logStderr := fs.Bool("log-stderr", true, "also write the log to stderr (browserbridge start turns this off, since its bridge's stderr is a file)")
	servers := fs.String("servers", "", "claude_desktop_config.json-style file of stdio MCP servers for the gateway (overrides gateway.servers_file)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath, *listen, *socket, *servers)
	if err != nil {
		reportStartFailure(stageConfig, err, configPath(*cfgPath), "")
		return err
	}
	// Started on purpose: the browsers' hosts may start it again after this.
	if err := clearStopped(cfg.Socket); err != nil {
		return err
	}
	if *relayURL != "" || *relayToken != "" {
		if *relayURL != "" {
			cfg.Relay.URL = *relayURL
		}
		if *relayToken != "" {
			cfg.Relay.Token = *relayToken
		}
		if err := cfg.Relay.Validate(); err != nil {
			reportStartFailure(stageConfig, err, configPath(*cfgPath), "")
			return cliflags.Usage(err.Error() + " (from --relay-url/--relay-token)")
		}
	}
	logOpts := logging.Options{MaxSizeMB: cfg.Log.MaxSizeMB, MaxBackups: cfg.Log.MaxBackups, Level: cfg.LogLevel(), AlsoStderr: *logStderr}
	if cfg.Log.File != "-" {
		logOpts.File = cfg.Log.File
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(mcpserver.GCPercent)
	}
	logger, closer, err := logging.Open(logOpts)
	if err != nil {
		reportStartFailure(stageServe, err, cfg.Path, cfg.Listen)
		return err
	}
	defer closer.Close()
	// Take the socket and port first, so "already running" is an error the
	// user sees at once rather than a log line.
	b, err := daemon.Start(cfg, logger)
	if err != nil {
		logger.Error("bridge not started", "error", err)
		reportStartFailure(stageServe, err, cfg.Path, cfg.Listen)
		return err
	}
	return runner.Run(ctx, b.Run, logger)
}
