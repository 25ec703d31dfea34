// Package clientconfig writes Browser Bridge into MCP clients' own
// configuration, the way each client expects it: Claude Code through its
// `claude mcp` CLI, Claude Desktop's claude_desktop_config.json (a stdio
// server: `browserbridge stdio`), Cursor's ~/.cursor/mcp.json and VS Code's
// user mcp.json (the bridge's URL, and its token as an Authorization
// header).
//
// Edits are surgical: only the bridge's entry changes, every other byte of
// the file stays as the user wrote it; a file that is not valid JSON is
// left alone with an error naming its line; a file is replaced atomically
// (a temporary file renamed over it, with the same mode) after its previous
// version is copied to <file>.bak. Adding again changes nothing. The
// bridge's entries are known by their names (EntryName, EntryNameSSE) and
// their shape (a loopback /mcp or /sse URL, or `browserbridge stdio`): an
// entry of that name that is something else belongs to the user and is
// left alone unless Options.Force.
package clientconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/paths"
)

// Entry names the bridge uses in clients' configs.
const (
	// EntryName is the bridge's entry: Streamable HTTP, or stdio.
	EntryName = "browserbridge"
	// EntryNameSSE is Claude Code's second entry, the legacy HTTP+SSE
	// endpoint (a client's server names must differ).
	EntryNameSSE = "browserbridge-sse"
)

// Client names, as the command line takes them.
const (
	ClaudeCode    = "claude-code"
	ClaudeDesktop = "claude-desktop"
	Cursor        = "cursor"
	VSCode        = "vscode"
)

// Clients are the clients this package configures, in the order `all`
// takes them.
var Clients = []string{ClaudeCode, ClaudeDesktop, Cursor, VSCode}

// Bridge is what the clients are pointed at.
type Bridge struct {
	// URL is the Streamable HTTP endpoint, such as http://127.0.0.1:3456/mcp.
	URL string
	// SSEURL is the legacy HTTP+SSE endpoint, such as http://127.0.0.1:3456/sse.
	SSEURL string
	// Token is the bearer token clients send as "Authorization: Bearer
	// <token>"; "" when the bridge has none.
	Token string
	// Command is the browserbridge executable, which stdio clients start
	// with Args (["stdio"], and --config when the config is not the
	// default one); it reads the token from the config itself. Env is
	// its environment (BROWSERBRIDGE_TOKEN when the token is set only in
	// the environment); nil for none.
	Command string
	Args    []string
	Env     map[string]string
}

// Env is where the clients live: the user's machine (FromOS) or a test's.
type Env struct {
	// GOOS picks the per-OS locations; "" means runtime.GOOS.
	GOOS string
	// Home is the user's home directory.
	Home string
	// AppData is %APPDATA% (Windows).
	AppData string
	// XDGConfigHome is $XDG_CONFIG_HOME (Linux); "" means ~/.config.
	XDGConfigHome string
	// ClaudeConfigDir is $CLAUDE_CONFIG_DIR, where Claude Code keeps
	// .claude.json instead of the home directory; "" means Home.
	ClaudeConfigDir string
	// LookPath finds the claude CLI; nil means exec.LookPath.
	LookPath func(file string) (string, error)
	// Record is the file where Add notes the config files and folders it
	// created, so that Remove takes them away with their last entry (and
	// uninstall with it). "" notes nothing: such files stay, emptied.
	Record string
}

// FromOS returns the current user's Env.
func FromOS() Env {
	home, _ := os.UserHomeDir()
	return Env{
		GOOS:            runtime.GOOS,
		Home:            home,
		AppData:         os.Getenv("APPDATA"),
		XDGConfigHome:   os.Getenv("XDG_CONFIG_HOME"),
		ClaudeConfigDir: os.Getenv("CLAUDE_CONFIG_DIR"),
		Record:          recordPath(),
	}
}

// recordPath is where the bridge keeps Env.Record: its state folder.
func recordPath() string {
	dir, err := paths.StateDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "clients-created.json")
}

func (e Env) goos() string {
	if e.GOOS == "" {
		return runtime.GOOS
	}
	return e.GOOS
}

func (e Env) lookPath(file string) (string, error) {
	if e.LookPath != nil {
		return e.LookPath(file)
	}
	return exec.LookPath(file)
}

// Options changes what Add and Remove may do. The zero value leaves alone
// an entry of the bridge's name that the bridge did not write.
type Options struct {
	// Force replaces (Add) or removes (Remove) an entry of the bridge's
	// name even when it is not the bridge's.
	Force bool
	// OnlyFound skips a client that is not installed (Add with `all`),
	// instead of creating its config.
	OnlyFound bool
	// SSE also adds Claude Code's legacy HTTP+SSE entry (browserbridge-sse)
	// beside the Streamable HTTP one. Off by default: each entry brings the
	// same tools, so Claude Code would list them twice.
	SSE bool
}

// Action is what Add or Remove did with one entry.
type Action string

// Actions, as reported in Result.
const (
	Added     Action = "added"
	Updated   Action = "updated"
	Unchanged Action = "already configured"
	Removed   Action = "removed"
	Absent    Action = "not configured"
	NotOurs   Action = "left alone"
	NotFound  Action = "skipped"
	RunThis   Action = "run this yourself"
)

