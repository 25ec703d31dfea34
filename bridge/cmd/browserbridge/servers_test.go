package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
)

// secretValue is an env value that no output may show.
const secretValue = "ghp_secret-value-42"

// claudeDesktopFile is a Claude Desktop config with keys the gateway does
// not know, at the top level and in one entry.
const claudeDesktopFile = `{
  "globalShortcut": "Ctrl+Space",
  "preferences": {"quickEntry": true, "menuBarEnabled": false},
  "mcpServers": {
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "` + secretValue + `"}},
    "legacy": {"command": "node", "args": ["server.js"], "disabled": true}
  }
}`

// serversWorld is a temporary directory with a Claude Desktop file and a
// bridge config path, and the environment pointed at it.
type serversWorld struct {
	t            *testing.T
	dir          string
	claude, conf string
}

func newServersWorld(t *testing.T) *serversWorld {
	dir := t.TempDir()
	t.Setenv("BROWSERBRIDGE_HOME", filepath.Join(dir, "bbhome"))
	t.Setenv("BROWSERBRIDGE_TOKEN", "")
	w := &serversWorld{t: t, dir: dir, claude: filepath.Join(dir, "claude_desktop_config.json"), conf: filepath.Join(dir, "config.json")}
	w.write(w.claude, claudeDesktopFile)
	return w
}

func (w *serversWorld) write(path, data string) {
	w.t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *serversWorld) read(path string) []byte {
	w.t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		w.t.Fatal(err)
	}
	return data
}

// run runs browserbridge in-process and returns stdout, stderr and the
// exit code.
func (w *serversWorld) run(args ...string) (string, string, int) {
	w.t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	for _, out := range []string{stdout.String(), stderr.String()} {
		if strings.Contains(out, secretValue) {
			w.t.Errorf("browserbridge %v printed an env value:\n%s", args, out)
		}
	}
	return stdout.String(), stderr.String(), code
}

// importOK runs servers import with --from and --config and wants success.
func (w *serversWorld) importOK(extra ...string) string {
	w.t.Helper()
	args := append([]string{"servers", "import", "--from", w.claude, "--config", w.conf}, extra...)
	out, errOut, code := w.run(args...)
	if code != 0 {
		w.t.Fatalf("servers import exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	return out
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l+"\n") {
			t.Errorf("output lacks the line %q:\n%s", l, out)
		}
	}
}

// loadServers reads the servers the bridge would run from conf.
func loadServers(t *testing.T, conf string) map[string]stdio.ServerConfig {
	t.Helper()
	c, err := config.Load(conf)
	if err != nil {
		t.Fatalf("the bridge cannot load its config after the import: %v", err)
	}
	servers, _, err := c.Servers()
	if err != nil {
		t.Fatal(err)
	}
	return servers
}

func TestServersImportIntoEmptyConfig(t *testing.T) {
	for _, existing := range []string{"", "{}"} {
		t.Run("existing="+existing, func(t *testing.T) {
			w := newServersWorld(t)
			if existing != "" {
				w.write(w.conf, existing)
			}
			out := w.importOK()
			wantLines(t, out, "github: added", "memory: added", "wrote "+w.conf)
			if !strings.Contains(out, "legacy: skipped: mcpServers.legacy.disabled: unknown key") {
				t.Errorf("legacy not skipped with its reason:\n%s", out)
			}
			servers := loadServers(t, w.conf)
			if len(servers) != 2 || servers["github"].Env["GITHUB_TOKEN"] != secretValue ||
				!reflect.DeepEqual(servers["memory"].Args, []string{"-y", "@modelcontextprotocol/server-memory"}) {
				t.Fatalf("servers after import: %v", servers)
			}
		})
	}
}

