package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/browserbridge/browserbridge/bridge/internal/clientconfig"
	"github.com/browserbridge/browserbridge/bridge/internal/cliflags"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/paths"
)

const clientsUsage = `usage: browserbridge clients add|remove|list [flags] [client]

  add CLIENT [--force] [--sse] [--config FILE]
        write the bridge into the client's own config (adding again
        changes nothing; the previous file is kept as <file>.bak);
        --sse also adds Claude Code's legacy HTTP+SSE entry, browserbridge-sse
  remove CLIENT [--force] [--config FILE]
        take out what add wrote, and nothing else: a file or folder add
        created goes with its last entry, a .bak once the file is as it was
  list [--config FILE]
        show each client, whether it is installed, and its browserbridge entries

CLIENT is claude-code, claude-desktop, cursor, vscode, or all (the installed ones).
--force replaces or removes an entry named browserbridge that add did not write.`

// runClients writes the bridge into MCP clients' configs.
func runClients(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return cliflags.Usage(clientsUsage)
	}
	action := args[0]
	switch action {
	case "add", "remove", "list":
	case "-h", "--help", "help":
		fmt.Fprintln(stderr, clientsUsage)
		return flag.ErrHelp
	default:
		return cliflags.Usage(fmt.Sprintf("unknown action %q; use add, remove or list", action))
	}
	fs := newFlags("clients "+action, stderr)
	cfgPath := fs.String("config", "", "the bridge's config file (default: the per-user config.json that serve reads)")
	force := fs.Bool("force", false, "replace or remove an entry named browserbridge that is not Browser Bridge's")
	withSSE := fs.Bool("sse", false, "also add Claude Code's legacy HTTP+SSE entry, browserbridge-sse (its tools are the same, so Claude Code lists them twice)")
	// Flags may come before or after the client's name.
	rest := args[1:]
	var names []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return cliflags.Usage(err.Error())
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	bridge, err := clientBridge(*cfgPath)
	if err != nil {
		return err
	}
	env := clientconfig.FromOS()
	if action == "list" {
		if len(names) > 0 {
			return cliflags.Usage(fmt.Sprintf("unexpected argument %q", names[0]))
		}
		return printClients(stdout, clientconfig.List(env, bridge), bridge)
	}
	if len(names) != 1 {
		return cliflags.Usage(fmt.Sprintf("name one client: %s or all", strings.Join(clientconfig.Clients, ", ")))
	}
	clients, opts := []string{names[0]}, clientconfig.Options{Force: *force, SSE: *withSSE}
	if names[0] == "all" {
		clients, opts.OnlyFound = clientconfig.Clients, true
	}
	failed := false
	for _, name := range clients {
		var results []clientconfig.Result
		if action == "add" {
			results, err = clientconfig.Add(ctx, env, name, bridge, opts)
		} else {
			results, err = clientconfig.Remove(ctx, env, name, bridge, opts)
		}
		if errors.Is(err, clientconfig.ErrUnknownClient) {
			return cliflags.Usage(err.Error())
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			failed = true
			continue
		}
		printResults(stdout, results)
		for _, r := range results {
			// Under all, a client without its CLI is not a failure: the
			// commands to run are printed.
			if r.Failed() && !(opts.OnlyFound && r.Action == clientconfig.RunThis) {
				failed = true
			}
		}
	}
	if failed {
		return errSilent
	}
	return nil
}

func printResults(w io.Writer, results []clientconfig.Result) {
	for i, r := range results {
		switch r.Action {
		case clientconfig.RunThis:
			if i == 0 || results[i-1].Action != clientconfig.RunThis {
				fmt.Fprintf(w, "%s: the claude CLI is not on PATH; run:\n", r.Client)
			}
			fmt.Fprintf(w, "    %s\n", r.Detail)
		case clientconfig.NotOurs, clientconfig.NotFound:
			fmt.Fprintf(w, "%s: %s: %s\n", r.Client, r.Action, r.Detail)
		default:
			line := fmt.Sprintf("%s: %s %s", r.Client, r.Entry, r.Action)
			if r.Where != "" {
				line += " (" + r.Where + ")"
			}
			if r.Detail != "" {
				line += "; previous version kept in " + r.Detail
			}
			if len(r.Deleted) > 0 {
				line += "; deleted " + strings.Join(r.Deleted, ", ") + " (made by clients add, or a backup no longer needed)"
			}
			fmt.Fprintln(w, line)
		}
	}
}

