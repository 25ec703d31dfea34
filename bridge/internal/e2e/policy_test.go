//go:build linux

package e2e

// Issue 29 end to end: the person stays in control. Real headless Chromium
// with the real extension, a local MCP client and a remote one through the
// cloud relay (the real proxy and `browserbridge connect`), and the popup
// open in a tab, driven over DevTools as a person would (mouse clicks on
// its buttons). The site policy is written where the extension keeps it
// (chrome.storage.local "policy", from the popup's page). Screenshots of a
// pending approval go to artifacts/popup/ (light and dark).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// approvalTimeout is the policy's timeoutMs in the test: short, so that
// the timeout cases end soon, long enough for the popup to show the call.
const approvalTimeout = 4 * time.Second

// timeLeft is an approval card's time left under the default 2 minutes.
var timeLeft = regexp.MustCompile(`^(2:00|1:[0-5][0-9]) left$`)

func TestPolicy(t *testing.T) {
	start := time.Now()
	proxyURL, mint := startTestProxy(t)
	w := startWorld(t, worldOptions{relay: &relayOptions{url: proxyURL, token: mint(token.KindExtension)}})
	dt := w.restartChromiumWithDevTools()
	extID := relayExtensionID(t, w, proxyURL)
	popup := openExtensionPage(t, dt, "popup.html")
	popup.waitText(t, "connected", "Connected to the bridge", "Pause all agents")
	shots := artifactsDir(t, "popup")

	form := w.pages.url("form.html")
	origin := w.pages.URL
	var progressMu sync.Mutex
	var progress []string
	local := w.clientWith("e2e-policy-local", func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		progressMu.Lock()
		progress = append(progress, req.Params.Message)
		progressMu.Unlock()
	})
	localTab := local.newTab(t, form)
	local.waitURL(t, localTab, form)
	remote, _ := connectRemote(t, w, proxyURL, mint(token.KindMCP), extID)
	remoteTab := remote.newTab(t, form)
	remote.waitURL(t, remoteTab, form)
	t.Logf("world, popup, a local and a remote client up in %v", time.Since(start).Round(time.Millisecond))

	// One call of each class on the client's own tab.
	type classCall struct {
		cls, tool string
		args      func(tab int) map[string]any
	}
	classes := []classCall{
		{"read", "get_page_text", func(tab int) map[string]any { return map[string]any{"tabId": tab} }},
		{"act", "navigate", func(tab int) map[string]any { return map[string]any{"url": form, "tabId": tab} }},
		{"script", "javascript_tool", func(tab int) map[string]any { return map[string]any{"code": "document.title", "tabId": tab} }},
	}
	clients := []struct {
		c   *client
		tab int
	}{{local, localTab}, {remote, remoteTab}}

	t.Run("scopes refuse what they exclude", func(t *testing.T) {
		text, _ := remote.toolError(t, "javascript_tool", classes[2].args(remoteTab))
		if !strings.Contains(text, "javascript_tool needs the full (scripts, uploads, dev tools) scope, and e2e-relay (remote) has the read and act scope") {
			t.Errorf("a remote client's script under the default scope: %q", text)
		}
		// The person makes the local client read-only in the popup.
		popup.chooseScope(t, "e2e-policy-local", "read")
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			res, err := local.try(bg(callWait), "navigate", classes[1].args(localTab))
			if err == nil {
				return false, "navigate still runs for a read-only client: " + describe(res)
			}
			return strings.Contains(err.Error(), "navigate needs the read and act scope, and e2e-policy-local has the read-only scope"), err.Error()
		})
		if res := local.call(t, "get_page_text", map[string]any{"tabId": localTab}); res.IsError {
			t.Errorf("a read-only client cannot read: %s", describe(res))
		}
		popup.chooseScope(t, "e2e-policy-local", "full")
		// And gives the remote client the full scope, so that the site policy
		// below is all that stands between either client and the page.
		popup.chooseScope(t, "e2e-relay", "full")
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			_, err := remote.try(bg(callWait), "javascript_tool", classes[2].args(remoteTab))
			return err == nil, fmt.Sprintf("javascript_tool from the remote client with the full scope: %v", err)
		})
	})

	t.Run("block, for each class, local and remote alike", func(t *testing.T) {
		popup.setPolicy(t, map[string]any{"sites": []map[string]any{{"pattern": "127.0.0.1", "read": "block", "act": "block", "script": "block"}}})
		for _, cl := range clients {
			for _, k := range classes {
				text, _ := cl.c.toolError(t, k.tool, k.args(cl.tab))
				want := fmt.Sprintf(`blocks %s (%s) on %s: the rule for "127.0.0.1" says %s = block`, k.tool, k.cls, origin, k.cls)
				if !strings.Contains(text, want) {
					t.Errorf("%s's %s: %q, want it to say %q", cl.c.name, k.tool, text, want)
				}
			}
		}
	})

	askPolicy := map[string]any{
		"sites":     []map[string]any{{"pattern": "127.0.0.1", "read": "ask", "act": "ask", "script": "ask"}},
		"timeoutMs": approvalTimeout.Milliseconds(),
	}
	var roundTrips []time.Duration
	t.Run("ask: approve, deny, time out, for each class, local and remote alike", func(t *testing.T) {
		popup.setPolicy(t, askPolicy)
		for _, cl := range clients {
			for _, k := range classes {
				what := fmt.Sprintf("%s (%s) on %s", k.tool, k.cls, origin)
				// Approved in the popup: the call runs.
				done := cl.c.start(k.tool, k.args(cl.tab))
				popup.waitApproval(t, cl.c.name, k.tool, origin)
				clicked := time.Now()
				popup.answer(t, "once")
				r := <-done
				roundTrips = append(roundTrips, time.Since(clicked))
				if r.err != nil {
					t.Errorf("%s's %s, approved once: %v", cl.c.name, k.tool, r.err)
				}
				// Denied in the popup.
				done = cl.c.start(k.tool, k.args(cl.tab))
				popup.waitApproval(t, cl.c.name, k.tool, origin)
				popup.answer(t, "deny")
				if r := <-done; r.err == nil || !strings.Contains(r.err.Error(), "The person denied "+what) {
					t.Errorf("%s's %s, denied: %v", cl.c.name, k.tool, r.err)
				}
				// Nobody answers.
				done = cl.c.start(k.tool, k.args(cl.tab))
				r = <-done
				if r.err == nil || !strings.Contains(r.err.Error(), fmt.Sprintf("Nobody approved %s within %d s", what, int(approvalTimeout.Seconds()))) {
					t.Errorf("%s's %s, unanswered: %v", cl.c.name, k.tool, r.err)
				} else if r.took < approvalTimeout-100*time.Millisecond {
					t.Errorf("%s's %s timed out after %v, before the policy's %v", cl.c.name, k.tool, r.took, approvalTimeout)
				}
			}
		}
		popup.waitJS(t, "no approval left", popupWait, `document.querySelectorAll('#approvals > li').length === 0 && document.getElementById('approvals-section').hidden`)
	})

	t.Run("a waiting call gets progress, a badge and a notification; the popup shows it, light and dark", func(t *testing.T) {
		popup.setPolicy(t, map[string]any{"sites": askPolicy["sites"]}) // the default timeout, 2 minutes
		done := local.startWithProgress("get_page_text", map[string]any{"tabId": localTab})
		what := fmt.Sprintf("get_page_text (read) on %s", origin)
		popup.waitApproval(t, local.name, "get_page_text", origin)
		testutil.WaitWithin(t, callWait, "", func() (bool, string) {
			progressMu.Lock()
			defer progressMu.Unlock()
			return slices.ContainsFunc(progress, func(m string) bool {
				return strings.Contains(m, "Waiting for the person to approve "+what)
			}), fmt.Sprintf("progress so far: %q", progress)
		})
		var state struct {
			Badge         string   `json:"badge"`
			Notifications []string `json:"notifications"`
			Left          string   `json:"left"`
		}
		popup.evalInto(t, `(async () => ({
			badge: await chrome.action.getBadgeText({}),
			notifications: Object.keys(await chrome.notifications.getAll()),
			left: document.querySelector('#approvals .approval-left').textContent,
		}))()`, &state)
		id := popup.js(t, `document.querySelector('#approvals > li').dataset.approval`)
		if state.Badge != "1" || !slices.Contains(state.Notifications, "approval:"+id) || !timeLeft.MatchString(state.Left) {
			t.Errorf("while a call waits: badge %q, notifications %q (want approval:%s), time left %q", state.Badge, state.Notifications, id, state.Left)
		}
		popup.screenshot(t, filepath.Join(shots, "11-approval-pending.png"), popupWidth, popupMaxHeight)
		popup.darkScreenshot(t, filepath.Join(shots, "12-approval-pending-dark.png"), popupWidth, popupMaxHeight)
		// "Allow this site for this client": this call and the next ones.
		popup.answer(t, "site")
		if r := <-done; r.err != nil {
			t.Fatalf("approved for the site: %v", r.err)
		}
		for _, k := range classes[:2] {
			if res, err := local.try(bg(callWait), k.tool, k.args(localTab)); err != nil {
				t.Errorf("%s after the site was allowed for the client: %v", k.tool, err)
			} else if res.IsError {
				t.Errorf("%s: %s", k.tool, describe(res))
			}
		}
		popup.waitJS(t, "the badge cleared", popupWait, `chrome.action.getBadgeText({}).then((t) => t === '')`)
	})

	t.Run("pause ends the waiting call and refuses new ones until resume", func(t *testing.T) {
		popup.setPolicy(t, askPolicy)
		done := remote.start("get_page_text", map[string]any{"tabId": remoteTab})
		popup.waitApproval(t, remote.name, "get_page_text", "read")
		popup.click(t, "#pause")
		r := <-done
		if r.err == nil || !strings.Contains(r.err.Error(), "The person paused all agents in Browser Bridge while get_page_text") {
			t.Errorf("the waiting call when the person paused: %v", r.err)
		}
		popup.waitText(t, "paused", "Resume agents", "Agents are paused")
		for _, cl := range clients {
			text, _ := cl.c.toolError(t, "tabs_context", nil)
			if !strings.Contains(text, "The person paused all agents in Browser Bridge, so tabs_context was not run") {
				t.Errorf("%s's call while paused: %q", cl.c.name, text)
			}
		}
		popup.screenshot(t, filepath.Join(shots, "13-paused.png"), popupWidth, popupMaxHeight)
		popup.click(t, "#pause")
		popup.waitText(t, "resumed", "Pause all agents")
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			_, err := local.try(bg(callWait), "tabs_context", nil)
			return err == nil, fmt.Sprintf("tabs_context after resume: %v", err)
		})
	})

	t.Run("an approved plan grants its sites to the session", func(t *testing.T) {
		// The switch in the popup: ask on sites not yet allowed. The person
		// answers the plan's approval here, so its wait is long: on a busy
		// machine showing it and clicking can take more than approvalTimeout.
		popup.setPolicy(t, map[string]any{"timeoutMs": popupWait.Milliseconds()})
		popup.click(t, "#ask-unlisted")
		popup.waitJS(t, "the policy asks on unlisted sites", popupWait, `chrome.storage.local.get('policy').then((g) => g.policy?.unlisted === 'ask')`)
		planner := w.client("e2e-planner")
		tab := planner.newTabApproved(t, popup, form)
		done := planner.start("update_plan", map[string]any{
			"plan":    []map[string]any{{"step": "Read the form", "status": "in_progress"}},
			"domains": []string{"127.0.0.1"},
		})
		popup.waitApproval(t, "e2e-planner", "approve a plan on 127.0.0.1")
		popup.answer(t, "site")
		if r := <-done; r.err != nil {
			t.Fatalf("update_plan, approved: %v", r.err)
		}
		for _, k := range classes[:2] {
			if _, err := planner.try(bg(callWait), k.tool, k.args(tab)); err != nil {
				t.Errorf("%s on a site of the approved plan: %v", k.tool, err)
			}
		}
		// Another site is still asked for: localhost is another origin of the
		// same pages. Nobody answers, so the short wait again.
		popup.setPolicy(t, map[string]any{"timeoutMs": approvalTimeout.Milliseconds(), "unlisted": "ask"})
		other := strings.Replace(form, "127.0.0.1", "localhost", 1)
		r := <-planner.start("navigate", map[string]any{"url": other, "tabId": tab})
		if r.err == nil || !strings.Contains(r.err.Error(), "Nobody approved navigate (act) on "+strings.Replace(origin, "127.0.0.1", "localhost", 1)) {
			t.Errorf("navigate to a site outside the plan: %v", r.err)
		}
		popup.click(t, "#ask-unlisted")
		popup.waitJS(t, "the policy allows unlisted sites again", popupWait, `chrome.storage.local.get('policy').then((g) => g.policy?.unlisted === 'allow')`)
	})

	t.Run("site rules made in the options page apply", func(t *testing.T) {
		popup.setPolicy(t, map[string]any{})
		options := openExtensionPage(t, dt, "options.html")
		options.waitText(t, "the options page", "Sites agents may use", "No site has a rule yet.")
		options.js(t, `document.getElementById('site-pattern').value = 'not a site'`)
		options.click(t, `#site-add button[type="submit"]`)
		options.waitText(t, "a bad pattern", `"not a site" is not a site`)
		options.js(t, `document.getElementById('site-pattern').value = '127.0.0.1'`)
		options.click(t, `#site-add button[type="submit"]`)
		options.waitJS(t, "the new rule", popupWait, `!!document.querySelector('li.site-rule[data-pattern="127.0.0.1"]')`)
		// A new rule asks for everything; the person lets agents read and act, and blocks scripts.
		for cls, verdict := range map[string]string{"read": "allow", "act": "allow", "script": "block"} {
			options.js(t, fmt.Sprintf(`(() => { const s = document.getElementById('rule-127.0.0.1-%s'); s.value = %q; s.dispatchEvent(new Event('change')); return s.value; })()`, cls, verdict))
		}
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			got := options.js(t, `chrome.storage.local.get('policy').then((g) => JSON.stringify(g.policy.sites))`)
			var rules []map[string]any
			_ = json.Unmarshal([]byte(got), &rules)
			// secrets: the opt-in of issue 30, off for a new rule.
			want := map[string]any{"pattern": "127.0.0.1", "read": "allow", "act": "allow", "script": "block", "secrets": false}
			return len(rules) == 1 && maps.Equal(rules[0], want), "the stored rules: " + got
		})
		options.screenshot(t, filepath.Join(shots, "14-options-site-rules.png"), 760, 1400)
		text, _ := local.toolError(t, "javascript_tool", classes[2].args(localTab))
		if want := `the rule for "127.0.0.1" says script = block`; !strings.Contains(text, want) {
			t.Errorf("javascript_tool under the options page's rule: %q, want %q", text, want)
		}
		if _, err := local.try(bg(callWait), "get_page_text", map[string]any{"tabId": localTab}); err != nil {
			t.Errorf("get_page_text under the options page's rule: %v", err)
		}
		options.click(t, `li.site-rule[data-pattern="127.0.0.1"] button.danger`)
		options.waitText(t, "the rule removed", "No site has a rule yet.")
	})

	t.Run("figures: the policy check per call, and the approval round trip", func(t *testing.T) {
		// get_page_text on the same tab, interleaved: under the default policy
		// (no tab lookup) and under 50 rules with an allow for this site (a tab
		// lookup and a rule match). The difference of the medians is the check.
		rules := []map[string]any{{"pattern": "127.0.0.1", "read": "allow", "act": "allow", "script": "allow"}}
		for i := range 49 {
			rules = append(rules, map[string]any{"pattern": fmt.Sprintf("*.site%d.example", i), "read": "ask", "act": "block", "script": "block"})
		}
		var plain, ruled []time.Duration
		var plainCheck, ruledCheck []float64
		measure := func(into *[]time.Duration, checks *[]float64) {
			since := time.Now().UnixMilli()
			for range 20 {
				t0 := time.Now()
				local.call(t, "get_page_text", map[string]any{"tabId": localTab})
				*into = append(*into, time.Since(t0))
			}
			// The extension's own timing of the check (recent calls' checkMs),
			// which it stores once the calls pause.
			var ms []float64
			testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
				ms = nil
				popup.evalInto(t, fmt.Sprintf(`chrome.storage.session.get('recentCalls').then((g) => (g.recentCalls || [])
					.filter((c) => c.tool === 'get_page_text' && c.client === 'e2e-policy-local' && c.at >= %d).map((c) => c.checkMs))`, since), &ms)
				return len(ms) == 20, fmt.Sprintf("%d of the 20 calls in the recent calls", len(ms))
			})
			*checks = append(*checks, ms...)
		}
		for range 5 {
			popup.setPolicy(t, map[string]any{})
			measure(&plain, &plainCheck)
			popup.setPolicy(t, map[string]any{"sites": rules})
			measure(&ruled, &ruledCheck)
		}
		popup.setPolicy(t, map[string]any{})
		t.Logf("get_page_text, 100 calls each: the policy check inside the extension (performance.now around sw/gate.js check): median %.3f ms, p99 %.3f ms under the default policy; median %.3f ms, p99 %.3f ms under 50 rules (a tab lookup and a rule match)",
			quantile(plainCheck, 0.5), quantile(plainCheck, 0.99), quantile(ruledCheck, 0.5), quantile(ruledCheck, 0.99))
		t.Logf("the whole call from the client, median: %v under the default policy, %v under 50 rules", medianOf(plain), medianOf(ruled))
		if len(roundTrips) > 0 {
			t.Logf("approval round trip, from the popup's button pressed to the client's result (%d calls, the tool's own run included): median %v, max %v",
				len(roundTrips), medianOf(roundTrips), slices.Max(roundTrips))
		}
	})
}

