package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
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
		{"trusting every address", []string{"--trusted-proxies", "10.0.0.1, 0.0.0.0/0"}, "--trusted-proxies: \"0.0.0.0/0\" trusts every address"},
		{"a trusted proxy by name", []string{"--trusted-proxies", "caddy"}, "--trusted-proxies: \"caddy\" is not an IP address or a network"},
		{"oauth state without a public URL", []string{"--oauth-state", "x.db"}, "--oauth-state and --oauth-config go with --public-url"},
		{"public URL over http", []string{"--public-url", "http://proxy.example.com"}, "use https"},
		{"public URL with a path", []string{"--public-url", "https://proxy.example.com/relay"}, "has a path"},
		{"unknown key in the OAuth config", []string{"--public-url", "https://p.example.com", "--oauth-config", oauthConfig(t, `{"pasword_hash":"x"}`)}, `unknown field "pasword_hash"`},
		{"a pairing subject mapped", []string{"--public-url", "https://p.example.com", "--oauth-config", oauthConfig(t, `{"users":{"pair:bob":"alice"}}`)}, "bound to its user already"},
		{"an unknown kind of subject", []string{"--public-url", "https://p.example.com", "--oauth-config", oauthConfig(t, `{"users":{"owner":"alice"}}`)}, `"password:owner" or "oidc:<issuer>#<sub>"`},
		{"a bad sign-in limit", []string{"--public-url", "https://p.example.com", "--oauth-config", oauthConfig(t, `{"unused_client_ttl":"an hour"}`)}, `key "unused_client_ttl"`},
		{"an access token living a week", []string{"--public-url", "https://p.example.com", "--oauth-config", oauthConfig(t, `{"access_token_ttl":"168h"}`)}, `key "access_token_ttl": 168h is outside 1m–24h`},
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
	testutil.WaitFor(t, "serve to say where it listens", func() bool {
		if _, rest, ok := strings.Cut(logs.String(), "extensions=ws://"); ok {
			addr, _, _ = strings.Cut(rest, "/")
		}
		return addr != ""
	})
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
	// The log names the address bound (loopback here), never an
	// all-interfaces address nobody listens on (issue 31, item 6).
	if l := logs.String(); strings.Contains(l, "0.0.0.0") || strings.Contains(l, "beyond loopback") ||
		!strings.Contains(l, "listen="+addr) || !strings.Contains(l, `reach="loopback only`) {
		t.Errorf("serve's log does not say truthfully where it listens (%s):\n%s", addr, l)
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

func TestServeClusterFlags(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a node name without --nats", []string{"--node", "a"}, "--node goes with --nats"},
		{"replicas without --nats", []string{"--nats-replicas", "3"}, "--nats-replicas goes with --nats"},
		{"a presence TTL without --nats", []string{"--presence-ttl", "3s"}, "--presence-ttl goes with --nats"},
		{"an advertised URL without --nats", []string{"--advertise-url", "http://a:8787"}, "--advertise-url goes with --nats"},
		{"an advertised URL with a path", []string{"--nats", "embedded", "--advertise-url", "http://a:8787/x"}, "http(s)://host:port, no path"},
		{"an advertised URL over ws", []string{"--nats", "embedded", "--advertise-url", "ws://a:8787"}, "http(s)://host:port, no path"},
		{"credentials without --nats", []string{"--nats-creds", "x.creds"}, "--nats-creds goes with --nats"},
		{"a NATS listener without embedded", []string{"--nats", "nats://127.0.0.1:4222", "--nats-listen", "127.0.0.1:4222"}, "--nats-listen goes with --nats embedded"},
		{"a store for an external NATS", []string{"--nats", "nats://127.0.0.1:4222", "--nats-store", dir}, "--nats-store goes with --nats embedded"},
		{"routes for an external NATS", []string{"--nats", "nats://127.0.0.1:4222", "--nats-routes", "nats-route://a:6222"}, "--nats-routes goes with --nats embedded"},
		{"credentials with embedded", []string{"--nats", "embedded", "--nats-creds", "x.creds"}, "--nats-creds is for an external NATS"},
		{"a CA with embedded", []string{"--nats", "embedded", "--nats-ca", "ca.pem"}, "--nats-ca is for an external NATS"},
		{"a client certificate without its key", []string{"--nats", "nats://127.0.0.1:4222", "--nats-cert", "c.pem"}, "--nats-cert and --nats-key go together"},
		{"OAuth state beside --nats", []string{"--nats", "embedded", "--public-url", "https://p.example.com", "--oauth-state", "x.db"}, "keeps the OAuth state in JetStream"},
		{"a node name with a dot", []string{"--nats", "embedded", "--node", "a.b"}, `--node "a.b": a node name is 1 to 64 letters`},
		{"a node name too long", []string{"--nats", "embedded", "--node", strings.Repeat("n", 65)}, "a node name is 1 to 64"},
		{"a prefix with a dot", []string{"--nats", "embedded", "--nats-prefix", "bb.x"}, `--nats-prefix "bb.x"`},
		{"no replicas", []string{"--nats", "embedded", "--nats-replicas", "0"}, "--nats-replicas 0: JetStream keeps 1 to 5 copies"},
		{"replicas on one embedded server", []string{"--nats", "embedded", "--nats-replicas", "3"}, "needs a NATS cluster (--nats-routes)"},
		{"a presence TTL under a second", []string{"--nats", "embedded", "--presence-ttl", "100ms"}, "--presence-ttl 100ms: at least 1s"},
		{"routes without a route listener", []string{"--nats", "embedded", "--nats-routes", "nats-route://a:6222"}, "--nats-routes and --nats-cluster-listen go together"},
		{"a route listener without routes", []string{"--nats", "embedded", "--nats-cluster-listen", "127.0.0.1:6222"}, "go together"},
		{"a route that is a client URL", []string{"--nats", "embedded", "--nats-routes", "nats://a:4222", "--nats-cluster-listen", ":6222"}, "not a route URL like nats-route://"},
		{"an empty URL list", []string{"--nats", ","}, "--nats: no URL"},
		{"an HTTP URL", []string{"--nats", "http://a:4222"}, "the scheme is nats, tls, ws or wss"},
		{"a URL without a host, its password hidden", []string{"--nats", "nats://bob:hunter2@"}, `"nats://REDACTED@" is not a NATS URL`},
		{"a NATS that is not there", []string{"--nats", "nats://127.0.0.1:1", "--node", "a"}, "connecting to NATS at nats://127.0.0.1:1"},
		{"a credentials file that is not there", []string{"--nats", "nats://127.0.0.1:1", "--nats-creds", filepath.Join(dir, "none.creds")}, "--nats-creds: stat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret}, tc.args...)
			var logs bytes.Buffer
			err := run(context.Background(), args, &bytes.Buffer{}, &logs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run %v: %v, want an error with %q", tc.args, err, tc.want)
			}
			if strings.Contains(err.Error()+logs.String(), "hunter2") {
				t.Fatalf("a NATS password in the error or the log: %v\n%s", err, logs.String())
			}
		})
	}
}

