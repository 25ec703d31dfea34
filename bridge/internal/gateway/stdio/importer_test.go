package stdio

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const claudeDesktop = `{
  "globalShortcut": "Ctrl+Space",
  "preferences": {"quickEntry": true},
  "mcpServers": {
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "ghp_secret-value-42"}},
    "legacy": {"command": "node", "disabled": true},
    "browserbridge": {"command": "/home/u/.local/bin/browserbridge", "args": ["stdio"]}
  }
}`

func verdicts(r ImportReport) map[string]ImportAction {
	m := map[string]ImportAction{}
	for _, res := range r.Results {
		m[res.Name] = res.Action
	}
	return m
}

// decodeDoc decodes a document for comparisons that ignore formatting.
func decodeDoc(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decoding %s: %v", doc, err)
	}
	return m
}

func TestImport(t *testing.T) {
	tests := []struct {
		name    string
		dst     string
		opts    ImportOptions
		want    map[string]ImportAction
		wantErr string
		changed bool
	}{
		{
			name:    "into an empty document",
			dst:     ``,
			want:    map[string]ImportAction{"memory": ImportAdded, "github": ImportAdded, "legacy": ImportSkipped, "browserbridge": ImportSkipped},
			changed: true,
		},
		{
			name:    "identical entries unchanged",
			dst:     `{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "start": "lazy", "env": {}}, "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "ghp_secret-value-42"}}}}`,
			want:    map[string]ImportAction{"memory": ImportUnchanged, "github": ImportUnchanged, "legacy": ImportSkipped, "browserbridge": ImportSkipped},
			changed: false,
		},
		{
			name:    "conflict refused",
			dst:     `{"mcpServers": {"github": {"command": "npx", "env": {"GITHUB_TOKEN": "old"}}}}`,
			want:    map[string]ImportAction{"memory": ImportAdded, "github": ImportConflict, "legacy": ImportSkipped, "browserbridge": ImportSkipped},
			wantErr: "already configured differently: github",
		},
		{
			name:    "conflict replaced",
			dst:     `{"mcpServers": {"github": {"command": "npx", "env": {"GITHUB_TOKEN": "old"}}}}`,
			opts:    ImportOptions{Replace: true},
			want:    map[string]ImportAction{"memory": ImportAdded, "github": ImportReplaced, "legacy": ImportSkipped, "browserbridge": ImportSkipped},
			changed: true,
		},
		{name: "destination not JSON", dst: `{"listen": `, wantErr: "not valid JSON"},
		{name: "destination not an object", dst: `[]`, wantErr: "must be a JSON object, not a list"},
		{name: "destination duplicate key", dst: `{"listen": "a", "listen": "b"}`, wantErr: "listen: the key appears twice"},
		{name: "destination trailing data", dst: `{} {}`, wantErr: "unexpected data after"},
		{name: "destination servers invalid", dst: `{"mcpServers": {"memory": {"comand": "npx"}}}`, wantErr: "mcpServers.memory.comand: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report, err := Import([]byte(tt.dst), []byte(claudeDesktop), tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if report.Doc != nil {
					t.Errorf("a refused import returned a document")
				}
			} else if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if tt.want != nil && !reflect.DeepEqual(verdicts(report), tt.want) {
				t.Errorf("verdicts %v, want %v", verdicts(report), tt.want)
			}
			if (report.Doc != nil) != tt.changed {
				t.Errorf("document returned: %v, want %v", report.Doc != nil, tt.changed)
			}
			for _, r := range report.Results {
				if strings.Contains(r.Reason, "ghp_secret") {
					t.Errorf("%s: reason quotes an env value: %s", r.Name, r.Reason)
				}
			}
			if report.Doc == nil {
				return
			}
			servers, err := ParseServers(report.Doc)
			if err != nil {
				t.Fatalf("the merged document does not parse: %v\n%s", err, report.Doc)
			}
			if servers["github"].Env["GITHUB_TOKEN"] != "ghp_secret-value-42" || len(servers["memory"].Args) != 2 {
				t.Errorf("imported servers %v", servers)
			}
			if _, ok := servers["legacy"]; ok {
				t.Errorf("a skipped server was imported")
			}
		})
	}
}

func TestImportConflictError(t *testing.T) {
	_, err := Import([]byte(`{"mcpServers": {"memory": {"command": "node"}, "github": {"command": "node"}}}`), []byte(claudeDesktop), ImportOptions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Names, []string{"github", "memory"}) {
		t.Fatalf("error %v, want a ConflictError naming github and memory", err)
	}
}

