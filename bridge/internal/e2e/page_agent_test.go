//go:build linux

package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestPageAgent: form_input sets several fields in one call (by ref and by
// selector, each reported, one failure not stopping the others, an error
// only when all fail), and read_page keeps long paragraphs whole, cutting
// only past max_chars and saying how to read the rest. Issue 19, in real
// Chromium, through the page agent's injected files (issue 15). On issue
// 32's page set, read_page keeps every control with its ref.
func TestPageAgent(t *testing.T) {
	w := startWorld(t, worldOptions{})
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *world)
	}{
		{"form_input_fields", testFormInputFields},
		{"form_input_one_bad_field", testFormInputOneBad},
		{"form_input_all_bad", testFormInputAllBad},
		{"read_page_whole_paragraphs", testReadPageWhole},
		{"read_page_max_chars", testReadPageMaxChars},
		{"page_shapes", testPageShapes},
		{"page_set_controls", testPageSetControls},
		{"page_text_main_part", testPageTextMainPart},
		{"read_page_said_once", testReadPageSaidOnce},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, w) })
	}
}

// fieldSetLine and fieldFailedLine are form_input's line for a field it
// set (`- textbox "Email" [ref_7]: "a@b.c"`) and for one it did not
// (`- #x: not set: why`).
var (
	fieldSetLine    = regexp.MustCompile(`^- \S+ ".*" \[(ref_\d+)\]: `)
	fieldFailedLine = regexp.MustCompile(`^- (.*): not set: (.+)$`)
)

