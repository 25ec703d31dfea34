// Command gwbench measures MCP stdio gateways (browserbridge, supergateway,
// mcp-proxy, TBXark's mcp-proxy) in front of server-everything's echo tool, against a direct
// stdio connection, and prints one table. Run it from the repository root
// after `make build test-tools` (or `make bench-gateway`):
//
//	go run ./bridge/cmd/gwbench [--sessions 1,10,50] [--rounds 1] [--duration 5s] [--warmup 1s]
//	    [--targets direct,direct-sdk,browserbridge,browserbridge-sdk,browserbridge-sdk-session,tbxark,tbxark-sdk,...]
//	    [--tbxark BINARY]
//	    [--gateway-url URL [--gateway-pid PID]]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/browserbridge/browserbridge/bridge/internal/gwbench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "gwbench: interrupted")
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gwbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gwbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o gwbench.Options
	sessions := fs.String("sessions", "1,10,50", "session counts, comma-separated")
	targets := fs.String("targets", strings.Join(gwbench.TargetNames(), ","), "targets to run, comma-separated")
	fs.IntVar(&o.Rounds, "rounds", 0, "times every row runs; the table gives the medians (default 1)")
	fs.DurationVar(&o.Duration, "duration", 0, "measured time per row (default 5s)")
	fs.DurationVar(&o.Warmup, "warmup", 0, "unmeasured load before it (default 1s; negative: none)")
	fs.StringVar(&o.Root, "root", "", "the repository, for tools/npm and bin/ (default: the working directory)")
	fs.StringVar(&o.Node, "node", "", "Node.js binary (default: node if >= 22.19, else tools/npm's)")
	fs.StringVar(&o.Browserbridge, "browserbridge", "", "browserbridge binary (default: ROOT/bin/browserbridge)")
	fs.StringVar(&o.TBXark, "tbxark", "", "TBXark's mcp-proxy binary (default: go install github.com/tbxark/mcp-proxy@latest into a temporary directory)")
	fs.StringVar(&o.GatewayURL, "gateway-url", "", "Streamable HTTP URL of a running browserbridge gateway to measure instead of starting one")
	fs.IntVar(&o.GatewayPID, "gateway-pid", 0, "that gateway's pid, for its RSS")
	fs.DurationVar(&o.CallTimeout, "call-timeout", 0, "limit on one call (default 10s)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range strings.Split(*sessions, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--sessions: %q is not a number", s)
		}
		o.Sessions = append(o.Sessions, n)
	}
	for _, t := range strings.Split(*targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.Targets = append(o.Targets, t)
		}
	}
	if !*quiet {
		o.Progress = stderr
	}
	return gwbench.Run(ctx, o, stdout)
}
