package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/daemon"
	"github.com/browserbridge/browserbridge/bridge/internal/logging"
	"github.com/browserbridge/browserbridge/bridge/internal/service"
)

// runGateway is `browserbridge gateway`: the stdio gateway alone, for a
// server or container (spec 003).
func runGateway(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gateway", stderr)
	servers := fs.String("servers", "", "claude_desktop_config.json-style file of the stdio servers (overrides gateway.servers_file)")
	listen := fs.String("listen", "", "HTTP address (default "+config.DefaultListen+"; beyond loopback a token is required: BROWSERBRIDGE_TOKEN)")
	cfgPath := fs.String("config", "", "config file (default: the per-user config.json, if present)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if err := useServersFile(cfg, *servers); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if _, _, err := cfg.Servers(); err != nil {
		return usageError{err.Error()}
	}
	logOpts := logging.Options{MaxSizeMB: cfg.Log.MaxSizeMB, MaxBackups: cfg.Log.MaxBackups, Level: cfg.LogLevel(), AlsoStderr: true}
	if cfg.Log.File != "-" {
		logOpts.File = cfg.Log.File
	}
	logger, closer, err := logging.Open(logOpts)
	if err != nil {
		return err
	}
	defer closer.Close()
	g, err := daemon.StartGateway(cfg, logger)
	if err != nil {
		logger.Error("gateway not started", "error", err)
		return err
	}
	return service.Run(ctx, g.Run, logger)
}

// useServersFile applies --servers: the file replaces the config's own
// servers. A relative path is the working directory's, as on any command
// line.
func useServersFile(cfg *config.Config, file string) error {
	if file == "" {
		return nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return usageError{fmt.Sprintf("--servers %s: %v", file, err)}
	}
	cfg.Gateway.ServersFile = abs
	cfg.MCPServers = nil
	return nil
}