// Result is the outcome for one entry of one client.
type Result struct {
	Client string
	Entry  string
	Action Action
	// Where is the file written or read, or the claude CLI.
	Where string
	// Detail says why an entry was left alone or a client skipped, names
	// the backup, or is the command to run (RunThis).
	Detail string
	// Deleted are the files and folders Remove took away with the entry:
	// a config file and folders Add created, or the backup of a file that
	// is back as it was before Add.
	Deleted []string
}

// Failed reports whether the result leaves the client not as asked.
func (r Result) Failed() bool { return r.Action == NotOurs || r.Action == RunThis }

// Status is what List finds for one client.
type Status struct {
	Client string
	// Found: the client is installed (its CLI is on PATH, or its config
	// directory exists).
	Found bool
	// Where is the CLI or the config file; Note says what is missing.
	Where, Note string
	// Entries are the client's entries of the bridge's names.
	Entries []EntryStatus
	// Err is a config file that cannot be read.
	Err error
}

// EntryStatus is one entry of the bridge's name in a client's config.
type EntryStatus struct {
	Name string
	// Target is the URL, or the command line of a stdio entry.
	Target string
	// Ours: the entry is the bridge's (else it is the user's, of the same
	// name). Current: it is what Add would write now.
	Ours, Current bool
}

// ErrUnknownClient is returned for a client name not in Clients.
var ErrUnknownClient = errors.New("unknown client")

// client is one MCP client's way of being configured.
type client interface {
	add(ctx context.Context, b Bridge, opts Options) ([]Result, error)
	remove(ctx context.Context, b Bridge, opts Options) ([]Result, error)
	status(b Bridge) Status
}

func (e Env) client(name string) (client, error) {
	switch name {
	case ClaudeCode:
		return claudeCode{env: e}, nil
	case ClaudeDesktop, Cursor, VSCode:
		return fileClientFor(e, name), nil
	}
	return nil, fmt.Errorf("%w %q: use %s or all", ErrUnknownClient, name, strings.Join(Clients, ", "))
}

// Add writes the bridge into the client's config.
func Add(ctx context.Context, env Env, name string, b Bridge, opts Options) ([]Result, error) {
	c, err := env.client(name)
	if err != nil {
		return nil, err
	}
	return c.add(ctx, b, opts)
}

// Remove takes the bridge's entries out of the client's config, and
// nothing else.
func Remove(ctx context.Context, env Env, name string, b Bridge, opts Options) ([]Result, error) {
	c, err := env.client(name)
	if err != nil {
		return nil, err
	}
	return c.remove(ctx, b, opts)
}

// List reports each client's state.
func List(env Env, b Bridge) []Status {
	var out []Status
	for _, name := range Clients {
		c, _ := env.client(name)
		out = append(out, c.status(b))
	}
	return out
}

// urlEntry is a URL entry (Cursor, VS Code, Claude Code); Type is ""
// for Cursor, which tells the transport itself.
type urlEntry struct {
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// stdioEntry is a stdio server entry (Claude Desktop).
type stdioEntry struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

func (b Bridge) urlEntry(typ, u string) urlEntry {
	e := urlEntry{Type: typ, URL: u}
	if b.Token != "" {
		e.Headers = map[string]string{"Authorization": "Bearer " + b.Token}
	}
	return e
}

// same reports whether the raw entry cur is the value want.
func same(cur []byte, want any) bool {
	var a, b any
	if err := json.Unmarshal(cur, &a); err != nil {
		return false
	}
	wb, err := encode(want, "", "")
	if err != nil || json.Unmarshal(wb, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// isOurs reports whether the raw entry cur is one the bridge writes: a
// stdio entry that runs `browserbridge stdio`, or a URL entry for the
// bridge's URL or a loopback /mcp or /sse endpoint.
func isOurs(cur []byte, b Bridge) bool {
	var e struct {
		Command *string `json:"command"`
		Args    []string
		URL     *string `json:"url"`
	}
	if json.Unmarshal(cur, &e) != nil {
		return false
	}
	switch {
	case e.Command != nil:
		base := strings.ToLower(filepath.Base(strings.ReplaceAll(*e.Command, `\`, "/")))
		return strings.TrimSuffix(base, ".exe") == "browserbridge" && len(e.Args) > 0 && e.Args[0] == "stdio"
	case e.URL != nil:
		if *e.URL == b.URL || *e.URL == b.SSEURL {
			return true
		}
		u, err := url.Parse(*e.URL)
		if err != nil || (u.Path != "/mcp" && u.Path != "/sse") {
			return false
		}
		h := u.Hostname()
		ip := net.ParseIP(h)
		return strings.EqualFold(h, "localhost") || (ip != nil && ip.IsLoopback())
	}
	return false
}

// describe is an entry's URL or command line, for List.
func describe(cur []byte) string {
	var e struct {
		Command string
		Args    []string
		URL     string
	}
	if json.Unmarshal(cur, &e) != nil {
		return "(not an object)"
	}
	if e.URL != "" {
		return e.URL
	}
	return strings.TrimSpace(e.Command + " " + strings.Join(e.Args, " "))
}
