//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/gif"
	_ "image/jpeg" // screenshots may be JPEG
	_ "image/png"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

func testNavigate(t *testing.T, w *world) {
	c := w.client("e2e-navigate")
	index, form, long := w.pages.url("index.html"), w.pages.url("form.html"), w.pages.url("long.html")
	tab := c.newTab(t, index)

	c.navigate(t, tab, form)
	if got := c.js(t, tab, "document.title"); got != "E2E form" {
		t.Errorf("after navigate to the form, document.title = %q", got)
	}
	c.navigate(t, tab, long)

	// History: back, forward, reload.
	c.call(t, "navigate", map[string]any{"url": "back", "tabId": tab})
	c.waitURL(t, tab, form)
	c.call(t, "navigate", map[string]any{"url": "forward", "tabId": tab})
	c.waitURL(t, tab, long)
	c.js(t, tab, "window.bbMarker = 'before reload'; 'ok'")
	c.call(t, "navigate", map[string]any{"url": "reload", "tabId": tab})
	c.waitURL(t, tab, long)
	if got := c.js(t, tab, "String(window.bbMarker)"); got != "undefined" {
		t.Errorf("after reload the page still holds its old state: window.bbMarker = %q", got)
	}

	// Following a link with a click lands on the linked page.
	c.navigate(t, tab, index)
	x, y := c.center(t, tab, "#to-form")
	c.call(t, "computer", map[string]any{"action": "left_click", "coordinate": []int{x, y}, "tabId": tab})
	c.waitURL(t, tab, form)

	// tabs_create (outside any group) opens a tab that tabs_context lists.
	res := c.call(t, "tabs_create", map[string]any{"url": long})
	other, ok := tabIDOf(res)
	if !ok {
		t.Fatalf("tabs_create gave no tab id: %s", describe(res))
	}
	c.waitURL(t, other, long)
	ctxText := testutil.Text(c.call(t, "tabs_context", nil))
	for _, id := range []int{tab, other} {
		if !strings.Contains(ctxText, strconv.Itoa(id)) {
			t.Errorf("tabs_context does not list tab %d:\n%s", id, clip(ctxText, 2000))
		}
	}
}