func printClients(w io.Writer, sts []clientconfig.Status, b clientconfig.Bridge) error {
	fmt.Fprintf(w, "bridge: %s (and %s)\n\n", b.URL, b.SSEURL)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tINSTALLED\tCONFIG\tBROWSERBRIDGE")
	for _, st := range sts {
		found, where := "no", st.Where
		if st.Found {
			found = "yes"
		}
		if where == "" {
			where = st.Note
		}
		var entries []string
		for _, e := range st.Entries {
			s := e.Name + " -> " + e.Target
			switch {
			case !e.Ours:
				s += " (not Browser Bridge's)"
			case !e.Current:
				s += " (out of date: run browserbridge clients add " + st.Client + ")"
			}
			entries = append(entries, s)
		}
		state := strings.Join(entries, "; ")
		switch {
		case st.Err != nil:
			state = "error: " + st.Err.Error()
		case state == "":
			state = "not configured"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", st.Client, found, where, state)
	}
	return tw.Flush()
}

// clientBridge describes the bridge of the config at cfgPath (or the
// per-user default) for the clients' configs.
func clientBridge(cfgPath string) (clientconfig.Bridge, error) {
	var b clientconfig.Bridge
	cfg, err := loadConfig(cfgPath, "", "")
	if err != nil {
		return b, err
	}
	if _, port, err := net.SplitHostPort(cfg.Listen); err == nil && port == "0" {
		return b, cliflags.Usage(fmt.Sprintf("%s: \"listen\" %q picks a new port at every start, which no client config can name; set a fixed port such as %s", cfg.Path, cfg.Listen, config.DefaultListen))
	}
	b.URL = mcpURL(cfg.Listen)
	b.SSEURL = strings.TrimSuffix(b.URL, "/mcp") + "/sse"
	b.Token = cfg.Token
	if b.Command, err = os.Executable(); err != nil {
		return b, fmt.Errorf("finding the browserbridge executable for stdio clients: %w", err)
	}
	b.Args = []string{"stdio"}
	// A client starts `browserbridge stdio` without this shell's
	// environment: name a config it would not find by itself, and pass a
	// token that is only in the environment.
	if cfgPath != "" || os.Getenv(paths.EnvHome) != "" {
		if _, err := os.Stat(cfg.Path); err == nil {
			abs, err := filepath.Abs(cfg.Path)
			if err != nil {
				return b, err
			}
			b.Args = append(b.Args, "--config", abs)
		}
	}
	if t := os.Getenv(config.EnvToken); t != "" && !tokenInFile(cfg.Path, t) {
		b.Env = map[string]string{config.EnvToken: t}
	}
	return b, nil
}

// tokenInFile reports whether the config file at path sets token t.
func tokenInFile(path, t string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var c struct {
		Token string `json:"token"`
	}
	return json.Unmarshal(data, &c) == nil && c.Token == t
}

// removeFromClients takes the bridge out of every MCP client's config, as
// `clients remove all` does, for uninstall: the clients would otherwise
// point at a program about to be removed. It says what stays and why.
func removeFromClients(ctx context.Context, stdout, stderr io.Writer) {
	b, err := clientBridge("")
	if err != nil {
		// A config the clients cannot be pointed at (port 0) still lets
		// its entries be known by their shape (isOurs).
		b = clientconfig.Bridge{}
	}
	env := clientconfig.FromOS()
	for _, name := range clientconfig.Clients {
		results, err := clientconfig.Remove(ctx, env, name, b, clientconfig.Options{})
		if err != nil {
			fmt.Fprintf(stderr, "warning: %s: %v; its browserbridge entry stays\n", name, err)
			continue
		}
		for _, r := range results {
			switch r.Action {
			case clientconfig.Absent:
			case clientconfig.RunThis:
				fmt.Fprintf(stdout, "%s: %s stays (the claude CLI is not on PATH); remove it with: %s\n", r.Client, r.Entry, r.Detail)
			case clientconfig.NotOurs:
				fmt.Fprintf(stdout, "%s: %s\n", r.Client, r.Detail)
			default:
				printResults(stdout, []clientconfig.Result{r})
			}
		}
	}
}
