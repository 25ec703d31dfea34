//go:build linux

package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestSettle: after a click the tool waits for the page to settle (the DOM
// quiet, the animations it started done, a navigation it started committed)
// and says what changed, so that the next read_page sees what the click did
// (issue 32). In real Chromium with the real extension, on settle.html,
// whose "Save" inserts a modal after a timeout and fades it in over 400 ms.
func TestSettle(t *testing.T) {
	w := startWorld(t, worldOptions{})
	c := w.client("e2e-settle")
	url := w.pages.url("settle.html")

	t.Run("modal_after_save", func(t *testing.T) {
		tab := c.newTab(t, url)
		save := c.refFor(t, tab, "#save")
		said := testutil.Text(c.call(t, "computer", map[string]any{"action": "left_click", "ref": save, "tabId": tab}))
		if !regexp.MustCompile(`A dialog opened: "Changes saved" \[ref_\d+\]`).MatchString(said) {
			t.Errorf("the click's result does not name the dialog it opened:\n%s", said)
		}
		// The very next look shows the modal, drawn (not at opacity 0), with its button.
		tree := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab}))
		if !regexp.MustCompile(`dialog "Changes saved" \[ref_\d+\]`).MatchString(tree) || !strings.Contains(tree, `button "OK"`) {
			t.Errorf("read_page right after the click lacks the modal and its OK button:\n%s", clip(tree, 3000))
		}
	})

	t.Run("click_that_changes_nothing", func(t *testing.T) {
		tab := c.newTab(t, url)
		nothing := c.refFor(t, tab, "#nothing")
		said := testutil.Text(c.call(t, "computer", map[string]any{"action": "left_click", "ref": nothing, "tabId": tab}))
		for _, bad := range []string{"dialog", "changed", "avigat", "still"} {
			if strings.Contains(said, bad) {
				t.Errorf("a click that changes nothing reports a change (%q):\n%s", bad, said)
			}
		}
	})

	t.Run("link_navigates", func(t *testing.T) {
		tab := c.newTab(t, url)
		next := c.refFor(t, tab, "#next")
		said := testutil.Text(c.call(t, "computer", map[string]any{"action": "left_click", "ref": next, "tabId": tab}))
		if !strings.Contains(said, "Navigated to "+url+"?page=2") {
			t.Errorf("the click on a link does not say where it went:\n%s", said)
		}
		c.waitURL(t, tab, url+"?page=2")
	})

	t.Run("link_opens_tab", func(t *testing.T) {
		tab := c.newTab(t, url)
		help := c.refFor(t, tab, "#help")
		said := testutil.Text(c.call(t, "computer", map[string]any{"action": "left_click", "ref": help, "tabId": tab}))
		if !regexp.MustCompile(`Opened tab \d+ at ` + regexp.QuoteMeta(url+"?page=help")).MatchString(said) {
			t.Errorf("the click on a link with target=_blank does not name the tab it opened:\n%s", said)
		}
	})

	t.Run("key_opens_modal", func(t *testing.T) {
		tab := c.newTab(t, url)
		c.js(t, tab, `document.getElementById('save').focus(); "focused"`)
		said := testutil.Text(c.call(t, "computer", map[string]any{"action": "key", "text": "Enter", "tabId": tab}))
		if !strings.Contains(said, `A dialog opened: "Changes saved"`) {
			t.Errorf("Enter on the focused Save button does not report the dialog it opened:\n%s", said)
		}
	})
}

// BenchmarkSettle: what waiting for the page to settle adds to an action.
// A click that changes nothing pays the quiet window (sw/settle.js QUIET_MS)
// and two calls into the page; hover, which does not wait, on the same
// button is the action without it. p50 and p95 of each over up to 30 calls.
func BenchmarkSettle(b *testing.B) {
	w := startWorld(b, worldOptions{})
	c := w.client("e2e-bench-settle")
	tab := c.newTab(b, w.pages.url("settle.html"))
	nothing := c.refFor(b, tab, "#nothing")
	for _, action := range []string{"hover", "left_click"} {
		b.Run(action+"_nothing", func(b *testing.B) {
			n := min(b.N, 30)
			lat := make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				start := time.Now()
				c.call(b, "computer", map[string]any{"action": action, "ref": nothing, "tabId": tab})
				lat = append(lat, time.Since(start))
			}
			reportLatency(b, lat)
		})
	}
}