// fieldResults are form_input's per-field results read from its text, one
// line per field in the order the call named them (fields: each field's ref
// or selector, in that order): ok, and the ref of a field set or the error
// of one that was not.
func fieldResults(t *testing.T, res *mcp.CallToolResult, fields ...string) map[string]map[string]any {
	t.Helper()
	if res.StructuredContent != nil {
		t.Errorf("form_input has structured content; Claude Code would hand a model that in place of its text: %s", describe(res))
	}
	var lines []string
	for _, l := range strings.Split(testutil.Text(res), "\n") {
		if strings.HasPrefix(l, "- ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(fields) {
		t.Fatalf("form_input's text has %d field lines for %d fields:\n%s", len(lines), len(fields), testutil.Text(res))
	}
	out := map[string]map[string]any{}
	for i, l := range lines {
		if m := fieldSetLine.FindStringSubmatch(l); m != nil {
			out[fields[i]] = map[string]any{"ok": true, "ref": m[1]}
		} else if m := fieldFailedLine.FindStringSubmatch(l); m != nil && m[1] == fields[i] {
			out[fields[i]] = map[string]any{"ok": false, "error": m[2]}
		} else {
			t.Errorf("form_input's line for field %s reads neither set nor not set: %q", fields[i], l)
		}
	}
	return out
}

func testFormInputFields(t *testing.T, w *world) {
	c := w.client("e2e-form-fields")
	tab := c.newTab(t, w.pages.url("form.html"))
	nameRef, agreeRef := c.refFor(t, tab, "#name"), c.refFor(t, tab, "#agree")
	res := c.call(t, "form_input", map[string]any{"tabId": tab, "fields": []map[string]any{
		{"ref": nameRef, "value": "Ada Lovelace"},
		{"selector": "#email", "value": "ada@example.org"},
		{"selector": "#color", "value": "Blue"},
		{"ref": agreeRef, "value": true},
		{"selector": "input[name=size][value=l]", "value": true},
	}})
	got := c.readForm(t, tab)
	want := formState{Name: "Ada Lovelace", Email: "ada@example.org", Color: "blue", Agree: true, Size: "l"}
	if got != want {
		t.Fatalf("after one form_input call with 5 fields the form holds\n %+v\nwant\n %+v\n(form_input said %s)", got, want, describe(res))
	}
	fields := []string{nameRef, "#email", "#color", agreeRef, "input[name=size][value=l]"}
	results := fieldResults(t, res, fields...)
	for _, f := range fields {
		r := results[f]
		if r == nil || r["ok"] != true {
			t.Errorf("form_input reports no success for field %s: %v", f, r)
		}
	}
	// A field named by selector reports its ref, for later calls.
	if r := results["#email"]; r != nil && !refText.MatchString(fmt.Sprint(r["ref"])) {
		t.Errorf("the field named by selector #email reports no ref: %v", r)
	}
	text := testutil.Text(res)
	if !strings.Contains(text, "Set 5 fields") || !strings.Contains(text, `"ada@example.org"`) {
		t.Errorf("form_input's text does not report the 5 fields:\n%s", text)
	}

	// The one-field forms still work: by ref, and now by selector.
	c.call(t, "form_input", map[string]any{"tabId": tab, "ref": nameRef, "value": "Grace Hopper"})
	c.call(t, "form_input", map[string]any{"tabId": tab, "selector": "#quantity", "value": 12})
	if got := c.readForm(t, tab); got.Name != "Grace Hopper" || got.Quantity != "12" {
		t.Errorf("after the one-field calls the form holds name %q, quantity %q", got.Name, got.Quantity)
	}
}

func testFormInputOneBad(t *testing.T, w *world) {
	c := w.client("e2e-form-one-bad")
	tab := c.newTab(t, w.pages.url("form.html"))
	notesRef := c.refFor(t, tab, "#notes")
	res := c.call(t, "form_input", map[string]any{"tabId": tab, "fields": []map[string]any{
		{"selector": "#quantity", "value": 7},
		{"selector": "#no-such-field", "value": "lost"},
		{"ref": notesRef, "value": "still set"},
	}})
	if got := c.readForm(t, tab); got.Quantity != "7" || got.Notes != "still set" {
		t.Errorf("with one bad selector among three fields, the good ones hold quantity %q, notes %q; want 7 and \"still set\"", got.Quantity, got.Notes)
	}
	text := testutil.Text(res)
	for _, want := range []string{"2 of 3", "1 failed", "#no-such-field", "no element matches"} {
		if !strings.Contains(text, want) {
			t.Errorf("form_input with one bad field: the text lacks %q:\n%s", want, text)
		}
	}
	if r := fieldResults(t, res, "#quantity", "#no-such-field", notesRef)["#no-such-field"]; r == nil || r["ok"] != false || r["error"] == "" {
		t.Errorf("the bad field's result is %v; want ok false with an error", r)
	}
}

func testFormInputAllBad(t *testing.T, w *world) {
	c := w.client("e2e-form-all-bad")
	tab := c.newTab(t, w.pages.url("form.html"))
	text, res := c.toolError(t, "form_input", map[string]any{"tabId": tab, "fields": []map[string]any{
		{"selector": "#nothing-here", "value": "x"},
		{"selector": "p[", "value": "y"},
		{"ref": "ref_999999", "value": "z"},
	}})
	for _, want := range []string{"None of the 3 fields", "#nothing-here", `"p[" is not a valid CSS selector`, "ref_999999", "not found"} {
		if !strings.Contains(text, want) {
			t.Errorf("form_input with every field bad: the error lacks %q:\n%s", want, text)
		}
	}
	if n := len(fieldResults(t, res, "#nothing-here", "p[", "ref_999999")); n != 3 {
		t.Errorf("form_input with every field bad reports %d results, want 3", n)
	}
	// One field, failing: a tool error in that field's own words, as before.
	text, _ = c.toolError(t, "form_input", map[string]any{"tabId": tab, "selector": "#nothing-here", "value": "x"})
	if !strings.Contains(text, "no element matches the selector #nothing-here") {
		t.Errorf("form_input with one missing selector says %q", text)
	}
}

// normSpace collapses white space as read_page does.
func normSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

func testReadPageWhole(t *testing.T, w *world) {
	c := w.client("e2e-read-whole")
	tab := c.newTab(t, w.pages.url("prose.html"))
	long := normSpace(c.js(t, tab, `document.getElementById("long").textContent`))
	styled := normSpace(c.js(t, tab, `document.getElementById("styled").innerText`))
	if len(long) != 1500 {
		t.Fatalf("the test page's paragraph has %d characters, want 1,500", len(long))
	}
	res := c.call(t, "read_page", map[string]any{"tabId": tab})
	tree := testutil.Text(res)
	for name, p := range map[string]string{"#long (plain text)": long, "#styled (inline markup)": styled} {
		if !strings.Contains(tree, p) {
			t.Errorf("read_page does not give the paragraph %s whole (%d characters):\n%s", name, len(p), clip(tree, 5000))
		}
	}
	if !strings.Contains(tree, "The last paragraph of the prose page.") || strings.Contains(tree, "truncated") {
		t.Errorf("read_page of a short page should be whole and say nothing of truncation:\n%s", clip(tree, 5000))
	}
	// The text says all: no structured copy of it for a client to hand a model twice.
	if res.StructuredContent != nil {
		t.Errorf("read_page answers with structured content besides its text: %s", describe(res))
	}
}

func testReadPageMaxChars(t *testing.T, w *world) {
	c := w.client("e2e-read-max")
	tab := c.newTab(t, w.pages.url("prose.html"))
	const budget = 1000
	res := c.call(t, "read_page", map[string]any{"tabId": tab, "max_chars": budget})
	tree := testutil.Text(res)
	if n := len([]rune(tree)); n > budget {
		t.Errorf("read_page with max_chars %d answered %d characters", budget, n)
	}
	for _, want := range []string{"truncated at max_chars 1000", "Opening of the long paragraph", "larger max_chars", "get_page_text", `ref "ref_`} {
		if !strings.Contains(tree, want) {
			t.Errorf("read_page cut at max_chars %d: the answer lacks %q:\n%s", budget, want, tree)
		}
	}
	if strings.Contains(tree, "The last paragraph of the prose page.") {
		t.Errorf("read_page with max_chars %d still holds the end of the page:\n%s", budget, tree)
	}
	// The cut fell inside the long paragraph: the note names it, and reading
	// that subtree gives the paragraph whole.
	longRef := c.refFor(t, tab, "#long")
	if note := tree[strings.Index(tree, "truncated at"):]; !strings.Contains(note, `ref "`+longRef+`"`) {
		t.Errorf("the note does not name the paragraph it cut (%s): %s", longRef, note)
	}
	whole := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab, "ref": longRef}))
	if !strings.Contains(whole, "closing words of the long paragraph.") || strings.Contains(whole, "truncated") {
		t.Errorf("read_page ref %s (the paragraph the note names) does not give it whole:\n%s", longRef, clip(whole, 5000))
	}
}

