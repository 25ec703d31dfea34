//go:build linux

package e2e

// Issue 30 end to end: what an agent reads is safe to read. Real headless
// Chromium with the real extension and a local MCP client: no result of any
// reading tool holds the value of a password field (testdata/secrets.html
// tempts with a value attribute, a typed value, a value filled after load
// and page text that echoes them all), typing into one needs the site's
// secrets opt-in, and text the person cannot see (testdata/hidden.html) is
// left out unless asked for.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

func TestSafety(t *testing.T) {
	w := startWorld(t, worldOptions{})
	dt := w.restartChromiumWithDevTools()
	options := openExtensionPage(t, dt, "options.html")
	options.waitText(t, "the options page", "Sites agents may use")
	c := w.client("e2e-safety")
	origin := w.pages.URL

	t.Run("secrets", func(t *testing.T) {
		page := w.pages.url("secrets.html")
		tab := c.newTab(t, page)
		typed := c.refFor(t, tab, "#pw-typed")
		refused := fmt.Sprintf("is a password field on %s, and the person has not let agents type secrets on this site", origin)

		// Without the opt-in: no typing, no filling, no keys into a password field.
		text, _ := c.toolError(t, "computer", map[string]any{"action": "type", "ref": typed, "text": "S3cret-Typed-55", "tabId": tab})
		if !strings.Contains(text, typed+" "+refused) {
			t.Errorf("computer type into a password field without the opt-in: %q", text)
		}
		text, _ = c.toolError(t, "form_input", map[string]any{"selector": "#pw-typed", "value": "S3cret-Typed-55", "tabId": tab})
		if !strings.Contains(text, "#pw-typed "+refused) {
			t.Errorf("form_input into a password field without the opt-in: %q", text)
		}
		c.js(t, tab, `document.getElementById("pw-typed").focus()`)
		text, _ = c.toolError(t, "computer", map[string]any{"action": "key", "text": "a b c", "tabId": tab})
		if !strings.Contains(text, "the focused element "+refused) {
			t.Errorf("computer key into a focused password field without the opt-in: %q", text)
		}
		if got := c.js(t, tab, `document.getElementById("pw-typed").value`); got != "" {
			t.Fatalf("the refused calls still put %q into the field", got)
		}

		// The person opts the site in: acting there and typing secrets.
		options.setPolicy(t, map[string]any{"sites": []map[string]any{{"pattern": "127.0.0.1", "read": "allow", "act": "allow", "script": "allow", "secrets": true}}})
		var filled *mcp.CallToolResult
		waitFor(t, popupWait, func() (bool, string) {
			res, err := c.try(bg(callWait), "form_input", map[string]any{"selector": "#pw-typed", "value": "S3cret-Form-63", "tabId": tab})
			filled = res
			return err == nil, fmt.Sprintf("form_input after the opt-in: %v", err)
		})
		if s := resultJSON(t, filled); strings.Contains(s, "S3cret-Form-63") || !strings.Contains(s, "••••••••") {
			t.Errorf("form_input's result into a password field shows the value, or not that it holds one: %s", s)
		}
		c.call(t, "form_input", map[string]any{"selector": "#pw-typed", "value": "", "tabId": tab})
		c.call(t, "computer", map[string]any{"action": "type", "ref": typed, "text": "S3cret-Typed-55", "tabId": tab})
		// A full-scope client's script is not filtered (README, Safety): it shows the field holds what was typed.
		if got := c.js(t, tab, `document.getElementById("pw-typed").value`); got != "S3cret-Typed-55" {
			t.Fatalf("after typing with the opt-in the field holds %q", got)
		}
		// The page echoes every value into its text: the temptation is real.
		if got := c.js(t, tab, `document.getElementById("echo").textContent`); !strings.Contains(got, "S3cret-AutoFilled-27") || !strings.Contains(got, "S3cret-Typed-55") {
			t.Fatalf("the page does not echo its passwords (%q): the test would prove nothing", got)
		}

		secrets := []string{"S3cret-AttrValue-91", "S3cret-Typed-55", "S3cret-AutoFilled-27", "S3cret-Marked-44"}
		reads := []struct {
			name, tool string
			args       map[string]any
		}{
			{"read_page", "read_page", map[string]any{}},
			{"read_page interactive", "read_page", map[string]any{"filter": "interactive"}},
			{"read_page include_hidden", "read_page", map[string]any{"include_hidden": true}},
			{"get_page_text", "get_page_text", map[string]any{}},
			{"get_page_text whole page, hidden included", "get_page_text", map[string]any{"whole_page": true, "include_hidden": true}},
			{"find the echo", "find", map[string]any{"query": "you entered"}},
			{"find a password field", "find", map[string]any{"query": "#pw-attr"}},
			{"find by a secret", "find", map[string]any{"query": "S3cret-AttrValue-91"}},
			{"find password fields by words", "find", map[string]any{"query": "password field", "limit": 20}},
			{"form_input reads back", "form_input", map[string]any{"fields": []map[string]any{{"selector": "#user", "value": "ada"}, {"selector": "#pw-auto", "value": "S3cret-AutoFilled-27"}}}},
			{"screenshot", "computer", map[string]any{"action": "screenshot"}},
			{"zoom", "computer", map[string]any{"action": "zoom", "region": []int{0, 0, 600, 400}}},
		}
		for _, r := range reads {
			r.args["tabId"] = tab
			res := c.call(t, r.tool, r.args)
			s := resultJSON(t, res)
			for _, secret := range secrets {
				if strings.Contains(s, secret) {
					t.Errorf("%s: the result holds the password %q:\n%s", r.name, secret, testutil.Text(res))
				}
			}
		}
		page1 := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab}))
		if !strings.Contains(page1, `textbox "Password" value="••••••••" [type=password]`) {
			t.Errorf("read_page does not say the password field holds something:\n%s", page1)
		}
		if txt := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab})); !strings.Contains(txt, "you entered ada / [password hidden]") {
			t.Errorf("get_page_text does not show the echoed passwords as hidden:\n%s", txt)
		}
		options.setPolicy(t, map[string]any{})
	})

	t.Run("hidden text", func(t *testing.T) {
		page := w.pages.url("hidden.html")
		tab := c.newTab(t, page)
		visible := []string{"VISIBLE-A", "VISIBLE-B", "VISIBLE-C", "VISIBLE-D"}
		var hidden []string
		for i := 1; i <= 10; i++ {
			hidden = append(hidden, fmt.Sprintf("HIDDEN-%d ", i))
		}
		for _, tool := range []string{"read_page", "get_page_text"} {
			text := testutil.Text(c.call(t, tool, map[string]any{"tabId": tab}))
			for _, v := range visible {
				if !strings.Contains(text, v) {
					t.Errorf("%s leaves out the visible %s:\n%s", tool, v, text)
				}
			}
			for _, h := range hidden {
				if strings.Contains(text, h) {
					t.Errorf("%s shows the hidden %q by default:\n%s", tool, h, text)
				}
			}
			for _, want := range []string{"Origin: " + origin, "10 hidden elements left out", tool + " with include_hidden: true shows them"} {
				if !strings.Contains(text, want) {
					t.Errorf("%s by default does not say %q:\n%s", tool, want, text)
				}
			}
			all := testutil.Text(c.call(t, tool, map[string]any{"tabId": tab, "include_hidden": true}))
			for _, h := range append(hidden, visible...) {
				if !strings.Contains(all, h) {
					t.Errorf("%s with include_hidden leaves out %q:\n%s", tool, h, all)
				}
			}
			if marks := strings.Count(all, "[hidden"); marks < 10 {
				t.Errorf("%s with include_hidden marks %d hidden parts, want 10:\n%s", tool, marks, all)
			}
		}
		if text := testutil.Text(c.call(t, "find", map[string]any{"query": "HIDDEN-5", "tabId": tab})); !strings.Contains(text, "No visible element matches") {
			t.Errorf("find finds hidden text: %s", text)
		}
	})
}

// resultJSON is the whole result as the client got it: text, images'
// encoding aside, structured content.
func resultJSON(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
