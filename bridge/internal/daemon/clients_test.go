package daemon

// Real MCP clients that nobody here wrote, from the npm registry, against a
// bridge in this process with an echo extension attached: the official
// conformance suite on /mcp, and the MCP Inspector's CLI on /mcp (both
// eras) and /sse. scripts/install-test-tools.sh installs them, pinned in
// tools/npm; these tests fail, never skip, when they are missing, since CI
// installs them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/npmtools"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/paths"
)

// npmTools are the installed clients and the Node.js that runs them.
type npmTools struct {
	root        string // the repository
	node        string
	conformance string // the suite's entry point
	inspector   string // the inspector's launcher
}

// needNpmTools finds the clients installed in tools/npm, failing the test
// when they are missing or older than tools/npm/package-lock.json.
func needNpmTools(t *testing.T) npmTools {
	t.Helper()
	found, err := npmtools.Here()
	if err != nil {
		t.Fatal(err)
	}
	tools := npmTools{root: found.Root, node: found.Node}
	if tools.conformance, err = found.Module("@modelcontextprotocol", "conformance", "dist", "index.js"); err != nil {
		t.Fatal(err)
	}
	if tools.inspector, err = found.Module("@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js"); err != nil {
		t.Fatal(err)
	}
	return tools
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// run runs one of the clients in a home of its own (the inspector keeps a
// catalog under ~/.mcp-inspector) and returns its stdout; both its stdout
// and its stderr go to the test log.
func (n npmTools) run(t *testing.T, timeout time.Duration, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.node, args...)
	home := t.TempDir()
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	t0 := time.Now()
	err := cmd.Run()
	status := "exit 0"
	if err != nil {
		status = err.Error()
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", timeout, err)
	}
	t.Logf("$ %s %s\n(%s in %s)\n%s%s", n.node, strings.Join(args, " "), status, time.Since(t0).Round(time.Millisecond),
		ansiEscape.ReplaceAll(stdout.Bytes(), nil), ansiEscape.ReplaceAll(stderr.Bytes(), nil))
	return stdout.Bytes(), err
}

const echoInstance = "instance-clients-1"

// bridgeWithEcho starts a bridge in this process with an echo extension
// behind the real host, as Chrome would run it, waits until the bridge
// offers the extension's tool, and returns the bridge's base URL.
func bridgeWithEcho(t *testing.T) string {
	t.Helper()
	e := newEnv(t)
	// The bridge caches the browser's tools in its state directory: keep
	// the echo tool out of the user's.
	t.Setenv(paths.EnvHome, filepath.Join(e.dir, "home"))
	br, _ := e.startBridge()
	e.startEcho("chain", echoInstance)
	waitRegistered(t, br, echoInstance)
	hasEcho := func(tool *mcp.Tool) bool { return tool.Name == "echo" }
	testutil.WaitFor(t, "the bridge to offer the echo extension's tool", func() bool { return slices.ContainsFunc(br.mcp.ToolList(), hasEcho) })
	return "http://" + br.Addr()
}

// TestConformance runs every server scenario of the official MCP
// conformance suite (--suite all: the pending ones too) against /mcp.
// Scenarios that need fixtures the bridge does not have (test_* tools,
// prompts, resources) are listed, each with its reason, in
// testdata/conformance-expected-failures.yml; the suite fails on any other
// failure or warning, and on a listed scenario that passes.
func TestConformance(t *testing.T) {
	tools := needNpmTools(t)
	base := bridgeWithEcho(t)
	results := t.TempDir()
	baseline := filepath.Join(tools.root, "bridge", "internal", "daemon", "testdata", "conformance-expected-failures.yml")
	_, err := tools.run(t, 60*time.Second, tools.conformance, "server", "--suite", "all",
		"--url", base+"/mcp", "--expected-failures", baseline, "--output-dir", results)
	if err != nil {
		t.Errorf("conformance suite: %v (output above); failed checks of scenarios not in %s:\n%s",
			err, filepath.Base(baseline), unexpectedChecks(results, baseline))
	}
}

