//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestNavigateErrors: loads that fail are tool errors that name the
// failure, the page tools on Chrome's error page say which tab, URL and
// error and what to do, a session without a tab is told to navigate (and
// nothing opens a blank tab for it), and a full-resolution screenshot has
// one id. Issue 14, in real Chromium.
func TestNavigateErrors(t *testing.T) {
	w := startWorld(t, worldOptions{})
	errPages := startErrorPages(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *world, *httptest.Server)
	}{
		{"no_tab_yet", testNoTabYet},
		{"net_errors", testNetErrors},
		{"http_errors", testHTTPErrors},
		{"screenshot_one_id", testScreenshotOneID},
		{"history_steps", testHistorySteps},
		{"redirects", testRedirects},
		{"late_subframe", testLateSubframe},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, w, errPages) })
	}
}

// startErrorPages serves pages that answer with HTTP errors: with a page
// of their own (the browser shows it) and without (Chrome shows its own).
func startErrorPages(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	page := func(status int, body string) http.HandlerFunc {
		return func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Cache-Control", "no-store")
			if body != "" {
				rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			}
			rw.WriteHeader(status)
			fmt.Fprint(rw, body)
		}
	}
	mux.HandleFunc("/missing", page(http.StatusNotFound, "<title>Gone fishing</title><h1>bb-e2e 404 page</h1>"))
	mux.HandleFunc("/broken", page(http.StatusInternalServerError, "<title>Oops</title><h1>bb-e2e 500 page</h1>"))
	mux.HandleFunc("/empty-404", page(http.StatusNotFound, ""))
	mux.HandleFunc("/fine", page(http.StatusOK, "<title>Fine</title><h1>bb-e2e fine page</h1>"))
	mux.Handle("/moved-to-missing", http.RedirectHandler("/missing", http.StatusFound))
	mux.Handle("/moved-to-fine", http.RedirectHandler("/fine", http.StatusMovedPermanently))
	// A page that sends the tab on as it loads: its own load event comes before the next page's.
	mux.HandleFunc("/script-moves-to-fine", page(http.StatusOK, `<title>Leaving</title><script>location.replace("/fine")</script>`))
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// tabsAndWindows counts the browser's tabs and windows, as tabs_context
// (every tab of every window) lists them.
func (c *client) tabsAndWindows(t testing.TB) (tabs, windows int) {
	t.Helper()
	res := c.call(t, "tabs_context", nil)
	list, windows := listedTabs(res)
	if len(list) == 0 && !strings.HasPrefix(testutil.Text(res), "No tabs are open") {
		t.Fatalf("tabs_context lists no tabs: %s", describe(res))
	}
	return len(list), windows
}

// toolError calls a tool that must fail as a tool (isError) and returns
// what it said.
func (c *client) toolError(t testing.TB, name string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	res, err := c.try(bg(callWait), name, args)
	switch {
	case res == nil:
		t.Fatalf("%s %s: %v", name, argsJSON(args), err)
	case !res.IsError:
		t.Fatalf("%s %s succeeded, want a tool error: %s", name, argsJSON(args), describe(res))
	}
	return testutil.Text(res), res
}