func TestSanitizeNode(t *testing.T) {
	for _, tc := range []struct{ name, host, want string }{
		{"plain", "proxy-1", "proxy-1"},
		{"a domain", "proxy1.example.com", "proxy1-example-com"},
		{"long", strings.Repeat("h", 70), strings.Repeat("h", 64)},
		{"empty", "", "node"},
		{"not ASCII", "café", "caf--"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sanitizeNode(tc.host); got != tc.want {
				t.Fatalf("sanitizeNode(%q) = %q, want %q", tc.host, got, tc.want)
			}
		})
	}
}

// node is a `serve` running in the test, with its log.
type node struct {
	addr      string
	internal  string // --metrics-listen's host:port
	logs      *testutil.Watch
	listening <-chan struct{}
	done      chan error
}

// startNode runs serve with args until the test ends, and returns once it
// listens.
func startNode(t *testing.T, args ...string) *node {
	t.Helper()
	n := launchNode(t, args...)
	n.wait(t)
	return n
}

// launchNode runs serve with args until the test ends; wait waits until
// it listens.
func launchNode(t *testing.T, args ...string) *node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{logs: &testutil.Watch{}, done: make(chan error, 1)}
	n.listening = n.logs.Seen("extensions=ws://")
	done := n.done
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, args...), &bytes.Buffer{}, n.logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve %v: %v", args, err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("serve %v did not stop on cancel", args)
		}
	})
	return n
}

