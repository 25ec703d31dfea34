package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeRejectsWithKeyNamed(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"unknown key", `{"lsiten":"127.0.0.1:1"}`, `unknown key "lsiten"`},
		{"nested unknown key", `{"log":{"levle":"info"}}`, `unknown key "levle"`},
		{"wrong type", `{"listen":3456}`, `key "listen" must be a string`},
		{"wrong nested type", `{"log":{"max_size_mb":"big"}}`, `key "log.max_size_mb" must be a whole number`},
		{"bad listen", `{"listen":"3456"}`, `key "listen"`},
		{"bad port", `{"listen":"127.0.0.1:99999"}`, `key "listen": port`},
		{"empty host", `{"listen":":3456"}`, `key "listen": name an address`},
		{"relative socket", `{"socket":"bridge.sock"}`, `key "socket"`},
		{"bad extension id", `{"allowed_extensions":["abc"]}`, `key "allowed_extensions[0]"`},
		{"bad level", `{"log":{"level":"loud"}}`, `key "log.level"`},
		{"negative size", `{"log":{"max_size_mb":-1}}`, `key "log.max_size_mb"`},
		{"bad duration", `{"browser_wait":"soon"}`, `key "browser_wait"`},
		{"bad ping style", `{"sse_ping":"loud"}`, `key "sse_ping"`},
		{"negative rate", `{"rate_limit":-1}`, `key "rate_limit"`},
		{"bad origin", `{"allowed_origins":["example.com"]}`, `key "allowed_origins[0]"`},
		{"origin with path", `{"allowed_origins":["https://example.com/app"]}`, `key "allowed_origins[0]"`},
		{"syntax error", "{\n\"listen\": ,}", `invalid JSON on line 2`},
		{"trailing data", `{} {}`, `unexpected data after`},
		{"empty file", ``, `file is empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode(%s) error = %v, want one containing %q", tc.json, err, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	home := t.TempDir()
	t.Setenv("BROWSERBRIDGE_HOME", home)
	t.Setenv("BROWSERBRIDGE_SOCKET", filepath.Join(home, "s.sock"))
	c, err := Load("") // no file at the default path: defaults
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != DefaultListen || c.Socket != filepath.Join(home, "s.sock") || c.Log.File != filepath.Join(home, "logs", "bridge.log") {
		t.Fatalf("defaults = %+v", c)
	}
	if _, err := Load(filepath.Join(home, "missing.json")); err == nil {
		t.Fatal("a config file named explicitly but missing was accepted")
	}
	p := filepath.Join(home, "c.json")
	os.WriteFile(p, []byte(`{"listen":"127.0.0.1:4000","log":{"level":"debug"}}`), 0o600)
	c, err = Load(p)
	if err != nil || c.Listen != "127.0.0.1:4000" || c.LogLevel().String() != "DEBUG" {
		t.Fatalf("Load = %+v, %v", c, err)
	}
}

func TestRelayValidation(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" = valid
	}{
		{`{"relay":{"url":"wss://relay.example.com","token":"t"}}`, ""},
		{`{"relay":{"url":"ws://127.0.0.1:8080","token":"t","name":"Work"}}`, ""},
		{`{"relay":{"url":"ws://localhost:8080","token":"t"}}`, ""},
		{`{"relay":{"url":"ws://relay.example.com","token":"t"}}`, `"relay.url"`},
		{`{"relay":{"url":"https://relay.example.com","token":"t"}}`, `"relay.url"`},
		{`{"relay":{"url":"wss://relay.example.com"}}`, `"relay.token"`},
		{`{"relay":{"token":"t"}}`, `"relay.url"`},
		{`{"relay":{"url":"wss://x","token":"t","extra":1}}`, `unknown key "extra"`},
	} {
		_, err := Decode(strings.NewReader(c.in))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one naming %s", c.in, err, c.want)
		}
	}
}
