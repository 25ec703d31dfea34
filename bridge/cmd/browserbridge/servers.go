package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
	"github.com/browserbridge/browserbridge/bridge/internal/cliflags"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/paths"
)

const serversUsage = `usage: browserbridge servers import|list [flags]

  import [--from FILE] [--config FILE] [--replace] [--dry-run]
        copy Claude Desktop's mcpServers into the bridge's config (or its
        gateway.servers_file)
  list [--config FILE]
        show the configured stdio servers (env keys only, never values)`

// runServers manages the gateway's stdio MCP servers.
func runServers(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return cliflags.Usage(serversUsage)
	}
	switch args[0] {
	case "import":
		return runServersImport(args[1:], stdout, stderr)
	case "list":
		return runServersList(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stderr, serversUsage)
		return flag.ErrHelp
	}
	return cliflags.Usage(fmt.Sprintf("unknown action %q; use import or list", args[0]))
}

// maxInputFile bounds the files servers reads: the stdio package refuses
// documents over 4 MiB, one byte more is enough to tell.
const maxInputFile = 4<<20 + 1

// readInput reads a file of at most maxInputFile bytes.
func readInput(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxInputFile))
}

// importTarget is the file servers import writes: the bridge's config, or
// the servers file it names.
type importTarget struct {
	path        string
	data        []byte // current content; nil when the file does not exist
	serversFile bool   // a gateway.servers_file, not the config itself
	mkdir       bool   // create the directory (the per-user config dir)
}

// findImportTarget reads the bridge's config (cfgPath, or the per-user
// default) and returns the file the servers belong in.
func findImportTarget(cfgPath string) (importTarget, error) {
	t := importTarget{path: cfgPath}
	if cfgPath == "" {
		p, err := paths.ConfigFile()
		if err != nil {
			return t, err
		}
		t.path, t.mkdir = p, true
	}
	data, err := readInput(t.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return t, nil // a new config holding just the servers
	case err != nil:
		return t, fmt.Errorf("reading the bridge's config: %w", err)
	}
	cfg, err := config.Decode(bytes.NewReader(data))
	if err != nil {
		return t, cliflags.Usage(fmt.Sprintf("%s: %v (fix the bridge's config before importing)", t.path, err))
	}
	cfg.Path = t.path
	file := cfg.ServersFile()
	if file == "" {
		t.data = data
		return t, nil
	}
	t = importTarget{path: file, serversFile: true}
	t.data, err = readInput(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return t, fmt.Errorf("reading the servers file (gateway.servers_file): %w", err)
	}
	return t, nil
}

func runServersImport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("servers import", stderr)
	from := fs.String("from", "", "Claude Desktop's claude_desktop_config.json (default: where Claude Desktop keeps it on this OS)")
	cfgPath := fs.String("config", "", "the bridge's config file (default: the per-user config.json that serve reads)")
	replace := fs.Bool("replace", false, "overwrite servers of the same name that are configured differently")
	dryRun := fs.Bool("dry-run", false, "say what would change and write nothing")
	if err := parse(fs, args); err != nil {
		return err
	}
	src := *from
	if src == "" {
		p, err := stdio.ClaudeDesktopConfigPath()
		if err != nil {
			return cliflags.Usage(fmt.Sprintf("%v; pass --from FILE", err))
		}
		src = p
	}
	srcData, err := readInput(src)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return cliflags.Usage(fmt.Sprintf("no Claude Desktop config at %s (pass --from FILE to import another file)", src))
	case err != nil:
		return fmt.Errorf("reading Claude Desktop's config: %w", err)
	}
	target, err := findImportTarget(*cfgPath)
	if err != nil {
		return err
	}

	report, err := stdio.Import(target.data, srcData, stdio.ImportOptions{Replace: *replace, SourceName: src, DestName: target.path})
	for _, r := range report.Results {
		if r.Reason != "" {
			fmt.Fprintf(stdout, "%s: %s: %s\n", r.Name, r.Action, r.Reason)
		} else {
			fmt.Fprintf(stdout, "%s: %s\n", r.Name, r.Action)
		}
	}
	var conflict *stdio.ConflictError
	switch {
	case errors.As(err, &conflict):
		return cliflags.Usage(fmt.Sprintf("%s already configures %s differently; nothing written (rerun with --replace to overwrite)",
			target.path, strings.Join(conflict.Names, ", ")))
	case err != nil:
		return cliflags.Usage(err.Error())
	case len(report.Results) == 0:
		fmt.Fprintf(stdout, "no servers in %s: nothing to import\n", src)
		return nil
	case report.Doc == nil && !hasAction(report, stdio.ImportUnchanged):
		fmt.Fprintf(stdout, "no server of %s can be imported: nothing written\n", src)
		return nil
	case report.Doc == nil:
		fmt.Fprintf(stdout, "%s is up to date: nothing written\n", target.path)
		return nil
	}
	if err := checkMerged(target, report.Doc); err != nil {
		return err
	}
	if *dryRun {
		fmt.Fprintf(stdout, "dry run: %s not written\n", target.path)
		return nil
	}
	if target.mkdir {
		if err := os.MkdirAll(filepath.Dir(target.path), 0o700); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(target.path, report.Doc); err != nil {
		return fmt.Errorf("writing %s: %w", target.path, err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", target.path)
	return nil
}

// hasAction reports whether some server of the report got action a.
func hasAction(r stdio.ImportReport, a stdio.ImportAction) bool {
	for _, res := range r.Results {
		if res.Action == a {
			return true
		}
	}
	return false
}

// checkMerged makes sure the merged document still reads as its kind of
// file, so that an import never leaves the bridge unable to start.
func checkMerged(t importTarget, doc []byte) error {
	var err error
	if t.serversFile {
		_, err = stdio.ParseServers(doc)
	} else {
		_, err = config.Decode(bytes.NewReader(doc))
	}
	if err != nil {
		return cliflags.Usage(fmt.Sprintf("%s: the merged file would not be valid, nothing written: %v", t.path, err))
	}
	return nil
}

// writeFileAtomic replaces path with data, mode 0600 (env values may be
// secrets), atomically. A symbolic link is followed, so that the file it
// points to is replaced.
func writeFileAtomic(path string, data []byte) error {
	return atomicfile.WriteFile(path, data, 0o600, atomicfile.FollowLinks)
}

func runServersList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("servers list", stderr)
	cfgPath := fs.String("config", "", "the bridge's config file (default: the per-user config.json that serve reads)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	servers, from, err := cfg.Servers()
	if err != nil {
		return err
	}
	if len(servers) == 0 {
		fmt.Fprintf(stdout, "no stdio servers configured in %s\n", from)
		return nil
	}
	fmt.Fprintf(stdout, "servers in %s:\n", from)
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tCOMMAND\tARGS\tENV\tPER_SESSION\tSTART")
	for _, name := range names {
		c := servers[name]
		start := string(c.Start)
		if start == "" {
			start = string(stdio.StartLazy)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\t%s\n", name, c.Command, shellWords(c.Args), envKeys(c.Env), c.PerSession, start)
	}
	return w.Flush()
}

// shellWords joins args, quoting those that would not read as one word.
func shellWords(args []string) string {
	if len(args) == 0 {
		return "-"
	}
	words := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			a = strconv.Quote(a)
		}
		words[i] = a
	}
	return strings.Join(words, " ")
}

// envKeys lists the names of env, sorted; never the values.
func envKeys(env map[string]string) string {
	if len(env) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}