func (n *node) wait(t *testing.T) {
	t.Helper()
	select {
	case <-n.listening:
	case err := <-n.done:
		n.done <- err // for the cleanup
		t.Fatalf("serve ended before it listened: %v\n%s", err, n.logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve never said where it listens:\n%s", n.logs.String())
	}
	_, rest, _ := strings.Cut(n.logs.String(), "extensions=ws://")
	n.addr, _, _ = strings.Cut(rest, "/")
	_, rest, _ = strings.Cut(n.logs.String(), "health=http://")
	n.internal, _, _ = strings.Cut(rest, "/")
}

// health is the node's whole /health, on its --metrics-listen.
func (n *node) health(t *testing.T) map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + n.internal + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %s %v", resp.Status, err)
	}
	return h
}

// serve --nats embedded runs a node with NATS in its own process: it
// starts, says which node it is in /health, and stops on cancel (the
// embedded server with it).
func TestServeEmbeddedNATS(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	n := startNode(t, "--secret-file", secret, "--nats", "embedded", "--node", "a", "--nats-store", filepath.Join(dir, "nats"))
	h := n.health(t)
	if h["node"] != "a" || h["status"] != "ok" {
		t.Fatalf("/health of node a: %v", h)
	}
	// The public listener says the status alone, and has no /metrics.
	resp, err := http.Get("http://" + n.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Errorf("the public /health says more than the status: %s", body)
	}
	if resp, err := http.Get("http://" + n.addr + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the public /metrics: %v %v, want 404", resp.Status, err)
	}
	for _, key := range []string{"peers", "pairs"} {
		if _, ok := h[key]; !ok {
			t.Errorf("/health has no %q: %v", key, h)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream")); err != nil {
		t.Errorf("JetStream's files are not in --nats-store: %v", err)
	}
}

// Two nodes: a runs the embedded NATS and lets b connect to it (--nats
// URL, signing in with the user and password both derive from the
// secret); each sees the other in /health's peers. b serves --public-url
// with its OAuth state in JetStream: its authorization server answers. A
// node with another secret, or a URL with another password, is refused by
// a's NATS, and the password is never logged.
func TestServeTwoNodes(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	t.Setenv("BROWSERBRIDGE_OAUTH_PASSWORD", "a password for the test")
	a := startNode(t, "--secret-file", secret, "--nats", "embedded", "--node", "a", "--nats-store", filepath.Join(dir, "nats"),
		"--nats-listen", "127.0.0.1:0", "--presence-ttl", "2s")
	_, rest, ok := strings.Cut(a.logs.String(), "client_url=")
	if !ok {
		t.Fatalf("node a does not log its NATS client URL:\n%s", a.logs.String())
	}
	natsURL, _, _ := strings.Cut(rest, " ")
	withPassword := strings.Replace(natsURL, "nats://", "nats://proxy:hunter2@", 1)
	logs := &bytes.Buffer{}
	err := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret, "--nats", withPassword, "--node", "x"}, &bytes.Buffer{}, logs)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("a node with a wrong NATS password: %v", err)
	}
	if strings.Contains(err.Error()+logs.String(), "hunter2") {
		t.Errorf("the NATS password is logged: %v\n%s", err, logs.String())
	}
	other := filepath.Join(dir, "other")
	os.WriteFile(other, []byte(strings.Repeat("o", 40)), 0o600)
	err = run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", other, "--nats", natsURL, "--node", "y"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("a node of another deployment (another secret): %v", err)
	}
	b := startNode(t, "--secret-file", secret, "--nats", natsURL, "--node", "b", "--presence-ttl", "2s",
		"--public-url", "https://proxy.example.com", "--oauth-config", oauthConfig(t, `{"users":{"password:owner":"alice"}}`))
	if strings.Contains(b.logs.String(), "kept in memory") {
		t.Errorf("node b says its OAuth state is in memory:\n%s", b.logs.String())
	}
	for _, tc := range []struct {
		self, peer *node
		peerName   string
	}{{a, b, "b"}, {b, a, "a"}} {
		// Heartbeats reach a peer within a fifth of the TTL; the guard is
		// only against a node that never sees the other.
		testutil.WaitFor(t, "a node to see its peer "+tc.peerName, func() bool { return hasPeer(tc.self.health(t), tc.peerName) })
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+b.addr+"/.well-known/oauth-authorization-server", nil)
	req.Host = "proxy.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"issuer":"https://proxy.example.com"`) {
		t.Fatalf("node b's authorization server metadata: %s %s", resp.Status, body)
	}
}

