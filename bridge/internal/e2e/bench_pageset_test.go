//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// Issue 32's page set: pages of the shapes agents meet (testdata/pageset,
// written for the benchmark), each with a task whose outcome is checked.
// BenchmarkTaskAlternatives runs every task with each server's own tools,
// as a careful scripted agent would: it reads what the server's last answer
// gave before asking for more (Playwright MCP's navigate and click answer
// with a snapshot, chrome-devtools-mcp's click can), acts by ref, and reads
// the page again only when the answer to its action does not show the
// outcome.

// pageTask is one page of the set and its task.
type pageTask struct {
	name, page string // the row's name; the page under testdata
	// run does the task with d's tools; an error says why it failed.
	run func(a *pageAgent, d *pageDriver, url string) error
	// check reads what the page server was told during the task (nil: the
	// task only reads, and run checks what it read).
	check func(outcomes []string) error
}

// pageAgent is one server's session doing one task: it records every
// result it read.
type pageAgent struct {
	c       *client
	tab     int // our tab id, chrome-devtools-mcp's page id, 0 for Playwright MCP
	results []*mcp.CallToolResult
	calls   int
}

// call calls a tool and records its result; a failed call is an error.
func (a *pageAgent) call(name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	a.calls++
	res, err := a.c.try(ctx, name, args)
	if res != nil {
		a.results = append(a.results, res)
	}
	return res, err
}

// text calls a tool and returns the text of its answer.
func (a *pageAgent) text(name string, args map[string]any) (string, error) {
	res, err := a.call(name, args)
	if err != nil {
		return "", err
	}
	return testutil.Text(res), nil
}

// bytesRead is the JSON of every result read (as the client receives it)
// and the text content alone (what a client that drops structured content
// hands a model).
func (a *pageAgent) bytesRead() (jsonBytes, textBytes int) {
	for _, r := range a.results {
		raw, _ := json.Marshal(r)
		jsonBytes += len(raw)
		for _, c := range r.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				textBytes += len(t.Text)
			}
		}
	}
	return jsonBytes, textBytes
}

// lastBytes is the JSON of the last result read.
func (a *pageAgent) lastBytes() int {
	if len(a.results) == 0 {
		return 0
	}
	raw, _ := json.Marshal(a.results[len(a.results)-1])
	return len(raw)
}

// pageField is one form field the task sets: its role and name as the
// snapshot shows them, the ref found there, and the value.
type pageField struct {
	role, name, ref, value string
}

// pageDriver is one server's tools for the page set's tasks.
type pageDriver struct {
	// line matches one control of a snapshot: groups role, name, ref.
	line                       *regexp.Regexp
	roleGroup, nameGroup, refG int
	// lines, when not nil, puts each control of a snapshot on a line of
	// its own before line reads them.
	lines    func(string) string
	navigate func(a *pageAgent, url string) (string, error)
	snapshot func(a *pageAgent) (string, error)
	// snapshotAfter reads the page after an action whose answer was last:
	// nil, a whole snapshot.
	snapshotAfter func(a *pageAgent, last string) (string, error)
	// readText reads the page's text until found holds or there is no more.
	readText func(a *pageAgent, found func(string) bool) (string, error)
	// click clicks ref (the control named name); wantPage: the agent needs
	// the page as it is after the click (a server that can add a snapshot
	// to the answer is asked to).
	click      func(a *pageAgent, ref, name string, wantPage bool) (string, error)
	fill       func(a *pageAgent, fields []pageField) error
	screenshot func(a *pageAgent) (*mcp.CallToolResult, error)
}