// testPageShapes holds issue 32's shape fixes on a page built to show them:
// table and grid cells keep their boundaries in get_page_text, a sortable
// column header is something read_page's interactive filter keeps, and
// zero-width spaces do not reach a name.
func testPageShapes(t *testing.T, w *world) {
	c := w.client("e2e-page-shapes")
	tab := c.newTab(t, w.pages.url("shapes.html"))
	text := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab}))
	for _, want := range []string{
		"ID | Name | Department | City\n1001 | Guido Sammet | Legal | Madrid\n1002 | Ada Lovelace | Research | London\n",
		"Order | Item\nA-1 | Alpha\nA-2 | Beta\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("get_page_text lacks the rows %q, a line each:\n%s", want, clip(text, 3000))
		}
	}
	inter := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab, "filter": "interactive"}))
	for _, want := range []string{`columnheader "ID"`, `columnheader "Name"`} {
		if !strings.Contains(inter, want) {
			t.Errorf("read_page interactive lacks the sortable header %s:\n%s", want, clip(inter, 3000))
		}
	}
	if strings.Contains(inter, `columnheader "City"`) || strings.Contains(inter, "- code") {
		t.Errorf("read_page interactive lists a header that does not sort, or a code block:\n%s", clip(inter, 3000))
	}
	tree := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab}))
	// Rows of text are a line each with their cells apart; grid cells too.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\n +- row \[ref_\d+\]: "1001 \| Guido Sammet \| Legal \| Madrid"\n`),
		regexp.MustCompile(`\n +- row \[ref_\d+\]: "A-2 \| Beta"\n`),
		// A virtualized grid (aria-rowcount above its rendered rows) says so, and how to reach the rest.
		regexp.MustCompile(`\n +- note: 3 of its 500 rows are in the page; scroll it \(computer scroll at ref_\d+\)`),
		// A highlighted code block with tabindex=0 stays one block, its whitespace kept.
		regexp.MustCompile(`\n +- code \[ref_\d+\]: ` + regexp.QuoteMeta(`"func main() {\n    fmt.Println(\"hi\")\n}"`) + `\n`),
		regexp.MustCompile(`\n +- columnheader "Name" \[sort=none\] \[ref_\d+\]\n|\n +- columnheader "Name"[^\n]*\[ref_\d+\]\n`),
	} {
		if !want.MatchString(tree) {
			t.Errorf("read_page lacks a line matching %s:\n%s", want, clip(tree, 3000))
		}
	}
	if n := strings.Count(tree, "- note:"); n != 1 {
		t.Errorf("read_page gave %d notes of missing rows; only the grid with aria-rowcount misses any:\n%s", n, clip(tree, 3000))
	}
	if !strings.Contains(tree, `button "Savechanges"`) || strings.Contains(tree, "\u200b") {
		t.Errorf("read_page should name the button without its zero-width space:\n%s", clip(tree, 3000))
	}
	t.Logf("read_page of shapes.html: %d bytes", len(tree))

	// A field's label is said once, in the field's name, with what CSS draws
	// for it (a "*required" marker); the label gets no line of its own.
	for _, want := range []string{`textbox "Email *required"`, `checkbox "Send me news"`, `textbox "Home town" value="Madrid"`} {
		if !strings.Contains(tree, want) {
			t.Errorf("read_page lacks %s:\n%s", want, tree)
		}
	}
	for _, label := range []string{"Email", "Send me news", "Home town"} {
		if n := strings.Count(tree, label); n != 1 {
			t.Errorf("read_page says the label %q %d times, want once (in the field's name):\n%s", label, n, tree)
		}
	}
	// Text is said once, and wrappers that add nothing take no line: a heading around a link
	// is the link, marked with its level, a list item around one link is the link, a label's
	// select is named without its options, a paragraph of text is one line, an empty one none.
	if !strings.Contains(tree, `- link "Read the guide" [href=/guide] [h2] [ref_`) || strings.Contains(tree, "- heading [level=2]") {
		t.Errorf("read_page should read a heading around a link as the link, marked [h2]:\n%s", tree)
	}
	for _, nest := range []struct{ parent, child string }{
		{`- list [ref_`, `- link "First link" [href=/one] [ref_`},
		{`- list [ref_`, `- link "Second link" [href=/two] [ref_`},
	} {
		p, c := indentOf(tree, nest.parent), indentOf(tree, nest.child)
		if p < 0 || c != p+2 {
			t.Errorf("read_page should put %s right under %s (indents %d and %d):\n%s", nest.child, nest.parent, c, p, tree)
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\n +- combobox "Size" value="Small" \[ref_\d+\]\n`),
		// A paragraph of text alone is its text: no role word, no ref.
		regexp.MustCompile(`\n +- "A table of text, a grid of divs`),
		regexp.MustCompile(`\n +- "Delivery in 3 days\."\n`),
	} {
		if !want.MatchString(tree) {
			t.Errorf("read_page lacks a line matching %s:\n%s", want, tree)
		}
	}
	for _, once := range []string{"Read the guide", "Large"} {
		if n := strings.Count(tree, once); n != 1 {
			t.Errorf("read_page says %q %d times, want once:\n%s", once, n, tree)
		}
	}
	if strings.Contains(tree, "listitem") || strings.Contains(tree, "paragraph") || strings.Contains(tree, `- ""`) {
		t.Errorf("read_page keeps a list item around a single link, or an empty paragraph:\n%s", tree)
	}

	// What an expanded control opens is read under it, not beside it.
	for _, nest := range []struct{ parent, child string }{
		{`button "Shipping" [expanded] [h2]`, `region "Shipping options"`},
		{`region "Shipping options"`, `"Delivery in 3 days."`},
		{`region "Shipping options"`, `checkbox "Gift wrap"`},
		{`button "Returns" [expanded]`, `"Free within 30 days."`},
	} {
		p, c := indentOf(tree, nest.parent), indentOf(tree, nest.child)
		if p < 0 || c != p+2 {
			t.Errorf("read_page should put %s right under %s (indents %d and %d):\n%s", nest.child, nest.parent, c, p, tree)
		}
	}
}

