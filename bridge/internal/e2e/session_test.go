//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// client is one MCP session of a test, with helpers that call the
// extension's tools and fail the test with the tool's own words.
type client struct {
	w    *world
	cs   *mcp.ClientSession
	name string
	// remote is a client through the cloud relay: its default scope in the
	// extension leaves out scripts, so waitURL reads tabs_context instead.
	remote bool
}

func (w *world) client(name string) *client {
	return &client{w: w, cs: w.connect(name), name: name}
}

// try calls a tool; a protocol error or a result with isError is an error
// whose text is what the tool said.
func (c *client) try(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("tool %s %s: %w", name, argsJSON(args), err)
	}
	if res.IsError {
		return res, fmt.Errorf("tool %s %s answered isError: %s", name, argsJSON(args), testutil.Text(res))
	}
	return res, nil
}

// call calls a tool and fails the test if it fails.
func (c *client) call(t testing.TB, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	res, err := c.try(ctx, name, args)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// newTab opens a tab in this session's group (tabs_create_mcp) at url and
// returns its id.
func (c *client) newTab(t testing.TB, url string) int {
	t.Helper()
	res := c.call(t, "tabs_create_mcp", map[string]any{"url": url})
	id, ok := tabIDOf(res)
	if !ok {
		t.Fatalf("tabs_create_mcp gave no tab id: %s", describe(res))
	}
	if url != "" {
		c.waitURL(t, id, url)
	}
	return id
}

// navigate sends tab to url with the navigate tool and waits until the
// page there has loaded.
func (c *client) navigate(t testing.TB, tab int, url string) *mcp.CallToolResult {
	t.Helper()
	res := c.call(t, "navigate", map[string]any{"url": url, "tabId": tab})
	c.waitURL(t, tab, url)
	return res
}

// js runs an expression in the page with javascript_tool and returns the
// text of its answer.
func (c *client) js(t testing.TB, tab int, code string) string {
	t.Helper()
	res := c.call(t, "javascript_tool", map[string]any{"code": code, "tabId": tab})
	return jsValue(testutil.Text(res))
}

// waitURL waits (10 s) until the page in tab is at url and loaded, reading
// location.href and document.readyState in the page itself (a remote
// client: the tab's URL and status, from tabs_context).
func (c *client) waitURL(t testing.TB, tab int, url string) {
	t.Helper()
	if c.remote {
		c.waitTabURL(t, tab, url)
		return
	}
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := c.try(ctx, "javascript_tool", map[string]any{"code": "location.href + ' ' + document.readyState", "tabId": tab})
		cancel()
		if err != nil {
			last = err.Error()
			continue
		}
		last = jsValue(testutil.Text(res))
		if last == url+" complete" {
			return
		}
	}
	t.Fatalf("tab %d never got to %s (loaded): last saw %q", tab, url, last)
}

// waitTabURL waits (10 s) until tabs_context shows tab at url, loaded.
func (c *client) waitTabURL(t testing.TB, tab int, url string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, ti := range c.tabs(t, "tabs_context") {
			if ti.TabID == tab {
				last = ti.URL + " " + ti.Status
			}
		}
		if last == url+" complete" {
			return
		}
	}
	t.Fatalf("tab %d never got to %s (loaded): tabs_context last showed %q", tab, url, last)
}

// tabOf is tab as tabs_context describes it (zero if it lists no such tab).
func (c *client) tabOf(t testing.TB, tab int) tabInfo {
	t.Helper()
	for _, ti := range c.tabs(t, "tabs_context") {
		if ti.TabID == tab {
			return ti
		}
	}
	return tabInfo{}
}

// jsValue strips what javascript_tool may wrap a value in: surrounding
// quotes of a JSON string, or a JSON object {"result": …}.
func jsValue(s string) string {
	s = strings.TrimSpace(s)
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		switch x := v.(type) {
		case string:
			return x
		case map[string]any:
			for _, k := range []string{"result", "value"} {
				if r, ok := x[k]; ok {
					if str, ok := r.(string); ok {
						return str
					}
					b, _ := json.Marshal(r)
					return string(b)
				}
			}
		}
	}
	return s
}

// describe summarises a result for a failure message.
func describe(res *mcp.CallToolResult) string {
	if res == nil {
		return "<nil>"
	}
	var parts []string
	for _, c := range res.Content {
		switch x := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, fmt.Sprintf("text %q", clip(x.Text, 400)))
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("image %s (%d bytes)", x.MIMEType, len(x.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("resource_link %s (%s)", x.URI, x.MIMEType))
		case *mcp.EmbeddedResource:
			if x.Resource != nil {
				parts = append(parts, fmt.Sprintf("resource %s (%s, %d bytes)", x.Resource.URI, x.Resource.MIMEType, len(x.Resource.Blob)))
			}
		default:
			parts = append(parts, fmt.Sprintf("%T", c))
		}
	}
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, "structured "+clip(string(b), 400))
	}
	return fmt.Sprintf("isError=%v [%s]", res.IsError, strings.Join(parts, "; "))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func argsJSON(args map[string]any) string {
	b, _ := json.Marshal(args)
	return clip(string(b), 200)
}

var tabIDText = regexp.MustCompile(`(?i)"?tab[ _]?id"?\s*[:=]?\s*(\d+)`)

// tabIDOf finds the tab id in a result: structuredContent's tabId (or
// tab.id), else "tabId: N" / "Tab ID: N" in the text.
func tabIDOf(res *mcp.CallToolResult) (int, bool) {
	if m, ok := structured(res); ok {
		if id, ok := intField(m, "tabId"); ok {
			return id, true
		}
		if tab, ok := m["tab"].(map[string]any); ok {
			if id, ok := intField(tab, "id"); ok {
				return id, true
			}
		}
	}
	if m := tabIDText.FindStringSubmatch(testutil.Text(res)); m != nil {
		id, err := strconv.Atoi(m[1])
		return id, err == nil
	}
	return 0, false
}

// structured returns the structured content as a map, or the text parsed
// as a JSON object.
func structured(res *mcp.CallToolResult) (map[string]any, bool) {
	if res == nil {
		return nil, false
	}
	var m map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if json.Unmarshal(b, &m) == nil {
			return m, true
		}
	}
	if json.Unmarshal([]byte(testutil.Text(res)), &m) == nil {
		return m, true
	}
	return nil, false
}

func intField(m map[string]any, k string) (int, bool) {
	switch v := m[k].(type) {
	case float64:
		return int(v), true
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}