// ref finds the ref of the control with role and name in a snapshot's
// text: the name said exactly, else a name that starts with it and a space
// (a label that wraps its control names it with what follows).
func (d *pageDriver) ref(text, role, name string) string {
	if d.lines != nil {
		text = d.lines(text)
	}
	matches := d.line.FindAllStringSubmatch(text, -1)
	for _, exact := range []bool{true, false} {
		for _, m := range matches {
			if m[d.roleGroup] != role {
				continue
			}
			n := strings.ReplaceAll(m[d.nameGroup], `\"`, `"`)
			if n == name || !exact && strings.HasPrefix(n, name+" ") {
				return m[d.refG]
			}
		}
	}
	return ""
}

// refs finds every control's ref in text, or says which are missing.
func (d *pageDriver) refs(text string, controls [][2]string) (map[string]string, error) {
	out := map[string]string{}
	var missing []string
	for _, rn := range controls {
		if r := d.ref(text, rn[0], rn[1]); r != "" {
			out[rn[1]] = r
		} else {
			missing = append(missing, fmt.Sprintf("%s %q", rn[0], rn[1]))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the snapshot gives no ref for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// pageOrSnapshot is the page as the agent last saw it when that answer
// holds the controls it needs, else a new snapshot.
func (d *pageDriver) pageOrSnapshot(a *pageAgent, last string, controls [][2]string) (map[string]string, error) {
	if refs, err := d.refs(last, controls); err == nil {
		return refs, nil
	}
	read := d.snapshot
	if d.snapshotAfter != nil {
		read = func(a *pageAgent) (string, error) { return d.snapshotAfter(a, last) }
	}
	text, err := read(a)
	if err != nil {
		return nil, err
	}
	return d.refs(text, controls)
}

// confirm checks that the answer to the last action shows want, else reads
// the page for it.
func (d *pageDriver) confirm(a *pageAgent, last, want string) error {
	if strings.Contains(last, want) {
		return nil
	}
	text, err := d.readText(a, func(s string) bool { return strings.Contains(s, want) })
	if err != nil {
		return err
	}
	if !strings.Contains(text, want) {
		return fmt.Errorf("the page does not say %q after the action", want)
	}
	return nil
}

// readFact navigates and reads until re matches (the answer the agent was
// sent for), and checks the match's first group.
func readFact(a *pageAgent, d *pageDriver, url string, re *regexp.Regexp, want string) error {
	nav, err := d.navigate(a, url)
	if err != nil {
		return err
	}
	text := nav
	if !re.MatchString(text) {
		if text, err = d.readText(a, re.MatchString); err != nil {
			return err
		}
	}
	m := re.FindStringSubmatch(text)
	if m == nil {
		return fmt.Errorf("what the agent read does not match %s", re)
	}
	if got := strings.Join(strings.Fields(m[1]), " "); got != want {
		return fmt.Errorf("the agent read %q, want %q", got, want)
	}
	return nil
}

// The page set's answers. A row's price is 1.99 + ((row × 7919) mod
// 48000) / 100 (testdata/pageset/table.html).
var (
	articleFact = regexp.MustCompile(`lifts a boat (11\.4 metres in \w+\s+minutes)`)
	// The first price after the SKU: on its row's line (ours), or on a
	// later cell's line (the others print a cell a line).
	tableRow347     = regexp.MustCompile(`HC-0347\b[^$]{0,400}?\$(\d+\.\d\d)`)
	tableRow347Want = fmt.Sprintf("%.2f", float64(199+(347*7919)%48000)/100)
	belowFoldPrice  = regexp.MustCompile(`Team[^€]{0,80}(€\d+ per seat per month)`)
)

// searchThird is the third organic result of testdata/pageset/search.html.
const (
	searchThirdTitle = "Lock maintenance: winter stoppages on the Harrow Canal"
	searchThirdPath  = "/visit/harrow-canal.example/notices/winter-stoppages-2026?q=canal+lock+maintenance&pos=3&sig=7f3a9c03e41b"
	settingsSaved    = "Saved 3 changes: display_name, weekly_summary, theme."
	modalArchived    = "Project archived."
)

// pageSet is issue 32's page set and its tasks.
var pageSet = []pageTask{
	{name: "article", page: "pageset/article.html",
		run: func(a *pageAgent, d *pageDriver, url string) error {
			return readFact(a, d, url, articleFact, "11.4 metres in eight minutes")
		}},
	{name: "table_500_rows", page: "pageset/table.html",
		run: func(a *pageAgent, d *pageDriver, url string) error {
			return readFact(a, d, url, tableRow347, tableRow347Want)
		}},
	{name: "search_results", page: "pageset/search.html",
		run: func(a *pageAgent, d *pageDriver, url string) error {
			nav, err := d.navigate(a, url)
			if err != nil {
				return err
			}
			refs, err := d.pageOrSnapshot(a, nav, [][2]string{{"link", searchThirdTitle}})
			if err != nil {
				return err
			}
			_, err = d.click(a, refs[searchThirdTitle], searchThirdTitle, false)
			return err
		},
		check: func(outcomes []string) error {
			if want := "GET " + searchThirdPath; !slices.Contains(outcomes, want) {
				return fmt.Errorf("the third result was not opened: the page server saw %q", outcomes)
			}
			return nil
		}},
	{name: "settings_40_controls", page: "pageset/settings.html",
		run: func(a *pageAgent, d *pageDriver, url string) error {
			nav, err := d.navigate(a, url)
			if err != nil {
				return err
			}
			refs, err := d.pageOrSnapshot(a, nav, [][2]string{
				{"textbox", "Display name"}, {"checkbox", "Weekly summary email"}, {"combobox", "Theme"}, {"button", "Save changes"}})
			if err != nil {
				return err
			}
			if err := d.fill(a, []pageField{
				{role: "textbox", name: "Display name", ref: refs["Display name"], value: "Ada L."},
				{role: "checkbox", name: "Weekly summary email", ref: refs["Weekly summary email"], value: "true"},
				{role: "combobox", name: "Theme", ref: refs["Theme"], value: "Dark"},
			}); err != nil {
				return err
			}
			after, err := d.click(a, refs["Save changes"], "Save changes", true)
			if err != nil {
				return err
			}
			return d.confirm(a, after, settingsSaved)
		},
		check: func(outcomes []string) error {
			for _, o := range outcomes {
				body, ok := strings.CutPrefix(o, "POST /api/pageset/settings ")
				if !ok {
					continue
				}
				var saved map[string]any
				if err := json.Unmarshal([]byte(body), &saved); err != nil {
					return fmt.Errorf("the saved settings are not JSON: %v", err)
				}
				if saved["display_name"] != "Ada L." || saved["weekly_summary"] != true || saved["theme"] != "dark" {
					return fmt.Errorf("saved display_name %v, weekly_summary %v, theme %v; want Ada L., true, dark",
						saved["display_name"], saved["weekly_summary"], saved["theme"])
				}
				return nil
			}
			return fmt.Errorf("the settings were not saved: the page server saw %q", outcomes)
		}},
	{name: "modal_dialog", page: "pageset/modal.html",
		run: func(a *pageAgent, d *pageDriver, url string) error {
			nav, err := d.navigate(a, url)
			if err != nil {
				return err
			}
			refs, err := d.pageOrSnapshot(a, nav, [][2]string{{"button", "Archive project"}})
			if err != nil {
				return err
			}
			opened, err := d.click(a, refs["Archive project"], "Archive project", true)
			if err != nil {
				return err
			}
			dialog, err := d.pageOrSnapshot(a, opened, [][2]string{{"button", "Archive"}})
			if err != nil {
				return err
			}
			after, err := d.click(a, dialog["Archive"], "Archive", true)
			if err != nil {
				return err
			}
			return d.confirm(a, after, modalArchived)
		},
		check: func(outcomes []string) error {
			if !slices.Contains(outcomes, `POST /api/pageset/archive {"project":"harbour-redesign"}`) {
				return fmt.Errorf("the dialog was not confirmed: the page server saw %q", outcomes)
			}
			return nil
		}},
	{name: "below_the_fold", page: "pageset/belowfold.html",
		run: func(a *pageAgent, d *pageDriver, url string) error {
			return readFact(a, d, url, belowFoldPrice, "€12 per seat per month")
		}},
}

// Snapshot lines with a ref, per server: ours `- button "Save" [ref_12]`,
// Playwright MCP's `- button "Save" [ref=e12]` (YAML-quoted when the name
// holds a colon: `- 'link "A: b" [ref=e12]':`), chrome-devtools-mcp's
// `uid=1_12 button "Save"`.
var (
	oursLine     = regexp.MustCompile(`(?m)^\s*- (\w+) "((?:[^"\\]|\\.)*)"[^\n]*?\[(ref_\d+)\]`)
	playwrightLn = regexp.MustCompile(`(?m)^\s*- '?(\w+) "((?:[^"\\]|\\.)*)"[^\n]*\[ref=(\w+)\]`)
	devtoolsLine = regexp.MustCompile(`uid=(\S+) (\w+) "((?:[^"\\]|\\.)*)"`)
)

// oursRunItem is one link of our line of side-by-side links,
// `- link "2" [ref_66], "3" [ref_67]`: a name and its ref.
var oursRunItem = regexp.MustCompile(`"(?:[^"\\]|\\.)*" \[ref_\d+\]`)

// oursLines puts each link of our lines of side-by-side links on a line
// of its own, as `- link "3" [ref_67]`.
func oursLines(text string) string {
	ls := strings.Split(text, "\n")
	for i, l := range ls {
		t := strings.TrimLeft(l, " ")
		rest, ok := strings.CutPrefix(t, "- link ")
		if !ok {
			continue
		}
		items := oursRunItem.FindAllString(rest, -1)
		if len(items) < 2 || strings.Join(items, ", ") != rest {
			continue // a link alone, or with more than its name and ref
		}
		prefix := l[:len(l)-len(t)] + "- link "
		ls[i] = prefix + strings.Join(items, "\n"+prefix)
	}
	return strings.Join(ls, "\n")
}

// oursDialogOpened finds the dialog an action opened in our answer to it:
// `A dialog opened: "Archive …?" [ref_22].`
var oursDialogOpened = regexp.MustCompile(`A dialog opened: .*\[(ref_\d+)\]`)

// oursDriver: navigate, read_page (of the dialog alone when a click says
// which one it opened), get_page_text page by page, computer
// left_click, form_input with every field in one call, computer screenshot.
func oursDriver() *pageDriver {
	return &pageDriver{
		line: oursLine, roleGroup: 1, nameGroup: 2, refG: 3, lines: oursLines,
		navigate: func(a *pageAgent, url string) (string, error) {
			return a.text("navigate", map[string]any{"url": url, "tabId": a.tab})
		},
		snapshot: func(a *pageAgent) (string, error) {
			return a.text("read_page", map[string]any{"tabId": a.tab})
		},
		// A click that opened a dialog names its ref: only the dialog is read.
		snapshotAfter: func(a *pageAgent, last string) (string, error) {
			args := map[string]any{"tabId": a.tab}
			if m := oursDialogOpened.FindStringSubmatch(last); m != nil {
				args["ref"] = m[1]
			}
			return a.text("read_page", args)
		},
		readText: func(a *pageAgent, found func(string) bool) (string, error) {
			var all strings.Builder
			for page := 1; ; page++ {
				res, err := a.call("get_page_text", map[string]any{"tabId": a.tab, "page": page})
				if err != nil {
					return "", err
				}
				text := testutil.Text(res)
				all.WriteString(text)
				// The answer ends "[more: call get_page_text with page N]" while there is more.
				if found(all.String()) || !strings.Contains(text, "[more: call get_page_text") {
					return all.String(), nil
				}
			}
		},
		click: func(a *pageAgent, ref, _ string, _ bool) (string, error) {
			return a.text("computer", map[string]any{"action": "left_click", "ref": ref, "tabId": a.tab})
		},
		fill: func(a *pageAgent, fields []pageField) error {
			var list []map[string]any
			for _, f := range fields {
				var v any = f.value
				if f.role == "checkbox" {
					v = f.value == "true"
				}
				list = append(list, map[string]any{"ref": f.ref, "value": v})
			}
			_, err := a.call("form_input", map[string]any{"fields": list, "tabId": a.tab})
			return err
		},
		screenshot: func(a *pageAgent) (*mcp.CallToolResult, error) {
			return a.call("computer", map[string]any{"action": "screenshot", "tabId": a.tab})
		},
	}
}

// playwrightDriver: browser_navigate (its answer holds a snapshot),
// browser_snapshot, browser_click, browser_fill_form,
// browser_take_screenshot at CSS scale.
func playwrightDriver() *pageDriver {
	snapshot := func(a *pageAgent) (string, error) { return a.text("browser_snapshot", nil) }
	return &pageDriver{
		line: playwrightLn, roleGroup: 1, nameGroup: 2, refG: 3,
		navigate: func(a *pageAgent, url string) (string, error) {
			return a.text("browser_navigate", map[string]any{"url": url})
		},
		snapshot: snapshot,
		readText: func(a *pageAgent, _ func(string) bool) (string, error) { return snapshot(a) },
		click: func(a *pageAgent, ref, name string, _ bool) (string, error) {
			return a.text("browser_click", map[string]any{"target": ref, "element": name})
		},
		fill: func(a *pageAgent, fields []pageField) error {
			var list []map[string]any
			for _, f := range fields {
				list = append(list, map[string]any{"target": f.ref, "name": f.name, "type": f.role, "value": f.value})
			}
			_, err := a.call("browser_fill_form", map[string]any{"fields": list})
			return err
		},
		screenshot: func(a *pageAgent) (*mcp.CallToolResult, error) {
			return a.call("browser_take_screenshot", map[string]any{"type": "png", "scale": "css"})
		},
	}
}

// devtoolsDriver: navigate_page, take_snapshot, click (with includeSnapshot
// when the agent needs the page after it), fill_form for text and choices
// and click for a checkbox (fill takes no checkbox), take_screenshot.
func devtoolsDriver() *pageDriver {
	snapshot := func(a *pageAgent) (string, error) {
		return a.text("take_snapshot", map[string]any{"pageId": a.tab})
	}
	return &pageDriver{
		line: devtoolsLine, roleGroup: 2, nameGroup: 3, refG: 1,
		navigate: func(a *pageAgent, url string) (string, error) {
			return a.text("navigate_page", map[string]any{"pageId": a.tab, "type": "url", "url": url})
		},
		snapshot: snapshot,
		readText: func(a *pageAgent, _ func(string) bool) (string, error) { return snapshot(a) },
		click: func(a *pageAgent, ref, _ string, wantPage bool) (string, error) {
			return a.text("click", map[string]any{"pageId": a.tab, "uid": ref, "includeSnapshot": wantPage})
		},
		fill: func(a *pageAgent, fields []pageField) error {
			var list []map[string]any
			for _, f := range fields {
				if f.role == "checkbox" {
					if _, err := a.call("click", map[string]any{"pageId": a.tab, "uid": f.ref}); err != nil {
						return err
					}
					continue
				}
				list = append(list, map[string]any{"uid": f.ref, "value": f.value})
			}
			_, err := a.call("fill_form", map[string]any{"pageId": a.tab, "elements": list})
			return err
		},
		screenshot: func(a *pageAgent) (*mcp.CallToolResult, error) {
			return a.call("take_screenshot", map[string]any{"pageId": a.tab})
		},
	}
}

// pageStats is what one server did on one page of the set, over the passes.
type pageStats struct {
	task, snapshot []time.Duration
	// snapshotAgain is a second snapshot of the same document: ours injects
	// the page agent's files on the first call in a document only.
	snapshotAgain []time.Duration
	// afterPause and afterPauseAgain are the same two snapshots of the page
	// loaded anew, the first taken modelPause after navigate answered: as an
	// agent meets the page, its model having read navigate's answer.
	afterPause, afterPauseAgain []time.Duration
	calls                       int // summed over the passes
	jsonB, textB                int
	snapshotB                   int // one snapshot of the page, last pass
	ok, failed                  int
	why                         string // the first failure
	screenshot                  image.Config
	screenshotB                 int // the image's bytes, last pass
}

// modelPause is how long the page set waits between navigate's answer and
// the snapshot it times "after a pause": a model reads the answer before it
// asks for the page, and a turn of a model takes a second or more. In the
// meantime the browser finishes what follows a load (the page's first
// frames, the old document's teardown, and for an extension the debugger's
// infobar, which Chrome takes away at each navigation and shows again at the
// load's end: docs/performance.md, "The first read of a page").
const modelPause = time.Second

// runPageSet does every task of the page set once on the session and adds
// to stats (one per page): first, apart from the task, two snapshot calls
// timed alone right after navigate and a screenshot of the page as it loads,
// then two more of the page loaded again, after modelPause; then the task,
// timed, its answers counted as read.
func runPageSet(s *targetSession, d *pageDriver, pages *pageServer, stats []*pageStats) {
	for i, pt := range pageSet {
		st := stats[i]
		url := pages.url(pt.page)
		// The snapshot and the screenshot of the page as it loads, apart
		// from the task: neither is timed with it or counted as read.
		probe := &pageAgent{c: s.c, tab: s.tab}
		if _, err := d.navigate(probe, url); err == nil {
			start := time.Now()
			_, serr := d.snapshot(probe)
			st.snapshot = append(st.snapshot, time.Since(start))
			if serr == nil {
				st.snapshotB = probe.lastBytes()
			}
			start = time.Now()
			if _, err := d.snapshot(probe); err == nil {
				st.snapshotAgain = append(st.snapshotAgain, time.Since(start))
			}
			if res, err := d.screenshot(probe); err == nil {
				if data, _, ok := imageOf(res); ok {
					st.screenshotB = len(data)
					st.screenshot, _, _ = image.DecodeConfig(bytes.NewReader(data))
				}
			}
		}
		if _, err := d.navigate(probe, url); err == nil {
			time.Sleep(modelPause)
			start := time.Now()
			if _, err := d.snapshot(probe); err == nil {
				st.afterPause = append(st.afterPause, time.Since(start))
			}
			start = time.Now()
			if _, err := d.snapshot(probe); err == nil {
				st.afterPauseAgain = append(st.afterPauseAgain, time.Since(start))
			}
		}

		a := &pageAgent{c: s.c, tab: s.tab}
		_, _ = pages.takeOutcomes()
		start := time.Now()
		err := pt.run(a, d, url)
		d0 := time.Since(start)
		if err == nil && pt.check != nil {
			err = checkOutcome(pages, pt.check)
		}
		st.task = append(st.task, d0)
		st.calls += a.calls
		j, t := a.bytesRead()
		st.jsonB += j
		st.textB += t
		dumpPageTask(s.target.name, pt.name, a)
		if err != nil {
			// The failed pass's answers too (the dump above keeps the last pass only).
			dumpPageTask(s.target.name, fmt.Sprintf("%s-failed-%d", pt.name, st.failed+1), a)
			st.failed++
			if st.why == "" {
				st.why = err.Error()
			}
		} else {
			st.ok++
		}
	}
}

// checkOutcome waits (5 s at most: the page's fetch may still be on its
// way when the agent's last answer came) for what the page server was told
// to pass check.
func checkOutcome(pages *pageServer, check func([]string) error) error {
	var seen []string
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		more, added := pages.takeOutcomes()
		seen = append(seen, more...)
		err := check(seen)
		if err == nil {
			return nil
		}
		select {
		case <-added:
		case <-deadline.C:
			return err
		}
	}
}

// envPageSetDump names a directory to write every page task's answers to,
// one file per server and page (the last pass), to see what each read: each
// answer's JSON size, its text, and its structured content when it has one.
const envPageSetDump = "BROWSERBRIDGE_BENCH_PAGESET_DUMP"

func dumpPageTask(server, page string, a *pageAgent) {
	dir := os.Getenv(envPageSetDump)
	if dir == "" {
		return
	}
	var sb strings.Builder
	for i, r := range a.results {
		raw, _ := json.Marshal(r)
		fmt.Fprintf(&sb, "=== answer %d: %d B of JSON ===\n%s\n", i+1, len(raw), testutil.Text(r))
		if r.StructuredContent != nil {
			sc, _ := json.Marshal(r.StructuredContent)
			fmt.Fprintf(&sb, "--- structured content, %d B ---\n%s\n", len(sc), sc)
		}
	}
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, server+"-"+page+".txt"), []byte(sb.String()), 0o644)
}

