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
		{"session cap below -1", `{"max_sessions":-2}`, `key "max_sessions"`},
		{"per-client cap below -1", `{"max_sessions_per_client":-5}`, `key "max_sessions_per_client"`},
		{"too many children", `{"gateway":{"max_children":5000}}`, `key "gateway.max_children"`},
		{"bad aggregate timeout", `{"gateway":{"aggregate_timeout":"later"}}`, `gateway.aggregate_timeout`},
		{"bad idle timeout", `{"gateway":{"idle_timeout":"a while"}}`, `key "gateway.idle_timeout"`},
		{"connection cap below -1", `{"gateway":{"max_conns_per_ip":-2}}`, `key "gateway.max_conns_per_ip"`},
		{"negative client cap", `{"oauth":{"max_clients":-1}}`, `key "oauth.max_clients"`},
		{"bad unused client ttl", `{"oauth":{"unused_client_ttl":"1 hour"}}`, `key "oauth.unused_client_ttl"`},
		{"negative password wait", `{"oauth":{"password_check_wait":"-1s"}}`, `key "oauth.password_check_wait"`},
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
		{`{"relay":{"url":"wss://relay.example.com","token":"t","servers":false}}`, ""},
		{`{"relay":{"servers":false}}`, `"relay.url"`},
		{`{"relay":{"replace_servers":true}}`, `"relay.url"`},
		{`{"relay":{"url":"wss://relay.example.com","token":"t","replace_servers":true}}`, ""},
		{`{"relay":{"url":"wss://relay.example.com","token":"t","servers":false,"replace_servers":true}}`, `"relay.replace_servers": has no effect`},
		{`{"relay":{"url":"wss://relay.example.com","token":"t","replace_servers":"yes"}}`, `replace_servers`},
		{`{"relay":{"url":"ws://relay.example.com","token":"t"}}`, `"relay.url"`},
		{`{"relay":{"url":"https://relay.example.com","token":"t"}}`, `"relay.url"`},
		{`{"relay":{"url":"wss://relay.example.com/","token":"t"}}`, ""},
		{`{"relay":{"url":"wss://relay.example.com/extension","token":"t"}}`, ""},
		{`{"relay":{"url":"ws://127.0.0.1:8787/extension/","token":"t"}}`, ""},
		{`{"relay":{"url":"wss://relay.example.com/mcp","token":"t"}}`, `"relay.url": "wss://relay.example.com/mcp" is the proxy's MCP clients' endpoint`},
		{`{"relay":{"url":"wss://relay.example.com/relay","token":"t"}}`, `"relay.url": "wss://relay.example.com/relay": the proxy serves nothing at "/relay"`},
		{`{"relay":{"url":"wss://relay.example.com/?token=t","token":"t"}}`, `"relay.url"`},
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

