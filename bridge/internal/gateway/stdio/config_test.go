package stdio

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseServers(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name    string
		json    string
		wantErr string // "" means success
	}{
		{"minimal", `{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`, ""},
		{"full", `{"mcpServers": {"fs-1": {"command": "node", "args": [], "env": {"TOKEN": "s3cret-value"}, "cwd": "/tmp", "per_session": true, "start": "boot", "tools": {"allow": ["read"], "deny": ["write"]}}}}`, ""},
		{"empty servers", `{"mcpServers": {}}`, ""},
		{"not JSON", `{"mcpServers": {`, "not valid JSON"},
		{"not JSON at all", `mcpServers = 1`, "not valid JSON"},
		{"empty file", ``, "the file is empty"},
		{"trailing data", `{"mcpServers": {}} {}`, "unexpected data after"},
		{"missing mcpServers", `{}`, "mcpServers: missing"},
		{"unknown top-level key", `{"mcpServers": {}, "servers": {}}`, "servers: unknown key"},
		{"unknown key", `{"mcpServers": {"memory": {"comand": "npx"}}}`, "mcpServers.memory.comand: unknown key"},
		{"unknown nested key", `{"mcpServers": {"memory": {"command": "npx", "tools": {"allowed": []}}}}`, "mcpServers.memory.tools.allowed: unknown key"},
		{"missing command", `{"mcpServers": {"memory": {"args": ["x"]}}}`, "mcpServers.memory.command: missing"},
		{"blank command", `{"mcpServers": {"memory": {"command": "  "}}}`, "mcpServers.memory.command: missing"},
		{"uppercase name", `{"mcpServers": {"Memory": {"command": "npx"}}}`, "mcpServers.Memory: bad server name"},
		{"underscore name", `{"mcpServers": {"my_server": {"command": "npx"}}}`, "DNS label"},
		{"name with dot", `{"mcpServers": {"a.b": {"command": "npx"}}}`, `mcpServers."a.b": bad server name`},
		{"name ending in hyphen", `{"mcpServers": {"mem-": {"command": "npx"}}}`, "bad server name"},
		{"name too long", `{"mcpServers": {"` + long + `": {"command": "npx"}}}`, "bad server name"},
		{"empty name", `{"mcpServers": {"": {"command": "npx"}}}`, `mcpServers."": bad server name`},
		{"duplicate name", `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`, "mcpServers.a: the server is defined twice"},
		{"args wrong type", `{"mcpServers": {"memory": {"command": "npx", "args": "-y"}}}`, "mcpServers.memory.args: must be a list, not a string"},
		{"command wrong type", `{"mcpServers": {"memory": {"command": 7}}}`, "mcpServers.memory.command: must be a string, not a number"},
		{"env value wrong type", `{"mcpServers": {"memory": {"command": "npx", "env": {"PORT": 8080}}}}`, "mcpServers.memory.env.PORT: must be a string, not a number"},
		{"per_session wrong type", `{"mcpServers": {"memory": {"command": "npx", "per_session": "yes"}}}`, "mcpServers.memory.per_session: must be true or false"},
		{"server not an object", `{"mcpServers": {"memory": "npx"}}`, "mcpServers.memory: must be an object, not a string"},
		{"mcpServers not an object", `{"mcpServers": []}`, "mcpServers: must be an object of servers, not a list"},
		{"top level not an object", `[]`, "must be a JSON object"},
		{"bad start", `{"mcpServers": {"memory": {"command": "npx", "start": "eager"}}}`, `mcpServers.memory.start: "eager" must be "lazy" or "boot"`},
		{"relative cwd", `{"mcpServers": {"memory": {"command": "npx", "cwd": "work"}}}`, "mcpServers.memory.cwd: \"work\" must be an absolute path"},
		{"bad env key", `{"mcpServers": {"memory": {"command": "npx", "env": {"A=B": "x"}}}}`, "mcpServers.memory.env: key \"A=B\""},
		{"empty tool name", `{"mcpServers": {"memory": {"command": "npx", "tools": {"deny": [""]}}}}`, "mcpServers.memory.tools.deny[0]: empty tool name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseServers([]byte(tt.json))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseServers: %v", err)
				}
				for name, c := range got {
					if c.Name != name {
						t.Errorf("server %q has Name %q", name, c.Name)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseServers accepted it: %+v", got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestSecretsNeverShown(t *testing.T) {
	const secret = "s3cret-value-123"
	servers, err := ParseServers([]byte(`{"mcpServers": {"notion": {"command": "npx", "env": {"TOKEN": "` + secret + `"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := servers["notion"]
	if c.Env["TOKEN"] != secret {
		t.Fatalf("env not decoded: %v", c.Env)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "server", c)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "server", c)
	views := map[string]string{
		"slog":          logged.String(),
		"%v":            fmt.Sprintf("%v", c),
		"%+v":           fmt.Sprintf("%+v", c),
		"Redacted":      fmt.Sprintf("%#v", c.Redacted().Env),
		"type error":    errString(ParseServers([]byte(`{"mcpServers": {"n": {"command": "x", "env": {"T": "` + secret + `", "U": 1}}}}`))),
		"unknown error": errString(ParseServers([]byte(`{"mcpServers": {"n": {"command": "x", "env": {"T": "` + secret + `"}, "bad": 1}}}`))),
	}
	for name, s := range views {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the env value: %s", name, s)
		}
	}
	if !strings.Contains(views["slog"], "TOKEN") {
		t.Errorf("the log should still name the env key: %s", views["slog"])
	}
	if c.Env["TOKEN"] != secret {
		t.Error("Redacted changed the original")
	}
}

func errString(_ map[string]ServerConfig, err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestClaudeDesktopConfigPath(t *testing.T) {
	join := func(p ...string) string { return strings.Join(p, "/") }
	tests := []struct {
		goos, home, appData string
		want                string
		wantErr             bool
	}{
		{"linux", "/home/u", "", "/home/u/.config/Claude/claude_desktop_config.json", false},
		{"freebsd", "/home/u", "", "/home/u/.config/Claude/claude_desktop_config.json", false},
		{"darwin", "/Users/u", "", "/Users/u/Library/Application Support/Claude/claude_desktop_config.json", false},
		{"windows", `C:\Users\u`, `C:\Users\u\AppData\Roaming`, `C:\Users\u\AppData\Roaming/Claude/claude_desktop_config.json`, false},
		{"windows", `C:\Users\u`, "", "", true},
		{"linux", "", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.goos+"/"+tt.want, func(t *testing.T) {
			got, err := claudeDesktopConfigPath(tt.goos, tt.home, tt.appData, join)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if p, err := ClaudeDesktopConfigPath(); err != nil || !filepath.IsAbs(p) {
		t.Errorf("ClaudeDesktopConfigPath() = %q, %v", p, err)
	}
}
