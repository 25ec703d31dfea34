package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/cliflags"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// envConnectToken supplies connect's token when --token is not given, so it
// need not appear in a process list or a client's config.
const envConnectToken = "BROWSERBRIDGE_PROXY_TOKEN"

// runConnect is a stdio MCP server for remote clients: it reaches a browser
// through a cloud proxy (spec 001) and exposes that browser's tools.
//
//	{"mcpServers": {"browser": {"command": "browserbridge",
//	  "args": ["connect", "--proxy", "wss://relay.example.com"], "env": {"BROWSERBRIDGE_PROXY_TOKEN": "…"}}}}
//
// Stdout carries only JSON-RPC messages; logs go to stderr.
func runConnect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("connect", stderr)
	proxyURL := fs.String("proxy", "", "the proxy's WebSocket URL: its base (wss://relay.example.com) or its MCP endpoint (wss://relay.example.com/mcp)")
	tok := fs.String("token", "", "access token of kind mcp (default $"+envConnectToken+")")
	ext := fs.String("extension", "", "the browser (extension id) to connect to; default: the first connected (`browserbridge status` on the browser's machine shows its id)")
	wait := fs.Duration("wait", 30*time.Second, "how long a call waits for the proxy or the browser to come back")
	verbose := fs.Bool("v", false, "log debug messages to stderr")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tok == "" {
		*tok = os.Getenv(envConnectToken)
	}
	// The proxy's base URL or its /mcp endpoint, as the proxy prints it.
	if _, err := relaywire.EndpointURL(*proxyURL, relaywire.PathMCP); err != nil {
		return cliflags.Usage("--proxy " + err.Error())
	}
	if *tok == "" {
		return cliflags.Usage("--token (or $" + envConnectToken + ") is required: an access token of kind mcp from the proxy's operator")
	}
	// A token of another kind can never work here: say so at once rather
	// than have the client see an empty tool list.
	if c, err := token.Unverified(*tok); err == nil && c.Kind != token.KindMCP {
		return fmt.Errorf("this token is of kind %q (for a bridge's relay link, its config's relay.token), and connect needs one of kind %q: ask the proxy's operator for one (browserbridge-proxy token --kind mcp --user %s)",
			c.Kind, token.KindMCP, c.Subject)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	srv := relay.NewRemoteServer(relay.RemoteOptions{URL: *proxyURL, Token: *tok, ExtensionID: *ext, ReadyWait: *wait, Logger: log}, buildinfo.String())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go srv.Remote().Run(ctx)
	// Offer the browser's tools from the first tools/list on, if they come
	// in time; later changes reach the client as list_changed.
	select {
	case <-srv.Synced():
	case <-srv.Remote().Refused():
		return connectRefused(srv.Remote().RefusedErr())
	case <-time.After(min(*wait, 10*time.Second)):
		log.Warn("no browser tools yet; serving anyway", "reason", srv.Remote().LastError())
	case <-ctx.Done():
		return nil
	}
	var t mcp.Transport = &mcp.StdioTransport{}
	if stdout != os.Stdout {
		t = &mcp.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{stdout}}
	}
	// A refusal after serving began (the token expired) ends the server:
	// its client sees the process exit with the sentence on stderr.
	go func() {
		select {
		case <-srv.Remote().Refused():
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := srv.MCP().Run(ctx, t); err != nil && ctx.Err() == nil {
		return fmt.Errorf("serving MCP on stdio: %w", err)
	}
	select {
	case <-srv.Remote().Refused():
		return connectRefused(srv.Remote().RefusedErr())
	default:
	}
	if ctx.Err() == nil {
		// The client left (stdin ended): its session, and its tab group,
		// end with it. Not on a signal: the process may be restarting.
		endCtx, endCancel := context.WithTimeout(ctx, 2*time.Second)
		if !srv.EndSession(endCtx) {
			log.Debug("the browser was not told that this session ended", "reason", srv.Remote().LastError())
		}
		endCancel()
	}
	return nil
}

// connectRefused is connect's final error when the proxy refused its token.
func connectRefused(err error) error {
	return fmt.Errorf("the proxy refused the token, which will not change while connect runs: %w; ask the proxy's operator for a token of kind mcp", err)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