func testNoTabYet(t *testing.T, w *world, _ *httptest.Server) {
	observer := w.client("e2e-observer")
	tabs0, windows0 := observer.tabsAndWindows(t)

	// A one-shot client's first call, with no tab id.
	fresh := w.client("e2e-one-shot")
	for _, call := range []struct {
		name string
		args map[string]any
	}{
		{"read_page", nil},
		{"get_page_text", nil},
		{"computer", map[string]any{"action": "screenshot"}},
	} {
		text, _ := fresh.toolError(t, call.name, call.args)
		for _, want := range []string{"no tab yet", "navigate with a url", "tabs_create_mcp"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s in a session without a tab says %q; want it to mention %q", call.name, text, want)
			}
		}
		if strings.Contains(strings.ToLower(text), "cannot be read or scripted") || strings.Contains(text, "about:blank") {
			t.Errorf("%s in a session without a tab reads like a permissions problem: %q", call.name, text)
		}
	}
	if tabs, windows := observer.tabsAndWindows(t); tabs != tabs0 || windows != windows0 {
		t.Fatalf("calls of a session without a tab changed the browser from %d tabs in %d windows to %d in %d", tabs0, windows0, tabs, windows)
	}
	if mine, _ := listedTabs(fresh.call(t, "tabs_context_mcp", nil)); len(mine) != 0 {
		t.Fatalf("the session without a tab has tabs after its failed calls: %v", mine)
	}

	// What the error says to do works: navigate with a url opens one tab in
	// the session's group and loads the page.
	index := w.pages.url("index.html")
	res := fresh.call(t, "navigate", map[string]any{"url": index})
	tab, ok := tabIDOf(res)
	if !ok {
		t.Fatalf("navigate gave no tab id: %s", describe(res))
	}
	fresh.waitURL(t, tab, index)
	if tabs, _ := observer.tabsAndWindows(t); tabs != tabs0+1 {
		t.Errorf("navigate in a session without a tab: %d tabs, want %d", tabs, tabs0+1)
	}
	if mine, _ := listedTabs(fresh.call(t, "tabs_context_mcp", nil)); len(mine) != 1 {
		t.Errorf("after navigate the session's group holds %d tabs, want 1: %v", len(mine), mine)
	}
	if text := testutil.Text(fresh.call(t, "read_page", nil)); !strings.Contains(text, index) {
		t.Errorf("read_page after navigate does not read %s:\n%s", index, clip(text, 500))
	}
}

func testNetErrors(t *testing.T, w *world, _ *httptest.Server) {
	c := w.client("e2e-net-errors")
	index := w.pages.url("index.html")
	tab := c.newTab(t, index)
	tabWord := "tab " + strconv.Itoa(tab)
	for _, tc := range []struct {
		name, url, want string
	}{
		{"unresolvable_host", "http://no-such-host.invalid/", "net::ERR_NAME_NOT_RESOLVED"},
		{"closed_port", "http://" + testutil.ClosedAddr(t) + "/", "net::ERR_CONNECTION_REFUSED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, res := c.toolError(t, "navigate", map[string]any{"url": tc.url, "tabId": tab})
			t.Logf("navigate %s: %s", tc.url, text)
			for _, want := range []string{tc.want, tc.url, tabWord, "navigate"} {
				if !strings.Contains(text, want) {
					t.Errorf("navigate to %s says %q; want it to name %q", tc.url, text, want)
				}
			}
			if id, ok := tabIDOf(res); !ok || id != tab {
				t.Errorf("the failed navigate's result names tab %d (%v), want %d: %s", id, ok, tab, describe(res))
			}
			// The page tools on the error page: which tab, which URL, which error, what to do.
			for _, call := range []struct {
				name string
				args map[string]any
			}{
				{"get_page_text", map[string]any{"tabId": tab}},
				{"read_page", map[string]any{"tabId": tab}},
				{"find", map[string]any{"query": "button", "tabId": tab}},
				{"javascript_tool", map[string]any{"code": "document.title", "tabId": tab}},
				{"computer", map[string]any{"action": "left_click", "coordinate": []int{10, 10}, "tabId": tab}},
			} {
				text, _ := c.toolError(t, call.name, call.args)
				if call.name == "get_page_text" {
					t.Logf("get_page_text on the error page: %s", text)
				}
				for _, want := range []string{"Tab " + strconv.Itoa(tab) + " shows Chrome's error page", tc.url, tc.want, "navigate with a working URL"} {
					if !strings.Contains(text, want) {
						t.Errorf("%s on the error page of %s says %q; want it to name %q", call.name, tc.url, text, want)
					}
				}
				if strings.Contains(text, "Frame with ID") {
					t.Errorf("%s passes on Chrome's raw error: %q", call.name, text)
				}
			}
			// reload fails the same way.
			if text, _ := c.toolError(t, "navigate", map[string]any{"action": "reload", "tabId": tab}); !strings.Contains(text, tc.want) {
				t.Errorf("navigate reload of %s says %q; want %s", tc.url, text, tc.want)
			}
		})
	}
	// A successful navigate still succeeds, and the page tools work again.
	form := w.pages.url("form.html")
	res := c.navigate(t, tab, form)
	if text := testutil.Text(res); !strings.HasPrefix(text, "Navigated in "+tabWord+": "+form) {
		t.Errorf("navigate to the form after errors says %q", text)
	}
	if text := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab})); !strings.Contains(text, "Every input type") {
		t.Errorf("get_page_text after a successful navigate:\n%s", clip(text, 500))
	}
}

