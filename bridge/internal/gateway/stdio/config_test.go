package stdio

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
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
		{"max_children", `{"mcpServers": {"memory": {"command": "npx", "per_session": true, "max_children": 3}}}`, ""},
		{"negative max_children", `{"mcpServers": {"memory": {"command": "npx", "max_children": -1}}}`, "mcpServers.memory.max_children: -1 is outside 0-1024"},
		{"huge max_children", `{"mcpServers": {"memory": {"command": "npx", "max_children": 100000}}}`, "mcpServers.memory.max_children: 100000 is outside 0-1024"},
		{"max_children wrong type", `{"mcpServers": {"memory": {"command": "npx", "max_children": "8"}}}`, "mcpServers.memory.max_children: must be a whole number, not a string"},
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

func TestDecodeServersPrefix(t *testing.T) {
	tests := []struct {
		name, raw, prefix, wantErr string
	}{
		{"valid", `{"memory": {"command": "npx"}}`, "mcpServers", ""},
		{"empty", `{}`, "mcpServers", ""},
		{"unknown key", `{"memory": {"comand": "npx"}}`, "mcpServers", "mcpServers.memory.comand: unknown key"},
		{"other prefix", `{"memory": {"comand": "npx"}}`, "gateway.servers", "gateway.servers.memory.comand: unknown key"},
		{"validation under prefix", `{"memory": {"command": "npx", "start": "now"}}`, "x.mcpServers", `x.mcpServers.memory.start: "now"`},
		{"bad name under prefix", `{"Memory": {"command": "npx"}}`, "x", "x.Memory: bad server name"},
		{"duplicate", `{"a": {"command": "x"}, "a": {"command": "x"}}`, "mcpServers", "mcpServers.a: the server is defined twice"},
		{"not an object", `["memory"]`, "mcpServers", "mcpServers: must be an object of servers, not a list"},
		{"null", `null`, "mcpServers", "mcpServers: must be an object of servers, not null"},
		{"missing", ``, "mcpServers", "mcpServers: missing"},
		{"truncated", `{"memory": {"command": "npx"}`, "mcpServers", "mcpServers: not valid JSON"},
		{"trailing data", `{} {}`, "mcpServers", "mcpServers: unexpected data after the object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeServers([]byte(tt.raw), tt.prefix)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("DecodeServers: %v", err)
				}
				for name, c := range got {
					if c.Name != name {
						t.Errorf("server %q has Name %q", name, c.Name)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseClaudeDesktop(t *testing.T) {
	const secret = "ghp_secret-value-42"
	tests := []struct {
		name      string
		json      string
		want      []string // servers returned
		wantErr   []string // every one must appear; nil means success
		notInErrs string
	}{
		{
			name: "other top-level keys ignored",
			json: `{"globalShortcut": "Ctrl+Space", "preferences": {"theme": "dark"}, "mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`,
			want: []string{"memory"},
		},
		{name: "no mcpServers", json: `{"preferences": {}}`, want: []string{}},
		{name: "null mcpServers", json: `{"mcpServers": null}`, want: []string{}},
		{
			name:      "unknown entry key refused, naming server and key",
			json:      `{"mcpServers": {"github": {"command": "npx", "env": {"TOKEN": "` + secret + `"}, "disabled": true}, "memory": {"command": "npx"}}}`,
			wantErr:   []string{"mcpServers.github.disabled: unknown key", "Claude Desktop may accept it"},
			notInErrs: secret,
		},
		{
			name:    "every bad entry reported",
			json:    `{"mcpServers": {"b": {"command": "x", "type": "stdio"}, "My Server": {"command": "x"}}}`,
			wantErr: []string{"mcpServers.b.type: unknown key", `mcpServers."My Server": bad server name`},
		},
		{name: "duplicate server", json: `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`, wantErr: []string{"mcpServers.a: the server is defined twice"}},
		{name: "mcpServers not an object", json: `{"mcpServers": "none"}`, wantErr: []string{"mcpServers: must be an object of servers, not a string"}},
		{name: "not JSON", json: `{"mcpServers": `, wantErr: []string{"not valid JSON"}},
		{name: "top level not an object", json: `[1]`, wantErr: []string{"must be a JSON object, not a list"}},
		{name: "empty file", json: ` `, wantErr: []string{"the file is empty"}},
		{name: "trailing data", json: `{} x`, wantErr: []string{"claude desktop config: unexpected data after"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseClaudeDesktop([]byte(tt.json))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("ParseClaudeDesktop: %v", err)
				}
				var names []string
				for name := range got {
					names = append(names, name)
				}
				sort.Strings(names)
				if fmt.Sprint(names) != fmt.Sprint(tt.want) {
					t.Fatalf("servers %v, want %v", names, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %v", got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.notInErrs != "" && strings.Contains(err.Error(), tt.notInErrs) {
				t.Errorf("error quotes an env value: %v", err)
			}
		})
	}
}

func TestParseClaudeDesktopEntryErrors(t *testing.T) {
	_, err := ParseClaudeDesktop([]byte(`{"mcpServers": {"b": {"command": "x", "url": "u"}, "a": {"command": "x", "cwd": "rel"}}}`))
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not joined", err)
	}
	var names []string
	for _, e := range joined.Unwrap() {
		var ee *EntryError
		if !errors.As(e, &ee) {
			t.Fatalf("%T is not an *EntryError", e)
		}
		names = append(names, ee.Name)
	}
	if fmt.Sprint(names) != "[a b]" {
		t.Fatalf("entry errors for %v, want [a b] in order", names)
	}
}