// clientWith is world.client with a handler for progress notifications.
func (w *world) clientWith(name string, onProgress func(context.Context, *mcp.ProgressNotificationClientRequest)) *client {
	w.tb.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, &mcp.ClientOptions{ProgressNotificationHandler: onProgress})
	tr := &mcp.StreamableClientTransport{Endpoint: w.mcpURL, MaxRetries: -1}
	cs, err := c.Connect(bg(10*time.Second), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		w.fatalWithLogs("MCP connect to %s: %v", w.mcpURL, err)
	}
	w.mu.Lock()
	w.sessions = append(w.sessions, cs)
	w.mu.Unlock()
	return &client{w: w, cs: cs, name: name}
}

// callResult is how a call started with start ended; err holds a tool
// error's text as try gives it.
type callResult struct {
	res  *mcp.CallToolResult
	err  error
	took time.Duration
}

// start calls a tool in the background: the call may wait for the person.
func (c *client) start(name string, args map[string]any) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		t0 := time.Now()
		res, err := c.try(bg(2*callWait), name, args)
		done <- callResult{res, err, time.Since(t0)}
	}()
	return done
}

// startWithProgress is start with a progress token on the call.
func (c *client) startWithProgress(name string, args map[string]any) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		t0 := time.Now()
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		p.SetProgressToken("e2e-progress")
		res, err := c.cs.CallTool(bg(2*callWait), p)
		if err == nil && res.IsError {
			err = fmt.Errorf("%s", testutil.Text(res))
		}
		done <- callResult{res, err, time.Since(t0)}
	}()
	return done
}