func testHTTPErrors(t *testing.T, w *world, errPages *httptest.Server) {
	c := w.client("e2e-http-errors")
	index := w.pages.url("index.html")
	tab := c.newTab(t, index)
	tabWord := "tab " + strconv.Itoa(tab)
	for _, tc := range []struct {
		name, path, status, body string
	}{
		{"404_with_a_page", "/missing", "HTTP 404 Not Found", "bb-e2e 404 page"},
		{"500_with_a_page", "/broken", "HTTP 500 Internal Server Error", "bb-e2e 500 page"},
		{"404_without_a_page", "/empty-404", "HTTP 404 Not Found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := errPages.URL + tc.path
			text, res := c.toolError(t, "navigate", map[string]any{"url": url, "tabId": tab})
			t.Logf("navigate %s: %s", url, text)
			if !strings.HasPrefix(text, tc.status+":") {
				t.Errorf("navigate to %s says %q; want it to start with %q", url, text, tc.status)
			}
			for _, want := range []string{url, tabWord} {
				if !strings.Contains(text, want) {
					t.Errorf("navigate to %s says %q; want it to name %q", url, text, want)
				}
			}
			if id, ok := tabIDOf(res); !ok || id != tab {
				t.Errorf("the navigate to an HTTP error names tab %d (%v), want %d: %s", id, ok, tab, describe(res))
			}
			if tc.body == "" {
				// No page from the server: Chrome shows its own, which the page tools name.
				text, _ := c.toolError(t, "get_page_text", map[string]any{"tabId": tab})
				if !strings.Contains(text, "error page") || !strings.Contains(text, url) {
					t.Errorf("get_page_text on Chrome's page for an empty 404 says %q", text)
				}
				return
			}
			// The server's page loaded: the page tools read it.
			if got := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab})); !strings.Contains(got, tc.body) {
				t.Errorf("get_page_text on the %s page lacks %q:\n%s", tc.status, tc.body, clip(got, 500))
			}
			// reload: the same status, the same error.
			if text, _ := c.toolError(t, "navigate", map[string]any{"action": "reload", "tabId": tab}); !strings.HasPrefix(text, tc.status+":") {
				t.Errorf("navigate reload of %s says %q; want %q", url, text, tc.status)
			}
		})
	}
	// back and forward report the page they land on the same way.
	c.navigate(t, tab, index)
	missing := errPages.URL + "/missing"
	c.toolError(t, "navigate", map[string]any{"url": missing, "tabId": tab})
	res := c.call(t, "navigate", map[string]any{"action": "back", "tabId": tab})
	c.waitURL(t, tab, index)
	if text := testutil.Text(res); !strings.HasPrefix(text, "Went back in "+tabWord+": "+index) {
		t.Errorf("navigate back to the index says %q", text)
	}
	if text, _ := c.toolError(t, "navigate", map[string]any{"action": "forward", "tabId": tab}); !strings.HasPrefix(text, "HTTP 404 Not Found:") || !strings.Contains(text, missing) {
		t.Errorf("navigate forward to the 404 page says %q", text)
	}
}

var screenshotIDs = regexp.MustCompile(`shot_[a-z0-9_]+`)

