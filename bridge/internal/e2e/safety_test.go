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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

		// The person opts the site in, ticking its secrets box in the options page.
		options.setPolicy(t, map[string]any{"sites": []map[string]any{{"pattern": "127.0.0.1", "read": "allow", "act": "allow", "script": "allow"}}})
		options.waitJS(t, "the site's secrets box", popupWait, `!!document.getElementById('rule-127.0.0.1-secrets')`)
		options.click(t, `[id="rule-127.0.0.1-secrets"]`)
		options.waitJS(t, "the opt-in stored", popupWait, `chrome.storage.local.get('policy').then((g) => g.policy.sites[0].secrets === true)`)
		var filled *mcp.CallToolResult
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
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
		visible := []string{"VISIBLE-A", "VISIBLE-B", "VISIBLE-C", "VISIBLE-D", "VISIBLE-E", "VISIBLE-F", "VISIBLE-G", "VISIBLE-H"}
		var hidden []string
		for i := 1; i <= 14; i++ {
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
			// The head names the page's origin: get_page_text on its Origin line, read_page in the
			// address on its Page line (an Origin line only where the address does not say it).
			said := "Origin: " + origin
			if tool == "read_page" {
				said = " — " + page + "\n"
			}
			for _, want := range []string{said, "14 hidden elements left out", tool + " with include_hidden: true shows them"} {
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
			if marks := strings.Count(all, "[hidden"); marks < 14 {
				t.Errorf("%s with include_hidden marks %d hidden parts, want 14:\n%s", tool, marks, all)
			}
		}
		if text := testutil.Text(c.call(t, "find", map[string]any{"query": "HIDDEN-5", "tabId": tab})); !strings.Contains(text, "No visible element matches") {
			t.Errorf("find finds hidden text: %s", text)
		}
	})

	t.Run("audit trail", func(t *testing.T) {
		shots := artifactsDir(t, "audit")
		options.setPolicy(t, map[string]any{"auditMaxEntries": 100})
		old := map[string]any{"at": time.Now().Add(-8 * 24 * time.Hour).UnixMilli(), "client": "old", "tool": "read_page", "outcome": "ok"}
		options.js(t, fmt.Sprintf(`chrome.storage.local.set({audit: [%s]}).then(() => true)`, mustJSON(old)))
		a := w.client("e2e-audit")
		form := w.pages.url("form.html")
		tab := a.newTab(t, form)
		a.call(t, "computer", map[string]any{"action": "type", "ref": a.refFor(t, tab, "#name"), "text": "typed-words-123", "tabId": tab})
		a.call(t, "form_input", map[string]any{"selector": "#email", "value": "filled-value-456@example.org", "tabId": tab})
		// Blocked by a site rule.
		options.setPolicy(t, map[string]any{"auditMaxEntries": 100, "sites": []map[string]any{{"pattern": "127.0.0.1", "read": "block", "act": "block", "script": "block"}}})
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			_, err := a.try(bg(callWait), "get_page_text", map[string]any{"tabId": tab})
			return err != nil && strings.Contains(err.Error(), "blocks get_page_text"), fmt.Sprintf("get_page_text under a block rule: %v", err)
		})
		// Asked, and nobody answered: denied.
		options.setPolicy(t, map[string]any{"auditMaxEntries": 100, "timeoutMs": 1000, "sites": []map[string]any{{"pattern": "127.0.0.1", "read": "ask", "act": "ask", "script": "ask"}}})
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			_, err := a.try(bg(callWait), "find", map[string]any{"query": "Send", "tabId": tab})
			return err != nil && strings.Contains(err.Error(), "Nobody approved find"), fmt.Sprintf("find under an ask rule: %v", err)
		})
		// Paused.
		options.js(t, `chrome.storage.local.set({paused: {at: Date.now()}}).then(() => true)`)
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			_, err := a.try(bg(callWait), "tabs_context", nil)
			return err != nil && strings.Contains(err.Error(), "paused"), fmt.Sprintf("tabs_context while paused: %v", err)
		})
		options.js(t, `chrome.storage.local.remove('paused').then(() => true)`)
		options.setPolicy(t, map[string]any{"auditMaxEntries": 100})

		type entry struct {
			At       int64          `json:"at"`
			Client   string         `json:"client"`
			Session  string         `json:"session"`
			Tool     string         `json:"tool"`
			Site     string         `json:"site"`
			Args     map[string]any `json:"args"`
			Decision string         `json:"decision"`
			Why      string         `json:"why"`
			Outcome  string         `json:"outcome"`
			Ms       *int64         `json:"ms"`
		}
		var stored []entry
		var raw string
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			raw = options.js(t, `chrome.storage.local.get('audit').then((g) => JSON.stringify(g.audit || []))`)
			stored = nil
			_ = json.Unmarshal([]byte(raw), &stored)
			decided := map[string]bool{}
			for _, e := range stored {
				decided[e.Decision] = true
			}
			return decided["paused"] && decided["denied"] && decided["blocked"], "the stored audit: " + raw
		})
		find := func(tool, decision string) *entry {
			for i := range stored {
				if stored[i].Client == "e2e-audit" && stored[i].Tool == tool && stored[i].Decision == decision {
					return &stored[i]
				}
			}
			t.Fatalf("no audit entry of e2e-audit's %s (%s) in %s", tool, decision, raw)
			return nil
		}
		typed := find("computer", "allowed")
		if typed.Site != origin || typed.Outcome != "ok" || typed.Args["text"] != "[redacted: 15 characters]" || typed.Args["action"] != "type" ||
			typed.Session == "" || typed.Ms == nil || typed.At < time.Now().Add(-time.Minute).UnixMilli() {
			t.Errorf("the typing call's entry: %+v", *typed)
		}
		if e := find("form_input", "allowed"); e.Args["value"] != "[redacted: 28 characters]" || e.Args["selector"] != "#email" {
			t.Errorf("the form_input entry: %+v", *e)
		}
		if e := find("get_page_text", "blocked"); e.Site != origin || e.Why != "rule" || e.Outcome != "refused" {
			t.Errorf("the blocked entry: %+v", *e)
		}
		if e := find("find", "denied"); e.Why != "timeout" || e.Outcome != "refused" {
			t.Errorf("the denied entry: %+v", *e)
		}
		if e := find("tabs_context", "paused"); e.Outcome != "refused" {
			t.Errorf("the paused entry: %+v", *e)
		}
		for _, secret := range []string{"typed-words-123", "filled-value-456"} {
			if strings.Contains(raw, secret) {
				t.Errorf("the audit trail holds what was typed, %q", secret)
			}
		}
		if strings.Contains(raw, `"client":"old"`) {
			t.Errorf("an entry older than the 7 days is still there")
		}
		// The options page shows them, filters them and exports them as JSON Lines.
		view := openExtensionPage(t, dt, "options.html#audit")
		view.waitText(t, "the audit view", "What agents did", "e2e-audit", "blocked", "denied", "paused")
		view.screenshot(t, filepath.Join(shots, "options-audit-light.png"), 1240, 900)
		view.darkScreenshot(t, filepath.Join(shots, "options-audit-dark.png"), 1240, 900)

		// Bounded by count: 10.
		options.setPolicy(t, map[string]any{"auditMaxEntries": 10})
		for range 12 {
			a.call(t, "tabs_context", nil)
		}
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			got := options.js(t, `chrome.storage.local.get('audit').then((g) => JSON.stringify(g.audit.map((e) => e.tool)))`)
			return got == `["tabs_context","tabs_context","tabs_context","tabs_context","tabs_context","tabs_context","tabs_context","tabs_context","tabs_context","tabs_context"]`, "the tools of the stored audit: " + got
		})
		// The bridge logged the decisions.
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			b, _ := os.ReadFile(filepath.Join(w.bbHome, "logs", "bridge.log"))
			log := string(b)
			return strings.Contains(log, `msg="tool call decision"`) && strings.Contains(log, "tool=get_page_text site="+origin+" decision=blocked why=rule") &&
				strings.Contains(log, "decision=paused"), "the bridge log has no blocked get_page_text decision"
		})

		view.waitText(t, "the bounded audit view", "10 of 10 calls.")
		view.js(t, `(() => { const s = document.getElementById('audit-decision'); s.value = 'blocked'; s.dispatchEvent(new Event('change')); return true; })()`)
		view.waitText(t, "the filter", "0 of 10 calls.")
		view.js(t, `(() => { const s = document.getElementById('audit-decision'); s.value = ''; s.dispatchEvent(new Event('change')); return true; })()`)
		view.click(t, "#audit-export")
		var lines string
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			lines = view.js(t, `(() => { const a = document.getElementById('audit-download'); return a.href ? fetch(a.href).then((r) => r.text()) : ''; })()`)
			return lines != "", "no export yet"
		})
		n := 0
		for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
			var e entry
			if err := json.Unmarshal([]byte(l), &e); err != nil || e.Tool == "" {
				t.Errorf("export line %d does not parse as an entry (%v): %q", n+1, err, l)
			}
			n++
		}
		if n != 10 {
			t.Errorf("the export has %d lines, want 10:\n%s", n, lines)
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