func TestImportSkipReasons(t *testing.T) {
	report, err := Import(nil, []byte(claudeDesktop), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, r := range report.Results {
		reasons[r.Name] = r.Reason
	}
	if !strings.Contains(reasons["legacy"], "mcpServers.legacy.disabled: unknown key") {
		t.Errorf("legacy skipped for %q", reasons["legacy"])
	}
	if !strings.Contains(reasons["browserbridge"], "Browser Bridge itself") {
		t.Errorf("browserbridge skipped for %q", reasons["browserbridge"])
	}
	var names []string
	for _, r := range report.Results {
		names = append(names, r.Name)
	}
	if !reflect.DeepEqual(names, []string{"browserbridge", "github", "legacy", "memory"}) {
		t.Errorf("results in order %v", names)
	}
}

// TestImportKeepsOtherKeys checks that every other key of the destination,
// and its servers that the source does not name, keep their value (numbers
// digit for digit), and the keys their order.
func TestImportKeepsOtherKeys(t *testing.T) {
	dst := `{
	"listen": "127.0.0.1:4000",
	"max_body_bytes": 12345678901234567890,
	"rate_limit": 1.50,
	"log": {"level": "debug", "file": "<stderr> & co"},
	"mcpServers": {"zeta": {"command": "z", "env": {"K": "v"}}, "memory": {"command": "npx", "args": ["old"]}},
	"relay": {"url": "wss://relay.example.com", "token": "t"}
}`
	report, err := Import([]byte(dst), []byte(claudeDesktop), ImportOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	before, after := decodeDoc(t, []byte(dst)), decodeDoc(t, report.Doc)
	for k, v := range before {
		if k != "mcpServers" && !reflect.DeepEqual(after[k], v) {
			t.Errorf("key %s: %v became %v", k, v, after[k])
		}
	}
	if len(after) != len(before) {
		t.Errorf("keys %v, want %v", after, before)
	}
	if !bytes.Contains(report.Doc, []byte("12345678901234567890")) || !bytes.Contains(report.Doc, []byte("1.50")) {
		t.Errorf("numbers were rewritten:\n%s", report.Doc)
	}
	if !bytes.Contains(report.Doc, []byte(`"<stderr> & co"`)) {
		t.Errorf("strings were re-escaped:\n%s", report.Doc)
	}
	order := func(doc []byte, keys ...string) []int {
		var at []int
		for _, k := range keys {
			at = append(at, bytes.Index(doc, []byte(`"`+k+`"`)))
		}
		return at
	}
	at := order(report.Doc, "listen", "max_body_bytes", "rate_limit", "log", "mcpServers", "relay")
	for i := 1; i < len(at); i++ {
		if at[i] <= at[i-1] {
			t.Fatalf("key order lost (%v):\n%s", at, report.Doc)
		}
	}
	// Servers: zeta kept first, memory replaced in place, github appended.
	at = order(report.Doc, "zeta", "memory", "github")
	if !(at[0] < at[1] && at[1] < at[2]) {
		t.Errorf("server order lost (%v):\n%s", at, report.Doc)
	}
	servers, err := ParseServers([]byte(`{"mcpServers": ` + string(mustMember(t, report.Doc, "mcpServers")) + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if servers["zeta"].Env["K"] != "v" || !reflect.DeepEqual(servers["memory"].Args, []string{"-y", "@modelcontextprotocol/server-memory"}) {
		t.Errorf("servers %v", servers)
	}
	if !bytes.HasSuffix(report.Doc, []byte("}\n")) || !bytes.Contains(report.Doc, []byte("\n  \"listen\": ")) {
		t.Errorf("document not indented:\n%s", report.Doc)
	}
}

func mustMember(t *testing.T, doc []byte, key string) json.RawMessage {
	t.Helper()
	members, err := objectMembers(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.key == key {
			return m.raw
		}
	}
	t.Fatalf("no %s in %s", key, doc)
	return nil
}

func TestImportIdempotent(t *testing.T) {
	first, err := Import([]byte(`{"listen": "127.0.0.1:1"}`), []byte(claudeDesktop), ImportOptions{})
	if err != nil || first.Doc == nil {
		t.Fatalf("first import: %v", err)
	}
	second, err := Import(first.Doc, []byte(claudeDesktop), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if second.Doc != nil {
		t.Errorf("a second import changed the document:\n%s", second.Doc)
	}
	for _, r := range second.Results {
		if r.Action != ImportUnchanged && r.Action != ImportSkipped {
			t.Errorf("%s: %s on the second import", r.Name, r.Action)
		}
	}
}

func TestImportEmptySource(t *testing.T) {
	report, err := Import([]byte(`{"listen": "127.0.0.1:1"}`), []byte(`{"preferences": {}}`), ImportOptions{})
	if err != nil || report.Doc != nil || len(report.Results) != 0 {
		t.Fatalf("Import = %+v, %v; want nothing to do", report, err)
	}
}

func TestRunsBridge(t *testing.T) {
	for cmd, want := range map[string]bool{
		"browserbridge":                         true,
		"/home/u/.local/bin/browserbridge":      true,
		`C:\Program Files\BB\BrowserBridge.exe`: true,
		"browserbridge-proxy":                   false,
		"npx":                                   false,
	} {
		if got := runsBridge(ServerConfig{Command: cmd, Args: []string{"stdio"}}); got != want {
			t.Errorf("runsBridge(%q stdio) = %v", cmd, got)
		}
	}
	if runsBridge(ServerConfig{Command: "browserbridge", Args: []string{"connect", "--proxy", "wss://x"}}) {
		t.Error("browserbridge connect reaches a remote browser; it is not the bridge itself")
	}
}

func TestImportErrorsNameTheDocument(t *testing.T) {
	opts := ImportOptions{SourceName: "/y/claude.json", DestName: "/x/config.json"}
	for _, tc := range []struct {
		name, dst, src, want string
	}{
		{"source not JSON", `{}`, `{"mcpServers": `, "/y/claude.json: not valid JSON"},
		{"source servers not an object", `{}`, `{"mcpServers": 1}`, "/y/claude.json: mcpServers: must be an object of servers, not a number"},
		{"source empty", `{}`, ``, "/y/claude.json: the file is empty"},
		{"destination not JSON", `{"a"`, claudeDesktop, "/x/config.json: a: not valid JSON: truncated"},
		{"destination servers invalid", `{"mcpServers": {"m": {}}}`, claudeDesktop, "/x/config.json: mcpServers.m.command: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import([]byte(tc.dst), []byte(tc.src), opts)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want one starting %q", err, tc.want)
			}
		})
	}
}