func TestGatewayConfig(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       string // "" = valid
	}{
		{"inline servers", `{"mcpServers":{"memory":{"command":"npx","args":["-y","@modelcontextprotocol/server-memory"]}}}`, ""},
		{"empty servers with a file", `{"mcpServers":{},"gateway":{"servers_file":"servers.json"}}`, ""},
		{"null servers", `{"mcpServers":null}`, ""},
		{"full gateway", `{"gateway":{"servers_file":"/etc/bb/servers.json","host_prefix":"tools.mcp","host_domain":"example.com","watch":false}}`, ""},
		{"unknown server key", `{"mcpServers":{"memory":{"comand":"npx"}}}`, "mcpServers.memory.comand: unknown key"},
		{"bad server name", `{"mcpServers":{"My Server":{"command":"npx"}}}`, `mcpServers."My Server": bad server name`},
		{"servers not an object", `{"mcpServers":["memory"]}`, "mcpServers: must be an object of servers, not a list"},
		{"missing command", `{"mcpServers":{"memory":{}}}`, "mcpServers.memory.command: missing"},
		{"both inline and file", `{"mcpServers":{"memory":{"command":"npx"}},"gateway":{"servers_file":"s.json"}}`, `keys "mcpServers" and "gateway.servers_file"`},
		{"unknown gateway key", `{"gateway":{"servers_fil":"s.json"}}`, `unknown key "servers_fil"`},
		{"watch wrong type", `{"gateway":{"watch":"yes"}}`, `key "gateway.watch" must be true or false`},
		{"uppercase prefix", `{"gateway":{"host_prefix":"MCP"}}`, `key "gateway.host_prefix": "MCP" is not a DNS name`},
		{"underscore domain", `{"gateway":{"host_domain":"my_host.example"}}`, `key "gateway.host_domain"`},
		{"trailing dot", `{"gateway":{"host_domain":"example.com."}}`, `key "gateway.host_domain"`},
		{"label ending in hyphen", `{"gateway":{"host_domain":"a-.example.com"}}`, `key "gateway.host_domain"`},
		{"label too long", `{"gateway":{"host_prefix":"` + strings.Repeat("a", 64) + `"}}`, `key "gateway.host_prefix"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.json))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Decode: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestGatewayDefaults(t *testing.T) {
	c, err := Decode(strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Gateway.HostPrefix != "mcp" || c.Gateway.HostDomain != "" || !c.Gateway.WatchEnabled() || c.Gateway.Watch == nil || !*c.Gateway.Watch {
		t.Fatalf("gateway defaults = %+v", c.Gateway)
	}
	c, err = Decode(strings.NewReader(`{"gateway":{"watch":false,"host_prefix":"tools"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Gateway.WatchEnabled() || c.Gateway.HostPrefix != "tools" {
		t.Fatalf("gateway = %+v", c.Gateway)
	}
	if !(&Gateway{}).WatchEnabled() {
		t.Fatal("the zero Gateway should watch")
	}
}

func TestServers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const memory = `{"memory":{"command":"npx","args":["-y","@modelcontextprotocol/server-memory"],"env":{"K":"v"}}}`

	t.Run("inline", func(t *testing.T) {
		p := write("inline/config.json", `{"listen":"127.0.0.1:1","mcpServers":`+memory+`}`)
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		servers, from, err := c.Servers()
		if err != nil || from != p || servers["memory"].Command != "npx" || servers["memory"].Name != "memory" || servers["memory"].Env["K"] != "v" {
			t.Fatalf("Servers() = %v, %q, %v", servers, from, err)
		}
	})
	t.Run("relative servers file", func(t *testing.T) {
		s := write("rel/conf.d/servers.json", `{"mcpServers":`+memory+`}`)
		p := write("rel/config.json", `{"gateway":{"servers_file":"conf.d/servers.json"}}`)
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if c.ServersFile() != s {
			t.Fatalf("ServersFile() = %q, want %q", c.ServersFile(), s)
		}
		servers, from, err := c.Servers()
		if err != nil || from != s || servers["memory"].Command != "npx" {
			t.Fatalf("Servers() = %v, %q, %v", servers, from, err)
		}
	})
	t.Run("absolute servers file", func(t *testing.T) {
		s := write("abs/servers.json", `{"mcpServers":{}}`)
		p := write("abs/other/config.json", `{"gateway":{"servers_file":"`+s+`"}}`)
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		servers, from, err := c.Servers()
		if err != nil || from != s || len(servers) != 0 {
			t.Fatalf("Servers() = %v, %q, %v", servers, from, err)
		}
	})
	t.Run("servers file invalid", func(t *testing.T) {
		s := write("bad/servers.json", `{"mcpServers":{"memory":{"comand":"npx"}}}`)
		p := write("bad/config.json", `{"gateway":{"servers_file":"servers.json"}}`)
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Servers()
		if err == nil || !strings.Contains(err.Error(), s+": mcpServers.memory.comand: unknown key") {
			t.Fatalf("error %v, want one naming the file and key", err)
		}
	})
	t.Run("servers file missing", func(t *testing.T) {
		p := write("missing/config.json", `{"gateway":{"servers_file":"nope.json"}}`)
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		_, from, err := c.Servers()
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "missing", "nope.json")) || from != filepath.Join(dir, "missing", "nope.json") {
			t.Fatalf("error %v (from %q), want one naming the missing file", err, from)
		}
	})
	t.Run("none", func(t *testing.T) {
		p := write("none/config.json", `{}`)
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		servers, from, err := c.Servers()
		if err != nil || servers == nil || len(servers) != 0 || from != p {
			t.Fatalf("Servers() = %v, %q, %v", servers, from, err)
		}
	})
	t.Run("default file absent", func(t *testing.T) {
		home := filepath.Join(dir, "home")
		t.Setenv("BROWSERBRIDGE_HOME", home)
		c, err := Load("")
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(home, "config", "config.json"); c.Path != want {
			t.Fatalf("Path = %q, want %q", c.Path, want)
		}
	})
	t.Run("load error names the key", func(t *testing.T) {
		p := write("keyerr/config.json", `{"mcpServers":{"memory":{"command":"npx","env":{"TOKEN":"s3cret"},"bad":1}}}`)
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), p+": config: mcpServers.memory.bad: unknown key") || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("Load error %v", err)
		}
	})
}

func TestRelayOffersServers(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		name    string
		servers *bool
		want    bool
	}{
		{"unset: the gateway's servers are offered", nil, true},
		{"true", &yes, true},
		{"false: only the browsers are relayed", &no, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Relay{URL: "wss://relay.example.com", Token: "t", Servers: tc.servers}
			if got := r.OffersServers(); got != tc.want {
				t.Fatalf("OffersServers() = %v, want %v", got, tc.want)
			}
		})
	}
}
