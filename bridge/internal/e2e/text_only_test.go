//go:build linux

package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// listedBrowserID is list_browsers' line for the browser this session uses.
var listedBrowserID = regexp.MustCompile(`(?m)^- (\S+): .*\(used by this session\)$`)

// TestEveryToolAnswersTextOnly calls every tool tools/list offers, the
// bridge's and the extension's, with cheap valid arguments, and fails if
// a result carries structuredContent: Claude Code hands a model
// JSON.stringify(structuredContent) in place of a result's text whenever a
// result has both, so our texts, which say what a model acts on, must be
// the whole answer. A tool tools/list offers that the table below does not
// call fails the test too, so that a new tool is checked from the start.
//
// Covered: list_browsers, select_browser, tabs_create, tabs_create_mcp,
// tabs_context, tabs_context_mcp, navigate (a load, back, forward, reload,
// an HTTP error), read_page, get_page_text, find, form_input (one field and
// several), javascript_tool, computer (screenshot, full resolution, zoom,
// left_click, scroll), upload_image, gif_creator (start, stop, status,
// export, clear), resize_window, read_console_messages,
// read_network_requests, permissions_check, update_plan, turn_answer_start,
// turn_answer_complete, shortcuts_list, shortcuts_execute and dev_utils
// (echo, state).
func TestEveryToolAnswersTextOnly(t *testing.T) {
	w := startWorld(t, worldOptions{})
	dt := w.restartChromiumWithDevTools()
	// A shortcut to run, seeded as the options page saves one (an agent may not act on extension pages).
	options := openExtensionPage(t, dt, "options.html")
	options.js(t, `chrome.storage.local.set({shortcuts: [{id: "bb-text-only", name: "Read the page", description: "e2e",
		steps: [{tool: "get_page_text", arguments: {}}]}]}).then(() => "saved")`)

	c := w.client("e2e-text-only")
	ctx := testutil.Context(t, callWait)
	list, err := c.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var offered []string
	for _, tool := range list.Tools {
		offered = append(offered, tool.Name)
		if tool.OutputSchema != nil {
			t.Errorf("%s declares an outputSchema; its results would have to carry structuredContent", tool.Name)
		}
	}

	form, index := w.pages.url("form.html"), w.pages.url("index.html")
	called := map[string]bool{}
	var tab int
	var shotID, browserID string
	check := func(name string, res *mcp.CallToolResult, err error, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		called[name] = true
		if res == nil {
			t.Fatalf("%s %s: %v", name, argsJSON(args), err)
		}
		if res.StructuredContent != nil {
			t.Errorf("%s %s answers structuredContent, which Claude Code hands a model in place of its text: %s", name, argsJSON(args), describe(res))
		}
		if testutil.Text(res) == "" {
			t.Errorf("%s %s answers no text: %s", name, argsJSON(args), describe(res))
		}
		return res
	}
	// ok calls a tool that must succeed; tolerated one whose tool error is a result too.
	ok := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := c.try(bg(callWait), name, args)
		if err != nil {
			t.Fatalf("%v", err)
		}
		return check(name, res, nil, args)
	}
	tolerated := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := c.try(bg(callWait), name, args)
		return check(name, res, err, args)
	}

	lb := ok("list_browsers", nil)
	if m := listedBrowserID.FindStringSubmatch(testutil.Text(lb)); m != nil {
		browserID = m[1]
	} else {
		t.Fatalf("list_browsers names no browser used by this session:\n%s", testutil.Text(lb))
	}
	ok("select_browser", map[string]any{"browser": browserID})
	var found bool
	tab, found = tabIDOf(ok("tabs_create_mcp", map[string]any{"url": index}))
	if !found {
		t.Fatal("tabs_create_mcp names no tab")
	}
	c.waitURL(t, tab, index)
	other, _ := tabIDOf(ok("tabs_create", map[string]any{"url": "about:blank"}))
	ok("tabs_context", nil)
	ok("tabs_context_mcp", nil)
	ok("navigate", map[string]any{"url": form, "tabId": tab})
	ok("navigate", map[string]any{"action": "back", "tabId": tab})
	ok("navigate", map[string]any{"action": "forward", "tabId": tab})
	ok("navigate", map[string]any{"action": "reload", "tabId": tab})
	if res := tolerated("navigate", map[string]any{"url": w.pages.url("no-such-page.html"), "tabId": other}); !res.IsError {
		t.Errorf("navigate to a page the server does not have succeeded: %s", describe(res))
	}
	ok("read_page", map[string]any{"tabId": tab})
	ok("get_page_text", map[string]any{"tabId": tab})
	ok("find", map[string]any{"query": "email", "tabId": tab})
	ok("form_input", map[string]any{"selector": "#name", "value": "Ada", "tabId": tab})
	ok("form_input", map[string]any{"tabId": tab, "fields": []map[string]any{
		{"selector": "#email", "value": "ada@example.org"},
		{"selector": "#no-such-field", "value": "lost"},
	}})
	ok("javascript_tool", map[string]any{"code": "document.title", "tabId": tab})
	shotID = imageIDOf(ok("computer", map[string]any{"action": "screenshot", "tabId": tab}))
	if shotID == "" {
		t.Fatal("computer screenshot names no screenshot id")
	}
	full := testutil.Text(ok("computer", map[string]any{"action": "screenshot", "full_resolution": true, "tabId": tab}))
	if !strings.Contains(full, "browserbridge://screenshots/") {
		t.Errorf("a full-resolution screenshot's text does not name its resource URI: %q", full)
	}
	ok("computer", map[string]any{"action": "zoom", "region": []int{0, 0, 200, 100}, "tabId": tab})
	ok("computer", map[string]any{"action": "left_click", "coordinate": []int{5, 5}, "tabId": tab})
	ok("computer", map[string]any{"action": "scroll", "coordinate": []int{100, 100}, "scroll_direction": "down", "scroll_amount": 1, "tabId": tab})
	ok("upload_image", map[string]any{"screenshot_id": shotID, "ref": c.refFor(t, tab, "#file"), "tabId": tab, "filename": "shot.png"})
	ok("gif_creator", map[string]any{"action": "start_recording", "tabId": tab})
	ok("computer", map[string]any{"action": "screenshot", "tabId": tab}) // a frame
	ok("gif_creator", map[string]any{"action": "stop_recording"})
	ok("gif_creator", map[string]any{"action": "status"})
	gif := testutil.Text(ok("gif_creator", map[string]any{"action": "export"}))
	if !strings.Contains(gif, "browserbridge://screenshots/") {
		t.Errorf("gif_creator export's text does not name its resource URI: %q", gif)
	}
	ok("gif_creator", map[string]any{"action": "clear"})
	resized := testutil.Text(ok("resize_window", map[string]any{"width": 1280, "height": 900, "tabId": tab}))
	if !strings.Contains(resized, "viewport is") {
		t.Errorf("resize_window's text does not give the viewport: %q", resized)
	}
	ok("read_console_messages", map[string]any{"tabId": tab})
	ok("read_network_requests", map[string]any{"tabId": tab})
	ok("permissions_check", map[string]any{"tabId": tab})
	ok("update_plan", map[string]any{"plan": []map[string]any{{"step": "check the tools", "status": "in_progress"}}})
	ok("turn_answer_start", map[string]any{"summary": "checking"})
	ok("turn_answer_complete", map[string]any{"summary": "checked"})
	ok("shortcuts_list", nil)
	ok("shortcuts_execute", map[string]any{"shortcut": "Read the page"})
	ok("dev_utils", map[string]any{"action": "echo", "message": "text only"})
	ok("dev_utils", map[string]any{"action": "state"})

	var missed []string
	for _, name := range offered {
		if !called[name] {
			missed = append(missed, name)
		}
	}
	if len(missed) > 0 {
		t.Errorf("tools/list offers %q, which this test does not call: add them to its table", missed)
	}
	for name := range called {
		if !slices.Contains(offered, name) {
			t.Errorf("the test called %s, which tools/list does not offer", name)
		}
	}
}
