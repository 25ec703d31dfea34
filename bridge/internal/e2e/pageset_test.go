//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// markControls gives every rendered control of the page a data-probe
// attribute and returns them as JSON: {probe, tag, word}, word being the
// first word of the name a person reads for it (aria-label, its label, its
// text or value), for the read_page line to hold.
const markControls = `(() => {
  const selector = 'a[href], button, input:not([type=hidden]), select, textarea, [role=button], [role=link], [role=checkbox], [role=switch], [tabindex]:not([tabindex="-1"])';
  const out = [];
  document.querySelectorAll(selector).forEach((el, i) => {
    if (!el.getClientRects().length) return;
    el.setAttribute('data-probe', String(i));
    const label = el.labels && el.labels.length ? el.labels[0].textContent : '';
    const name = (el.getAttribute('aria-label') || label || el.textContent || el.value || el.placeholder || '').trim();
    out.push({ probe: i, tag: el.tagName.toLowerCase(), word: name.split(/\s+/)[0] });
  });
  return JSON.stringify(out);
})()`

// probedControl is one control markControls found.
type probedControl struct {
	Probe int    `json:"probe"`
	Tag   string `json:"tag"`
	Word  string `json:"word"`
}

// testPageSetControls: on every page of issue 32's page set, read_page (as
// an agent calls it, no arguments) lists every control a person can act on
// with its ref, the same ref find gives for that element, on a line that
// names it. The modal page is read with its dialog open.
func testPageSetControls(t *testing.T, w *world) {
	c := w.client("e2e-page-set-controls")
	tab := c.newTab(t, w.pages.url("index.html"))
	for _, pt := range pageSet {
		t.Run(pt.name, func(t *testing.T) {
			c.navigate(t, tab, w.pages.url(pt.page))
			if pt.name == "modal_dialog" {
				c.call(t, "computer", map[string]any{"action": "left_click", "ref": c.refFor(t, tab, "#archive"), "tabId": tab})
				testutil.WaitWithin(t, 10*time.Second, "", func() (bool, string) {
					return c.js(t, tab, `String(!!document.querySelector("[role=dialog] #dlg-confirm"))`) == "true", "the dialog did not open"
				})
			}
			var controls []probedControl
			if err := json.Unmarshal([]byte(c.js(t, tab, markControls)), &controls); err != nil || len(controls) == 0 {
				t.Fatalf("marking the page's controls gave %d (%v)", len(controls), err)
			}
			tree := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab}))
			// ref -> its read_page line, and its own part of that line: from the
			// ref before it on the line (side-by-side links share a line) to it.
			lines, owns := map[string]string{}, map[string]string{}
			for _, l := range strings.Split(tree, "\n") {
				from := 0
				for _, at := range refText.FindAllStringIndex(l, -1) {
					if at[0] > 0 && l[at[0]-1] == '[' && at[1] < len(l) && l[at[1]] == ']' {
						m := l[at[0]:at[1]]
						lines[m], owns[m] = strings.TrimSpace(l), l[from:at[1]+1]
						from = at[1] + 1
					}
				}
			}
			seen := map[string]int{}
			for _, ctl := range controls {
				ref := c.refFor(t, tab, fmt.Sprintf(`[data-probe="%d"]`, ctl.Probe))
				line, ok := lines[ref]
				switch {
				case !ok:
					t.Errorf("<%s> %q (%s): read_page has no line with it", ctl.Tag, ctl.Word, ref)
				case !strings.HasPrefix(line, "- "):
					t.Errorf("<%s> %q (%s): its line is not an element's: %s", ctl.Tag, ctl.Word, ref, line)
				case ctl.Word != "" && !strings.Contains(strings.ToLower(owns[ref]), strings.ToLower(ctl.Word)):
					t.Errorf("<%s> %q (%s): its line does not name it: %s", ctl.Tag, ctl.Word, ref, line)
				}
				if p, dup := seen[ref]; dup {
					t.Errorf("controls %d and %d share the ref %s", p, ctl.Probe, ref)
				}
				seen[ref] = ctl.Probe
			}
			if t.Failed() {
				t.Logf("read_page of %s (%d bytes):\n%s", pt.page, len(tree), clip(tree, 20000))
			}
			t.Logf("%s: %d controls, each with its ref in read_page's %d bytes", pt.page, len(controls), len(tree))
		})
	}
}

