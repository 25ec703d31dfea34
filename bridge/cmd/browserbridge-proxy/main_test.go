package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

func TestTokenCommand(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)+"\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"mcp", []string{"token", "--secret-file", secret, "--user", "alice", "--kind", "mcp"}, true},
		{"extension with ttl", []string{"token", "--secret-file", secret, "--user", "alice", "--kind", "extension", "--ttl", "1h"}, true},
		{"bad kind", []string{"token", "--secret-file", secret, "--user", "alice", "--kind", "admin"}, false},
		{"no user", []string{"token", "--secret-file", secret, "--kind", "mcp"}, false},
		{"serve without secret", []string{"serve"}, false},
		{"unknown command", []string{"nope"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errb)
			if (err == nil) != tc.ok {
				t.Fatalf("run: %v (%s)", err, errb.String())
			}
			if !tc.ok {
				return
			}
			keys, _ := token.Load(secret)
			kind := token.Kind(tc.args[len(tc.args)-1])
			if tc.name == "extension with ttl" {
				kind = token.KindExtension
			}
			c, err := keys.Verify(strings.TrimSpace(out.String()), kind, time.Now())
			if err != nil || c.Subject != "alice" {
				t.Fatalf("minted token: %v %+v", err, c)
			}
		})
	}
}

func TestServeStopsOnCancel(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	var errb testutil.Watch
	listening := errb.Seen("extensions=ws://")
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret}, &bytes.Buffer{}, &errb)
	}()
	select { // cancel a server that is up, not one still starting
	case <-listening:
	case err := <-done:
		t.Fatalf("serve ended before it listened: %v\n%s", err, errb.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestServeFlags(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"negative per-IP cap", []string{"--max-conns-per-ip", "-1"}, "--max-conns-per-ip -1 must be 0 (no limit) or more"},
		{"negative per-user MCP cap", []string{"--max-mcp-per-user", "-5"}, "--max-mcp-per-user -5 must be 0"},
		{"negative per-user extension cap", []string{"--max-extensions-per-user", "-1"}, "--max-extensions-per-user -1 must be 0"},
		{"zero idle timeout", []string{"--idle-timeout", "0s"}, "--idle-timeout 0s must be positive"},
		{"negative read timeout", []string{"--read-timeout", "-1s"}, "--read-timeout -1s must be positive"},
		{"stray argument", []string{"extra"}, `unexpected argument "extra"`},
		{"oauth state without a public URL", []string{"--oauth-state", "x.db"}, "--oauth-state and --oauth-config go with --public-url"},
		{"public URL over http", []string{"--public-url", "http://proxy.example.com"}, "use https"},
		{"public URL with a path", []string{"--public-url", "https://proxy.example.com/relay"}, "has a path"},
		{"unknown key in the OAuth config", []string{"--public-url", "https://p.example.com", "--oauth-config", oauthConfig(t, `{"pasword_hash":"x"}`)}, `unknown field "pasword_hash"`},
		{"a pairing subject mapped", []string{"--public-url", "https://p.example.com", "--oauth-config", oauthConfig(t, `{"users":{"pair:bob":"alice"}}`)}, "bound to its user already"},
		{"an unknown kind of subject", []string{"--public-url", "https://p.example.com", "--oauth-config", oauthConfig(t, `{"users":{"owner":"alice"}}`)}, `"password:owner" or "oidc:<issuer>#<sub>"`},
		{"OIDC without an allow list", []string{"--public-url", "https://p.example.com", "--oauth-config", oauthConfig(t, `{"oidc":{"issuer":"https://id.example.com","client_id":"c"}}`)}, "needs allowed_subjects or allowed_emails"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret}, tc.args...)
			err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run %v: %v, want an error with %q", tc.args, err, tc.want)
			}
		})
	}
}

// --max-conns-per-ip reaches the server: with 1, a second connection from
// this address is answered 429.
func TestServePerIPFlag(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	var logs testbrowser.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret, "--max-conns-per-ip", "1"}, &bytes.Buffer{}, &logs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	addr := ""
	for deadline := time.Now().Add(30 * time.Second); addr == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve never said where it listens:\n%s", logs.String())
		}
		if _, rest, ok := strings.Cut(logs.String(), "extensions=ws://"); ok {
			addr, _, _ = strings.Cut(rest, "/")
		}
	}
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "at most 1 may be open at once") {
		t.Fatalf("a second connection with --max-conns-per-ip 1: %s %q", resp.Status, body)
	}
}

// oauthConfig writes an --oauth-config file and returns its path.
func oauthConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "oauth.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// --public-url reaches the server: behind a TLS proxy at
// https://proxy.example.com, the Streamable HTTP endpoint answers for that
// host only, names its resource metadata in its 401, and the metadata
// names the proxy's own authorization server; the OAuth state file is made.
func TestServePublicURL(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	state := filepath.Join(dir, "state", "oauth.db")
	t.Setenv("BROWSERBRIDGE_OAUTH_PASSWORD", "a password for the test")
	ctx, cancel := context.WithCancel(context.Background())
	var logs testutil.Watch
	listening := logs.Seen("mcp_http=")
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret, "--public-url", "https://Proxy.Example.com/",
			"--oauth-state", state, "--oauth-config", oauthConfig(t, `{"users":{"password:owner":"alice"}}`)}, &bytes.Buffer{}, &logs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve never said where it listens:\n%s", logs.String())
	}
	_, rest, _ := strings.Cut(logs.String(), "extensions=ws://")
	addr, _, _ := strings.Cut(rest, "/")
	if !strings.Contains(logs.String(), "mcp_http=https://proxy.example.com/mcp") {
		t.Errorf("serve does not log the Streamable HTTP endpoint:\n%s", logs.String())
	}
	if _, err := os.Stat(state); err != nil {
		t.Errorf("the OAuth state file: %v", err)
	}
	do := func(method, path, host string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	resp, body := do(http.MethodPost, "/mcp", "proxy.example.com")
	if resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="https://proxy.example.com/.well-known/oauth-protected-resource/mcp"`) {
		t.Errorf("POST /mcp without a token: %s %q %s", resp.Status, resp.Header.Get("WWW-Authenticate"), body)
	}
	resp, body = do(http.MethodGet, "/.well-known/oauth-protected-resource/mcp", "proxy.example.com:443")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"resource":"https://proxy.example.com/mcp"`) ||
		!strings.Contains(body, `"authorization_servers":["https://proxy.example.com"]`) {
		t.Errorf("the resource metadata: %s %s", resp.Status, body)
	}
	if resp, body = do(http.MethodPost, "/mcp", addr); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not this proxy's public host") {
		t.Errorf("POST /mcp to the listen address's host: %s %s", resp.Status, body)
	}
}
