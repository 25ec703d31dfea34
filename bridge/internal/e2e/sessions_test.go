//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

var (
	refText     = regexp.MustCompile(`\bref[_-]?\d+\b`)
	pageOfText  = regexp.MustCompile(`(?i)page\s+(\d+)\s*(?:of|/)\s*(\d+)`)
	imageIDText = regexp.MustCompile(`(?i)(?:image|screenshot)[ _]?id[":\s]*([A-Za-z0-9_:-]+(?:\.[A-Za-z0-9_:-]+)*)`)
)

func bg(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	_ = cancel // the timeout releases it
	return ctx
}

// testTwoSessions: two clients at once get two tab groups, and a call in
// one session never acts on the other's tab.
func testTwoSessions(t *testing.T, w *world) {
	a, b := w.client("e2e-alpha"), w.client("e2e-beta")
	index, form, long := w.pages.url("index.html"), w.pages.url("form.html"), w.pages.url("long.html")

	// Both open a tab at once.
	var resA, resB *mcp.CallToolResult
	var errA, errB error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		resA, errA = a.try(bg(callWait), "tabs_create_mcp", map[string]any{"url": index})
	}()
	go func() {
		defer wg.Done()
		resB, errB = b.try(bg(callWait), "tabs_create_mcp", map[string]any{"url": form})
	}()
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("concurrent tabs_create_mcp: alpha: %v; beta: %v", errA, errB)
	}
	tabA, okA := tabIDOf(resA)
	tabB, okB := tabIDOf(resB)
	if !okA || !okB || tabA == tabB {
		t.Fatalf("tabs_create_mcp gave tabs %d (%v) and %d (%v): %s / %s", tabA, okA, tabB, okB, describe(resA), describe(resB))
	}
	a.waitURL(t, tabA, index)
	b.waitURL(t, tabB, form)

	// Each session's context lists its own tab, in its own group, and not the other's.
	mineA, mineB := a.tabs(t, "tabs_context_mcp"), b.tabs(t, "tabs_context_mcp")
	groupA, groupB := check(t, "e2e-alpha", mineA, tabA, tabB), check(t, "e2e-beta", mineB, tabB, tabA)
	if groupA == groupB {
		t.Errorf("the two sessions share tab group %d", groupA)
	}
	// The full context shows each tab in the group of its session, titled with the client's name.
	for _, tab := range a.tabs(t, "tabs_context") {
		switch tab.TabID {
		case tabA:
			if tab.GroupID != groupA || !tab.InThisSession {
				t.Errorf("tabs_context of alpha shows its tab as %+v", tab)
			}
		case tabB:
			if tab.GroupID != groupB || tab.InThisSession || tab.Session != "e2e-beta" {
				t.Errorf("tabs_context of alpha shows beta's tab as %+v", tab)
			}
		}
	}

	// Both navigate at once without naming a tab: each moves its own.
	wg.Add(2)
	go func() { defer wg.Done(); _, errA = a.try(bg(callWait), "navigate", map[string]any{"url": long}) }()
	go func() { defer wg.Done(); _, errB = b.try(bg(callWait), "navigate", map[string]any{"url": index}) }()
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("concurrent navigate: alpha: %v; beta: %v", errA, errB)
	}
	a.waitURL(t, tabA, long)
	b.waitURL(t, tabB, index)
	// A call in alpha leaves beta's tab where it is.
	a.call(t, "navigate", map[string]any{"url": form})
	a.waitURL(t, tabA, form)
	if got := b.js(t, tabB, "location.href"); got != index {
		t.Errorf("session beta's tab moved to %s when alpha navigated", got)
	}
	if got := a.tabs(t, "tabs_context_mcp"); len(got) != 1 || got[0].TabID != tabA {
		t.Errorf("after the navigations alpha's group holds %+v, want only tab %d", got, tabA)
	}

	// Ending alpha's MCP session closes or ungroups its tab (session.ended);
	// beta's tab stays in beta's group.
	w.closeSession(a.cs)
	testutil.WaitWithin(t, 10*time.Second, "", func() (bool, string) {
		for _, tab := range b.tabs(t, "tabs_context") {
			switch {
			case tab.TabID == tabA && tab.GroupID == groupA:
				return false, fmt.Sprintf("alpha's tab %d is still in its group %d after alpha's session ended", tabA, groupA)
			case tab.TabID == tabB && tab.GroupID != groupB:
				return false, fmt.Sprintf("beta's tab %d left its group: %+v", tabB, tab)
			}
		}
		return true, ""
	})
}

// tabInfo is one tab as tabs_context and tabs_context_mcp describe it.
type tabInfo struct {
	TabID         int
	GroupID       int    // from dev_utils state, as Status: tabs_context's text names neither
	Status        string // loading, complete
	URL           string
	Title         string
	Session       string // the other session's client that holds the tab
	InThisSession bool
	Current       bool
}

// tabs calls tabs_context or tabs_context_mcp and returns the tabs its
// text lists, each with its tab group from dev_utils state.
func (c *client) tabs(t testing.TB, tool string) []tabInfo {
	t.Helper()
	tabs, err := tryTabs(c, tool)
	if err != nil {
		t.Fatal(err)
	}
	return tabs
}

// readState reads dev_utils state through a local session of its own,
// for the tests' clients that may not (remote ones): every tab's group and
// status are the same whoever asks. A bridge restart can end that
// session's client (its GET stream is not retried), so a failed read opens
// a new one and asks once more.
func (w *world) readState() (*mcp.CallToolResult, error) {
	return w.callAsReader("dev_utils", map[string]any{"action": "state"})
}