// testScreenshotOneID: the text of a full-resolution screenshot names one
// id, the one resources/read takes.
func testScreenshotOneID(t *testing.T, w *world, _ *httptest.Server) {
	c := w.client("e2e-screenshot-id")
	tab := c.newTab(t, w.pages.url("form.html"))
	res := c.call(t, "computer", map[string]any{"action": "screenshot", "full_resolution": true, "tabId": tab})
	text := testutil.Text(res)
	ids := map[string]bool{}
	for _, id := range screenshotIDs.FindAllString(text, -1) {
		ids[id] = true
	}
	if len(ids) != 1 {
		t.Fatalf("the full-resolution screenshot's text names %d ids, want one: %q", len(ids), text)
	}
	var id string
	for k := range ids {
		id = k
	}
	var link *mcp.ResourceLink
	for _, ct := range res.Content {
		if l, ok := ct.(*mcp.ResourceLink); ok {
			link = l
		}
	}
	if link == nil || link.URI != "browserbridge://screenshots/"+id {
		t.Fatalf("the text names %s; the resource link is %+v", id, link)
	}
	if got := imageIDOf(res); got != id {
		t.Errorf("the text's \"Screenshot id:\" is %q, the resource's %q", got, id)
	}
	if !strings.Contains(text, "the resource browserbridge://screenshots/"+id) {
		t.Errorf("the text does not name the full resolution's resource URI: %q", text)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	rr, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "browserbridge://screenshots/" + id})
	if err != nil || len(rr.Contents) != 1 || len(rr.Contents[0].Blob) == 0 {
		t.Fatalf("resources/read of the id the text names: %+v, %v", rr, err)
	}
	full, _, err := image.DecodeConfig(bytes.NewReader(rr.Contents[0].Blob))
	small, _, ok := imageOf(res)
	if !ok {
		t.Fatalf("the screenshot has no inline image: %s", describe(res))
	}
	inline, _, err2 := image.DecodeConfig(bytes.NewReader(small))
	if err != nil || err2 != nil || full.Width < inline.Width {
		t.Errorf("the resource is %dx%d (%v), the inline image %dx%d (%v): want the resource at full resolution", full.Width, full.Height, err, inline.Width, inline.Height, err2)
	}
	// upload_image takes the same id.
	c.call(t, "upload_image", map[string]any{"screenshot_id": id, "ref": c.refFor(t, tab, "#file"), "tabId": tab, "filename": "full.png"})
}

// testHistorySteps (issue 31, item 3): back and forward move exactly one
// entry of the history the agent made, in a tab nobody clicked in (where
// chrome.tabs.goBack finds no earlier page: it skips entries made without
// a user gesture), through a 404 page too, and say so truthfully at
// either end.
func testHistorySteps(t *testing.T, w *world, errPages *httptest.Server) {
	c := w.client("e2e-history")
	pages := []string{w.pages.url("index.html?p=1"), w.pages.url("index.html?p=2"), w.pages.url("index.html?p=3"), errPages.URL + "/missing"}
	var tab int
	for i, u := range pages {
		res, err := c.try(bg(callWait), "navigate", map[string]any{"url": u})
		if i == len(pages)-1 {
			if res == nil || !res.IsError {
				t.Fatalf("navigate to the 404 page: %v, %s", err, describe(res))
			}
		} else if err != nil {
			t.Fatal(err)
		}
		tab, _ = tabIDOf(res)
	}
	// step goes back or forward and returns where it arrived: the URL and
	// the history entry the result names.
	step := func(action string) (url string, entry, length int) {
		t.Helper()
		res, err := c.cs.CallTool(bg(callWait), &mcp.CallToolParams{Name: "navigate", Arguments: map[string]any{"action": action, "tabId": tab}})
		if err != nil {
			t.Fatalf("navigate %s: %v", action, err)
		}
		nav, _ := navigated(res)
		if res.IsError && nav.entry == 0 {
			return "", 0, 0 // the end of the history (or a failed load: the caller checks)
		}
		return nav.url, nav.entry, nav.length
	}
	// Back from the 404 page, one page at a time, to the first.
	last := -1
	for i := len(pages) - 2; i >= 0; i-- {
		url, entry, n := step("back")
		if url != pages[i] {
			t.Fatalf("back to %s: arrived at %q (entry %d of %d)", pages[i], url, entry, n)
		}
		if last >= 0 && entry != last-1 {
			t.Fatalf("back from entry %d went to entry %d, not one entry", last, entry)
		}
		last = entry
	}
	if last == 1 {
		text, _ := c.toolError(t, "navigate", map[string]any{"action": "back", "tabId": tab})
		if !strings.Contains(text, "no earlier page") || !strings.Contains(text, "entry 1 of") {
			t.Fatalf("back from the first entry says %q", text)
		}
	}
	// Forward again, one page at a time, to the 404 page, which is an
	// error that names its status, and then the end.
	for i := 1; i < len(pages); i++ {
		res, _ := c.cs.CallTool(bg(callWait), &mcp.CallToolParams{Name: "navigate", Arguments: map[string]any{"action": "forward", "tabId": tab}})
		if nav, _ := navigated(res); nav.url != pages[i] {
			t.Fatalf("forward to %s: %s", pages[i], describe(res))
		}
		if i == len(pages)-1 && (!res.IsError || !strings.Contains(testutil.Text(res), "404")) {
			t.Fatalf("forward to the 404 page: %s", describe(res))
		}
	}
	text, _ := c.toolError(t, "navigate", map[string]any{"action": "forward", "tabId": tab})
	if !strings.Contains(text, "no later page") {
		t.Fatalf("forward from the last entry says %q", text)
	}
}

