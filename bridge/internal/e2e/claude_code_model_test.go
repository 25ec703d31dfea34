//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/npmtools"
)

// modelSeen is what a tool result became in the request Claude Code sent
// the model: its text blocks (a string result counts as one) and the media
// types of its images.
type modelSeen struct {
	texts  []string
	images []string
}

// scriptedModel stands in for the Anthropic Messages API, which cannot be
// reached here: it answers each request with the next tool call of script
// (as a streamed tool_use), then with "done", and keeps every request so
// that the test can read what Claude Code handed the model.
type scriptedModel struct {
	script []scriptedCall
	mu     sync.Mutex
	last   map[string]any // the last /v1/messages request that offered the tools
}

type scriptedCall struct {
	tool string
	args map[string]any
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.Contains(r.URL.Path, "count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"input_tokens":10}`))
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "not JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	offered := false
	tools, _ := req["tools"].([]any)
	for _, t := range tools {
		if tm, _ := t.(map[string]any); tm != nil && strings.HasPrefix(fmt.Sprint(tm["name"]), "mcp__bb__") {
			offered = true
		}
	}
	done := 0
	msgs, _ := req["messages"].([]any)
	for _, msg := range msgs {
		blocks, _ := msg.(map[string]any)["content"].([]any)
		for _, b := range blocks {
			if bm, _ := b.(map[string]any); bm != nil && bm["type"] == "tool_result" {
				done++
			}
		}
	}
	block := map[string]any{"type": "text", "text": "done"}
	stop := "end_turn"
	if offered {
		m.mu.Lock()
		m.last = req
		m.mu.Unlock()
		if done < len(m.script) {
			c := m.script[done]
			block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", done), "name": "mcp__bb__" + c.tool, "input": c.args}
			stop = "tool_use"
		}
	}
	msg := map[string]any{"id": fmt.Sprintf("msg_%d", done), "type": "message", "role": "assistant", "model": req["model"],
		"stop_sequence": nil, "usage": map[string]int{"input_tokens": 1, "output_tokens": 1}}
	if stream, _ := req["stream"].(bool); !stream {
		msg["content"], msg["stop_reason"] = []any{block}, stop
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(typ string, data map[string]any) {
		data["type"] = typ
		raw, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, raw)
	}
	msg["content"], msg["stop_reason"] = []any{}, nil
	event("message_start", map[string]any{"message": msg})
	if block["type"] == "tool_use" {
		args, _ := json.Marshal(block["input"])
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}})
	} else {
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
	}
	event("content_block_stop", map[string]any{"index": 0})
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 1}})
	event("message_stop", map[string]any{})
}

// results is what each tool_result of the last request held, in order.
func (m *scriptedModel) results() []modelSeen {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []modelSeen
	msgs, _ := m.last["messages"].([]any)
	for _, msg := range msgs {
		blocks, _ := msg.(map[string]any)["content"].([]any)
		for _, b := range blocks {
			bm, _ := b.(map[string]any)
			if bm == nil || bm["type"] != "tool_result" {
				continue
			}
			var seen modelSeen
			switch c := bm["content"].(type) {
			case string:
				seen.texts = append(seen.texts, c)
			case []any:
				for _, part := range c {
					p, _ := part.(map[string]any)
					switch p["type"] {
					case "text":
						seen.texts = append(seen.texts, fmt.Sprint(p["text"]))
					case "image":
						src, _ := p["source"].(map[string]any)
						seen.images = append(seen.images, fmt.Sprint(src["media_type"]))
					}
				}
			}
			out = append(out, seen)
		}
	}
	return out
}

// claudeBinary is Claude Code's native CLI from tools/npm (the package's
// own bin is a stub until a postinstall that tools/npm does not run).
func claudeBinary(t *testing.T) string {
	t.Helper()
	tools, err := npmtools.Here()
	if err != nil {
		t.Skipf("Claude Code's CLI is not installed: %v", err)
	}
	platform := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	bin, err := tools.Module("@anthropic-ai", "claude-code-linux-"+platform, "claude")
	if err != nil {
		t.Skipf("Claude Code's CLI is not installed: %v (%s)", err, npmtools.Hint)
	}
	return bin
}

// TestClaudeCodeHandsTheModel drives the bridge with the real Claude Code
// CLI (its model stood in for by scriptedModel) and reads what it hands a
// model of our results. Claude Code gives a model a result's structured
// content in place of its text when both are there, and keeps its images:
// so our results carry no structured content, and the model must get each
// text as it is: navigate's tab and URL, javascript_tool's value, find's
// refs, form_input's per-field lines, and a screenshot as an image, in PNG
// (the default) and in WebP (format webp), with its id.
func TestClaudeCodeHandsTheModel(t *testing.T) {
	bin := claudeBinary(t)
	w := startWorld(t, worldOptions{})
	order := w.pages.url("order.html")
	model := &scriptedModel{script: []scriptedCall{
		{"navigate", map[string]any{"url": order}},
		{"javascript_tool", map[string]any{"code": "document.title + ' / ' + location.pathname"}},
		{"find", map[string]any{"query": "#email"}},
		{"form_input", map[string]any{"fields": []map[string]any{{"selector": "#name", "value": "Ada"}, {"selector": "#quantity", "value": 2}}}},
		{"computer", map[string]any{"action": "screenshot"}},
		{"computer", map[string]any{"action": "screenshot", "format": "webp"}},
	}}
	api := httptest.NewServer(model)
	defer api.Close()

	home := t.TempDir()
	config, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"bb": map[string]any{"type": "http", "url": w.mcpURL}}})
	var allowed []string
	for _, c := range model.script {
		allowed = append(allowed, "mcp__bb__"+c.tool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", "look at the order page", "--mcp-config", string(config), "--strict-mcp-config",
		"--allowedTools", strings.Join(allowed, ","))
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"ANTHROPIC_BASE_URL="+api.URL, "ANTHROPIC_API_KEY=sk-ant-e2e-stand-in",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
		// Every tool offered up front, not found through a tool search.
		"ENABLE_TOOL_SEARCH=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("claude -p: %v\n%s", err, tail(out.String(), 40))
	}
	got := model.results()
	if len(got) != len(model.script) {
		t.Fatalf("the model was handed %d tool results, want %d (claude said:\n%s)", len(got), len(model.script), tail(out.String(), 40))
	}
	for i, want := range []struct {
		name   string
		text   string // a text the model must get
		images int
	}{
		{"navigate", "Navigated in tab ", 0},
		{"javascript_tool", "E2E order / /order.html", 0},
		{"find", "<input> [ref_", 0},
		{"form_input", "Set 2 fields:\n- textbox ", 0},
		{"screenshot", "shot_", 1},
		{"screenshot webp", "shot_", 1},
	} {
		seen := got[i]
		if !strings.Contains(strings.Join(seen.texts, "\n"), want.text) {
			t.Errorf("%s: the model got %q, without %q", want.name, seen.texts, want.text)
		}
		if len(seen.images) != want.images {
			t.Errorf("%s: the model got %d images (%v), want %d", want.name, len(seen.images), seen.images, want.images)
		}
		t.Logf("%s: the model got texts %q and images %v", want.name, seen.texts, seen.images)
	}
}