// Three nodes, each embedding one server of a NATS cluster (--nats-routes):
// they start together (JetStream needs a majority of the servers, and
// three copies of the buckets need all three), as a compose file starts
// them, and each sees the other two.
func TestServeEmbeddedNATSCluster(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	// Route ports free a moment ago: every server needs all three routes
	// before it starts. Another process taking one fails the test loudly.
	var ports, routes []string
	var lns []net.Listener
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().String())
		routes = append(routes, "nats-route://"+ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	var nodes []*node
	for i, name := range []string{"c1", "c2", "c3"} {
		nodes = append(nodes, launchNode(t, "--secret-file", secret, "--nats", "embedded", "--node", name,
			"--nats-store", filepath.Join(dir, name), "--nats-cluster-listen", ports[i], "--nats-routes", strings.Join(routes, ","),
			"--nats-replicas", "3", "--presence-ttl", "2s"))
	}
	for _, n := range nodes {
		n.wait(t)
	}
	for i, n := range nodes {
		if h := n.health(t); h["node"] != "c"+strconv.Itoa(i+1) || h["nats"] != "connected" {
			t.Errorf("/health of node %d: %v", i+1, h)
		}
		for j, name := range []string{"c1", "c2", "c3"} {
			if i == j {
				continue
			}
			// Heartbeats go out every 400ms; the deadline only guards.
			testutil.WaitFor(t, fmt.Sprintf("node %d to see peer %s", i+1, name), func() bool { return hasPeer(n.health(t), name) })
		}
	}
}

func hasPeer(h map[string]any, name string) bool {
	peers, _ := h["peers"].([]any)
	for _, p := range peers {
		if m, _ := p.(map[string]any); m["node"] == name && m["alive"] == true {
			return true
		}
	}
	return false
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"no user", "nats://a:4222", "nats://a:4222"},
		{"user and password", "nats://bob:hunter2@a:4222", "nats://REDACTED@a:4222"},
		{"a token as the user", "nats://s3cr3t@a:4222", "nats://REDACTED@a:4222"},
		{"not a URL", "bob:hunter2@%zz", "…@%zz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redact(tc.in); got != tc.want {
				t.Fatalf("redact(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// A NATS without JetStream is refused at start, with a sentence that says
// what is missing, at once.
func TestServeNATSWithoutJetStream(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	// A plain nats-server: the deployment's NATS, started without -js.
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	err = run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret, "--nats", ns.ClientURL(), "--node", "a"},
		&bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "the cluster needs it: nats-server -js") {
		t.Fatalf("serve with a NATS without JetStream: %v", err)
	}
	// Known as "not enabled", which ends the asking at once, rather than
	// as a lost answer asked again until the deadline.
	if !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
		t.Errorf("the refusal is not jetstream.ErrJetStreamNotEnabled: %v", err)
	}
}

// nats-user prints the user and password a node derives from the secret
// (what an external NATS of the deployment is configured with); a
// verify-only key cannot seal a cluster, and says so.
func TestNATSUser(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"nats-user", "--secret-file", secret}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	ring, err := clusterseal.New([][]byte{[]byte(strings.Repeat("k", 40))})
	if err != nil {
		t.Fatal(err)
	}
	u, p := ring.NATSUser()
	if out.String() != "NATS_USER="+u+"\nNATS_PASSWORD="+p+"\n" {
		t.Fatalf("nats-user printed %q", out.String())
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	der, _ := x509.MarshalPKIXPublicKey(priv.Public())
	pub := filepath.Join(dir, "pub")
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
	for _, args := range [][]string{{"nats-user", "--secret-file", pub}, {"serve", "--listen", "127.0.0.1:0", "--secret-file", pub, "--nats", "embedded"}} {
		err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "PRIVATE KEY or an HS256 secret") {
			t.Fatalf("%s with a PUBLIC KEY: %v", args[0], err)
		}
	}
}