func TestServersImportDefaultConfig(t *testing.T) {
	w := newServersWorld(t)
	out, errOut, code := w.run("servers", "import", "--from", w.claude)
	want := filepath.Join(w.dir, "bbhome", "config", "config.json")
	if code != 0 || !strings.Contains(out, "wrote "+want) {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if got := loadServers(t, want); len(got) != 2 {
		t.Fatalf("servers in the default config: %v", got)
	}
}

// TestServersImportKeepsOtherKeys checks that every other key of the
// bridge's config reads the same after the import: same decoded value,
// same bytes once compacted, same order.
func TestServersImportKeepsOtherKeys(t *testing.T) {
	w := newServersWorld(t)
	before := `{
  "listen": "127.0.0.1:4567",
  "max_body_bytes": 8388608,
  "rate_limit": 2.50,
  "allowed_origins": ["https://app.example.com"],
  "log": {"level": "debug", "file": "-"},
  "relay": {"url": "wss://relay.example.com", "token": "tok<&>en"},
  "gateway": {"host_domain": "example.com", "watch": false}
}`
	w.write(w.conf, before)
	w.importOK()
	after := w.read(w.conf)

	members := func(doc []byte) (keys []string, vals map[string]string) {
		vals = map[string]string{}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		for k, raw := range m {
			var c bytes.Buffer
			if err := json.Compact(&c, raw); err != nil {
				t.Fatal(err)
			}
			vals[k] = c.String()
		}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.Token()
		for dec.More() {
			k, _ := dec.Token()
			keys = append(keys, k.(string))
			var skip json.RawMessage
			dec.Decode(&skip)
		}
		return keys, vals
	}
	keysBefore, valsBefore := members([]byte(before))
	keysAfter, valsAfter := members(after)
	if want := append(keysBefore, "mcpServers"); !reflect.DeepEqual(keysAfter, want) {
		t.Errorf("keys %v, want %v", keysAfter, want)
	}
	for k, v := range valsBefore {
		if valsAfter[k] != v {
			t.Errorf("key %s: %s became %s", k, v, valsAfter[k])
		}
	}
	c, err := config.Load(w.conf)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:4567" || c.Gateway.WatchEnabled() || c.Relay.Token != "tok<&>en" {
		t.Errorf("config after import: %+v", c)
	}
}

func TestServersImportConflict(t *testing.T) {
	w := newServersWorld(t)
	const mine = `{"listen": "127.0.0.1:4567", "mcpServers": {"github": {"command": "docker", "args": ["run", "ghcr.io/github/github-mcp-server"]}, "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`
	w.write(w.conf, mine)

	out, errOut, code := w.run("servers", "import", "--from", w.claude, "--config", w.conf)
	if code != 2 {
		t.Fatalf("exit %d, want 2 for a conflict\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	wantLines(t, out, "github: conflict: configured differently in the destination", "memory: unchanged")
	if !strings.Contains(errOut, "already configures github differently") || !strings.Contains(errOut, "--replace") || !strings.Contains(errOut, w.conf) {
		t.Errorf("the error should name the server, the file and --replace:\n%s", errOut)
	}
	if got := w.read(w.conf); string(got) != mine {
		t.Fatalf("a refused import changed the file:\n%s", got)
	}

	out = w.importOK("--replace")
	wantLines(t, out, "github: replaced", "memory: unchanged", "wrote "+w.conf)
	if s := loadServers(t, w.conf)["github"]; s.Command != "npx" || s.Env["GITHUB_TOKEN"] != secretValue {
		t.Fatalf("github after --replace: %v", s)
	}

	out = w.importOK()
	wantLines(t, out, "github: unchanged", "memory: unchanged", w.conf+" is up to date: nothing written")
}

func TestServersImportNothingImportable(t *testing.T) {
	w := newServersWorld(t)
	w.write(w.claude, `{"mcpServers": {"legacy": {"command": "node", "disabled": true}}}`)
	out := w.importOK()
	wantLines(t, out, "no server of "+w.claude+" can be imported: nothing written")
	if !strings.Contains(out, "legacy: skipped: ") {
		t.Errorf("output:\n%s", out)
	}
	w.write(w.claude, `{"preferences": {}}`)
	wantLines(t, w.importOK(), "no servers in "+w.claude+": nothing to import")
	if _, err := os.Stat(w.conf); !os.IsNotExist(err) {
		t.Fatalf("the config was written: %v", err)
	}
}

func TestServersImportDryRun(t *testing.T) {
	w := newServersWorld(t)
	out := w.importOK("--dry-run")
	wantLines(t, out, "memory: added", "dry run: "+w.conf+" not written")
	if _, err := os.Stat(w.conf); !os.IsNotExist(err) {
		t.Fatalf("a dry run created the config: %v", err)
	}
	const mine = `{"listen": "127.0.0.1:4567"}`
	w.write(w.conf, mine)
	w.importOK("--dry-run", "--replace")
	if got := w.read(w.conf); string(got) != mine {
		t.Fatalf("a dry run changed the file:\n%s", got)
	}
	if entries, _ := os.ReadDir(w.dir); len(entries) != 2 {
		t.Errorf("a dry run left files behind: %v", entries)
	}
}

func TestServersImportFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	w := newServersWorld(t)
	w.write(w.conf, `{}`) // 0644
	w.importOK()
	st, err := os.Stat(w.conf)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600 (env values are secrets)", st.Mode().Perm())
	}
	if entries, _ := os.ReadDir(w.dir); len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestServersImportIntoServersFile(t *testing.T) {
	w := newServersWorld(t)
	const conf = `{"gateway": {"servers_file": "servers.json"}}`
	w.write(w.conf, conf)
	out := w.importOK()
	servers := filepath.Join(w.dir, "servers.json")
	wantLines(t, out, "memory: added", "wrote "+servers)
	if got := w.read(w.conf); string(got) != conf {
		t.Errorf("the config changed although the servers live in servers_file:\n%s", got)
	}
	parsed, err := stdio.ParseServers(w.read(servers))
	if err != nil || len(parsed) != 2 {
		t.Fatalf("servers file: %v, %v", parsed, err)
	}
	if got := loadServers(t, w.conf); len(got) != 2 {
		t.Fatalf("servers as the bridge reads them: %v", got)
	}
}

func TestServersImportBadInput(t *testing.T) {
	w := newServersWorld(t)
	missing := filepath.Join(w.dir, "nowhere", "claude_desktop_config.json")
	tests := []struct {
		name    string
		setup   func()
		args    []string
		wantErr string
	}{
		{"missing Claude Desktop file", nil, []string{"servers", "import", "--from", missing, "--config", w.conf},
			"no Claude Desktop config at " + missing},
		{"Claude Desktop file not JSON", func() { w.write(filepath.Join(w.dir, "bad.json"), `{"mcpServers": {`) },
			[]string{"servers", "import", "--from", filepath.Join(w.dir, "bad.json"), "--config", w.conf},
			filepath.Join(w.dir, "bad.json") + ": not valid JSON"},
		{"bridge config invalid", func() { w.write(w.conf, `{"lsiten": "x"}`) },
			[]string{"servers", "import", "--from", w.claude, "--config", w.conf},
			w.conf + `: config: unknown key "lsiten"`},
		{"no action", nil, []string{"servers"}, "usage: browserbridge servers import|list"},
		{"unknown action", nil, []string{"servers", "export"}, `unknown action "export"`},
		{"unknown flag", nil, []string{"servers", "import", "--force"}, "flag provided but not defined"},
		{"stray argument", nil, []string{"servers", "list", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			out, errOut, code := w.run(tt.args...)
			if code != 2 || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q (stdout %q)", code, errOut, tt.wantErr, out)
			}
		})
	}
}

