package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/daemon"
	"github.com/browserbridge/browserbridge/bridge/internal/logging"
	"github.com/browserbridge/browserbridge/bridge/internal/service"
)

// runGateway is `browserbridge gateway`: the stdio gateway alone, for a
// server or container (spec 003); with --public-url, on the internet
// behind OAuth sign-in (docs/gateway.md). `browserbridge gateway
// hash-password` makes the sign-in's password hash.
func runGateway(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "hash-password" {
		return runHashPassword(args[1:], stdout, stderr)
	}
	fs := newFlags("gateway", stderr)
	servers := fs.String("servers", "", "claude_desktop_config.json-style file of the stdio servers (overrides gateway.servers_file)")
	listen := fs.String("listen", "", "HTTP address (default "+config.DefaultListen+"; beyond loopback a token is required, BROWSERBRIDGE_TOKEN, unless --public-url is set)")
	publicURL := fs.String("public-url", "", "public https URL the gateway is reached at through a TLS proxy (https://mcp.example.com): every MCP route then needs an OAuth sign-in (overrides gateway.public_url; see docs/gateway.md)")
	cfgPath := fs.String("config", "", "config file (default: the per-user config.json, if present)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: browserbridge gateway [flags]\n       browserbridge gateway hash-password   (reads a password on stdin, prints its bcrypt hash for oauth.password_hash)\n\nFlags:")
		fs.PrintDefaults()
	}
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
	if *publicURL != "" {
		cfg.Gateway.PublicURL = *publicURL
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
	if cfg.Gateway.PublicURL != "" {
		if err := cfg.OAuth.CheckSignIn(); err != nil {
			return usageError{err.Error()}
		}
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

// stdin is what hash-password reads (a test replaces it).
var stdin io.Reader = os.Stdin

// maxPasswordInput bounds what hash-password reads: bcrypt uses 72 bytes.
const maxPasswordInput = 4096

const hashPasswordUsage = `Usage: browserbridge gateway hash-password < file

Reads a password (its first line) on stdin and prints its bcrypt hash for the
config's "oauth": {"password_hash": "..."}. For instance:

  read -rs PW && printf '%s' "$PW" | browserbridge gateway hash-password; unset PW
`

// runHashPassword is `browserbridge gateway hash-password`: the password's
// first line on stdin, its bcrypt hash on stdout, for oauth.password_hash.
// It reads stdin rather than an argument, which would sit in the shell's
// history and in every process listing.
func runHashPassword(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gateway hash-password", stderr)
	fs.Usage = func() {
		_, _ = io.WriteString(stderr, hashPasswordUsage)
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintln(stderr, "Type the password and press Enter (it shows as you type; pipe it in to avoid that):")
		}
	}
	// Up to the first line break, so that a person typing it ends it
	// with Enter rather than Ctrl-D.
	line, err := bufio.NewReader(io.LimitReader(stdin, maxPasswordInput+1)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the password: %w", err)
	}
	if len(line) > maxPasswordInput {
		return usageError{"the input is longer than a password; give the password alone on stdin"}
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if pw == "" {
		return usageError{"no password on stdin: pipe it in, e.g. printf '%s' \"$PW\" | browserbridge gateway hash-password"}
	}
	h, err := authserver.HashPassword(pw)
	if err != nil {
		return usageError{err.Error()}
	}
	fmt.Fprintln(stdout, h)
	return nil
}