// pageSetTable is the markdown of the page set's figures: per page, one
// row per server.
func pageSetTable(targets []*benchTarget, stats [][]*pageStats) string {
	var sb strings.Builder
	sb.WriteString("| page | server | outcome | calls | bytes read (JSON) | text bytes | task ms, median | snapshot ms, median: first, again | after a pause: first, again | snapshot bytes | screenshot |\n")
	sb.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, pt := range pageSet {
		for k, t := range targets {
			st := stats[k][i]
			n := len(st.task)
			if n == 0 {
				continue
			}
			outcome := "ok"
			if st.failed > 0 {
				outcome = fmt.Sprintf("failed %d of %d: %s", st.failed, n, strings.ReplaceAll(clip(st.why, 200), "\n", " "))
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %d | %d | %d | %s | %s, %s | %s, %s | %d | %d×%d, %d B |\n",
				pt.name, t.name, outcome, st.calls/n, st.jsonB/n, st.textB/n,
				medianMS(st.task, "%.0f"), medianMS(st.snapshot, "%.1f"), medianMS(st.snapshotAgain, "%.1f"),
				medianMS(st.afterPause, "%.1f"), medianMS(st.afterPauseAgain, "%.1f"), st.snapshotB,
				st.screenshot.Width, st.screenshot.Height, st.screenshotB)
		}
	}
	return sb.String()
}

// pageSetRatios sums bytes read over the page set per server and compares
// with Playwright MCP's (targets[1]): issue 32's goal is at most 0.5×.
func pageSetRatios(targets []*benchTarget, stats [][]*pageStats) string {
	sum := func(k int) (j, t int) {
		for _, st := range stats[k] {
			if n := len(st.task); n > 0 {
				j += st.jsonB / n
				t += st.textB / n
			}
		}
		return j, t
	}
	if len(targets) < 2 {
		return "" // Browser Bridge alone: nothing to compare with
	}
	var sb strings.Builder
	pj, pt := sum(1)
	for k, t := range targets {
		j, tx := sum(k)
		fmt.Fprintf(&sb, "page set, %s: %d B read as JSON (%.2f× Playwright MCP's), %d B of text (%.2f×)\n",
			t.name, j, ratio(j, pj), tx, ratio(tx, pt))
	}
	return sb.String()
}

// medianMS is the median of d in milliseconds, or "–" when nothing was
// measured (every call failed).
func medianMS(d []time.Duration, format string) string {
	if len(d) == 0 {
		return "–"
	}
	p50, _ := quantiles(d)
	return fmt.Sprintf(format, ms(p50))
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
