package clientconfig

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestConfigLocations(t *testing.T) {
	for _, tc := range []struct {
		goos, xdg             string
		desktop, cursor, code string
	}{
		{"linux", "", "/h/.config/Claude/claude_desktop_config.json", "/h/.cursor/mcp.json", "/h/.config/Code/User/mcp.json"},
		{"linux", "/x", "/x/Claude/claude_desktop_config.json", "/h/.cursor/mcp.json", "/x/Code/User/mcp.json"},
		{"darwin", "", "/h/Library/Application Support/Claude/claude_desktop_config.json", "/h/.cursor/mcp.json", "/h/Library/Application Support/Code/User/mcp.json"},
		{"windows", "", "/appdata/Claude/claude_desktop_config.json", "/h/.cursor/mcp.json", "/appdata/Code/User/mcp.json"},
	} {
		t.Run(tc.goos+tc.xdg, func(t *testing.T) {
			env := Env{GOOS: tc.goos, Home: "/h", AppData: "/appdata", XDGConfigHome: tc.xdg}
			for name, want := range map[string]string{ClaudeDesktop: tc.desktop, Cursor: tc.cursor, VSCode: tc.code} {
				c := fileClientFor(env, name)
				if c.err != nil || c.path != filepath.FromSlash(want) {
					t.Errorf("%s: %q, %v; want %q", name, c.path, c.err, want)
				}
			}
		})
	}
	if c := fileClientFor(Env{GOOS: "windows", Home: "/h"}, VSCode); c.err == nil {
		t.Errorf("no %%APPDATA%%: want an error, got %q", c.path)
	}
}

// fixture is a client's config file as a user has it: other servers, keys
// the bridge knows nothing of, their own indentation, mode 0640.
type fixture struct {
	client, rel, src string
}

var fixtures = []fixture{
	{ClaudeDesktop, ".config/Claude/claude_desktop_config.json", `{
    "mcpServers": {
        "memory": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-memory"],
            "env": {"MEMORY_FILE_PATH": "/tmp/m.json"}
        }
    },
    "globalShortcut": "Ctrl+Space",
    "preferences": {"quickEntry": false}
}
`},
	{Cursor, ".cursor/mcp.json", `{
  "mcpServers": {
    "linear": {"url": "https://mcp.linear.app/sse"},
    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/"]}
  }
}
`},
	{VSCode, ".config/Code/User/mcp.json", `// Servers for every workspace.
{
	"servers": {
		"github": {
			"type": "http",
			"url": "https://api.githubcopilot.com/mcp/", // the hosted one
		},
	},
	"inputs": [],
}
`},
}

func newHome(t *testing.T) Env {
	home := t.TempDir()
	return Env{GOOS: "linux", Home: home, LookPath: func(string) (string, error) { return "", os.ErrNotExist }}
}