// newTabApproved opens a tab at url for a client whose first call asks the
// person (the popup's "Allow once").
func (c *client) newTabApproved(t *testing.T, popup *extPage, url string) int {
	t.Helper()
	done := c.start("tabs_create_mcp", map[string]any{"url": url})
	popup.waitApproval(t, c.name, "act on")
	popup.answer(t, "once")
	r := <-done
	if r.err != nil {
		t.Fatalf("tabs_create_mcp, approved: %v", r.err)
	}
	id, ok := tabIDOf(r.res)
	if !ok {
		t.Fatalf("tabs_create_mcp gave no tab id: %s", describe(r.res))
	}
	return id
}

// setPolicy writes the person's site policy where the extension keeps it,
// keeping the client scopes chosen in the popup.
func (p *extPage) setPolicy(t *testing.T, policy map[string]any) {
	t.Helper()
	var ok bool
	p.evalInto(t, fmt.Sprintf(`chrome.storage.local.get('policy').then((g) =>
		chrome.storage.local.set({policy: {...%s, scopes: g.policy?.scopes || {}}})).then(() => true)`, mustJSON(policy)), &ok)
}

// answer clicks one of the waiting call's buttons and waits until the
// popup no longer shows it.
func (p *extPage) answer(t *testing.T, answer string) {
	t.Helper()
	p.click(t, fmt.Sprintf(`#approvals [data-answer=%q]`, answer))
	p.waitJS(t, "the answered call gone from the popup", popupWait, `document.querySelectorAll('#approvals > li').length === 0`)
}

