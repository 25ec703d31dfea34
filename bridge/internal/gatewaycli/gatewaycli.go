// Package gatewaycli is the command line of the stdio gateway served
// alone (spec 003): `browserbridge gateway` and the browserbridge-gateway
// binary run it under their own names. With --public-url the gateway is
// on the internet behind OAuth sign-in (docs/gateway.md); `hash-password`
// makes the sign-in's password hash.
package gatewaycli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/cliflags"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gatewayserver"
	"github.com/browserbridge/browserbridge/bridge/internal/logging"
	"github.com/browserbridge/browserbridge/bridge/internal/service/runner"
)

// Main runs the command line for a main and returns its exit code: 0 (or
// -h), 2 for bad input, 1 for any other error, which it prints after prog.
func Main(ctx context.Context, prog string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := Run(ctx, prog, args, stdin, stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case cliflags.IsUsage(err):
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
}

// Run is the gateway's command line; prog is the command as the user
// types it ("browserbridge gateway", "browserbridge-gateway"), for the
// usage text. Bad input is a cliflags.UsageError. `prog hash-password`
// reads the password from stdin.
func Run(ctx context.Context, prog string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "hash-password" {
		return runHashPassword(prog, args[1:], stdin, stdout, stderr)
	}
	fs := cliflags.New(prog, stderr)
	servers := fs.String("servers", "", "claude_desktop_config.json-style file of the stdio servers (overrides gateway.servers_file)")
	listen := fs.String("listen", "", "HTTP address (default "+config.DefaultListen+"; beyond loopback a token is required, BROWSERBRIDGE_TOKEN, unless --public-url is set)")
	publicURL := fs.String("public-url", "", "public https URL the gateway is reached at through a TLS proxy (https://mcp.example.com): every MCP route then needs an OAuth sign-in (overrides gateway.public_url; see docs/gateway.md)")
	cfgPath := fs.String("config", "", "config file (default: the per-user config.json, if present)")
	maxConns := fs.Int("max-conns-per-ip", 0, "with --public-url: TCP connections one address may hold open at once (overrides gateway.max_conns_per_ip; default 256, -1: no cap, for a gateway whose clients all come through one proxy not in trusted_proxies)")
	idleTimeout := fs.String("idle-timeout", "", "how long a keep-alive connection may wait for its next request, such as 60s (overrides gateway.idle_timeout; default 60s with --public-url, else 2m)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s [flags]\n       %s hash-password   (reads a password on stdin, prints its bcrypt hash for oauth.password_hash)\n\nFlags:\n", prog, prog)
		fs.PrintDefaults()
	}
	if err := cliflags.Parse(fs, args); err != nil {
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
	if *maxConns != 0 {
		cfg.Gateway.MaxConnsPerIP = *maxConns
	}
	if *idleTimeout != "" {
		cfg.Gateway.IdleTimeout = *idleTimeout
	}
	if err := UseServersFile(cfg, *servers); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return cliflags.Usage(err.Error())
	}
	if _, _, err := cfg.Servers(); err != nil {
		return cliflags.Usage(err.Error())
	}
	if cfg.Gateway.PublicURL != "" {
		if err := cfg.OAuth.CheckSignIn(); err != nil {
			return cliflags.Usage(err.Error())
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
	g, err := gatewayserver.Start(cfg, logger)
	if err != nil {
		logger.Error("gateway not started", "error", err)
		return err
	}
	return runner.Run(ctx, g.Run, logger)
}

// UseServersFile applies --servers (the gateway's, and `browserbridge
// serve`'s): the file replaces the config's own servers. A relative path
// is the working directory's, as on any command line.
func UseServersFile(cfg *config.Config, file string) error {
	if file == "" {
		return nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return cliflags.Usage(fmt.Sprintf("--servers %s: %v", file, err))
	}
	cfg.Gateway.ServersFile = abs
	cfg.MCPServers = nil
	return nil
}

// maxPasswordInput bounds what hash-password reads: bcrypt uses 72 bytes.
const maxPasswordInput = 4096

const hashPasswordUsage = `Usage: %[1]s hash-password < file

Reads a password (its first line) on stdin and prints its bcrypt hash for the
config's "oauth": {"password_hash": "..."}. For instance:

  read -rs PW && printf '%%s' "$PW" | %[1]s hash-password; unset PW
`

// runHashPassword is `prog hash-password`: the password's first line on
// stdin, its bcrypt hash on stdout, for oauth.password_hash. It reads
// stdin rather than an argument, which would sit in the shell's history
// and in every process listing.
func runHashPassword(prog string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := cliflags.New(prog+" hash-password", stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, hashPasswordUsage, prog)
	}
	if err := cliflags.Parse(fs, args); err != nil {
		return err
	}
	if isTerminal(stdin) {
		fmt.Fprintln(stderr, "Type the password and press Enter (it shows as you type; pipe it in to avoid that):")
	}
	// Up to the first line break, so that a person typing it ends it
	// with Enter rather than Ctrl-D.
	line, err := bufio.NewReader(io.LimitReader(stdin, maxPasswordInput+1)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the password: %w", err)
	}
	if len(line) > maxPasswordInput {
		return cliflags.Usage("the input is longer than a password; give the password alone on stdin")
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if pw == "" {
		return cliflags.Usage(fmt.Sprintf("no password on stdin: pipe it in, e.g. printf '%%s' \"$PW\" | %s hash-password", prog))
	}
	h, err := authserver.HashPassword(pw)
	if err != nil {
		return cliflags.Usage(err.Error())
	}
	fmt.Fprintln(stdout, h)
	return nil
}
