//go:build linux

package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
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

	t.Run("change_150ms_later", func(t *testing.T) {
		// The handler changes nothing at once and the page 150 ms later: the
		// wait after a handler ran (sw/settle.js SCRIPT_IDLE_MS) covers it.
		tab := c.newTab(t, url)
		later := c.refFor(t, tab, "#later")
		said := testutil.Text(c.call(t, "computer", map[string]any{"action": "left_click", "ref": later, "tabId": tab}))
		if !regexp.MustCompile(`(?i)message: "Export finished"`).MatchString(said) {
			t.Errorf("the click's result lacks what the page showed 150 ms after it:\n%s", said)
		}
	})

	t.Run("submit_listener_defers", func(t *testing.T) {
		// The button has no listener; its form's submit listener shows the
		// outcome 100 ms later: the wait after an action the page listens
		// for covers listeners the click reaches through the form.
		tab := c.newTab(t, url)
		submit := c.refFor(t, tab, "#submit")
		said := testutil.Text(c.call(t, "computer", map[string]any{"action": "left_click", "ref": submit, "tabId": tab}))
		if !regexp.MustCompile(`(?i)message: "Order received"`).MatchString(said) {
			t.Errorf("the click's result lacks what the form's submit listener showed 100 ms later:\n%s", said)
		}
	})

	t.Run("request_answered", func(t *testing.T) {
		// "Send" shows "Sending…" at once, then posts to a server that takes
		// 400 ms to answer (longer than any quiet window): the click waits
		// for the request it started and reports what the answer showed.
		api := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Access-Control-Allow-Origin", "*")
			_, _ = io.Copy(io.Discard, r.Body)
			select { // a slow server, not a synchronisation
			case <-time.After(400 * time.Millisecond):
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(api.Close)
		tab := c.newTab(t, url+"?api="+neturl.QueryEscape(api.URL+"/send"))
		send := c.refFor(t, tab, "#send")
		said := testutil.Text(c.call(t, "computer", map[string]any{"action": "left_click", "ref": send, "tabId": tab}))
		if !regexp.MustCompile(`(?i)message: "Sent"`).MatchString(said) || strings.Contains(said, "Sending") {
			t.Errorf("the click's result does not say what the page showed once its request answered:\n%s", said)
		}
	})

	t.Run("long_animation_bounded", func(t *testing.T) {
		// A 5 s fade: the click returns at the bound (MAX_MS) and says the page is still changing.
		tab := c.newTab(t, url)
		fade := c.refFor(t, tab, "#fade")
		said := testutil.Text(c.call(t, "computer", map[string]any{"action": "left_click", "ref": fade, "tabId": tab}))
		if !strings.Contains(said, "The page was still changing after 1.5 s") {
			t.Errorf("a click that starts a 5 s animation does not say the page was still changing at the bound:\n%s", said)
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

// BenchmarkSettle: what waiting for the page to settle adds to an action
// (sw/settle.js). hover, which does not wait, on a button without a handler
// is the action without it; left_click on the same button pays a frame
// (IDLE_MS), two calls into the page and two reads of the metrics; on a
// button whose handler changes nothing, the wait for deferred work
// (SCRIPT_IDLE_MS); on one whose handler changes the page at once, the
// quiet window after the change (QUIET_MS); typing into a field by ref (a
// click on it, the text, what changed: no wait) and a key press on a button
// without a handler (IDLE_MS). p50 and p95 of each over up to 30 calls.
func BenchmarkSettle(b *testing.B) {
	w := startWorld(b, worldOptions{})
	c := w.client("e2e-bench-settle")
	tab := c.newTab(b, w.pages.url("settle.html"))
	for _, bc := range []struct{ name, action, sel, text string }{
		{"hover_nothing", "hover", "#nothing", ""},
		{"left_click_nothing", "left_click", "#nothing", ""},
		{"left_click_handler_changes_nothing", "left_click", "#noop", ""},
		{"left_click_changes_at_once", "left_click", "#count", ""},
		{"type_into_field", "type", "#display", "ring twice"},
		{"key_on_nothing", "key", "#nothing", "Shift"},
	} {
		ref := c.refFor(b, tab, bc.sel)
		b.Run(bc.name, func(b *testing.B) {
			args := map[string]any{"action": bc.action, "ref": ref, "tabId": tab}
			if bc.action == "key" {
				// key acts on the focused element: focus the button first.
				c.js(b, tab, `document.querySelector('`+bc.sel+`').focus(); "focused"`)
				args = map[string]any{"action": "key", "text": bc.text, "tabId": tab}
			} else if bc.text != "" {
				args["text"] = bc.text
			}
			n := min(b.N, 30)
			lat := make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				start := time.Now()
				c.call(b, "computer", args)
				lat = append(lat, time.Since(start))
			}
			reportLatency(b, lat)
		})
	}
}