// unexpectedChecks lists the failed and warning checks, from the suite's
// <results>/server-<scenario>-<time>/checks.json, of the scenarios the
// baseline does not list.
func unexpectedChecks(results, baseline string) string {
	raw, err := os.ReadFile(baseline)
	if err != nil {
		return err.Error()
	}
	expected := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*-\s*([\w.-]+)\s*$`).FindAllStringSubmatch(string(raw), -1) {
		expected[m[1]] = true
	}
	dirName := regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$`)
	files, _ := filepath.Glob(filepath.Join(results, "*", "checks.json"))
	var b strings.Builder
	for _, f := range files {
		m := dirName.FindStringSubmatch(filepath.Base(filepath.Dir(f)))
		if m == nil || expected[m[1]] {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f, err)
			continue
		}
		var checks []struct {
			ID           string          `json:"id"`
			Status       string          `json:"status"`
			ErrorMessage string          `json:"errorMessage"`
			Details      json.RawMessage `json:"details"`
		}
		if err := json.Unmarshal(data, &checks); err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f, err)
			continue
		}
		for _, c := range checks {
			if c.Status == "FAILURE" || c.Status == "WARNING" {
				fmt.Fprintf(&b, "%s: %s %s: %s %s\n", m[1], c.Status, c.ID, c.ErrorMessage, c.Details)
			}
		}
	}
	return b.String()
}

// TestInspectorCLI drives the bridge with the MCP Inspector's CLI over
// Streamable HTTP (/mcp, initialize-based and 2026-07-28 stateless) and
// legacy HTTP+SSE (/sse): list the tools, call the extension's echo tool
// and the bridge's own list_browsers.
func TestInspectorCLI(t *testing.T) {
	tools := needNpmTools(t)
	base := bridgeWithEcho(t)
	for _, tr := range []struct {
		name string
		args []string
	}{
		{"streamable", []string{base + "/mcp", "--transport", "http", "--protocol-era", "legacy"}},
		{"stateless", []string{base + "/mcp", "--transport", "http", "--protocol-era", "modern"}},
		{"sse", []string{base + "/sse", "--transport", "sse"}},
	} {
		t.Run(tr.name, func(t *testing.T) {
			// inspect runs the CLI and decodes the "result" of its JSON output
			// into result.
			inspect := func(result any, args ...string) {
				t.Helper()
				args = append(append([]string{tools.inspector, "--cli"}, tr.args...), append([]string{"--format", "json"}, args...)...)
				stdout, err := tools.run(t, 30*time.Second, args...)
				if err != nil {
					t.Fatalf("inspector: %v (output above)", err)
				}
				var out struct {
					Result json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal(stdout, &out); err != nil || len(out.Result) == 0 {
					t.Fatalf("inspector output is not {\"result\": ...}: %v\n%s", err, stdout)
				}
				if err := json.Unmarshal(out.Result, result); err != nil {
					t.Fatalf("inspector result: %v\n%s", err, out.Result)
				}
			}

			var list struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			}
			inspect(&list, "--method", "tools/list")
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"echo", "list_browsers", "select_browser"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list gave %q, want %q among them", names, want)
				}
			}

			var echo struct {
				IsError bool `json:"isError"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
				Meta map[string]struct {
					ID string `json:"id"`
				} `json:"_meta"`
			}
			inspect(&echo, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hello")
			if echo.IsError || len(echo.Content) != 1 || echo.Content[0].Type != "text" || echo.Content[0].Text != `{"text":"hello"}` {
				t.Errorf("echo gave %+v, want one text block with its arguments {\"text\":\"hello\"}", echo)
			}
			if got := echo.Meta["browserbridge/browser"].ID; got != echoInstance {
				t.Errorf("echo result's _meta names browser %q, want %q", got, echoInstance)
			}

			var browsers struct {
				IsError bool `json:"isError"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
				StructuredContent json.RawMessage `json:"structuredContent"`
			}
			inspect(&browsers, "--method", "tools/call", "--tool-name", "list_browsers")
			if browsers.IsError || len(browsers.Content) == 0 || !strings.Contains(browsers.Content[0].Text, echoInstance+": EchoBrowser 1.0") {
				t.Errorf("list_browsers gave %+v, want a text naming %s: EchoBrowser 1.0", browsers, echoInstance)
			}
			// The text is the whole answer: the only browser, the one this session uses.
			if n := strings.Count(browsers.Content[0].Text, "\n- "); n != 1 || !strings.Contains(browsers.Content[0].Text, echoInstance+": EchoBrowser 1.0") || !strings.HasSuffix(browsers.Content[0].Text, "(used by this session)") {
				t.Errorf("list_browsers text = %q, want only %s EchoBrowser 1.0, used by this session", browsers.Content[0].Text, echoInstance)
			}
			if browsers.StructuredContent != nil {
				t.Errorf("list_browsers has structuredContent %s; Claude Code would hand a model that in place of the text", browsers.StructuredContent)
			}
		})
	}
}
