package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/npmtools"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// claudeCLI returns a directory holding `claude`, Claude Code's CLI from
// the npm registry (tools/npm). The package's own bin/claude.exe is a stub
// until its postinstall links the native binary in, and tools/npm installs
// without scripts, so the link points at the native binary itself.
func claudeCLI(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the bridge's socket tests run on Unix")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := npmtools.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "tools", "npm", "node_modules")); os.IsNotExist(err) {
		t.Skip("Claude Code's CLI is not installed: " + npmtools.Hint)
	}
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	platform := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	native, err := tools.Module("@anthropic-ai", "claude-code-"+runtime.GOOS+"-"+platform, "claude")
	if err != nil {
		native, err = tools.Module("@anthropic-ai", "claude-code-"+runtime.GOOS+"-"+platform+"-musl", "claude")
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(native, filepath.Join(dir, "claude")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestClientsAddWithRealClaudeCode: `browserbridge clients add all` in a
// home that already has each client's config, against a real bridge with a
// token: Claude Code's own `claude mcp list` connects to both entries,
// every other server of every client stays, adding again changes nothing,
// the Claude Desktop entry runs as a client would start it, and `clients
// remove all` takes out exactly what add wrote.
func TestClientsAddWithRealClaudeCode(t *testing.T) {
	bin := claudeCLI(t)
	w := newWorld(t)
	addr := freeLoopbackAddr(t)
	cfgFile := filepath.Join(w.home, "bb", "config", "config.json")
	if err := os.WriteFile(cfgFile, []byte(`{"listen":"`+addr+`","token":"tok-clients-test"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	w.serve()
	w.env = append(w.env, "PATH="+bin+":"+filepath.Dir(bins.Bridge)+":/usr/bin:/bin",
		// Keep Claude Code offline and in this home.
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1")

	// What the user has already (a stdio server that exits at once: claude
	// mcp list checks every server, and it must not wait for one).
	files := map[string]string{
		".claude.json": `{
  "numStartups": 3,
  "mcpServers": {
    "memory": {"type": "stdio", "command": "/bin/true", "args": ["server-memory"], "env": {}}
  }
}
`,
		".config/Claude/claude_desktop_config.json": "{\n    \"mcpServers\": {\n        \"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\"]}\n    },\n    \"globalShortcut\": \"\"\n}\n",
		".cursor/mcp.json":                          "{\"mcpServers\": {\"linear\": {\"url\": \"https://mcp.linear.app/sse\"}}}\n",
		".config/Code/User/mcp.json":                "{\n\t// mine\n\t\"servers\": {\n\t\t\"github\": {\"type\": \"http\", \"url\": \"https://api.githubcopilot.com/mcp/\"},\n\t},\n\t\"inputs\": []\n}\n",
	}
	for rel, src := range files {
		path := filepath.Join(w.home, rel)
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	out, code := w.cli("clients", "add", "--sse", "all")
	if code != 0 {
		t.Fatalf("clients add all: exit %d\n%s", code, out)
	}
	for _, want := range []string{"claude-code: browserbridge added", "claude-code: browserbridge-sse added", "claude-desktop: browserbridge added",
		"cursor: browserbridge added", "vscode: browserbridge added", "previous version kept in " + filepath.Join(w.home, ".cursor", "mcp.json.bak")} {
		if !strings.Contains(out, want) {
			t.Errorf("clients add all does not say %q:\n%s", want, out)
		}
	}

	list := w.claude(t, bin, "mcp", "list")
	for _, want := range []string{"browserbridge: http://" + addr + "/mcp (HTTP)", "browserbridge-sse: http://" + addr + "/sse (SSE)"} {
		line := lineWith(list, want)
		if !strings.Contains(line, "Connected") {
			t.Errorf("claude mcp list: %q is not connected:\n%s", want, list)
		}
	}
	if !strings.Contains(list, "memory: /bin/true server-memory") {
		t.Errorf("claude mcp list lost the user's server:\n%s", list)
	}
	// The control: a wrong token is not connected, so Connected above
	// means the header add wrote is right.
	wrong := exec.Command(filepath.Join(bin, "claude"), "mcp", "add-json", "--scope", "user", "wrong-token", "-")
	wrong.Env = w.claudeEnv()
	wrong.Stdin = strings.NewReader(`{"type":"http","url":"http://` + addr + `/mcp","headers":{"Authorization":"Bearer nope"}}`)
	if b, err := wrong.CombinedOutput(); err != nil {
		t.Fatalf("claude mcp add-json: %v\n%s", err, b)
	}
	if line := lineWith(w.claude(t, bin, "mcp", "list"), "wrong-token: "); line == "" || strings.Contains(line, "Connected") {
		t.Fatalf("a wrong token shows as %q, want a failure", line)
	}

	// Adding again changes nothing.
	before := readFiles(t, w.home, files)
	out, code = w.cli("clients", "add", "all", "--sse")
	if code != 0 || strings.Count(out, "already configured") != 5 {
		t.Fatalf("second clients add all: exit %d, want 5 entries already configured\n%s", code, out)
	}
	if after := readFiles(t, w.home, files); !mapsEqual(before, after) {
		t.Fatalf("the second add changed files")
	}

	out, code = w.cli("clients", "list")
	for _, want := range []string{
		"claude-code     yes", "browserbridge -> http://" + addr + "/mcp; browserbridge-sse -> http://" + addr + "/sse",
		"browserbridge -> " + bins.Bridge + " stdio --config " + cfgFile,
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("clients list: exit %d, no %q:\n%s", code, want, out)
		}
	}

	// Claude Desktop starts the entry with its own environment: no
	// BROWSERBRIDGE_* variables, no token but what stdio reads itself.
	var desktop struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
		}
	}
	if err := json.Unmarshal([]byte(before[".config/Claude/claude_desktop_config.json"]), &desktop); err != nil {
		t.Fatal(err)
	}
	entry := desktop.MCPServers["browserbridge"]
	cmd := exec.Command(entry.Command, entry.Args...)
	cmd.Env = []string{"HOME=" + w.home, "PATH=/usr/bin:/bin"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop-entry-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("starting Claude Desktop's entry %v: %v", entry, err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list through Claude Desktop's entry: %v", err)
	}
	if !slices.ContainsFunc(tools.Tools, func(t *mcp.Tool) bool { return t.Name == "list_browsers" }) {
		t.Fatalf("Claude Desktop's entry lists %d tools, not the bridge's", len(tools.Tools))
	}
	cs.Close()

	out, code = w.cli("clients", "remove", "all")
	if code != 0 || strings.Count(out, " removed") != 5 {
		t.Fatalf("clients remove all: exit %d, want 5 entries removed\n%s", code, out)
	}
	after := readFiles(t, w.home, files)
	for rel, src := range files {
		if rel != ".claude.json" && after[rel] != src {
			t.Errorf("%s after remove:\n%s\nwant the user's file:\n%s", rel, after[rel], src)
		}
	}
	list = w.claude(t, bin, "mcp", "list")
	if strings.Contains(list, "browserbridge") || !strings.Contains(list, "memory:") || !strings.Contains(list, "wrong-token:") {
		t.Errorf("claude mcp list after remove:\n%s", list)
	}
}

// TestClientsWithoutClaude: without claude on PATH, `clients add
// claude-code` says so, prints the commands and fails; under all it is
// not a failure.
func TestClientsWithoutClaude(t *testing.T) {
	w := newWorld(t)
	if err := os.WriteFile(filepath.Join(w.home, "bb", "config", "config.json"), []byte(`{"listen":"127.0.0.1:3999"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without --sse, only the Streamable HTTP entry: with both, Claude Code
	// would list every tool twice.
	want := "claude-code: the claude CLI is not on PATH; run:\n" +
		"    claude mcp add --scope user --transport http browserbridge http://127.0.0.1:3999/mcp\n"
	out, code := w.cli("clients", "add", "claude-code")
	if code != 1 || out != want {
		t.Fatalf("exit %d, output:\n%s\nwant exit 1 and:\n%s", code, out, want)
	}
	want += "    claude mcp add --scope user --transport sse browserbridge-sse http://127.0.0.1:3999/sse\n"
	out, code = w.cli("clients", "add", "--sse", "all")
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("add all: exit %d:\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"clients", "add", "emacs"}, 2, `unknown client "emacs"`},
		{[]string{"clients", "add"}, 2, "name one client"},
		{[]string{"clients", "frob"}, 2, `unknown action "frob"`},
	} {
		if out, code := w.cli(tc.args...); code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
	os.WriteFile(filepath.Join(w.home, "bb", "config", "config.json"), []byte(`{"listen":"127.0.0.1:0"}`), 0o600)
	if out, code := w.cli("clients", "add", "cursor"); code != 2 || !strings.Contains(out, "set a fixed port") {
		t.Errorf("listen port 0: exit %d:\n%s", code, out)
	}
}

// claudeEnv is the environment Claude Code runs with: the world's, without
// the machine's CLAUDE_CONFIG_DIR.
func (w *world) claudeEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "CLAUDE_CONFIG_DIR=") })
	return append(env, w.env...)
}

// claude runs the claude CLI in dir.
func (w *world) claude(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "claude"), args...)
	cmd.Env = w.claudeEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("claude %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

func lineWith(text, sub string) string {
	for line := range strings.Lines(text) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

func readFiles(t *testing.T, home string, files map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for rel := range files {
		b, err := os.ReadFile(filepath.Join(home, rel))
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = string(b)
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Claude Code 2.1.197 (what Node 20's npm installs) answers `claude mcp
// add-json --scope user NAME -` with "Invalid configuration" and exit 1;
// `clients add claude-code` then adds the entry with `claude mcp add
// --transport http`, and the real CLI connects to it with the bridge's
// token (issue 31, item 4). The CLI here (tools/npm) takes add-json, so
// the old release's refusal is stood in for by a wrapper that answers
// add-json as 2.1.197 does and hands every other command to the real CLI.
func TestClientsAddClaudeCodeFallsBackFromAddJSON(t *testing.T) {
	real := claudeCLI(t)
	w := newWorld(t)
	addr := freeLoopbackAddr(t)
	cfgFile := filepath.Join(w.home, "bb", "config", "config.json")
	if err := os.WriteFile(cfgFile, []byte(`{"listen":"`+addr+`","token":"tok-fallback-test"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	w.serve()
	shim := t.TempDir()
	refused := filepath.Join(shim, "add-json-refused")
	script := "#!/bin/sh\n" +
		"# Claude Code 2.1.197's answer to add-json with the entry on stdin.\n" +
		"if [ \"$1 $2\" = \"mcp add-json\" ]; then touch '" + refused + "'; echo 'Invalid configuration' >&2; exit 1; fi\n" +
		"exec '" + filepath.Join(real, "claude") + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(shim, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	w.env = append(w.env, "PATH="+shim+":"+filepath.Dir(bins.Bridge)+":/usr/bin:/bin",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1")

	out, code := w.cli("clients", "add", "claude-code")
	if code != 0 || !strings.Contains(out, "claude-code: browserbridge added") {
		t.Fatalf("clients add claude-code: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(refused); err != nil {
		t.Fatal("add-json was never tried, so the fallback was not exercised")
	}
	list := w.claude(t, real, "mcp", "list")
	if line := lineWith(list, "browserbridge: http://"+addr+"/mcp (HTTP)"); !strings.Contains(line, "Connected") {
		t.Fatalf("claude mcp list: the entry added by `claude mcp add` is not connected:\n%s", list)
	}
	// What the fallback wrote is what add-json would have: adding again
	// through the wrapper changes nothing.
	out, code = w.cli("clients", "add", "claude-code")
	if code != 0 || !strings.Contains(out, "claude-code: browserbridge already configured") {
		t.Fatalf("clients add claude-code again: exit %d\n%s", code, out)
	}
}