// testPageTextMainPart: get_page_text gives a page's main part (its one
// article, or <main>) and says in a line what it left out around it and how
// to read that; a page without a main part, and one with a dialog open
// outside it, are read whole.
func testPageTextMainPart(t *testing.T, w *world) {
	c := w.client("e2e-page-text-main")
	tab := c.newTab(t, w.pages.url("index.html"))
	for _, tc := range []struct {
		name string
		page string
		// open runs on the loaded page before the read.
		open      func(t *testing.T)
		args      map[string]any
		want, not []string
	}{
		{name: "article_without_its_frame", page: "pageset/article.html",
			want: []string{"Text of article: ", "lifts a boat 11.4 metres in eight", "Left out: header, navigation, sidebar, footer (", "whole_page: true for all"},
			not:  []string{"Most read", "All rights reserved", "Subscribe to the journal"}},
		{name: "whole_page_reads_the_frame", page: "pageset/article.html", args: map[string]any{"whole_page": true},
			want: []string{"Text of body: ", "lifts a boat 11.4 metres in eight", "Most read", "All rights reserved"},
			not:  []string{"Left out"}},
		{name: "main_without_header_and_footer", page: "pageset/search.html",
			want: []string{"Text of main: ", "Lock maintenance: winter stoppages on the Harrow Canal", "Left out: header, footer ("},
			not:  []string{"Send feedback", "Sign in"}},
		{name: "a_dialog_outside_main_keeps_the_page_whole", page: "pageset/modal.html",
			open: func(t *testing.T) {
				c.call(t, "computer", map[string]any{"action": "left_click", "ref": c.refFor(t, tab, "#archive"), "tabId": tab})
				testutil.WaitWithin(t, 10*time.Second, "", func() (bool, string) {
					return c.js(t, tab, `String(!!document.querySelector("[role=dialog] #dlg-confirm"))`) == "true", "the dialog did not open"
				})
			},
			want: []string{"Text of body: ", "Its 12 open tasks are closed", "Owner: Marta Quell"},
			not:  []string{"Left out"}},
		{name: "no_main_part_reads_the_body", page: "pageset/table.html",
			want: []string{"Text of body: ", "HC-0001"},
			not:  []string{"Left out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.navigate(t, tab, w.pages.url(tc.page))
			if tc.open != nil {
				tc.open(t)
			}
			args := map[string]any{"tabId": tab, "page_size": 200000}
			for k, v := range tc.args {
				args[k] = v
			}
			text := testutil.Text(c.call(t, "get_page_text", args))
			for _, want := range tc.want {
				if !strings.Contains(text, want) {
					t.Errorf("get_page_text lacks %q:\n%s", want, clip(text, 3000))
				}
			}
			for _, not := range tc.not {
				if strings.Contains(text, not) {
					t.Errorf("get_page_text holds %q:\n%s", not, clip(text, 3000))
				}
			}
		})
	}
}