func TestServersImportDefaultClaudePath(t *testing.T) {
	w := newServersWorld(t)
	home := filepath.Join(w.dir, "home")
	t.Setenv("HOME", home)
	t.Setenv("APPDATA", filepath.Join(home, "AppData"))
	want, err := stdio.ClaudeDesktopConfigPath()
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := w.run("servers", "import", "--config", w.conf)
	if code != 2 || !strings.Contains(errOut, "no Claude Desktop config at "+want) || !strings.Contains(errOut, "--from") {
		t.Fatalf("exit %d, stderr %q; want one naming %s", code, errOut, want)
	}
	if err := os.MkdirAll(filepath.Dir(want), 0o700); err != nil {
		t.Fatal(err)
	}
	w.write(want, claudeDesktopFile)
	if out, errOut, code := w.run("servers", "import", "--config", w.conf); code != 0 || !strings.Contains(out, "memory: added") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestServersList(t *testing.T) {
	w := newServersWorld(t)
	w.write(w.conf, `{"mcpServers": {
		"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "`+secretValue+`", "GITHUB_HOST": "`+secretValue+`"}},
		"files": {"command": "/usr/bin/mcp files", "args": ["--root", "/my docs"], "per_session": true, "start": "boot"}
	}}`)
	out, errOut, code := w.run("servers", "list", "--config", w.conf)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[0] != "servers in "+w.conf+":" {
		t.Fatalf("output:\n%s", out)
	}
	for i, want := range [][]string{
		{"NAME", "COMMAND", "ARGS", "ENV", "PER_SESSION", "START"},
		{"files", "/usr/bin/mcp files", `--root "/my docs"`, "-", "true", "boot"},
		{"github", "npx", "-y @modelcontextprotocol/server-github", "GITHUB_HOST,GITHUB_TOKEN", "false", "lazy"},
	} {
		for _, field := range want {
			if !strings.Contains(lines[i+1], field) {
				t.Errorf("line %q lacks %q", lines[i+1], field)
			}
		}
	}

	empty := filepath.Join(w.dir, "empty.json")
	w.write(empty, `{}`)
	if out, _, code := w.run("servers", "list", "--config", empty); code != 0 || out != "no stdio servers configured in "+empty+"\n" {
		t.Fatalf("exit %d, output %q", code, out)
	}
	w.write(empty, `{"mcpServers": {"x": {"comand": "y"}}}`)
	if _, errOut, code := w.run("servers", "list", "--config", empty); code != 1 || !strings.Contains(errOut, "mcpServers.x.comand: unknown key") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