// waitApproval waits until the popup shows one waiting call, of client,
// whose card has each of parts.
func (p *extPage) waitApproval(t *testing.T, client string, parts ...string) {
	t.Helper()
	checks := []string{"li[0].innerText.includes(" + jsString(client) + ")"}
	for _, part := range parts {
		checks = append(checks, "li[0].innerText.includes("+jsString(part)+")")
	}
	p.waitJS(t, fmt.Sprintf("the approval of %s: %q", client, parts), popupWait, fmt.Sprintf(
		`(() => { const li = document.querySelectorAll('#approvals > li'); return li.length === 1 && %s; })()`,
		strings.Join(checks, " && ")))
}

// chooseScope picks a scope in the client card of the client named name,
// as a person does with the list: focus, choose, leave.
func (p *extPage) chooseScope(t *testing.T, name, scope string) {
	t.Helper()
	// A remote client's card says "<name> (remote)"; its scope is kept under its name.
	p.waitJS(t, "the scope list of "+name, popupWait, fmt.Sprintf(
		`[...document.querySelectorAll('#clients > li')].some((li) => [%[1]s, %[1]s + ' (remote)'].includes(li.querySelector('.name')?.textContent) && li.querySelector('select.scope'))`, jsString(name)))
	p.front(t)
	p.js(t, fmt.Sprintf(`(() => { const li = [...document.querySelectorAll('#clients > li')].find((l) => [%[1]s, %[1]s + ' (remote)'].includes(l.querySelector('.name')?.textContent));
		const s = li.querySelector('select.scope'); s.focus(); s.value = %s; s.dispatchEvent(new Event('change')); s.blur(); return s.value; })()`,
		jsString(name), jsString(scope)))
	p.waitJS(t, name+"'s scope stored", popupWait, fmt.Sprintf(
		`chrome.storage.local.get('policy').then((g) => Object.entries(g.policy?.scopes || {}).some(([k, v]) => k.endsWith(':' + %s) && v === %s))`,
		jsString(name), jsString(scope)))
}

// click presses and releases the mouse on the centre of the element
// selector names, as a person does.
func (p *extPage) click(t *testing.T, selector string) {
	t.Helper()
	p.front(t)
	var pt struct {
		OK bool    `json:"ok"`
		X  float64 `json:"x"`
		Y  float64 `json:"y"`
	}
	p.evalInto(t, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return {ok: false};
		e.scrollIntoView({block: 'center'}); const b = e.getBoundingClientRect();
		return {ok: true, x: b.left + b.width / 2, y: b.top + b.height / 2}; })()`, jsString(selector)), &pt)
	if !pt.OK {
		t.Fatalf("the popup has no %s to click:\n%s", selector, p.visibleText(t))
	}
	for _, ev := range []struct{ typ, button string }{{"mouseMoved", "none"}, {"mousePressed", "left"}, {"mouseReleased", "left"}} {
		if err := p.conn.call("Input.dispatchMouseEvent", map[string]any{
			"type": ev.typ, "x": pt.X, "y": pt.Y, "button": ev.button, "clickCount": 1,
		}, &struct{}{}); err != nil {
			t.Fatalf("DevTools: %v", err)
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// quantile is the q quantile of v, in any order.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// medianOf is the median of d, in any order.
func medianOf(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return median(s)
}