// indentOf is the indentation of the first line of text that holds s, or -1.
func indentOf(text, s string) int {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return len(l) - len(strings.TrimLeft(l, " "))
		}
	}
	return -1
}

// TestPageAgentPreload: the page agent is in a new document of a tab the
// tools use as soon as navigate has answered, before any tool reads it
// (sw/preload.js injects it as the document commits), marked with the
// worker's token; a tab the person opened and no tool used gets nothing.
// The extension's options page asks the tabs' isolated world, which is the
// extension's own in each document.
func TestPageAgentPreload(t *testing.T) {
	w := startWorld(t, worldOptions{})
	dt := w.restartChromiumWithDevTools()
	c := w.client("e2e-preload")
	agentTab := c.newTab(t, w.pages.url("index.html")) // waitURL reads the page: the tools use this tab
	c.call(t, "navigate", map[string]any{"url": w.pages.url("prose.html"), "tabId": agentTab})
	personURL := w.pages.url("form.html")
	openTab(t, dt, personURL)
	opts := openExtensionPage(t, dt, "options.html")
	// What the extension's isolated world of a tab's page holds: "agent <token>", "none", or why it cannot say.
	agentIn := func(tabExpr string) string {
		return opts.js(t, `(async () => {
			const tabId = `+tabExpr+`;
			const [r] = await chrome.scripting.executeScript({target: {tabId}, world: 'ISOLATED', func: () => {
				const A = globalThis.__browserBridgePage;
				if (!A) return 'none';
				return typeof A.run === 'function' && typeof A.token === 'string' ? 'agent ' + location.pathname : 'no token';
			}});
			return r.result;
		})()`)
	}
	if got := agentIn(fmt.Sprint(agentTab)); got != "agent /prose.html" {
		t.Errorf("the agent's tab after navigate, before any read: %q, want the page agent with a token", got)
	}
	// Once the page has loaded, the preloaded agent warms its code up on a
	// sample of its own (page/warm.js), and forgets the refs it gave there.
	var warm string
	testutil.WaitWithin(t, callWait, "", func() (bool, string) {
		warm = opts.js(t, `(async () => {
			const [r] = await chrome.scripting.executeScript({target: {tabId: `+fmt.Sprint(agentTab)+`}, world: 'ISOLATED', func: () => {
				const A = globalThis.__browserBridgePage, S = globalThis.__browserBridgeAgent;
				return typeof A.warmMs === 'number' ? 'warm, next ref ' + S.next + ', refs kept ' + S.byRef.size : 'cold';
			}});
			return r.result;
		})()`)
		return warm != "cold", "the preloaded agent never warmed up"
	})
	if warm != "warm, next ref 1, refs kept 0" {
		t.Errorf("after the warm-up: %q, want no ref given (the page's refs start at ref_1)", warm)
	}
	personTab := `(await chrome.tabs.query({})).find((t) => t.url === ` + fmt.Sprintf("%q", personURL) + `).id`
	if got := agentIn(personTab); got != "none" {
		t.Errorf("a tab no tool used: %q, want no page agent", got)
	}
	// The preloaded agent answers the tools as an injected one does.
	if text := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": agentTab})); !strings.Contains(text, "[ref_1]") {
		t.Errorf("read_page of the preloaded page gives no ref_1:\n%s", clip(text, 2000))
	}
}

