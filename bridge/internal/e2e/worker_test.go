//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
)

// Time limits of the worker test.
const (
	// workerGoneWait bounds how long the bridge takes to notice the stopped
	// worker: its native port closes, the host exits, the bridge forgets
	// the browser.
	workerGoneWait = 30 * time.Second
	// workerBackWait bounds the return of the worker by itself. The
	// extension's standing alarm fires every 30 s, so it is back within
	// about 30 s; three periods leave room for a loaded machine.
	workerBackWait = 90 * time.Second
)

// TestWorkerStopped stops the extension's service worker the way Chrome
// does on an update, a crash, memory pressure or devtools' Stop (here the
// DevTools protocol's Target.closeTarget on the service_worker target).
// Without any user action the worker must come back (the standing
// chrome.alarms alarm of sw/native.js wakes it), reconnect to the bridge,
// and the same MCP session's next call must act on the same tab, still in
// the session's group.
//
// A second session ends while the browser is away, so its session.ended
// reaches no browser: the hello after the return does not list it, and the
// extension must release its tab group (ungroup, the default) instead of
// keeping it for ever or handing it to anyone.
func TestWorkerStopped(t *testing.T) {
	start := time.Now()
	mark := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }

	w := startWorld(t, worldOptions{})
	dt := w.restartForRemote()
	mark("world up, Chromium with DevTools")

	c := w.client("e2e-worker")
	index := w.pages.url("index.html")
	tab := c.newTab(t, index)
	group := sessionTab(t, c, tab).GroupID
	gone := w.client("e2e-ends-while-away")
	goneTab := gone.newTab(t, w.pages.url("form.html"))
	goneGroup := sessionTab(t, gone, goneTab).GroupID
	before := w.healthBrowsers(t)
	if len(before) != 1 {
		t.Fatalf("before the stop /health lists %d browsers, want 1: %+v", len(before), before)
	}
	mark(fmt.Sprintf("session has tab %d in group %d; browser %s via host %d", tab, group, before[0].ID, before[0].HostPID))

	browser, err := dialCDP("ws://" + dt.host + dt.browserPath)
	if err != nil {
		t.Fatalf("DevTools: %v", err)
	}
	defer browser.close()
	worker := workerTarget(t, browser)
	var closed struct {
		Success bool `json:"success"`
	}
	if err := browser.call("Target.closeTarget", map[string]any{"targetId": worker}, &closed); err != nil {
		t.Fatalf("DevTools Target.closeTarget on the service worker: %v", err)
	}
	stopped := time.Now()
	mark("service worker stopped (Target.closeTarget)")

	// A call made right away waits up to the bridge's browser_wait for the
	// browser: whether that is long enough for the alarm is what this
	// measures. If it succeeds it must have run on the session's tab.
	type early struct {
		href  string
		err   error
		after time.Duration
	}
	earlyDone := make(chan early, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), workerBackWait)
		defer cancel()
		res, err := c.try(ctx, "javascript_tool", map[string]any{"code": "location.href"})
		earlyDone <- early{href: jsValue(testutil.Text(res)), err: err, after: time.Since(stopped)}
	}()

	// The stop must really cut the link, or the rest proves nothing.
	testutil.WaitWithin(t, workerGoneWait, "", func() (bool, string) {
		got := w.healthBrowsers(t)
		return len(got) == 0, fmt.Sprintf("the bridge still lists %+v after the worker was stopped", got)
	})
	mark(fmt.Sprintf("the bridge lost the browser %.1fs after the stop", time.Since(stopped).Seconds()))
	w.closeSession(gone.cs)
	mark("the second session ended while the browser was away")

	// Back by itself: nothing in this test touches the browser now.
	var after []protocol.BrowserInfo
	testutil.WaitWithin(t, workerBackWait, "", func() (bool, string) {
		after = w.healthBrowsers(t)
		return len(after) == 1, fmt.Sprintf("no browser came back within %v of the worker's stop (the bridge lists %d)", workerBackWait, len(after))
	})
	back := time.Since(stopped)
	mark(fmt.Sprintf("browser back %.1fs after the worker stopped", back.Seconds()))
	t.Logf("worker stop -> reconnected: %.1fs", back.Seconds())
	if after[0].ID != before[0].ID {
		t.Errorf("the browser came back as %s, was %s: the instance id must survive a worker restart", after[0].ID, before[0].ID)
	}
	if after[0].HostPID == before[0].HostPID {
		t.Errorf("the browser came back through the same host %d: the worker did not really stop", after[0].HostPID)
	}
	if w.chrome.ProcessState != nil {
		t.Fatalf("Chromium exited: %v", w.chrome.ProcessState)
	}
	if got := workerTarget(t, browser); got == worker {
		t.Errorf("the service worker's DevTools target %s is the one that was closed", got)
	}

	select {
	case e := <-earlyDone:
		switch {
		case e.err != nil:
			t.Logf("the call made at the stop failed after %.1fs (the bridge's browser_wait ran out first): %v", e.after.Seconds(), e.err)
		case e.href != index:
			t.Errorf("the call made at the stop ran at %q after the restart, want the session's tab at %s", e.href, index)
		default:
			t.Logf("the call made at the stop succeeded after %.1fs, on the session's tab", e.after.Seconds())
		}
	case <-time.After(callWait):
		t.Errorf("the call made at the stop has not returned %v after the browser came back", callWait)
	}

	// The same MCP session, the same tab: a call without a tab id acts on
	// the session's current tab, which is still the one it had, in its group.
	res := c.call(t, "javascript_tool", map[string]any{"code": "location.href"})
	if got := jsValue(testutil.Text(res)); got != index {
		t.Errorf("after the restart the session's call without a tab id ran at %q, want its tab at %s", got, index)
	}
	again := sessionTab(t, c, tab)
	if !again.Current || again.GroupID != group {
		t.Errorf("after the restart the session's tab %d is %+v, want it current and in group %d", tab, again, group)
	}
	c.navigate(t, tab, w.pages.url("form.html"))
	mark("the same session navigated its tab after the restart")

	// The session that ended meanwhile: its tab is open (ungroup is the
	// default) and in no group, and its group is gone.
	testutil.WaitWithin(t, 10*time.Second, "", func() (bool, string) {
		all := c.tabs(t, "tabs_context")
		for _, got := range all {
			if got.TabID == goneTab {
				return got.GroupID == -1, fmt.Sprintf("the tab of the session that ended while the browser was away is still in a group: %+v (its group was %d)", got, goneGroup)
			}
		}
		return false, fmt.Sprintf("the tab %d of the session that ended while the browser was away was closed; ungroup is the default (tabs: %+v)", goneTab, all)
	})
	mark("the session that ended while the browser was away lost its group")
}

