package main

import (
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestConnectProxyURLForms runs `browserbridge connect` against a real
// proxy with each form of --proxy it accepts (the base URL with or without
// a trailing slash, the /mcp endpoint as the proxy prints it): each one
// authenticates with the proxy. Other paths and schemes are refused at
// start with a usage error that names the accepted forms.
func TestConnectProxyURLForms(t *testing.T) {
	keys, err := token.NewHS256([]byte(strings.Repeat("s", 40)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	base := "ws://" + strings.TrimPrefix(hs.URL, "http://")
	tok, err := keys.MintFor("alice", token.KindMCP, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)

	for _, form := range []string{"", "/", "/mcp", "/mcp/"} {
		t.Run("accepted "+form, func(t *testing.T) {
			cmd := exec.Command(bins.Bridge, "connect", "--proxy", base+form)
			cmd.Env = append(os.Environ(), append(w.env, envConnectToken+"="+tok)...)
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			stdin, err := cmd.StdinPipe() // kept open: connect serves until it closes
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				stdin.Close()
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}()
			testutil.WaitFor(t, "connect --proxy "+base+form+" to authenticate with the proxy", func() bool {
				return strings.Contains(stderr.String(), "authenticated with the proxy")
			})
		})
	}

	for _, tc := range []struct{ name, url, want string }{
		{"the extensions' endpoint", base + "/extension", "is the proxy's extensions' endpoint, not its MCP clients' one: use " + base + "/ or " + base + "/mcp"},
		{"another path", base + "/relay/mcp", `the proxy serves nothing at "/relay/mcp"`},
		{"https", "https://relay.example.com", "the proxy is reached over WebSocket, wss://relay.example.com/"},
	} {
		t.Run("refused "+tc.name, func(t *testing.T) {
			out, code := w.cli("connect", "--proxy", tc.url, "--token", "t")
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Fatalf("connect --proxy %s: exit %d, want 2 with %q; output:\n%s", tc.url, code, tc.want, out)
			}
		})
	}
}

// A token connect can never use ends it at once with a sentence, instead
// of a retry loop behind an empty tool list (issue 31, item 5): one of the
// wrong kind is caught before dialling, one the proxy refuses (signed with
// another key) after its first handshake. connect --help names no method
// a user cannot call.
func TestConnectRefusedTokenIsFinal(t *testing.T) {
	keys, err := token.NewHS256([]byte(strings.Repeat("s", 40)))
	if err != nil {
		t.Fatal(err)
	}
	other, err := token.NewHS256([]byte(strings.Repeat("o", 40)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	base := "ws://" + strings.TrimPrefix(hs.URL, "http://")
	extTok, _ := keys.MintFor("alice", token.KindExtension, time.Hour, time.Now())
	foreignTok, _ := other.MintFor("alice", token.KindMCP, time.Hour, time.Now())
	w := newWorld(t)
	for _, tc := range []struct{ name, tok, want string }{
		{"an extension token", extTok, `this token is of kind "extension"`},
		{"a token of another key", foreignTok, "the proxy refused the token, which will not change while connect runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bins.Bridge, "connect", "--proxy", base)
			cmd.Env = append(os.Environ(), append(w.env, envConnectToken+"="+tc.tok)...)
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			stdin, err := cmd.StdinPipe() // kept open: only the refusal may end connect
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(90 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("connect kept running with %s; stderr:\n%s", tc.name, stderr.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("connect with %s: %v, want exit 1 with %q; stderr:\n%s", tc.name, err, tc.want, stderr.String())
			}
		})
	}
	out, _ := w.cli("connect", "--help")
	if strings.Contains(out, "list_extensions") || !strings.Contains(out, "browserbridge status") {
		t.Errorf("connect --help:\n%s", out)
	}
}