// callAsReader calls a tool through readState's local session.
func (w *world) callAsReader(tool string, args map[string]any) (*mcp.CallToolResult, error) {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	if w.state != nil {
		if res, err := w.state.try(bg(callWait), tool, args); err == nil {
			return res, nil
		}
		w.state.cs.Close()
	}
	w.state = w.client("e2e-state-reader")
	return w.state.try(bg(callWait), tool, args)
}

// sessionOfTab is the client name of the session that holds a tab, as
// another session's tabs_context says it ("session \"NAME\""); a tab's own
// session sees "this session" there instead.
func (w *world) sessionOfTab(t testing.TB, tab int) string {
	t.Helper()
	res, err := w.callAsReader("tabs_context", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range tabLines(testutil.Text(res)) {
		if info.TabID == tab {
			return info.Session
		}
	}
	t.Fatalf("tabs_context lists no tab %d: %s", tab, clip(testutil.Text(res), 300))
	return ""
}

var (
	tabLineText    = regexp.MustCompile(`(?m)^- tab (\d+): (.*) — (\S*)(?: \[(.*)\])?$`)
	tabSessionText = regexp.MustCompile(`session "([^"]*)"`)
)

// tabLines reads tabs_context(_mcp)'s lines, "- tab N: title — URL
// [marks]", with no group (-1) and no status.
func tabLines(text string) []tabInfo {
	tabs := []tabInfo{}
	for _, m := range tabLineText.FindAllStringSubmatch(text, -1) {
		id, _ := strconv.Atoi(m[1])
		tab := tabInfo{TabID: id, GroupID: -1, Title: m[2], URL: m[3]}
		marks := ", " + m[4] + ","
		tab.InThisSession = strings.Contains(marks, ", this session,")
		tab.Current = strings.Contains(marks, ", current,")
		if s := tabSessionText.FindStringSubmatch(m[4]); s != nil {
			tab.Session = s[1]
		}
		tabs = append(tabs, tab)
	}
	return tabs
}

// tabsFrom reads tabs_context(_mcp)'s text, "- tab N: title — URL
// [marks]" a line, and adds each tab's group from dev_utils state's JSON.
func tabsFrom(tool, listText, stateText string) ([]tabInfo, error) {
	var state struct {
		Tabs []struct {
			TabID   int    `json:"tabId"`
			GroupID int    `json:"groupId"`
			Status  string `json:"status"`
		} `json:"tabs"`
	}
	if err := json.Unmarshal([]byte(stateText), &state); err != nil {
		return nil, fmt.Errorf("dev_utils state: %w: %s", err, clip(stateText, 300))
	}
	groups, status := map[int]int{}, map[int]string{}
	for _, s := range state.Tabs {
		groups[s.TabID], status[s.TabID] = s.GroupID, s.Status
	}
	tabs := tabLines(listText)
	for i, tab := range tabs {
		if g, ok := groups[tab.TabID]; ok {
			tabs[i].GroupID = g
		}
		tabs[i].Status = status[tab.TabID]
	}
	if len(tabs) == 0 && !strings.Contains(listText, "no tabs") && !strings.HasPrefix(listText, "No tabs") {
		return nil, fmt.Errorf("%s lists no tabs and does not say it has none: %q", tool, clip(listText, 300))
	}
	return tabs, nil
}

// check asserts that a session's tabs hold mine, in a real group, and not
// theirs, and returns mine's group.
func check(t *testing.T, who string, tabs []tabInfo, mine, theirs int) int {
	t.Helper()
	group := -1
	for _, tab := range tabs {
		switch tab.TabID {
		case mine:
			group = tab.GroupID
		case theirs:
			t.Errorf("tabs_context_mcp of %s lists the other session's tab %d", who, theirs)
		}
	}
	if group == -1 {
		t.Errorf("tabs_context_mcp of %s does not list its tab %d in a group: %+v", who, mine, tabs)
	}
	return group
}

// testHostKilled: SIGKILL the native host mid-session; the extension
// reconnects (Chrome starts a new host) and the next call succeeds, with
// the same Chromium.
func testHostKilled(t *testing.T, w *world) {
	c := w.client("e2e-reconnect")
	tab := c.newTab(t, w.pages.url("index.html"))
	before := hostPIDs()
	if len(before) != 1 {
		t.Fatalf("want one browserbridge-host running, pgrep finds %v", before)
	}
	chromePID := w.chrome.Process.Pid
	if err := syscall.Kill(before[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var lastErr error
	ok := false
	for time.Since(start) < 10*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := c.try(ctx, "javascript_tool", map[string]any{"code": "location.href", "tabId": tab})
		cancel()
		if err == nil && jsValue(testutil.Text(res)) == w.pages.url("index.html") {
			ok = true
			break
		}
		lastErr = err
		time.Sleep(200 * time.Millisecond)
	}
	if !ok {
		t.Fatalf("no call succeeded within 10 s of killing the host (last error: %v)", lastErr)
	}
	t.Logf("a call succeeded %v after the host was killed", time.Since(start).Round(time.Millisecond))
	after := hostPIDs()
	if len(after) != 1 || after[0] == before[0] {
		t.Errorf("hosts before the kill %v, after %v: want one new host", before, after)
	}
	if w.chrome.ProcessState != nil || syscall.Kill(chromePID, 0) != nil {
		t.Errorf("Chromium (pid %d) is gone", chromePID)
	}
	// The session still works as before: navigate in it.
	c.navigate(t, tab, w.pages.url("form.html"))
}