// center returns the viewport coordinates of the centre of the element
// matching selector, scrolled into view first.
func (c *client) center(t testing.TB, tab int, selector string) (int, int) {
	t.Helper()
	out := c.js(t, tab, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.scrollIntoView({block: "center"});
		const r = e.getBoundingClientRect(); return Math.round(r.left + r.width / 2) + "," + Math.round(r.top + r.height / 2); })()`, selector))
	var x, y int
	if _, err := fmt.Sscanf(out, "%d,%d", &x, &y); err != nil {
		t.Fatalf("locating %s: javascript_tool answered %q", selector, out)
	}
	return x, y
}

// formValues reads the form back in the page: what the tests assert.
const formValues = `JSON.stringify({
	name: document.getElementById("name").value,
	password: document.getElementById("password").value,
	email: document.getElementById("email").value,
	quantity: document.getElementById("quantity").value,
	when: document.getElementById("when").value,
	notes: document.getElementById("notes").value,
	color: document.getElementById("color").value,
	agree: document.getElementById("agree").checked,
	size: (document.querySelector("input[name=size]:checked") || {}).value || "",
})`

type formState struct {
	Name, Password, Email, Quantity, When, Notes, Color string
	Agree                                               bool
	Size                                                string
}

func (c *client) readForm(t testing.TB, tab int) formState {
	t.Helper()
	out := c.js(t, tab, formValues)
	var f formState
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("reading the form back: %v (javascript_tool answered %q)", err, out)
	}
	return f
}

func testFormInput(t *testing.T, w *world) {
	c := w.client("e2e-form")
	tab := c.newTab(t, w.pages.url("form.html"))
	want := formState{
		// The password field stays empty: without the person's secrets opt-in
		// for the site (issue 30, TestSafety) form_input refuses it.
		Name: "Ada Lovelace", Password: "", Email: "ada@example.org", Quantity: "42",
		When: "2024-05-17", Notes: "first line\nsecond line", Color: "green", Agree: true, Size: "m",
	}
	for _, f := range []struct {
		selector string
		value    any
	}{
		{"#name", want.Name},
		{"#email", want.Email},
		{"#quantity", 42},
		{"#when", want.When},
		{"#notes", want.Notes},
		{"#color", "green"},
		{"#agree", true},
		{"#size-m", true},
	} {
		ref := c.refFor(t, tab, f.selector)
		c.call(t, "form_input", map[string]any{"ref": ref, "value": f.value, "tabId": tab})
	}
	if got := c.readForm(t, tab); got != want {
		t.Fatalf("after form_input the form holds\n %+v\nwant\n %+v", got, want)
	}
	if text, _ := c.toolError(t, "form_input", map[string]any{"selector": "#password", "value": "s3cret!pw", "tabId": tab}); !strings.Contains(text, "is a password field") {
		t.Errorf("form_input into a password field without the opt-in: %q", text)
	}
	// Unchecking works too.
	c.call(t, "form_input", map[string]any{"ref": c.refFor(t, tab, "#agree"), "value": false, "tabId": tab})
	if got := c.readForm(t, tab); got.Agree {
		t.Errorf("form_input value=false left the checkbox checked")
	}
}

// refFor finds the element ref (as read_page and find give them) of the
// element matching a CSS selector, by asking find for it.
func (c *client) refFor(t testing.TB, tab int, selector string) string {
	t.Helper()
	res := c.call(t, "find", map[string]any{"query": selector, "tabId": tab})
	ref := firstRef(res)
	if ref == "" {
		t.Fatalf("find %q gave no element ref: %s", selector, describe(res))
	}
	return ref
}

// firstRef is the first element ref in a result: structured "ref" fields,
// else the first "ref_N"-like token in the text.
func firstRef(res *mcp.CallToolResult) string {
	if m, ok := structured(res); ok {
		if r := findRef(m); r != "" {
			return r
		}
	}
	return refText.FindString(testutil.Text(res))
}

func findRef(v any) string {
	switch x := v.(type) {
	case map[string]any:
		if r, ok := x["ref"].(string); ok && r != "" {
			return r
		}
		for _, k := range []string{"elements", "matches", "results", "nodes", "children"} {
			if r := findRef(x[k]); r != "" {
				return r
			}
		}
	case []any:
		for _, e := range x {
			if r := findRef(e); r != "" {
				return r
			}
		}
	}
	return ""
}

func testComputerType(t *testing.T, w *world) {
	c := w.client("e2e-computer")
	tab := c.newTab(t, w.pages.url("form.html"))

	x, y := c.center(t, tab, "#name")
	c.call(t, "computer", map[string]any{"action": "left_click", "coordinate": []int{x, y}, "tabId": tab})
	c.call(t, "computer", map[string]any{"action": "type", "text": "Typed by computer", "tabId": tab})
	if got := c.readForm(t, tab).Name; got != "Typed by computer" {
		t.Fatalf("after click + type the name field holds %q", got)
	}
	// A key chord: select all, then Backspace clears the field.
	c.call(t, "computer", map[string]any{"action": "key", "text": "ctrl+a", "tabId": tab})
	c.call(t, "computer", map[string]any{"action": "key", "text": "Backspace", "tabId": tab})
	if got := c.readForm(t, tab).Name; got != "" {
		t.Errorf("after ctrl+a, Backspace the name field still holds %q", got)
	}
	// Typing into a textarea, by element ref.
	c.call(t, "computer", map[string]any{"action": "left_click", "ref": c.refFor(t, tab, "#notes"), "tabId": tab})
	c.call(t, "computer", map[string]any{"action": "type", "text": "notes by ref", "tabId": tab})
	if got := c.readForm(t, tab).Notes; got != "notes by ref" {
		t.Errorf("after a click by ref and type the textarea holds %q", got)
	}
	// Clicks count: single, then double.
	x, y = c.center(t, tab, "#counter")
	c.call(t, "computer", map[string]any{"action": "left_click", "coordinate": []int{x, y}, "tabId": tab})
	if got := c.js(t, tab, `document.getElementById("counter").dataset.clicks || "0"`); got != "1" {
		t.Errorf("after one left_click the button counted %s clicks", got)
	}
	c.call(t, "computer", map[string]any{"action": "double_click", "coordinate": []int{x, y}, "tabId": tab})
	if got := c.js(t, tab, `document.getElementById("counter").dataset.clicks || "0"`); got != "3" {
		t.Errorf("after a double_click the button counted %s clicks in all, want 3", got)
	}
	// Hover, triple click (selects the paragraph), drag (down, moves, up), wait, zoom.
	x, y = c.center(t, tab, "#hover")
	c.call(t, "computer", map[string]any{"action": "hover", "coordinate": []int{x, y}, "tabId": tab})
	if got := c.js(t, tab, `document.getElementById("hover").dataset.hovered || "no"`); got != "yes" {
		t.Errorf("hover did not reach the element (hovered=%s)", got)
	}
	x, y = c.center(t, tab, "#para")
	c.call(t, "computer", map[string]any{"action": "triple_click", "coordinate": []int{x, y}, "tabId": tab})
	if got := c.js(t, tab, `String(getSelection()).trim()`); got != "Triple click selects this whole paragraph of words." {
		t.Errorf("after triple_click the selection is %q", got)
	}
	x, y = c.center(t, tab, "#pad")
	c.call(t, "computer", map[string]any{"action": "left_click_drag", "start_coordinate": []int{x - 100, y}, "coordinate": []int{x + 100, y}, "tabId": tab})
	drag := c.js(t, tab, `(() => { const d = document.getElementById("pad").dataset; return d.down + " " + d.up + " " + d.moves; })()`)
	var dx0, dy0, dx1, dy1, moves int
	if _, err := fmt.Sscanf(drag, "%d,%d %d,%d %d", &dx0, &dy0, &dx1, &dy1, &moves); err != nil || abs(dx0-(x-100)) > 2 || abs(dx1-(x+100)) > 2 || moves < 1 {
		t.Errorf("left_click_drag from (%d,%d) to (%d,%d): the pad saw down/up/moves %q", x-100, y, x+100, y, drag)
	}
	start := time.Now()
	c.call(t, "computer", map[string]any{"action": "wait", "duration": 0.5, "tabId": tab})
	if d := time.Since(start); d < 450*time.Millisecond {
		t.Errorf("wait 0.5 s returned after %v", d)
	}
	zoom := c.call(t, "computer", map[string]any{"action": "zoom", "region": []int{0, 0, 200, 100}, "tabId": tab})
	if data, _, ok := imageOf(zoom); !ok {
		t.Errorf("zoom returned no image: %s", describe(zoom))
	} else if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err != nil || cfg.Width < 200 {
		t.Errorf("zoom of a 200x100 region: %v, %dx%d", err, cfg.Width, cfg.Height)
	}

	// Scrolling the long page moves it.
	c.navigate(t, tab, w.pages.url("long.html"))
	c.call(t, "computer", map[string]any{"action": "scroll", "coordinate": []int{400, 400}, "scroll_direction": "down", "scroll_amount": 5, "tabId": tab})
	testutil.WaitWithin(t, 3*time.Second, "", func() (bool, string) {
		y := c.js(t, tab, "String(Math.round(window.scrollY))")
		return y != "0", "window.scrollY = " + y + " after scrolling down"
	})
}

// imageOf returns the first image of a result: image content, or an
// embedded resource with an image type.
func imageOf(res *mcp.CallToolResult) ([]byte, string, bool) {
	for _, ct := range res.Content {
		switch x := ct.(type) {
		case *mcp.ImageContent:
			return x.Data, x.MIMEType, true
		case *mcp.EmbeddedResource:
			if x.Resource != nil && strings.HasPrefix(x.Resource.MIMEType, "image/") {
				return x.Resource.Blob, x.Resource.MIMEType, true
			}
		}
	}
	return nil, "", false
}

func (c *client) screenshot(t testing.TB, tab int, extra map[string]any) (image.Config, string, []byte) {
	t.Helper()
	args := map[string]any{"action": "screenshot", "tabId": tab}
	for k, v := range extra {
		args[k] = v
	}
	res := c.call(t, "computer", args)
	data, mime, ok := imageOf(res)
	if !ok {
		t.Fatalf("computer screenshot %s returned no image: %s", argsJSON(args), describe(res))
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("computer screenshot: the %s image (%d bytes) does not decode: %v", mime, len(data), err)
	}
	if want := "image/" + format; want != mime {
		t.Errorf("computer screenshot: content says %s, the bytes are %s", mime, format)
	}
	if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
		t.Fatalf("computer screenshot: the %s image does not decode fully: %v", mime, err)
	}
	return cfg, mime, data
}

func testScreenshot(t *testing.T, w *world) {
	c := w.client("e2e-screenshot")
	tab := c.newTab(t, w.pages.url("form.html"))
	viewport := func() (int, int) {
		var vw, vh int
		// The visible content area, without scrollbars, in device pixels.
		out := c.js(t, tab, `(() => { const e = document.documentElement, r = devicePixelRatio;
			return Math.round(e.clientWidth * r) + "x" + Math.round(e.clientHeight * r); })()`)
		if _, err := fmt.Sscanf(out, "%dx%d", &vw, &vh); err != nil {
			t.Fatalf("viewport size: %q", out)
		}
		return vw, vh
	}
	// Measured after the first screenshot: attaching the debugger for it
	// may change the viewport by a few pixels.
	c.screenshot(t, tab, nil)
	vw, vh := viewport()
	cfg, mime, _ := c.screenshot(t, tab, nil)
	t.Logf("screenshot of a %dx%d viewport: %s %dx%d", vw, vh, mime, cfg.Width, cfg.Height)
	if max(cfg.Width, cfg.Height) > 1568 {
		t.Errorf("default screenshot is %dx%d: long edge over 1568", cfg.Width, cfg.Height)
	}
	if vw <= 1568 && vh <= 1568 && (abs(cfg.Width-vw) > 2 || abs(cfg.Height-vh) > 2) {
		t.Errorf("default screenshot is %dx%d, the viewport %dx%d (no scaling needed)", cfg.Width, cfg.Height, vw, vh)
	}
	// With a scrollbar (long.html) the image is the viewport without it;
	// without one (order.html) the viewport is the whole window, which the
	// extension captures without a clip.
	for _, page := range []string{"long.html", "order.html"} {
		c.navigate(t, tab, w.pages.url(page))
		vw, vh = viewport()
		var ww int
		out := c.js(t, tab, `String(Math.round(innerWidth * devicePixelRatio))`)
		if _, err := fmt.Sscan(out, &ww); err != nil {
			t.Fatalf("window width: %q", out)
		}
		cfg, _, _ = c.screenshot(t, tab, nil)
		t.Logf("screenshot of %s, viewport %dx%d in a window %d wide: %dx%d", page, vw, vh, ww, cfg.Width, cfg.Height)
		if vw <= 1568 && vh <= 1568 && (abs(cfg.Width-vw) > 2 || abs(cfg.Height-vh) > 2) {
			t.Errorf("screenshot of %s is %dx%d, its viewport %dx%d", page, cfg.Width, cfg.Height, vw, vh)
		}
		if ww > vw+2 && cfg.Width >= ww {
			t.Errorf("screenshot of %s is %d wide, the window with its scrollbar %d", page, cfg.Width, ww)
		}
	}
	c.navigate(t, tab, w.pages.url("form.html"))

	// A window larger than 1568 px: scaled down by default, full size on request.
	c.call(t, "resize_window", map[string]any{"width": 2000, "height": 1200, "tabId": tab})
	t.Cleanup(func() {
		c.try(bg(10*time.Second), "resize_window", map[string]any{"width": 1280, "height": 900, "tabId": tab})
	})
	testutil.WaitWithin(t, 5*time.Second, "", func() (bool, string) {
		vw, vh = viewport()
		return vw > 1568, fmt.Sprintf("after resize_window 2000x1200 the viewport is %dx%d", vw, vh)
	})
	cfg, _, _ = c.screenshot(t, tab, nil)
	if max(cfg.Width, cfg.Height) > 1568 || max(cfg.Width, cfg.Height) < 1500 {
		t.Errorf("screenshot of a %dx%d viewport is %dx%d: want the long edge scaled to 1568", vw, vh, cfg.Width, cfg.Height)
	}
	if r, want := float64(cfg.Width)/float64(cfg.Height), float64(vw)/float64(vh); r/want > 1.02 || r/want < 0.98 {
		t.Errorf("screenshot %dx%d changed the aspect ratio of the %dx%d viewport", cfg.Width, cfg.Height, vw, vh)
	}
	full, _, _ := c.screenshot(t, tab, map[string]any{"max_edge": 0, "format": "png"})
	if abs(full.Width-vw) > 2 || abs(full.Height-vh) > 2 {
		t.Errorf("screenshot with max_edge 0 (full resolution) is %dx%d, the viewport %dx%d", full.Width, full.Height, vw, vh)
	}
	// full_resolution: the scaled image inline, the full one as a resource link.
	res := c.call(t, "computer", map[string]any{"action": "screenshot", "full_resolution": true, "tabId": tab})
	var link *mcp.ResourceLink
	for _, ct := range res.Content {
		if l, ok := ct.(*mcp.ResourceLink); ok {
			link = l
		}
	}
	if _, _, ok := imageOf(res); !ok || link == nil || !strings.HasPrefix(link.MIMEType, "image/") {
		t.Fatalf("screenshot full_resolution=true: want an inline image and an image resource_link, got %s", describe(res))
	}
	// The link resolves: resources/read through the bridge returns the
	// full-size image.
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	rr, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
	if err != nil || len(rr.Contents) != 1 || len(rr.Contents[0].Blob) == 0 {
		t.Fatalf("resources/read %s = %+v, %v", link.URI, rr, err)
	}
	img, _, err := image.DecodeConfig(bytes.NewReader(rr.Contents[0].Blob))
	if err != nil || abs(img.Width-vw) > 2 || abs(img.Height-vh) > 2 {
		t.Errorf("the linked screenshot decodes to %dx%d (%v); the viewport is %dx%d", img.Width, img.Height, err, vw, vh)
	}
	if _, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "browserbridge://screenshots/nope"}); err == nil {
		t.Error("reading a screenshot that does not exist succeeded")
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func testConsoleNetwork(t *testing.T, w *world) {
	c := w.client("e2e-console")
	tab := c.newTab(t, w.pages.url("index.html"))
	// Capture starts once the tab is in use; the page loads after that.
	c.call(t, "read_console_messages", map[string]any{"tabId": tab})
	c.call(t, "read_network_requests", map[string]any{"tabId": tab})
	c.navigate(t, tab, w.pages.url("console.html"))
	testutil.WaitWithin(t, 10*time.Second, "", func() (bool, string) {
		s := c.js(t, tab, `document.getElementById("status").textContent`)
		return s == "fetched 200,200,404", "the console page says " + s
	})

	logs := testutil.Text(c.call(t, "read_console_messages", map[string]any{"tabId": tab}))
	for _, want := range []string{"bb-e2e log marker", "bb-e2e info marker", "bb-e2e warn marker", "bb-e2e error marker", "bb-e2e fetched 200,200,404"} {
		if !strings.Contains(logs, want) {
			t.Errorf("read_console_messages lacks %q:\n%s", want, clip(logs, 3000))
		}
	}
	errorsOnly := testutil.Text(c.call(t, "read_console_messages", map[string]any{"tabId": tab, "pattern": "error marker"}))
	if !strings.Contains(errorsOnly, "bb-e2e error marker") || strings.Contains(errorsOnly, "bb-e2e info marker") {
		t.Errorf("read_console_messages pattern=\"error marker\" gave:\n%s", clip(errorsOnly, 2000))
	}

	netText := testutil.Text(c.call(t, "read_network_requests", map[string]any{"tabId": tab}))
	for _, want := range []string{"/api/data?item=alpha", "/api/echo", "/api/missing", "404"} {
		if !strings.Contains(netText, want) {
			t.Errorf("read_network_requests lacks %q:\n%s", want, clip(netText, 3000))
		}
	}
	if !strings.Contains(netText, "POST") {
		t.Errorf("read_network_requests does not say the /api/echo request was a POST:\n%s", clip(netText, 3000))
	}
	only := testutil.Text(c.call(t, "read_network_requests", map[string]any{"tabId": tab, "url_pattern": "/api/missing"}))
	if !strings.Contains(only, "/api/missing") || strings.Contains(only, "item=alpha") {
		t.Errorf("read_network_requests url_pattern=/api/missing gave:\n%s", clip(only, 2000))
	}
	// The server saw what the page fetched: the capture reports real requests.
	seen := strings.Join(w.pages.requests(), "\n")
	for _, want := range []string{"GET /api/data?item=alpha", "POST /api/echo", "GET /api/missing"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the test server never saw %q (it saw:\n%s)", want, seen)
		}
	}
}

func testPageText(t *testing.T, w *world) {
	c := w.client("e2e-page-text")
	tab := c.newTab(t, w.pages.url("long.html"))
	var pages []string
	for page := 1; page <= 50; page++ {
		res := c.call(t, "get_page_text", map[string]any{"tabId": tab, "page": page})
		text := testutil.Text(res)
		pages = append(pages, text)
		if !hasMorePages(res, page) {
			break
		}
	}
	if len(pages) < 2 {
		t.Fatalf("get_page_text gave the %d-paragraph page in one page of %d characters: no pagination", 400, len(pages[0]))
	}
	if pages[0] == pages[1] {
		t.Fatalf("get_page_text page 2 is the same as page 1")
	}
	if !strings.Contains(pages[0], "Paragraph 001") {
		t.Errorf("page 1 lacks the first paragraph:\n%s", clip(pages[0], 500))
	}
	if strings.Contains(pages[1], "Paragraph 001:") {
		t.Errorf("page 2 repeats the first paragraph")
	}
	all := strings.Join(pages, "\n")
	for _, want := range []string{"Paragraph 200:", "Paragraph 400:", "The end of the long page."} {
		if !strings.Contains(all, want) {
			t.Errorf("the %d pages of get_page_text lack %q", len(pages), want)
		}
	}
	t.Logf("get_page_text: %d pages", len(pages))
}

// hasMorePages says whether a get_page_text result says there is a page
// after this one: structured {page, totalPages|pages|hasMore}, else text
// like "page 1 of 5".
func hasMorePages(res *mcp.CallToolResult, page int) bool {
	if m, ok := structured(res); ok {
		if more, ok := m["hasMore"].(bool); ok {
			return more
		}
		for _, k := range []string{"totalPages", "pages", "pageCount"} {
			if n, ok := intField(m, k); ok {
				return page < n
			}
		}
	}
	if m := pageOfText.FindStringSubmatch(testutil.Text(res)); m != nil {
		n, _ := strconv.Atoi(m[2])
		return page < n
	}
	return false
}

func testReadPageFind(t *testing.T, w *world) {
	c := w.client("e2e-read-page")
	tab := c.newTab(t, w.pages.url("form.html"))
	tree := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab}))
	for _, want := range []string{"Every input type", "Name", "Colour", "Send"} {
		if !strings.Contains(tree, want) {
			t.Errorf("read_page lacks %q:\n%s", want, clip(tree, 3000))
		}
	}
	if refText.FindString(tree) == "" {
		t.Errorf("read_page gives no element refs:\n%s", clip(tree, 2000))
	}
	inter := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab, "filter": "interactive"}))
	if strings.Contains(inter, "Every input type") || !strings.Contains(inter, "Send") {
		t.Errorf("read_page filter=interactive should keep the button and drop the heading:\n%s", clip(inter, 3000))
	}
	// find by description, then act on the ref it gives: the form submits.
	res := c.call(t, "find", map[string]any{"query": "Send button", "tabId": tab})
	ref := firstRef(res)
	if ref == "" {
		t.Fatalf("find \"Send button\" gave no ref: %s", describe(res))
	}
	c.call(t, "computer", map[string]any{"action": "left_click", "ref": ref, "tabId": tab})
	testutil.WaitWithin(t, 3*time.Second, "", func() (bool, string) {
		s := c.js(t, tab, `document.getElementById("submitted").textContent`)
		return s == "submitted", fmt.Sprintf("clicking find's ref %s for \"Send button\" did not submit the form (%q)", ref, s)
	})
}

func testGIF(t *testing.T, w *world) {
	c := w.client("e2e-gif")
	tab := c.newTab(t, w.pages.url("index.html"))
	c.call(t, "gif_creator", map[string]any{"action": "start_recording", "tabId": tab})
	c.call(t, "computer", map[string]any{"action": "screenshot", "tabId": tab})
	c.navigate(t, tab, w.pages.url("form.html"))
	c.call(t, "computer", map[string]any{"action": "screenshot", "tabId": tab})
	x, y := c.center(t, tab, "#counter")
	c.call(t, "computer", map[string]any{"action": "left_click", "coordinate": []int{x, y}, "tabId": tab})
	c.call(t, "computer", map[string]any{"action": "screenshot", "tabId": tab})
	c.call(t, "gif_creator", map[string]any{"action": "stop_recording"})
	res := c.call(t, "gif_creator", map[string]any{"action": "export"})
	data, mime, ok := imageOf(res)
	if !ok {
		t.Fatalf("gif_creator export returned no image: %s", describe(res))
	}
	g, err := gif.DecodeAll(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("gif_creator export: the %s (%d bytes) does not decode as a GIF: %v", mime, len(data), err)
	}
	if len(g.Image) < 3 {
		t.Fatalf("gif_creator export: %d frames, want at least 3", len(g.Image))
	}
	t.Logf("gif_creator: %d frames, %dx%d, %d bytes", len(g.Image), g.Config.Width, g.Config.Height, len(data))
}

func testUploadImage(t *testing.T, w *world) {
	c := w.client("e2e-upload")
	tab := c.newTab(t, w.pages.url("form.html"))
	shot := c.call(t, "computer", map[string]any{"action": "screenshot", "tabId": tab})
	imageID := imageIDOf(shot)
	if imageID == "" {
		t.Fatalf("computer screenshot gave no image id for upload_image: %s", describe(shot))
	}
	// Into a file input.
	c.call(t, "upload_image", map[string]any{"screenshot_id": imageID, "ref": c.refFor(t, tab, "#file"), "tabId": tab, "filename": "shot.png"})
	got := c.js(t, tab, `(() => { const f = document.getElementById("file").files; return f.length + " " + (f[0] ? f[0].name + " " + f[0].type + " " + f[0].size : ""); })()`)
	if !strings.HasPrefix(got, "1 shot.png image/") {
		t.Errorf("after upload_image the file input holds %q, want one image named shot.png", got)
	}
	// Onto a drop target: the page's drop handler decodes the image.
	c.navigate(t, tab, w.pages.url("drop.html"))
	c.call(t, "upload_image", map[string]any{"screenshot_id": imageID, "ref": c.refFor(t, tab, "#drop"), "tabId": tab, "filename": "dropped.png"})
	testutil.WaitWithin(t, 3*time.Second, "", func() (bool, string) {
		d := c.js(t, tab, `JSON.stringify(window.dropped)`)
		return strings.Contains(d, `"name":"dropped.png"`) && strings.Contains(d, `"width":`) && !strings.Contains(d, `"width":0`), "the drop target got " + d
	})
}

// imageIDOf finds the id a screenshot is kept under (for upload_image):
// "Screenshot id: shot_…." in its text.
func imageIDOf(res *mcp.CallToolResult) string {
	if m := imageIDText.FindStringSubmatch(testutil.Text(res)); m != nil {
		return m[1]
	}
	return ""
}

func testSmallTools(t *testing.T, w *world) {
	c := w.client("e2e-small")
	tab := c.newTab(t, w.pages.url("index.html"))

	ctxText := testutil.Text(c.call(t, "tabs_context_mcp", nil))
	if !strings.Contains(ctxText, strconv.Itoa(tab)) {
		t.Errorf("tabs_context_mcp does not list the session's tab %d:\n%s", tab, clip(ctxText, 2000))
	}
	c.call(t, "turn_answer_start", map[string]any{"summary": "reading the index"})
	c.call(t, "update_plan", map[string]any{
		"plan": []map[string]any{
			{"step": "open the index", "status": "completed"},
			{"step": "read it", "status": "in_progress"},
		},
		"domains": []string{"127.0.0.1"},
	})
	c.call(t, "turn_answer_complete", map[string]any{"summary": "done"})
	// The plan and the activity are the session's state the popup shows.
	state := testutil.Text(c.call(t, "dev_utils", map[string]any{"action": "state"}))
	if state == "" {
		t.Errorf("dev_utils state said nothing")
	}
	perm := c.call(t, "permissions_check", map[string]any{"tabId": tab})
	if text := testutil.Text(perm); !strings.Contains(text, ": granted; page scriptable: yes.") {
		t.Errorf("permissions_check on the test page: want host access and a scriptable page, got %s", describe(perm))
	}
	echo := testutil.Text(c.call(t, "dev_utils", map[string]any{"action": "echo", "message": "bb-e2e-echo"}))
	if !strings.Contains(echo, "bb-e2e-echo") {
		t.Errorf("dev_utils echo answered %q", echo)
	}
	// The raw native-messaging echo the benchmark compares with works.
	st := c.call(t, "dev_utils", map[string]any{"action": "native_echo_benchmark", "host": echoHostName, "count": 20, "size": 64})
	if e, ok := echoBenchOf(st); !ok || e.count != 20 || e.median <= 0 {
		t.Errorf("dev_utils native_echo_benchmark: %s", describe(st))
	}
}

// testShortcuts saves a shortcut the way the options page does (in
// chrome.storage.local, from a page of the extension), lists it and runs
// it: its steps really navigate the session's tab.
// TestShortcuts: a shortcut saved in the extension's storage (as its
// options page saves one) is listed and run by the tools. The shortcut is
// seeded from the options page over DevTools, as the person's own page
// would: agents may not act on extension pages (the site policy).
func TestShortcuts(t *testing.T) {
	w := startWorld(t, worldOptions{})
	dt := w.restartChromiumWithDevTools()
	options := openExtensionPage(t, dt, "options.html")
	options.js(t, `chrome.storage.local.set({shortcuts: [{id: "bb-e2e", name: "Open a page", description: "e2e",
		steps: [{tool: "navigate", arguments: {url: "{{page}}"}}, {tool: "get_page_text", arguments: {}}]}]}).then(() => "saved")`)
	c := w.client("e2e-shortcuts")
	tab := c.newTab(t, w.pages.url("index.html"))
	list := testutil.Text(c.call(t, "shortcuts_list", nil))
	if !strings.Contains(list, "Open a page") {
		t.Fatalf("shortcuts_list does not show the saved shortcut:\n%s", list)
	}
	form := w.pages.url("form.html")
	res := c.call(t, "shortcuts_execute", map[string]any{"shortcut": "Open a page", "variables": map[string]any{"page": form}})
	if out := testutil.Text(res); !strings.Contains(out, "Every input type") {
		t.Errorf("shortcuts_execute: the get_page_text step did not read the form page:\n%s", clip(out, 2000))
	}
	c.waitURL(t, tab, form)
}

// testBackgroundTab: a session with two tabs acts on the one that is not
// in front (a model that opened a second tab and went back to the first):
// a screenshot and a click must work there too, promptly.
func testBackgroundTab(t *testing.T, w *world) {
	c := w.client("e2e-background")
	first := c.newTab(t, w.pages.url("form.html"))
	c.newTab(t, w.pages.url("index.html")) // now in front of first
	x, y := c.center(t, first, "#counter")
	for _, args := range []map[string]any{
		{"action": "screenshot", "tabId": first},
		{"action": "left_click", "coordinate": []int{x, y}, "tabId": first},
	} {
		start := time.Now()
		res, err := c.try(bg(8*time.Second), "computer", args)
		d := time.Since(start)
		switch {
		case err != nil:
			t.Errorf("computer %s on a tab that is not in front failed after %v: %v", args["action"], d.Round(time.Millisecond), err)
		case d > 3*time.Second:
			t.Errorf("computer %s on a tab that is not in front took %v", args["action"], d.Round(time.Millisecond))
		case args["action"] == "screenshot":
			if _, _, ok := imageOf(res); !ok {
				t.Errorf("screenshot of a tab that is not in front: %s", describe(res))
			}
		}
	}
	if got := c.js(t, first, `document.getElementById("counter").dataset.clicks || "0"`); got != "1" {
		t.Errorf("the click on the tab that was not in front counted %s clicks", got)
	}
}
