//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestSteadyViewport: while Chrome takes the debugger's bar away at a
// navigation's commit and shows it again at the load's end, an agent's page
// keeps its size (extension/sw/steadyview.js): a probe page that logs every
// resize sees none in the second after navigate, where it saw two or three
// before the hold. And a hold gives way at once to resize_window.
func TestSteadyViewport(t *testing.T) {
	w := startWorld(t, worldOptions{})
	c := w.client("steady-viewport")
	tab := c.newTab(t, w.pages.url("index.html"))
	type size struct {
		T    int    `json:"t"`
		What string `json:"what"`
		W    int    `json:"w"`
		H    int    `json:"h"`
	}
	// The page's log once it is 800 ms past its load: past the bar's return
	// (the load's end) and its 120 ms slide, and past the hold's end.
	settled := func(url string) []size {
		var sizes []size
		testutil.WaitFor(t, url+" to be 800 ms past its load", func() bool {
			out := c.js(t, tab, `JSON.stringify({href: location.href, now: performance.now(), sizes: window.__sizes || []})`)
			var got struct {
				Href  string  `json:"href"`
				Now   float64 `json:"now"`
				Sizes []size  `json:"sizes"`
			}
			if json.Unmarshal([]byte(out), &got) != nil || got.Href != url {
				return false
			}
			for _, s := range got.Sizes {
				if s.What == "load" && got.Now-float64(s.T) > 800 {
					sizes = got.Sizes
					return true
				}
			}
			return false
		})
		return sizes
	}
	// The first navigation also attaches the debugger (the bar slides in
	// for the first time): not held, not looked at.
	first := w.pages.url("resize-probe.html") + "?warm-up"
	c.call(t, "navigate", map[string]any{"url": first, "tabId": tab})
	settled(first)
	for i := range 4 {
		url := fmt.Sprintf("%s?round=%d", w.pages.url("resize-probe.html"), i)
		c.call(t, "navigate", map[string]any{"url": url, "tabId": tab})
		sizes := settled(url)
		for _, s := range sizes {
			if s.What == "resize" {
				t.Fatalf("round %d: the page was resized after navigate: %+v", i, sizes)
			}
		}
	}

	// A resize_window right after a load (the page still held) is what
	// the page gets at once.
	url := w.pages.url("resize-probe.html") + "?resized"
	c.call(t, "navigate", map[string]any{"url": url, "tabId": tab})
	text := testutil.Text(c.call(t, "resize_window", map[string]any{"width": 1000, "height": 700, "tabId": tab}))
	m := regexp.MustCompile(`viewport is (\d+)x(\d+) CSS px`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("resize_window did not say the viewport: %s", text)
	}
	if width, _ := strconv.Atoi(m[1]); width != 1000 {
		t.Fatalf("right after navigate, resize_window to 1000 px left a viewport %s px wide: %s", m[1], text)
	}
	if got := c.js(t, tab, "innerWidth + 'x' + innerHeight"); got != m[1]+"x"+m[2] {
		t.Fatalf("the page's viewport is %s, resize_window said %sx%s", got, m[1], m[2])
	}
	c.call(t, "resize_window", map[string]any{"width": 1280, "height": 900, "tabId": tab})
}
