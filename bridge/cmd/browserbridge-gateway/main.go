// Command browserbridge-gateway is the stdio gateway alone, for a server
// or container (spec 003, docs/gateway.md): `browserbridge gateway` in a
// binary of its own that links none of the bridge (browser, MCP SDK,
// relay, host link), so that it idles in less memory (issue 19).
//
//	browserbridge-gateway [--servers FILE] [--listen ADDR] [--public-url URL] [--config FILE]
//	browserbridge-gateway hash-password < file
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/browserbridge/browserbridge/bridge/internal/gatewaycli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := gatewaycli.Main(ctx, "browserbridge-gateway", os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