// testReadPageSaidOnce: read_page says a thing once. A heading around a
// single link is the link's line, marked with the heading's level; a text
// that only restates the address of the link before it (a search result's
// "example.org › docs › page") is left out, and the link's address is shown
// up to the part that text names (the rest, a redirect's tracking query,
// as "…"); a text after a link that is no address stays, and so does the
// whole address of a link no text names. An address within the page
// ("#compose") is not shown, a hash route ("#/inbox/42") is. A control
// whose name repeats the whole name of the control before it shows the
// repeated part as "…" when only text comes between them (find still
// matches the whole name); equal, short or merely overlapping names, and
// names with a heading between them, are said whole. A paragraph of text
// alone has no ref (nothing in it to act on) and its line is its text.
func testReadPageSaidOnce(t *testing.T, w *world) {
	c := w.client("e2e-read-page-once")
	tab := c.newTab(t, w.pages.url("index.html"))
	line := func(s string) *regexp.Regexp { return regexp.MustCompile(`\n *- ` + s + ` \[ref_\d+\](\n|$)`) }
	for _, tc := range []struct {
		name      string
		page      string
		want, not []*regexp.Regexp
	}{
		{name: "search_result_title_and_address", page: "pageset/search.html",
			want: []*regexp.Regexp{
				line(`link "Lock maintenance: winter stoppages on the Harrow Canal" \[href=/visit/harrow-canal\.example/notices/winter-stoppages-2026…\] \[h3\]`),
				line(`heading "Search results" \[level=2\]`),
				line(`button "About this result: …"`),
				// The sponsored result's cite is not in its address ("#ad-1"): it is said.
				regexp.MustCompile(`- link "Lock gate repairs - Harrow Marine Engineering" \[h3\] \[ref_\d+\]\n  - "https://harrow-marine\.example"\n`),
				// Side-by-side links with nothing else shown share a line, each with its name and ref.
				regexp.MustCompile(`\n    - link "All" \[ref_\d+\], "Images" \[ref_\d+\], "News" \[ref_\d+\], `),
				regexp.MustCompile(`\n    - "1"\n    - link "2" \[ref_\d+\], "3" \[ref_\d+\], `),
				// A paragraph of text alone has nothing to act on: its line is its text, no role word or ref.
				regexp.MustCompile(`\n  - "The programme of winter stoppages: [^\n]*"\n`),
				// The head: the tab, the viewport and where it is scrolled, no count of elements.
				regexp.MustCompile(`\nTab \d+; viewport \d+x\d+, scrolled to \(0, 0\) of \d+x\d+\.\n\n- banner`),
			},
			not: []*regexp.Regexp{
				regexp.MustCompile(`- heading \[level=3\]`),
				regexp.MustCompile(`"https://harrow-canal\.example › notices`),
				regexp.MustCompile(`- paragraph|- text "`),
				regexp.MustCompile(`sig=7f3a9c03e41b`),
				regexp.MustCompile(`About this result: Lock maintenance`),
				regexp.MustCompile(`\[href=#`),
				regexp.MustCompile(`\nOrigin: `),
			}},
		{name: "addresses_and_repeated_names", page: "addresses.html",
			want: []*regexp.Regexp{
				// A cite of the host alone: the whole path, not the tracking query.
				line(`link "Installing the guide" \[href=https://www\.example\.org/docs/guide/install…\] \[h3\]`),
				line(`button "More about …"`),
				// A redirect holding the destination in a parameter: up to the end of that parameter.
				line(`link "Volunteer lock keepers" \[href=//redirect\.example/l/\?uddg=https://canal-trust\.example/volunteer/keepers…\] \[h3\]`),
				// No text names where these go: their query is the point, and stays.
				line(`link "Lock gate oak, seasoned" \[href=/item\?id=4711&from=results\] \[h3\]`),
				line(`link "harrow canal closures" \[href=/search\?q=harrow\+canal\+closures&source=related\]`),
				line(`link "Inbox" \[href=#/inbox/42\]`),
				line(`link "Compose" \[ref_\d+\], "Menu"`),
				line(`link "Install guide" \[href=/docs/guide\.html#install\]`),
				regexp.MustCompile(`\n *- button "Reply" \[ref_\d+\]\n *- button "Reply" \[ref_\d+\]\n`),
				line(`button "Share Narrowboat Ellen for hire now"`),
				line(`button "Print Canal map"`),
				// A heading between them: the button's name is said whole.
				line(`button "Save Winter moorings on the Harrow Canal"`),
				// A paragraph holding a link keeps its ref.
				regexp.MustCompile(`\n  - paragraph \[ref_\d+\]\n    - "Related:"\n`),
			},
			not: []*regexp.Regexp{
				regexp.MustCompile(`utm_source|rut=4f2a9c`),
				regexp.MustCompile(`- "example\.org"|canal-trust\.example › volunteer`),
			}},
		{name: "text_after_a_link_that_is_no_address", page: "pageset/modal.html",
			want: []*regexp.Regexp{regexp.MustCompile(`- link "Projects" [^\n]*\n  - "› Harbour redesign"\n`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.navigate(t, tab, w.pages.url(tc.page))
			tree := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab}))
			for _, re := range tc.want {
				if !re.MatchString(tree) {
					t.Errorf("read_page lacks %s:\n%s", re, clip(tree, 6000))
				}
			}
			for _, re := range tc.not {
				if re.MatchString(tree) {
					t.Errorf("read_page holds %s:\n%s", re, clip(tree, 6000))
				}
			}
		})
	}
	// The name said as "…" is still the control's name: find matches it whole, with the ref of its line.
	t.Run("find_matches_the_whole_repeated_name", func(t *testing.T) {
		c.navigate(t, tab, w.pages.url("pageset/search.html"))
		tree := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab}))
		about := regexp.MustCompile(`Harrow Canal" \[href=[^\n]*\n[^\n]*\n *- button "About this result: …" \[(ref_\d+)\]`).FindStringSubmatch(tree)
		if about == nil {
			t.Fatalf("read_page has no \"About this result: …\" line after the third result:\n%s", clip(tree, 6000))
		}
		found := testutil.Text(c.call(t, "find", map[string]any{"tabId": tab, "query": "About this result: Lock maintenance: winter stoppages on the Harrow Canal"}))
		if !strings.Contains(found, "["+about[1]+"]") || !strings.Contains(found, "About this result: Lock maintenance: winter stoppages on the Harrow Canal") {
			t.Errorf("find by the whole name does not give %s, the ref of its read_page line:\n%s", about[1], found)
		}
	})
}

// TestOursLines: the harness finds each link of our line of side-by-side
// links by its own name and ref, not the line's first name with its last ref.
func TestOursLines(t *testing.T) {
	d := oursDriver()
	text := "- navigation \"Pages\" [ref_65]\n  - \"1\"\n  - link \"2\" [ref_66], \"3\" [ref_67], \"Say \\\"next\\\"\" [ref_68]\n" +
		"  - \"a], \\\"4\\\" [ref_9]\"\n  - link \"Long\" [href=/x] [h3] [ref_70]\n"
	for _, tc := range []struct{ name, role, text, want string }{
		{name: "first_of_the_run", role: "link", text: "2", want: "ref_66"},
		{name: "inside_the_run", role: "link", text: "3", want: "ref_67"},
		{name: "escaped_quote", role: "link", text: `Say "next"`, want: "ref_68"},
		{name: "props_before_the_ref", role: "link", text: "Long", want: "ref_70"},
		{name: "page_text_that_looks_like_a_link", role: "link", text: "4", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.ref(text, tc.role, tc.text); got != tc.want {
				t.Errorf("ref(link %q) = %q, want %q in:\n%s", tc.text, got, tc.want, oursLines(text))
			}
		})
	}
}
