package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// cliWith runs the built browserbridge with stdin and extra environment.
func (w *world) cliWith(stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	w.t.Helper()
	cmd := exec.Command(bins.Bridge, args...)
	cmd.Env = append(append(os.Environ(), w.env...), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func TestGatewayHashPassword(t *testing.T) {
	w := newWorld(t)
	const pw = "correct horse battery staple"
	for _, tc := range []struct {
		name, stdin string
		code        int
		err         string // in stderr when code != 0
	}{
		{"piped without a newline", pw, 0, ""},
		{"a line", pw + "\n", 0, ""},
		{"a Windows line", pw + "\r\n", 0, ""},
		{"only the first line", pw + "\nsomething else\n", 0, ""},
		{"empty", "", 2, "no password on stdin"},
		{"too short", "hunter2\n", 2, "too short"},
		{"not a password", strings.Repeat("x", 5000), 2, "longer than a password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := w.cliWith(tc.stdin, nil, "gateway", "hash-password")
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if tc.code != 0 {
				if !strings.Contains(errOut, tc.err) || out != "" {
					t.Fatalf("stderr %q, want %q; stdout %q, want nothing", errOut, tc.err, out)
				}
				return
			}
			hash := strings.TrimSuffix(out, "\n")
			if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)); err != nil {
				t.Fatalf("%q is not a bcrypt hash of the password: %v", out, err)
			}
		})
	}
}

func TestGatewayPublicURLFlag(t *testing.T) {
	w := newWorld(t)
	servers := filepath.Join(w.home, "servers.json")
	if err := os.WriteFile(servers, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const pw = "BROWSERBRIDGE_OAUTH_PASSWORD=correct horse battery staple"
	for _, tc := range []struct {
		name string
		env  []string
		url  string
		err  string
	}{
		{"http beyond loopback", []string{pw}, "http://mcp.example.com", `"gateway.public_url" (--public-url)`},
		{"a path", []string{pw}, "https://mcp.example.com/mcp", "has a path"},
		{"no way to sign in", nil, "https://mcp.example.com", "needs a way to sign in"},
		{"a static token too", []string{pw, "BROWSERBRIDGE_TOKEN=secret"}, "https://mcp.example.com", `keys "token" and "gateway.public_url"`},
		{"a short password", []string{"BROWSERBRIDGE_OAUTH_PASSWORD=short"}, "https://mcp.example.com", "too short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := w.cliWith("", tc.env, "gateway", "--servers", servers, "--listen", testutil.ClosedAddr(t), "--public-url", tc.url)
			if code == 0 || !strings.Contains(errOut, tc.err) {
				t.Fatalf("exit %d, want a refusal naming %q\nstdout: %s\nstderr: %s", code, tc.err, out, errOut)
			}
		})
	}

	t.Run("served beyond loopback with OAuth instead of a token", func(t *testing.T) {
		addr := testutil.ClosedAddr(t)
		_, port, _ := strings.Cut(addr, ":")
		cmd := exec.Command(bins.Bridge, "gateway", "--servers", servers, "--listen", "0.0.0.0:"+port, "--public-url", "https://mcp.example.com")
		cmd.Env = append(append(os.Environ(), w.env...), pw)
		var log testutil.Watch
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		select {
		case <-log.Seen("gateway serving"):
		case err := <-exited:
			t.Fatalf("the gateway exited: %v\n%s", err, log.String())
		case <-time.After(time.Minute):
			t.Fatalf("the gateway never said it serves:\n%s", log.String())
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/servers/any/mcp", strings.NewReader(`{}`))
		req.Host = "mcp.example.com" // as the TLS proxy passes it on
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/servers/any/mcp"`
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
			t.Fatalf("an MCP route without a token: %d %q, want 401 naming its metadata", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		if _, err := os.Stat(filepath.Join(w.home, "bb", "state", "oauth.db")); err != nil {
			t.Fatalf("the OAuth state file is not in the state directory: %v", err)
		}
	})
}