func writeFixture(t *testing.T, env Env, f fixture) string {
	t.Helper()
	path := filepath.Join(env.Home, filepath.FromSlash(f.rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(f.src), 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o640) // whatever the umask
	return path
}

func readEntry(t *testing.T, path string, f fixture) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key := "mcpServers"
	if f.client == VSCode {
		key = "servers"
	}
	d, err := parseDocument(path, data, f.client != ClaudeDesktop)
	if err != nil {
		t.Fatalf("the written file does not parse: %v\n%s", err, data)
	}
	raw, err := d.Get(key, EntryName)
	if err != nil || raw == nil {
		t.Fatalf("no %s entry (%v):\n%s", EntryName, err, data)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

var testBridge = Bridge{
	URL:     "http://127.0.0.1:3456/mcp",
	SSEURL:  "http://127.0.0.1:3456/sse",
	Command: "/home/u/.local/bin/browserbridge",
	Args:    []string{"stdio"},
}

// TestFileClientsAddRemove: add writes the entry among the user's own,
// keeps the previous file as .bak with the mode, changes nothing the
// second time, and remove gives back the user's file byte for byte.
func TestFileClientsAddRemove(t *testing.T) {
	ctx := context.Background()
	for _, f := range fixtures {
		t.Run(f.client, func(t *testing.T) {
			env := newHome(t)
			path := writeFixture(t, env, f)

			res, err := Add(ctx, env, f.client, testBridge, Options{})
			if err != nil || len(res) != 1 || res[0].Action != Added || res[0].Detail != path+".bak" {
				t.Fatalf("add: %+v, %v", res, err)
			}
			if got := mustRead(t, path+".bak"); got != f.src {
				t.Fatalf("backup = %q, want the previous file", got)
			}
			if runtime.GOOS != "windows" {
				for _, p := range []string{path, path + ".bak"} {
					if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o640 {
						t.Errorf("%s: mode %v (%v), want the file's 0640", p, st.Mode().Perm(), err)
					}
				}
			}
			got := readEntry(t, path, f)
			want := map[string]map[string]any{
				ClaudeDesktop: {"command": testBridge.Command, "args": []any{"stdio"}},
				Cursor:        {"url": testBridge.URL},
				VSCode:        {"type": "http", "url": testBridge.URL},
			}[f.client]
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("entry = %v, want %v", got, want)
			}
			written := mustRead(t, path)
			// Every line of the user's file is still there, in order.
			rest := written
			for _, line := range strings.Split(strings.TrimSpace(f.src), "\n") {
				line = strings.TrimRight(line, ",") // a comma may move
				i := strings.Index(rest, line)
				if i < 0 {
					t.Fatalf("line %q of the user's file is gone:\n%s", line, written)
				}
				rest = rest[i+len(line):]
			}

			res, err = Add(ctx, env, f.client, testBridge, Options{})
			if err != nil || res[0].Action != Unchanged {
				t.Fatalf("second add: %+v, %v", res, err)
			}
			if mustRead(t, path) != written || mustRead(t, path+".bak") != f.src {
				t.Fatal("the second add rewrote the file or its backup")
			}
			if st := List(env, testBridge); !reflect.DeepEqual(entriesOf(st, f.client), []EntryStatus{{EntryName, describeWant(f.client), true, true}}) {
				t.Fatalf("list: %+v", entriesOf(st, f.client))
			}

			res, err = Remove(ctx, env, f.client, testBridge, Options{})
			if err != nil || res[0].Action != Removed || res[0].Detail != "" || !reflect.DeepEqual(res[0].Deleted, []string{path + ".bak"}) {
				t.Fatalf("remove: %+v, %v", res, err)
			}
			if got := mustRead(t, path); got != f.src {
				t.Fatalf("after remove:\n%s\nwant the user's file as it was:\n%s", got, f.src)
			}
			// The file is back as it was: its backup has served (issue 31,
			// item 7), and the file keeps its mode.
			if _, err := os.Stat(path + ".bak"); !os.IsNotExist(err) {
				t.Fatalf("the backup outlived the file's return to what it was: %v", err)
			}
			if st, err := os.Stat(path); runtime.GOOS != "windows" && (err != nil || st.Mode().Perm() != 0o640) {
				t.Errorf("after remove: mode %v (%v), want the file's 0640", st.Mode().Perm(), err)
			}
			res, err = Remove(ctx, env, f.client, testBridge, Options{})
			if err != nil || res[0].Action != Absent {
				t.Fatalf("second remove: %+v, %v", res, err)
			}
		})
	}
}

func entriesOf(sts []Status, client string) []EntryStatus {
	for _, st := range sts {
		if st.Client == client {
			return st.Entries
		}
	}
	return nil
}

func describeWant(client string) string {
	if client == ClaudeDesktop {
		return testBridge.Command + " stdio"
	}
	return testBridge.URL
}

// TestTokenAndUpdates: the token goes in as a header (Cursor, VS Code) and
// a changed bridge updates the entry it wrote.
func TestTokenAndUpdates(t *testing.T) {
	ctx := context.Background()
	env := newHome(t)
	for _, f := range fixtures[1:] {
		writeFixture(t, env, f)
	}
	withToken := testBridge
	withToken.Token = "s3cret"
	withToken.URL = "http://127.0.0.1:4000/mcp"
	for _, f := range fixtures[1:] {
		path := filepath.Join(env.Home, filepath.FromSlash(f.rel))
		if _, err := Add(ctx, env, f.client, testBridge, Options{}); err != nil {
			t.Fatal(err)
		}
		res, err := Add(ctx, env, f.client, withToken, Options{})
		if err != nil || res[0].Action != Updated {
			t.Fatalf("%s: add with a token: %+v, %v", f.client, res, err)
		}
		got := readEntry(t, path, f)
		if h, _ := got["headers"].(map[string]any); h["Authorization"] != "Bearer s3cret" || got["url"] != withToken.URL {
			t.Fatalf("%s: entry = %v, want the new URL and the token header", f.client, got)
		}
		if runtime.GOOS != "windows" {
			if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
				t.Errorf("%s: mode %v, want 0640 kept", f.client, st.Mode().Perm())
			}
		}
		if st := entriesOf(List(env, testBridge), f.client); len(st) != 1 || !st[0].Ours || st[0].Current {
			t.Fatalf("%s: list against the old bridge: %+v, want ours and out of date", f.client, st)
		}
	}
}

