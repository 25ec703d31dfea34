package clientconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// claudeCode configures Claude Code through its CLI, in the user scope
// (every project): `claude mcp add-json --scope user` with the entry on
// stdin, so that the token never shows in a process list, and `claude mcp
// remove --scope user`. What is configured is read from the file the CLI
// writes, ~/.claude.json ($CLAUDE_CONFIG_DIR/.claude.json), whose
// top-level mcpServers is the user scope. Without the CLI on PATH, Add and
// Remove return the commands to run (RunThis).
type claudeCode struct{ env Env }

// claudeEntry is one of Claude Code's entries: one per transport, since
// a server's name is its key. The legacy SSE entry is added only when asked
// (Options.SSE): with both, Claude Code lists every browser tool twice.
type claudeEntry struct {
	name, transport string
	value           urlEntry
}

func (c claudeCode) entries(b Bridge, withSSE bool) []claudeEntry {
	entries := []claudeEntry{{EntryName, "http", b.urlEntry("http", b.URL)}}
	if withSSE {
		entries = append(entries, claudeEntry{EntryNameSSE, "sse", b.urlEntry("sse", b.SSEURL)})
	}
	return entries
}

func (c claudeCode) configFile() string {
	dir := c.env.ClaudeConfigDir
	if dir == "" {
		dir = c.env.Home
	}
	return filepath.Join(dir, ".claude.json")
}

// current reads the user-scope entries of the bridge's names.
func (c claudeCode) current() (map[string]json.RawMessage, error) {
	data, exists, err := readFile(c.configFile())
	if err != nil || !exists {
		return nil, err
	}
	doc, err := parseDocument(c.configFile(), data, false)
	if err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for _, name := range []string{EntryName, EntryNameSSE} {
		raw, err := doc.Get("mcpServers", name)
		if err != nil {
			return nil, err
		}
		if raw != nil {
			out[name] = raw
		}
	}
	return out, nil
}

// addCommand is the `claude mcp add` line a user would type.
func (e claudeEntry) addCommand() string {
	cmd := fmt.Sprintf("claude mcp add --scope user --transport %s %s %s", e.transport, e.name, e.value.URL)
	if h := e.value.Headers["Authorization"]; h != "" {
		cmd += fmt.Sprintf(" --header %q", "Authorization: "+h)
	}
	return cmd
}

func (c claudeCode) run(ctx context.Context, cli string, stdin []byte, args ...string) error {
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("claude %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c claudeCode) add(ctx context.Context, b Bridge, opts Options) ([]Result, error) {
	cli, lookErr := c.env.lookPath("claude")
	var results []Result
	if lookErr != nil {
		for _, e := range c.entries(b, opts.SSE) {
			results = append(results, Result{Client: ClaudeCode, Entry: e.name, Action: RunThis, Where: "claude (not on PATH)", Detail: e.addCommand()})
		}
		return results, nil
	}
	cur, err := c.current()
	if err != nil {
		return nil, err
	}
	for _, e := range c.entries(b, opts.SSE) {
		r := Result{Client: ClaudeCode, Entry: e.name, Action: Added, Where: cli}
		raw, exists := cur[e.name]
		switch {
		case !exists:
		case same(raw, e.value):
			r.Action = Unchanged
		case isOurs(raw, b) || opts.Force:
			r.Action = Updated
		default:
			r.Action, r.Detail = NotOurs, fmt.Sprintf("%q in Claude Code's user config is not Browser Bridge's (%s); rerun with --force to replace it", e.name, describe(raw))
		}
		if r.Action == Updated {
			if err := c.run(ctx, cli, nil, "mcp", "remove", "--scope", "user", e.name); err != nil {
				return results, err
			}
		}
		if r.Action == Added || r.Action == Updated {
			value, err := json.Marshal(e.value)
			if err != nil {
				return results, err
			}
			if err := c.addEntry(ctx, cli, e, value); err != nil {
				return results, err
			}
		}
		results = append(results, r)
	}
	return results, nil
}

// addEntry adds one entry with `claude mcp add-json … -` (the entry on
// stdin, so its token stays out of the process list). Some Claude Code
// releases (2.1.197, which Node 20's npm installs) read "-" as the JSON
// itself and answer "Invalid configuration": then the entry is added with
// `claude mcp add --transport …`, which every release takes, the token
// (if any) on its command line for that moment.
func (c claudeCode) addEntry(ctx context.Context, cli string, e claudeEntry, value []byte) error {
	errJSON := c.run(ctx, cli, value, "mcp", "add-json", "--scope", "user", e.name, "-")
	if errJSON == nil {
		return nil
	}
	args := []string{"mcp", "add", "--scope", "user", "--transport", e.transport, e.name, e.value.URL}
	if h := e.value.Headers["Authorization"]; h != "" {
		args = append(args, "--header", "Authorization: "+h)
	}
	// add-json may have written the entry before failing: add refuses a
	// name that exists.
	if cur, err := c.current(); err == nil && cur[e.name] != nil {
		if err := c.run(ctx, cli, nil, "mcp", "remove", "--scope", "user", e.name); err != nil {
			return fmt.Errorf("%w; and removing what it left: %w", errJSON, err)
		}
	}
	if errAdd := c.run(ctx, cli, nil, args...); errAdd != nil {
		return fmt.Errorf("this claude takes neither way of adding a server (Claude Code 2.1.332 takes both; `claude update`): %w; then %w", errJSON, errAdd)
	}
	return nil
}

func (c claudeCode) remove(ctx context.Context, b Bridge, opts Options) ([]Result, error) {
	cli, lookErr := c.env.lookPath("claude")
	cur, err := c.current()
	if err != nil {
		return nil, err
	}
	var results []Result
	// Remove takes out both entries, whichever add wrote.
	for _, e := range c.entries(b, true) {
		r := Result{Client: ClaudeCode, Entry: e.name, Action: Removed, Where: cli}
		raw, exists := cur[e.name]
		switch {
		case !exists:
			r.Action = Absent
		case !isOurs(raw, b) && !opts.Force:
			r.Action, r.Detail = NotOurs, fmt.Sprintf("%q in Claude Code's user config is not Browser Bridge's (%s); rerun with --force to remove it", e.name, describe(raw))
		case lookErr != nil:
			r.Action, r.Where, r.Detail = RunThis, "claude (not on PATH)", "claude mcp remove --scope user "+e.name
		default:
			if err := c.run(ctx, cli, nil, "mcp", "remove", "--scope", "user", e.name); err != nil {
				return results, err
			}
		}
		results = append(results, r)
	}
	return results, nil
}

func (c claudeCode) status(b Bridge) Status {
	st := Status{Client: ClaudeCode}
	cli, err := c.env.lookPath("claude")
	if err != nil {
		st.Note = "claude is not on PATH"
	} else {
		st.Found, st.Where = true, cli
	}
	cur, err := c.current()
	if err != nil {
		st.Err = err
		return st
	}
	for _, e := range c.entries(b, true) {
		if raw, ok := cur[e.name]; ok {
			st.Entries = append(st.Entries, EntryStatus{Name: e.name, Target: describe(raw), Ours: isOurs(raw, b), Current: same(raw, e.value)})
		}
	}
	return st
}
