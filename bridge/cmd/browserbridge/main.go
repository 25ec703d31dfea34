// Command browserbridge is the Browser Bridge service and the user's CLI.
//
//	browserbridge serve      run the bridge in the foreground
//	browserbridge start      start the bridge: the service, or a detached serve
//	browserbridge stop       stop the bridge, with or without a service manager
//	browserbridge restart    stop, then start (a new binary, a changed config)
//	browserbridge status     show the bridge, its browsers and MCP URLs
//	browserbridge doctor     check every hop and say how to fix failures
//	browserbridge install    register the native host with the browsers
//	browserbridge uninstall  stop the bridge and remove what install wrote (--purge: config, logs)
//	browserbridge service    install|uninstall|start|stop|restart|status
//	browserbridge servers    import|list the gateway's stdio MCP servers
//	browserbridge clients    add|remove|list the bridge in MCP clients' configs
//	browserbridge relay      join|status|leave a cloud proxy (enrolment code from its operator)
//	browserbridge gateway    run the stdio gateway alone (server deployments)
//	browserbridge version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/browserbridge/browserbridge/bridge/internal/cliflags"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand: it returns an error to print, or errSilent
// when it already said why it failed.
type command struct {
	name, usage string
	run         func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var errSilent = errors.New("failed")

func commands() []command {
	return []command{
		{"serve", "run the bridge in the foreground", runServe},
		{"start", "start the bridge in the background (the service if installed) and wait until it answers", runStart},
		{"stop", "stop the running bridge (the service if installed)", runStop},
		{"restart", "stop the bridge if it runs, then start it (to run a new binary or read a changed config)", runRestart},
		{"status", "show the bridge, connected browsers and MCP URLs", runStatus},
		{"doctor", "check every hop from MCP client to browser and say how to fix failures", runDoctor},
		{"install", "register the native host with your browsers and install the service", runInstall},
		{"uninstall", "stop the bridge and remove what install wrote and the service (--purge: the config and logs too)", runUninstall},
		{"service", "install|uninstall|start|stop|restart|status the per-user service", runService},
		{"connect", "serve a browser reached through a cloud proxy as a stdio MCP server", runConnect},
		{"relay", "join|status|leave a cloud proxy, so your browsers are reached from other machines", runRelay},
		{"pair", "print a one-time code that signs a remote MCP client in to the cloud proxy as you", runPair},
		{"stdio", "serve the bridge's MCP tools over stdio (for clients that only speak stdio)", runStdio},
		{"gateway", "run the stdio-server gateway alone, without the browser (server deployments)", runGateway},
		{"servers", "import Claude Desktop's MCP servers into the gateway's config, or list them", runServers},
		{"clients", "add the bridge to Claude Code, Claude Desktop, Cursor or VS Code (or remove, list)", runClients},
		{"version", "print the version", runVersion},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case cliflags.IsUsage(err):
			fmt.Fprintf(stderr, "browserbridge %s: %v\n", c.name, err)
			return 2
		case errors.Is(err, errSilent):
			return 1
		default:
			fmt.Fprintf(stderr, "browserbridge %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "browserbridge: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return 2
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Browser Bridge: lets MCP clients use your browser.\n\nUsage: browserbridge <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nRun `browserbridge <command> -h` for a command's flags.")
}

// newFlags returns a FlagSet that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	return cliflags.New("browserbridge "+name, stderr)
}

// parse parses flags and refuses stray arguments (a cliflags.UsageError).
func parse(fs *flag.FlagSet, args []string) error {
	return cliflags.Parse(fs, args)
}