// TestNewFile: a client installed without a config file gets one, mode
// 0600 (it may hold the token), with no backup.
func TestNewFile(t *testing.T) {
	env := newHome(t)
	dir := filepath.Join(env.Home, ".config", "Claude")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := Add(context.Background(), env, ClaudeDesktop, testBridge, Options{OnlyFound: true})
	if err != nil || res[0].Action != Added || res[0].Detail != "" {
		t.Fatalf("add: %+v, %v", res, err)
	}
	path := filepath.Join(dir, "claude_desktop_config.json")
	want := "{\n  \"mcpServers\": {\n    \"browserbridge\": {\n      \"command\": \"/home/u/.local/bin/browserbridge\",\n      \"args\": [\n        \"stdio\"\n      ]\n    }\n  }\n}\n"
	if got := mustRead(t, path); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if st, _ := os.Stat(path); runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := os.Stat(path + ".bak"); !os.IsNotExist(err) {
		t.Errorf("a backup of nothing: %v", err)
	}
	// Cursor is not installed here: all skips it and writes nothing.
	res, err = Add(context.Background(), env, Cursor, testBridge, Options{OnlyFound: true})
	if err != nil || res[0].Action != NotFound {
		t.Fatalf("add cursor under all: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(env.Home, ".cursor")); !os.IsNotExist(err) {
		t.Fatalf("all created ~/.cursor: %v", err)
	}
}

// TestNotOurs: an entry of the bridge's name that is the user's own is left
// alone by add and remove, and replaced or removed only with Force.
func TestNotOurs(t *testing.T) {
	ctx := context.Background()
	env := newHome(t)
	src := `{"mcpServers": {"browserbridge": {"command": "npx", "args": ["mcp-remote", "https://example.com/mcp"]}}}`
	path := writeFixture(t, env, fixture{Cursor, ".cursor/mcp.json", src})
	for _, op := range []func(context.Context, Env, string, Bridge, Options) ([]Result, error){Add, Remove} {
		res, err := op(ctx, env, Cursor, testBridge, Options{})
		if err != nil || res[0].Action != NotOurs || !strings.Contains(res[0].Detail, "npx mcp-remote https://example.com/mcp") || !strings.Contains(res[0].Detail, "--force") {
			t.Fatalf("%+v, %v", res, err)
		}
		if mustRead(t, path) != src {
			t.Fatal("the user's entry was touched")
		}
	}
	if st := entriesOf(List(env, testBridge), Cursor); len(st) != 1 || st[0].Ours {
		t.Fatalf("list: %+v", st)
	}
	res, err := Add(ctx, env, Cursor, testBridge, Options{Force: true})
	if err != nil || res[0].Action != Updated {
		t.Fatalf("forced add: %+v, %v", res, err)
	}
	if got := mustRead(t, path); got != `{"mcpServers": {"browserbridge": {"url":"http://127.0.0.1:3456/mcp"}}}` {
		t.Fatalf("forced add wrote %s", got)
	}
}

// TestInvalidFileUntouched: a file that is not JSON is refused with its
// name and line, and neither it nor a backup is written.
func TestInvalidFileUntouched(t *testing.T) {
	env := newHome(t)
	src := "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n"
	path := writeFixture(t, env, fixture{ClaudeDesktop, ".config/Claude/claude_desktop_config.json", src})
	for _, op := range []func(context.Context, Env, string, Bridge, Options) ([]Result, error){Add, Remove} {
		_, err := op(context.Background(), env, ClaudeDesktop, testBridge, Options{Force: true})
		if err == nil || !strings.Contains(err.Error(), path+": not valid JSON on line 4") {
			t.Fatalf("error = %v", err)
		}
	}
	if mustRead(t, path) != src {
		t.Fatal("the file was changed")
	}
	if _, err := os.Stat(path + ".bak"); !os.IsNotExist(err) {
		t.Fatalf("a backup was written: %v", err)
	}
	if st := List(env, testBridge)[1]; st.Client != ClaudeDesktop || st.Err == nil {
		t.Fatalf("list: %+v", st)
	}
}

// TestSymlinkFollowed: a config that is a link (a dotfiles repository) is
// written through the link, which stays a link.
func TestSymlinkFollowed(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	env := newHome(t)
	real := filepath.Join(env.Home, "dotfiles", "mcp.json")
	os.MkdirAll(filepath.Dir(real), 0o755)
	os.MkdirAll(filepath.Join(env.Home, ".cursor"), 0o755)
	if err := os.WriteFile(real, []byte(fixtures[1].src), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(env.Home, ".cursor", "mcp.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Add(context.Background(), env, Cursor, testBridge, Options{}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced by a file: %v", err)
	}
	if !strings.Contains(mustRead(t, real), `"browserbridge"`) {
		t.Fatal("the linked file was not written")
	}
}

// TestClaudeCodeWithoutCLI: without claude on PATH, add returns the
// commands to run, with the token header; the SSE entry only with SSE.
func TestClaudeCodeWithoutCLI(t *testing.T) {
	env := newHome(t)
	b := testBridge
	b.Token = "t0k"
	if res, err := Add(context.Background(), env, ClaudeCode, b, Options{}); err != nil || len(res) != 1 || res[0].Entry != EntryName {
		t.Fatalf("without SSE: %+v, %v; want only %s", res, err, EntryName)
	}
	res, err := Add(context.Background(), env, ClaudeCode, b, Options{SSE: true})
	if err != nil || len(res) != 2 {
		t.Fatalf("%+v, %v", res, err)
	}
	for i, want := range []string{
		`claude mcp add --scope user --transport http browserbridge http://127.0.0.1:3456/mcp --header "Authorization: Bearer t0k"`,
		`claude mcp add --scope user --transport sse browserbridge-sse http://127.0.0.1:3456/sse --header "Authorization: Bearer t0k"`,
	} {
		if res[i].Action != RunThis || res[i].Detail != want {
			t.Errorf("result %d = %+v, want the command %s", i, res[i], want)
		}
	}
	if st := List(env, b)[0]; st.Found || st.Note != "claude is not on PATH" {
		t.Errorf("list: %+v", st)
	}
}

// A config file and folders that Add created go with the file's last
// entry, and the client no longer looks installed; a file Add created that
// the user added to since stays, without the bridge's entry (issue 31,
// item 7).
func TestRemoveTakesWhatAddCreated(t *testing.T) {
	ctx := context.Background()
	env := newHome(t)
	env.Record = filepath.Join(env.Home, "state", "clients-created.json")
	cursor := filepath.Join(env.Home, ".cursor", "mcp.json")
	if res, err := Add(ctx, env, Cursor, testBridge, Options{}); err != nil || res[0].Action != Added {
		t.Fatalf("add cursor: %+v, %v", res, err)
	}
	res, err := Remove(ctx, env, Cursor, testBridge, Options{})
	if err != nil || res[0].Action != Removed || !reflect.DeepEqual(res[0].Deleted, []string{cursor, filepath.Dir(cursor)}) {
		t.Fatalf("remove cursor: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Dir(cursor)); !os.IsNotExist(err) {
		t.Fatalf("~/.cursor outlived remove: %v", err)
	}
	if entriesOf(List(env, testBridge), Cursor) != nil || statusOf(List(env, testBridge), Cursor).Found {
		t.Fatal("list calls Cursor installed after remove")
	}
	if _, err := os.Stat(env.Record); !os.IsNotExist(err) {
		t.Fatalf("the record outlived what it recorded: %v", err)
	}

	// VS Code's file, created by add, then given a server of the user's.
	vscode := filepath.Join(env.Home, ".config", "Code", "User", "mcp.json")
	if _, err := Add(ctx, env, VSCode, testBridge, Options{}); err != nil {
		t.Fatal(err)
	}
	src := mustRead(t, vscode)
	mine := strings.Replace(src, `"servers": {`, `"servers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},`, 1)
	if err := os.WriteFile(vscode, []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = Remove(ctx, env, VSCode, testBridge, Options{})
	if err != nil || res[0].Action != Removed || len(res[0].Deleted) != 0 {
		t.Fatalf("remove vscode: %+v, %v", res, err)
	}
	if got := mustRead(t, vscode); !strings.Contains(got, "githubcopilot") || strings.Contains(got, EntryName) {
		t.Fatalf("the user's server went, or the bridge's stayed:\n%s", got)
	}
}

func statusOf(sts []Status, client string) Status {
	for _, st := range sts {
		if st.Client == client {
			return st
		}
	}
	return Status{}
}
