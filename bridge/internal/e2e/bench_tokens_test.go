//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolsListBytes measures a tools/list result the way a client hands it to
// a model: the tools array as compact JSON, and only what a model is sent of
// each tool (name, description, input schema; titles and annotations are
// for the client's own interface). It encodes as JavaScript's
// JSON.stringify does (no \u003c for '<'), since the clients that matter
// here are written in TypeScript.
func toolsListBytes(tb testing.TB, tools []*mcp.Tool) (whole, model int) {
	tb.Helper()
	type modelTool struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		InputSchema any    `json:"input_schema"`
	}
	enc := func(v any) int {
		var buf bytes.Buffer
		e := json.NewEncoder(&buf)
		e.SetEscapeHTML(false)
		if err := e.Encode(v); err != nil {
			tb.Fatalf("encoding the tools: %v", err)
		}
		return buf.Len() - 1 // Encode's newline
	}
	forModel := make([]modelTool, len(tools))
	for i, t := range tools {
		forModel[i] = modelTool{t.Name, t.Description, t.InputSchema}
	}
	return enc(tools), enc(forModel)
}

// listTools is one tools/list through the session.
func listTools(tb testing.TB, cs *mcp.ClientSession) []*mcp.Tool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		tb.Fatalf("tools/list: %v", err)
	}
	return res.Tools
}

// BenchmarkToolDefinitions gives issue 32's first figure: the bytes of our
// tools/list (the bridge's own tools and the extension's, through the whole
// chain) and, when scripts/bench-alternatives.sh has installed it
// ($BROWSERBRIDGE_BENCH_ALTERNATIVES), Playwright MCP's, side by side:
//
//	go test -run '^$' -bench BenchmarkToolDefinitions -benchtime 1x ./bridge/internal/e2e/
//
// Metrics: tools-B (the whole tools array), model-B (name, description and
// input schema only), and each over Playwright MCP's as ratio-tools and
// ratio-model. ns/op is one tools/list of ours.
func BenchmarkToolDefinitions(b *testing.B) {
	w := startWorld(b, worldOptions{})
	c := w.client("e2e-tool-definitions")
	var tools []*mcp.Tool
	b.ResetTimer()
	for range b.N {
		tools = listTools(b, c.cs)
	}
	b.StopTimer()
	whole, model := toolsListBytes(b, tools)
	b.ReportMetric(float64(len(tools)), "tools")
	b.ReportMetric(float64(whole), "tools-B")
	b.ReportMetric(float64(model), "model-B")
	line := fmt.Sprintf("browserbridge: %d tools, %d B tools array, %d B as sent to a model", len(tools), whole, model)

	if pw, ok := playwrightTools(b); ok {
		pwWhole, pwModel := toolsListBytes(b, pw.tools)
		b.ReportMetric(float64(whole)/float64(pwWhole), "ratio-tools")
		b.ReportMetric(float64(model)/float64(pwModel), "ratio-model")
		line += fmt.Sprintf("\nplaywright-mcp %s: %d tools, %d B tools array, %d B as sent to a model (ours: %.2f×, %.2f×)",
			pw.version, len(pw.tools), pwWhole, pwModel, float64(whole)/float64(pwWhole), float64(model)/float64(pwModel))
	} else {
		line += "\nplaywright-mcp: not installed (" + alternativesHint + "); issue 32 measured 0.0.83 at 20.3 KB"
	}
	b.Log(line)
}

type peerTools struct {
	version string
	tools   []*mcp.Tool
}

// playwrightTools starts Playwright MCP on stdio (it opens no browser until
// a tool needs one) and lists its tools; false when it is not installed.
func playwrightTools(b *testing.B) (peerTools, bool) {
	prefix := os.Getenv(envAlternatives)
	if prefix == "" {
		return peerTools{}, false
	}
	pkg, err := findNPMPackage(prefix, "@playwright/mcp", "cli.js")
	if err != nil {
		b.Logf("playwright-mcp: %v", err)
		return peerTools{}, false
	}
	node := os.Getenv(envBenchNode)
	if node == "" {
		if node, err = exec.LookPath("node"); err != nil {
			b.Logf("playwright-mcp: no node in $PATH: %v", err)
			return peerTools{}, false
		}
	}
	scratch := b.TempDir()
	t := &benchTarget{name: "playwright-mcp", version: pkg.version, command: func() *exec.Cmd {
		cmd := exec.Command(node, pkg.entry, "--headless", "--isolated", "--no-sandbox",
			"--executable-path", chromiumBin, "--output-dir", filepath.Join(scratch, "playwright-output"))
		cmd.Env = append(os.Environ(), "HOME="+filepath.Join(scratch, "home"))
		cmd.Dir = scratch
		return cmd
	}}
	s, _ := startSession(b, t)
	defer s.close(b)
	start := time.Now()
	tools := listTools(b, s.cs)
	b.Logf("playwright-mcp tools/list took %s", time.Since(start).Round(time.Millisecond))
	return peerTools{version: pkg.version, tools: tools}, true
}
