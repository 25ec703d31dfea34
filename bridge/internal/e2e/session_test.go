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

var tabIDText = regexp.MustCompile(`(?i)\btab(?:[ _]?id"?\s*[:=]?)?\s*(\d+)\b`)

// tabIDOf finds the tab id a result's text names first: "Navigated in tab
// N", "Opened tab N", "Tab N:" (our tools answer text only: no structured
// content), or "tabId: N" in another server's text.
func tabIDOf(res *mcp.CallToolResult) (int, bool) {
	if m := tabIDText.FindStringSubmatch(testutil.Text(res)); m != nil {
		id, err := strconv.Atoi(m[1])
		return id, err == nil
	}
	return 0, false
}

// echoBench is dev_utils native_echo_benchmark's figures, from its text
// "N round trips of S B to host: median X ms, p95 Y ms, …".
type echoBench struct {
	count, size int
	median, p95 float64
}

var echoBenchText = regexp.MustCompile(`^(\d+) round trips of (\d+) B to \S+: median ([\d.]+) ms, p95 ([\d.]+) ms`)

func echoBenchOf(res *mcp.CallToolResult) (echoBench, bool) {
	m := echoBenchText.FindStringSubmatch(testutil.Text(res))
	if m == nil {
		return echoBench{}, false
	}
	var e echoBench
	e.count, _ = strconv.Atoi(m[1])
	e.size, _ = strconv.Atoi(m[2])
	e.median, _ = strconv.ParseFloat(m[3], 64)
	e.p95, _ = strconv.ParseFloat(m[4], 64)
	return e, true
}

// navigation is where a navigate result says the tab is: its text
// "Navigated in tab N: URL — "title" (history entry E of L)", or for a
// page that answered an HTTP error "the server answered URL with status S
// in tab N", or for a load that failed "Loading URL in tab N failed".
type navigation struct {
	tab           int
	url, title    string
	entry, length int // the history position back and forward name, else 0
	timedOut      bool
}

var (
	navDoneText   = regexp.MustCompile(`^(?:Navigated|Went back|Went forward|Reloaded) in tab (\d+): (\S*) — "(.*)"(?: \(history entry (\d+) of (\d+)\))?(\. The page had not finished loading)?`)
	navHTTPText   = regexp.MustCompile(`the server answered (\S+) with status \d+ in tab (\d+)`)
	navFailedText = regexp.MustCompile(`(?:Loading|Going back to|Going forward to|Reloading) (\S+) in tab (\d+) failed`)
)

// navigated reads a navigate result's text; ok is false when it names no
// place.
func navigated(res *mcp.CallToolResult) (nav navigation, ok bool) {
	if res == nil {
		return nav, false
	}
	text := testutil.Text(res)
	if m := navDoneText.FindStringSubmatch(text); m != nil {
		nav.tab, _ = strconv.Atoi(m[1])
		nav.url, nav.title = m[2], m[3]
		nav.entry, _ = strconv.Atoi(m[4])
		nav.length, _ = strconv.Atoi(m[5])
		nav.timedOut = m[6] != ""
		return nav, true
	}
	if m := navHTTPText.FindStringSubmatch(text); m != nil {
		nav.url = m[1]
		nav.tab, _ = strconv.Atoi(m[2])
		return nav, true
	}
	if m := navFailedText.FindStringSubmatch(text); m != nil {
		nav.url = m[1]
		nav.tab, _ = strconv.Atoi(m[2])
		return nav, true
	}
	return nav, false
}

var tabWindowsText = regexp.MustCompile(`^\d+ open tabs? in (\d+) windows:`)

// listedTabs reads tabs_context(_mcp)'s text: its tabs (no groups: see
// tabsFrom), and how many windows they are in (the header names it when
// there are several).
func listedTabs(res *mcp.CallToolResult) (tabs []tabInfo, windows int) {
	text := testutil.Text(res)
	tabs = tabLines(text)
	if m := tabWindowsText.FindStringSubmatch(text); m != nil {
		windows, _ = strconv.Atoi(m[1])
	} else if len(tabs) > 0 {
		windows = 1
	}
	return tabs, windows
}

// structured returns the text parsed as a JSON object (our tools answer
// text only; some answer JSON text, as another server's tools may).
func structured(res *mcp.CallToolResult) (map[string]any, bool) {
	if res == nil {
		return nil, false
	}
	var m map[string]any
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
