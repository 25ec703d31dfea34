package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hash is a well-formed bcrypt hash (of "correct horse battery staple").
const hash = "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"

func TestNormalizePublicURL(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{"https", "https://mcp.example.com", "https://mcp.example.com", ""},
		{"trailing slash", "https://mcp.example.com/", "https://mcp.example.com", ""},
		{"upper case host", "HTTPS://MCP.Example.COM", "https://mcp.example.com", ""},
		{"default port dropped", "https://mcp.example.com:443", "https://mcp.example.com", ""},
		{"other port kept", "https://mcp.example.com:8443", "https://mcp.example.com:8443", ""},
		{"http on loopback", "http://127.0.0.1:3456", "http://127.0.0.1:3456", ""},
		{"http on localhost", "http://localhost:3456/", "http://localhost:3456", ""},
		{"ipv6 loopback", "http://[::1]:3456", "http://[::1]:3456", ""},
		{"http elsewhere", "http://mcp.example.com", "", "unencrypted"},
		{"path", "https://mcp.example.com/mcp", "", "has a path"},
		{"query", "https://mcp.example.com/?a=1", "", "has a path"},
		{"fragment", "https://mcp.example.com#x", "", "has a path"},
		{"user info", "https://me:pw@mcp.example.com", "", "user name"},
		{"no scheme", "mcp.example.com", "", "not a URL"},
		{"ftp", "ftp://mcp.example.com", "", "not an https URL"},
		{"bad port", "https://mcp.example.com:0", "", "port"},
		{"bad host", "https://mcp_example.com", "", "not a host name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizePublicURL(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("NormalizePublicURL(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("NormalizePublicURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestOAuthConfig(t *testing.T) {
	for _, tc := range []struct {
		name, json, err string
	}{
		{"public with a hash", `{"gateway":{"public_url":"https://mcp.example.com"},"oauth":{"password_hash":"` + hash + `"}}`, ""},
		{"public with oidc", `{"gateway":{"public_url":"https://mcp.example.com"},"oauth":{"oidc":{"issuer":"https://accounts.example.com","client_id":"c","allowed_emails":["me@example.com"]}}}`, ""},
		{"state in memory", `{"oauth":{"state_file":":memory:"}}`, ""},
		{"limits", `{"oauth":{"max_clients":50,"unused_client_ttl":"30m","registrations_per_minute":3,"max_pending_signins":100,"max_pending_signins_per_address":4,"max_password_checks":2,"password_check_wait":"5s"},"gateway":{"max_conns_per_ip":-1,"idle_timeout":"90s"}}`, ""},
		{"bad public url", `{"gateway":{"public_url":"http://mcp.example.com"}}`, `key "gateway.public_url"`},
		{"token and public url", `{"token":"t","gateway":{"public_url":"https://mcp.example.com"}}`, `keys "token" and "gateway.public_url"`},
		{"not a bcrypt hash", `{"oauth":{"password_hash":"hunter2"}}`, `key "oauth.password_hash"`},
		{"unknown oauth key", `{"oauth":{"pasword_hash":"x"}}`, `unknown key "pasword_hash"`},
		{"password in the file", `{"oauth":{"password":"x"}}`, `unknown key "password"`},
		{"unknown oidc key", `{"oauth":{"oidc":{"issuer":"https://a.example","client_id":"c","allowed_emails":["a@b.c"],"scopes":[]}}}`, `unknown key "scopes"`},
		{"oidc issuer http", `{"oauth":{"oidc":{"issuer":"http://accounts.example.com","client_id":"c","allowed_emails":["a@b.c"]}}}`, `key "oauth.oidc.issuer"`},
		{"oidc without client id", `{"oauth":{"oidc":{"issuer":"https://a.example","allowed_emails":["a@b.c"]}}}`, `key "oauth.oidc.client_id"`},
		{"oidc letting everyone in", `{"oauth":{"oidc":{"issuer":"https://a.example","client_id":"c"}}}`, `"oauth.oidc.allowed_subjects" and "oauth.oidc.allowed_emails"`},
		{"oidc bad email", `{"oauth":{"oidc":{"issuer":"https://a.example","client_id":"c","allowed_emails":["me"]}}}`, `key "oauth.oidc.allowed_emails[0]"`},
		{"oidc empty subject", `{"oauth":{"oidc":{"issuer":"https://a.example","client_id":"c","allowed_subjects":[""]}}}`, `key "oauth.oidc.allowed_subjects[0]"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode(strings.NewReader(tc.json))
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Decode(%s): %v", tc.json, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Decode(%s) = %+v, %v; want an error containing %q", tc.json, c, err, tc.err)
			}
		})
	}
}

func TestOAuthEnvironment(t *testing.T) {
	home := t.TempDir()
	t.Setenv("BROWSERBRIDGE_HOME", home)
	t.Setenv(EnvOAuthPassword, "")
	t.Setenv(EnvOAuthOIDCSecret, "")
	t.Setenv(EnvOAuthStateFile, "") // restored after the test
	os.Unsetenv(EnvOAuthStateFile)
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	load := func(t *testing.T, json string) *Config {
		t.Helper()
		if err := os.WriteFile(p, []byte(json), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	t.Run("no way to sign in", func(t *testing.T) {
		c := load(t, `{"gateway":{"public_url":"https://mcp.example.com"}}`)
		if err := c.OAuth.CheckSignIn(); err == nil || !strings.Contains(err.Error(), "hash-password") {
			t.Fatalf("CheckSignIn = %v, want the ways to sign in named", err)
		}
	})
	t.Run("password from the environment", func(t *testing.T) {
		t.Setenv(EnvOAuthPassword, "correct horse")
		c := load(t, `{"gateway":{"public_url":"https://mcp.example.com"}}`)
		if c.OAuth.Password != "correct horse" || c.OAuth.CheckSignIn() != nil {
			t.Fatalf("password = %q, CheckSignIn = %v", c.OAuth.Password, c.OAuth.CheckSignIn())
		}
	})
	t.Run("hash and environment password both", func(t *testing.T) {
		t.Setenv(EnvOAuthPassword, "correct horse")
		c := load(t, `{"oauth":{"password_hash":"`+hash+`"}}`)
		if err := c.OAuth.CheckSignIn(); err == nil || !strings.Contains(err.Error(), "keep one") {
			t.Fatalf("CheckSignIn = %v, want both refused", err)
		}
	})
	t.Run("token from the environment", func(t *testing.T) {
		t.Setenv(EnvToken, "secret")
		c := load(t, `{"gateway":{"public_url":"https://mcp.example.com"}}`)
		// Defaults applied the token after Decode's check: the command
		// checks again (runGateway calls Validate after its flags).
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `"token"`) {
			t.Fatalf("Validate = %v, want the token refused", err)
		}
	})
	t.Run("oidc secret from the environment", func(t *testing.T) {
		t.Setenv(EnvOAuthOIDCSecret, "from-env")
		c := load(t, `{"oauth":{"oidc":{"issuer":"https://a.example","client_id":"c","client_secret":"in-file","allowed_subjects":["1"]}}}`)
		if c.OAuth.OIDC.ClientSecret != "from-env" {
			t.Fatalf("client secret = %q, want the environment's", c.OAuth.OIDC.ClientSecret)
		}
	})

	for _, tc := range []struct {
		name, json, env string
		setEnv          bool
		want            string
	}{
		{"default", `{}`, "", false, filepath.Join(home, "state", "oauth.db")},
		{"absolute", `{"oauth":{"state_file":"/data/oauth.db"}}`, "", false, "/data/oauth.db"},
		{"relative to the config", `{"oauth":{"state_file":"state/oauth.db"}}`, "", false, filepath.Join(dir, "state", "oauth.db")},
		{"memory", `{"oauth":{"state_file":":memory:"}}`, "", false, ""},
		{"empty means memory", `{"oauth":{"state_file":""}}`, "", false, ""},
		{"environment wins", `{"oauth":{"state_file":"/data/oauth.db"}}`, "/volume/oauth.db", true, "/volume/oauth.db"},
		{"environment memory", `{}`, ":memory:", true, ""},
	} {
		t.Run("state file "+tc.name, func(t *testing.T) {
			if tc.setEnv {
				t.Setenv(EnvOAuthStateFile, tc.env)
			}
			got, err := load(t, tc.json).OAuthStateFile()
			if err != nil || got != tc.want {
				t.Fatalf("OAuthStateFile = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestOAuthLifetimes: the lifetimes of tokens, codes and registrations
// are keys of the oauth section within sane bounds; a value outside them
// is refused with a sentence naming the key and the bounds (issue 33,
// item 7).
func TestOAuthLifetimes(t *testing.T) {
	for _, tc := range []struct {
		name, json, err string
		want            Lifetimes
	}{
		{"defaults", `{"oauth":{}}`, "", Lifetimes{}},
		{"all set", `{"oauth":{"access_token_ttl":"15m","refresh_token_ttl":"2160h","code_ttl":"1m","client_idle_ttl":"4320h","refresh_reuse_grace":"30s"}}`, "",
			Lifetimes{AccessToken: 15 * time.Minute, RefreshToken: 2160 * time.Hour, Code: time.Minute, ClientIdle: 4320 * time.Hour, RefreshReuseGrace: 30 * time.Second}},
		{"no reuse grace", `{"oauth":{"refresh_reuse_grace":"0s"}}`, "", Lifetimes{RefreshReuseGrace: -1}},
		{"at the bounds", `{"oauth":{"access_token_ttl":"24h","refresh_token_ttl":"8760h","code_ttl":"10s","client_idle_ttl":"8760h","refresh_reuse_grace":"1m"}}`, "",
			Lifetimes{AccessToken: 24 * time.Hour, RefreshToken: 8760 * time.Hour, Code: 10 * time.Second, ClientIdle: 8760 * time.Hour, RefreshReuseGrace: time.Minute}},
		{"access token too long", `{"oauth":{"access_token_ttl":"48h"}}`, `key "oauth.access_token_ttl": 48h is outside 1m–24h`, Lifetimes{}},
		{"access token too short", `{"oauth":{"access_token_ttl":"30s"}}`, `key "oauth.access_token_ttl": 30s is outside 1m–24h`, Lifetimes{}},
		{"refresh token too long", `{"oauth":{"refresh_token_ttl":"10000h"}}`, `key "oauth.refresh_token_ttl": 10000h is outside 1h–8760h`, Lifetimes{}},
		{"code too long", `{"oauth":{"code_ttl":"1h"}}`, `key "oauth.code_ttl": 1h is outside 10s–10m`, Lifetimes{}},
		{"grace too long", `{"oauth":{"refresh_reuse_grace":"5m"}}`, `key "oauth.refresh_reuse_grace": 5m is outside 0s–1m`, Lifetimes{}},
		{"negative grace", `{"oauth":{"refresh_reuse_grace":"-1s"}}`, `key "oauth.refresh_reuse_grace"`, Lifetimes{}},
		{"not a duration", `{"oauth":{"access_token_ttl":"an hour"}}`, `key "oauth.access_token_ttl": "an hour" is not a duration such as "1h"`, Lifetimes{}},
		{"days are not a Go duration", `{"oauth":{"refresh_token_ttl":"30d"}}`, `key "oauth.refresh_token_ttl"`, Lifetimes{}},
		{"registrations outlived by refresh tokens", `{"oauth":{"refresh_token_ttl":"2160h","client_idle_ttl":"720h"}}`,
			`key "oauth.client_idle_ttl": 720h is shorter than "oauth.refresh_token_ttl" (2160h): a registration would expire while its refresh tokens still live`, Lifetimes{}},
		{"registrations outlived by the default refresh tokens", `{"oauth":{"client_idle_ttl":"24h"}}`,
			`key "oauth.client_idle_ttl": 24h is shorter than "oauth.refresh_token_ttl" (720h, its default)`, Lifetimes{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode(strings.NewReader(tc.json))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Decode(%s): %v; want an error containing %q", tc.json, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%s): %v", tc.json, err)
			}
			if got := c.OAuth.OAuthLifetimes.Parsed(); got != tc.want {
				t.Fatalf("lifetimes %+v, want %+v", got, tc.want)
			}
		})
	}
}