// sessionTab returns tab as the session's tabs_context_mcp lists it, and
// fails if the session's group does not hold it.
func sessionTab(t *testing.T, c *client, tab int) tabInfo {
	t.Helper()
	tabs := c.tabs(t, "tabs_context_mcp")
	for _, got := range tabs {
		if got.TabID == tab {
			if got.GroupID < 0 {
				t.Fatalf("tab %d is in no group: %+v", tab, got)
			}
			return got
		}
	}
	t.Fatalf("the session's group does not hold tab %d: %+v", tab, tabs)
	return tabInfo{}
}

// workerTarget waits until DevTools lists the extension's service worker
// and returns its target id.
func workerTarget(t *testing.T, browser *cdpConn) string {
	t.Helper()
	want := extension.Origin() + "background.js"
	return waitTarget(t, browser, 10*time.Second, "service_worker", want, func(u string) bool { return u == want })
}

// waitTarget waits until DevTools (browser) lists a target of type typ
// whose URL match takes, and returns its id; where names what is wanted.
func waitTarget(t *testing.T, browser *cdpConn, d time.Duration, typ, where string, match func(url string) bool) string {
	t.Helper()
	var id string
	testutil.WaitWithin(t, d, "", func() (bool, string) {
		var r struct {
			TargetInfos []struct {
				TargetID string `json:"targetId"`
				Type     string `json:"type"`
				URL      string `json:"url"`
			} `json:"targetInfos"`
		}
		if err := browser.call("Target.getTargets", map[string]any{}, &r); err != nil {
			t.Fatalf("DevTools Target.getTargets: %v", err)
		}
		var seen []string
		for _, ti := range r.TargetInfos {
			if ti.Type == typ && match(ti.URL) {
				id = ti.TargetID
				return true, ""
			}
			seen = append(seen, ti.Type+" "+ti.URL)
		}
		return false, fmt.Sprintf("DevTools lists no %s at %s; targets: %s", typ, where, strings.Join(seen, ", "))
	})
	return id
}

// healthBrowsers returns the browsers the bridge's /health lists.
func (w *world) healthBrowsers(t *testing.T) []protocol.BrowserInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(w.mcpURL, "/mcp")+"/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /health: %v", err)
	}
	defer resp.Body.Close()
	var h struct {
		Browsers []protocol.BrowserInfo `json:"browsers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("GET /health: %v", err)
	}
	return h.Browsers
}
