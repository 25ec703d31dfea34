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
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireTools records the tools array of the last tools/list answer a
// session read, as the server sent it: mcp.LoggingTransport writes every
// message it reads as one "read: <json>" line, and a JSON-RPC result stays
// the server's own bytes there (decoding into mcp.Tool and encoding again
// would add the hints the Go SDK always writes, which a TypeScript server
// leaves out).
type wireTools struct {
	mu    sync.Mutex
	tools json.RawMessage
}

func (w *wireTools) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		msg, ok := bytes.CutPrefix(line, []byte("read: "))
		if !ok {
			continue
		}
		var resp struct {
			Result struct {
				Tools json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(msg, &resp) == nil && len(resp.Result.Tools) > 0 {
			w.mu.Lock()
			w.tools = resp.Result.Tools
			w.mu.Unlock()
		}
	}
	return len(p), nil
}

// bytes gives the tools array as compact JSON, and what a client sends a
// model of it: name, description and input schema of each tool (titles and
// annotations are for the client's own interface), each in the server's
// own encoding.
func (w *wireTools) bytes(tb testing.TB) (count, whole, forModelBytes int) {
	tb.Helper()
	w.mu.Lock()
	raw := w.tools
	w.mu.Unlock()
	if raw == nil {
		tb.Fatal("no tools/list answer was read")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		tb.Fatalf("the tools array: %v", err)
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		tb.Fatalf("the tools array: %v", err)
	}
	var forModel bytes.Buffer
	forModel.WriteByte('[')
	for i, t := range tools {
		if i > 0 {
			forModel.WriteByte(',')
		}
		fmt.Fprintf(&forModel, `{"name":%s,"description":%s,"input_schema":%s}`, t["name"], t["description"], t["inputSchema"])
	}
	forModel.WriteByte(']')
	var compact bytes.Buffer
	if err := json.Compact(&compact, forModel.Bytes()); err != nil {
		tb.Fatalf("the tools for a model: %v", err)
	}
	return len(tools), buf.Len(), compact.Len()
}

// listTools is one tools/list through the session.
func listTools(tb testing.TB, cs *mcp.ClientSession) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		tb.Fatalf("tools/list: %v", err)
	}
}

// connectRecording connects a client over tr, recording tools/list answers.
func connectRecording(tb testing.TB, tr mcp.Transport) (*mcp.ClientSession, *wireTools) {
	tb.Helper()
	rec := &wireTools{}
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e-tool-definitions", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.LoggingTransport{Transport: tr, Writer: rec}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		tb.Fatalf("MCP connect: %v", err)
	}
	return cs, rec
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
// envToolsDump names a file BenchmarkToolDefinitions writes our tools array
// to, to see which tool's definition grew.
const envToolsDump = "BROWSERBRIDGE_BENCH_TOOLS_DUMP"

func BenchmarkToolDefinitions(b *testing.B) {
	// The extension as installed: the tests' overlay adds dev_utils'
	// native_echo_benchmark, about 850 bytes no person's tools/list has.
	w := startWorld(b, worldOptions{installedExtension: true})
	cs, rec := connectRecording(b, &mcp.StreamableClientTransport{Endpoint: w.mcpURL, MaxRetries: -1})
	defer cs.Close()
	b.ResetTimer()
	for range b.N {
		listTools(b, cs)
	}
	b.StopTimer()
	n, whole, model := rec.bytes(b)
	if path := os.Getenv(envToolsDump); path != "" {
		rec.mu.Lock()
		err := os.WriteFile(path, rec.tools, 0o644)
		rec.mu.Unlock()
		if err != nil {
			b.Fatalf("%s: %v", envToolsDump, err)
		}
	}
	b.ReportMetric(float64(n), "tools")
	b.ReportMetric(float64(whole), "tools-B")
	b.ReportMetric(float64(model), "model-B")
	line := fmt.Sprintf("browserbridge: %d tools, %d B tools array, %d B as sent to a model", n, whole, model)

	if version, pw, ok := playwrightTools(b); ok {
		pn, pwWhole, pwModel := pw.bytes(b)
		b.ReportMetric(float64(whole)/float64(pwWhole), "ratio-tools")
		b.ReportMetric(float64(model)/float64(pwModel), "ratio-model")
		line += fmt.Sprintf("\nplaywright-mcp %s: %d tools, %d B tools array, %d B as sent to a model (ours: %.3f×, %.3f×)",
			version, pn, pwWhole, pwModel, float64(whole)/float64(pwWhole), float64(model)/float64(pwModel))
	} else {
		line += "\nplaywright-mcp: not installed (" + alternativesHint + "); issue 32 measured 0.0.83's tools array at 20.3 KB"
	}
	b.Log(line)
}

// playwrightTools starts Playwright MCP on stdio (it opens no browser until
// a tool needs one) and lists its tools; false when it is not installed.
func playwrightTools(b *testing.B) (string, *wireTools, bool) {
	prefix := os.Getenv(envAlternatives)
	if prefix == "" {
		return "", nil, false
	}
	pkg, err := findNPMPackage(prefix, "@playwright/mcp", "cli.js")
	if err != nil {
		b.Logf("playwright-mcp: %v", err)
		return "", nil, false
	}
	node := os.Getenv(envBenchNode)
	if node == "" {
		if node, err = exec.LookPath("node"); err != nil {
			b.Logf("playwright-mcp: no node in $PATH: %v", err)
			return "", nil, false
		}
	}
	scratch := b.TempDir()
	cmd := exec.Command(node, pkg.entry, "--headless", "--isolated", "--no-sandbox",
		"--executable-path", chromiumBin, "--output-dir", filepath.Join(scratch, "playwright-output"))
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(scratch, "home"))
	cmd.Dir = scratch
	cs, rec := connectRecording(b, &mcp.CommandTransport{Command: cmd, TerminateDuration: stopWait})
	defer cs.Close()
	listTools(b, cs)
	return pkg.version, rec, true
}