// testRedirects: navigate names the status and URL of where a redirect
// lands, not of its first hop (the capture keeps each hop; the main
// document is the last), in a tab whose last page was an error and the
// other way round; and of where a page that sends the tab on as it loads
// sends it, not of that page, whose load event came first.
func testRedirects(t *testing.T, w *world, errPages *httptest.Server) {
	c := w.client("e2e-redirects")
	tab := c.newTab(t, w.pages.url("index.html"))
	missing, fine := errPages.URL+"/missing", errPages.URL+"/fine"
	for i, tc := range []struct {
		name, path, want string
		isError          bool
	}{
		{"to_an_http_error", "/moved-to-missing", "HTTP 404 Not Found: the server answered " + missing, true},
		{"to_a_page_after_an_error", "/moved-to-fine", fmt.Sprintf("Navigated in tab %d: %s — \"Fine\".", tab, fine), false},
		{"to_an_http_error_again", "/moved-to-missing", "HTTP 404 Not Found: the server answered " + missing, true},
		{"by_the_page_as_it_loads", "/script-moves-to-fine", fmt.Sprintf("Navigated in tab %d: %s — \"Fine\".", tab, fine), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A query of its own per case: no cached redirect stands in for the server's.
			url := fmt.Sprintf("%s%s?case=%d", errPages.URL, tc.path, i)
			res, err := c.cs.CallTool(bg(callWait), &mcp.CallToolParams{Name: "navigate", Arguments: map[string]any{"url": url, "tabId": tab}})
			if err != nil {
				t.Fatalf("navigate %s: %v", url, err)
			}
			text := testutil.Text(res)
			t.Logf("navigate %s: %s", url, text)
			if res.IsError != tc.isError || !strings.HasPrefix(text, tc.want) {
				t.Errorf("navigate %s says %q (error %v); want it to start with %q (error %v)", url, text, res.IsError, tc.want, tc.isError)
			}
		})
	}
}

// testLateSubframe: a page that, just after its load event, adds a frame
// whose document never arrives keeps its tab loading for good; navigate
// answers for the page's own load, with its URL and title and no timeout
// note, and the next call finds the page. (A frame added by the load event's
// own handler holds the page's load back, in Chrome's eyes too: navigate
// then waits for it up to its timeout.)
func testLateSubframe(t *testing.T, w *world, _ *httptest.Server) {
	hang := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(rw, `<title>Late frame</title><h1>bb-e2e late frame</h1>
<script>addEventListener("load", () => setTimeout(() => { const f = document.createElement("iframe"); f.src = "/never"; document.body.append(f); }, 0));</script>`)
	})
	mux.HandleFunc("/never", func(rw http.ResponseWriter, r *http.Request) {
		select { // the frame's document never comes: until the test ends
		case <-hang:
		case <-r.Context().Done():
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(hang) }) // runs first: the held request returns, so Close does not wait for it
	c := w.client("e2e-late-subframe")
	tab := c.newTab(t, w.pages.url("index.html"))
	url := s.URL + "/page"
	res, err := c.cs.CallTool(bg(callWait), &mcp.CallToolParams{Name: "navigate", Arguments: map[string]any{"url": url, "tabId": tab, "timeoutMs": 60000}})
	if err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
	want := fmt.Sprintf("Navigated in tab %d: %s — \"Late frame\".", tab, url)
	if got := testutil.Text(res); res.IsError || got != want {
		t.Errorf("navigate to a page with a frame that never loads says %q (error %v), want %q", got, res.IsError, want)
	}
	if got := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab})); !strings.Contains(got, "bb-e2e late frame") {
		t.Errorf("get_page_text after it lacks the page's heading:\n%s", clip(got, 500))
	}
}