// TestPageAgentPreloadPolicy: the preload follows the person's site policy
// (sw/preload.js, agentPreloadAllowed in sw/policy.js). The person adds a
// rule for localhost in the options page (a new rule asks: the agent is
// preloaded, the person may approve), then blocks read, act and scripts
// there: the next document of an agent's tab at localhost has no agent,
// while 127.0.0.1, which no rule names, still gets it. The person moves the
// agents' tabs with chrome.tabs.update from the options page, as typing in
// the address bar would (navigate to a blocked site is refused by the gate).
func TestPageAgentPreloadPolicy(t *testing.T) {
	w := startWorld(t, worldOptions{})
	dt := w.restartChromiumWithDevTools()
	c := w.client("e2e-preload-policy")
	// Two tabs the tools use (newTab reads each page): the debugger is attached to both.
	blockedTab := c.newTab(t, w.pages.url("index.html"))
	allowedTab := c.newTab(t, w.pages.url("index.html"))
	opts := openExtensionPage(t, dt, "options.html")
	opts.waitText(t, "the options page", "Sites agents may use", "No site has a rule yet.")
	opts.js(t, `document.getElementById('site-pattern').value = 'localhost'`)
	opts.click(t, `#site-add button[type="submit"]`)
	opts.waitJS(t, "the new rule, asking", popupWait, `chrome.storage.local.get('policy').then((g) =>
		g.policy?.sites?.length === 1 && g.policy.sites[0].pattern === 'localhost' && g.policy.sites[0].read === 'ask')`)

	// What the extension's isolated world of tab's document at url holds:
	// "loading" until that document has loaded, then "agent" or "none".
	agentIn := func(tab int, url string) string {
		t.Helper()
		return opts.js(t, fmt.Sprintf(`(async () => {
			const [r] = await chrome.scripting.executeScript({target: {tabId: %d}, world: 'ISOLATED', func: () => {
				if (location.href !== %q || document.readyState !== 'complete') return 'loading';
				const A = globalThis.__browserBridgePage;
				return A && typeof A.run === 'function' && typeof A.token === 'string' ? 'agent' : 'none';
			}});
			return r.result;
		})()`, tab, url))
	}
	personGoes := func(tab int, url string) {
		t.Helper()
		opts.js(t, fmt.Sprintf(`chrome.tabs.update(%d, {url: %q}).then(() => 'sent')`, tab, url))
		testutil.WaitWithin(t, callWait, "", func() (bool, string) {
			return agentIn(tab, url) != "loading", "the tab never loaded " + url
		})
	}
	// The preload may land after the load event (its files are read first): wait for it.
	waitAgent := func(tab int, url, what string) {
		t.Helper()
		testutil.WaitWithin(t, callWait, "", func() (bool, string) {
			got := agentIn(tab, url)
			return got == "agent", fmt.Sprintf("%s: %q, want the page agent preloaded", what, got)
		})
	}
	onLocalhost := func(page string) string { return strings.Replace(w.pages.url(page), "127.0.0.1", "localhost", 1) }

	askURL := onLocalhost("prose.html")
	personGoes(blockedTab, askURL)
	waitAgent(blockedTab, askURL, "a site whose rule asks (the person may approve)")

	for _, cls := range []string{"read", "act", "script"} {
		opts.js(t, fmt.Sprintf(`(() => { const s = document.getElementById('rule-localhost-%s'); s.value = 'block'; s.dispatchEvent(new Event('change')); return s.value; })()`, cls))
	}
	opts.waitJS(t, "the rule blocking everything", popupWait, `chrome.storage.local.get('policy').then((g) =>
		['read', 'act', 'script'].every((k) => g.policy?.sites?.[0]?.[k] === 'block'))`)
	// A call the gate checks reads the changed policy into memory, so that the
	// worker decides each commit below as it happens, in their order.
	if res := c.call(t, "get_page_text", map[string]any{"tabId": allowedTab}); res.IsError {
		t.Fatalf("get_page_text on 127.0.0.1: %s", describe(res))
	}
	blockedURL := onLocalhost("form.html")
	personGoes(blockedTab, blockedURL)
	// Then the other tab goes to a site no rule names. Its preload was decided
	// after the blocked document's commit (and started after that document had
	// loaded), so once its agent is in, a preload of the blocked document
	// would have landed too.
	allowedURL := w.pages.url("prose.html")
	personGoes(allowedTab, allowedURL)
	waitAgent(allowedTab, allowedURL, "a site no rule names, after the block")
	if got := agentIn(blockedTab, blockedURL); got != "none" {
		t.Errorf("a site the person blocked: %q, want no page agent in its document", got)
	}
	if text, _ := c.toolError(t, "read_page", map[string]any{"tabId": blockedTab}); !strings.Contains(text, `the rule for "localhost" says read = block`) {
		t.Errorf("read_page on the blocked site: %q, want the site policy's refusal", text)
	}
	if got := agentIn(blockedTab, blockedURL); got != "none" {
		t.Errorf("the blocked site after a refused read_page: %q, want still no page agent", got)
	}
	if text := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": allowedTab})); !strings.Contains(text, "[ref_1]") {
		t.Errorf("read_page of the allowed page gives no ref_1:\n%s", clip(text, 2000))
	}
}
