//go:build unix

package testutil

import (
	"bufio"
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// mcpRemoteWait bounds each step of an mcp-remote sign-in: Node starting,
// discovery and registration, the person's part, the code exchange.
const mcpRemoteWait = 2 * time.Minute

// MCPRemote runs mcp-remote (npm, installed in tools/npm) as a stdio MCP
// server that signs in to endpoint with OAuth, as Claude Desktop and many
// other clients use it, and connects the Go SDK client to it over stdio.
// approve plays the person: given the authorization URL mcp-remote prints,
// it goes through the sign-in and consent pages and returns where the
// server sent the browser back, mcp-remote's own callback on loopback,
// which MCPRemote then visits as the browser would. mcp-remote finds no
// browser to open (its PATH holds nothing), keeps its state in a
// directory of the test's, and is stopped, with whatever it started, when
// the test ends.
func MCPRemote(t testing.TB, endpoint string, approve func(authURL string) (*url.URL, error)) *mcp.ClientSession {
	t.Helper()
	tools, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	proxyJS, err := tools.Module("mcp-remote", "dist", "proxy.js")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	dir := t.TempDir()
	emptyBin := filepath.Join(dir, "bin")
	if err := os.Mkdir(emptyBin, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tools.Node, proxyJS, endpoint, strconv.Itoa(port), "--host", "127.0.0.1")
	cmd.Env = []string{"HOME=" + dir, "PATH=" + emptyBin, "MCP_REMOTE_CONFIG_DIR=" + filepath.Join(dir, "mcp-auth")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		logs strings.Builder
	)
	authURL := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		next := false
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			logs.WriteString(line + "\n")
			mu.Unlock()
			if strings.Contains(line, "Please authorize this client by visiting:") {
				next = true
				continue
			}
			// The URL is the next line, after a "[pid] " prefix.
			if i := strings.Index(line, "http"); next && i >= 0 {
				next = false
				select {
				case authURL <- strings.TrimSpace(line[i:]):
				default:
				}
			}
		}
	}()
	mcpRemoteLog := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}

	type connected struct {
		cs  *mcp.ClientSession
		err error
	}
	done := make(chan connected, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*mcpRemoteWait)
	t.Cleanup(cancel)
	go func() {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcp-remote-test", Version: "1"}, nil).
			Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		done <- connected{cs, err}
	}()
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("--- mcp-remote's log ---\n%s", mcpRemoteLog())
		}
	})

	select {
	case u := <-authURL:
		back, err := approve(u)
		if err != nil {
			t.Fatalf("signing in at %s: %v", u, err)
		}
		if err := Visit(back); err != nil {
			t.Fatalf("the browser's return to mcp-remote (%s): %v", back, err)
		}
	case c := <-done:
		t.Fatalf("mcp-remote connected without a sign-in (err %v)", c.err)
	case <-time.After(mcpRemoteWait):
		t.Fatalf("mcp-remote printed no authorization URL within %v", mcpRemoteWait)
	}
	select {
	case c := <-done:
		if c.err != nil {
			t.Fatalf("connecting to mcp-remote: %v", c.err)
		}
		t.Cleanup(func() { c.cs.Close() })
		return c.cs
	case <-time.After(mcpRemoteWait):
		t.Fatalf("mcp-remote did not connect within %v of the sign-in", mcpRemoteWait)
	}
	return nil
}
