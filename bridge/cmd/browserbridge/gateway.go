package main

import (
	"context"
	"io"
	"os"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gatewaycli"
)

// runGateway is `browserbridge gateway`: the stdio gateway alone, for a
// server or container (spec 003); with --public-url, on the internet
// behind OAuth sign-in (docs/gateway.md). `browserbridge gateway
// hash-password` makes the sign-in's password hash. The browserbridge-gateway
// binary runs the same command line (package gatewaycli).
func runGateway(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return gatewaycli.Run(ctx, "browserbridge gateway", args, os.Stdin, stdout, stderr)
}

// useServersFile applies serve's --servers as the gateway's own.
func useServersFile(cfg *config.Config, file string) error {
	return gatewaycli.UseServersFile(cfg, file)
}
