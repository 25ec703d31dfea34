//go:build linux

package e2e

// Issue 30 end to end: an organization's policy wins over the person's.
// Real headless Chromium reads enterprise policy for the extension from
// /etc/chromium/policies/managed/*.json ("3rdparty" → "extensions" → the
// extension's id), as an IT department would deploy it; the test's
// Chromium sees a temporary directory there (worldOptions.policyDir), so
// the machine's /etc is never touched. The managed site rule refuses what
// the person's own rule allows, the popup and the options page show the
// managed settings locked and marked, and a policy changed while Chromium
// runs (the organization pausing agents) reaches the extension through
// chrome.storage.onChanged. Screenshots go to artifacts/managed/.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/extension"
)

func TestManagedPolicy(t *testing.T) {
	policyDir := managedPolicyDir(t)
	const reader = "e2e-managed-reader" // a client whose scope the organization sets
	org := map[string]any{
		"sites": []map[string]any{
			{"pattern": "127.0.0.1", "read": "allow", "act": "allow", "script": "block", "secrets": false},
		},
		"confirmIrreversible": true,
		"remoteScope":         "read",
		"scopes":              map[string]string{"local:" + reader: "read"},
		"auditMaxEntries":     50,
	}
	writeManagedPolicy(t, policyDir, org)
	w := startWorld(t, worldOptions{policyDir: policyDir})
	dt := w.restartChromiumWithDevTools()
	shots := artifactsDir(t, "managed")
	origin := w.pages.URL

	popup := openExtensionPage(t, dt, "popup.html")
	popup.waitText(t, "connected", "Connected to the bridge")
	// The policy is keyed by the id of the extension this Chromium loaded.
	if id := popup.js(t, `chrome.runtime.id`); id != extension.ID() {
		t.Fatalf("Chromium loaded the extension as %s; the policy names %s", id, extension.ID())
	}
	// Chromium read the directory: the extension sees the organization's values.
	testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
		got := popup.js(t, `chrome.storage.managed.get(null).then((m) => JSON.stringify(m))`)
		var m map[string]any
		_ = json.Unmarshal([]byte(got), &m)
		return m["confirmIrreversible"] == true && m["auditMaxEntries"] == float64(50), "chrome.storage.managed holds " + got
	})

	// The person's own policy says the opposite of the organization's.
	popup.setPolicy(t, map[string]any{
		"sites":               []map[string]any{{"pattern": "127.0.0.1", "read": "allow", "act": "allow", "script": "allow", "secrets": true}},
		"confirmIrreversible": false,
		"auditMaxEntries":     1000,
	})

	t.Run("the organization's rule wins over the person's", func(t *testing.T) {
		c := w.client("e2e-managed")
		// newTab waits for the page with a script, which the organization blocks here: tabs_context tells instead.
		res := c.call(t, "tabs_create_mcp", map[string]any{"url": w.pages.url("secrets.html")})
		tab, ok := tabIDOf(res)
		if !ok {
			t.Fatalf("tabs_create_mcp gave no tab id: %s", describe(res))
		}
		c.waitTabURL(t, tab, w.pages.url("secrets.html"))
		text, _ := c.toolError(t, "javascript_tool", map[string]any{"code": "document.title", "tabId": tab})
		want := fmt.Sprintf(`The organization's site policy blocks javascript_tool (script) on %s: its rule for "127.0.0.1" says script = block`, origin)
		if !strings.Contains(text, want) || !strings.Contains(text, "only their IT department can change it") {
			t.Errorf("javascript_tool under the managed rule: %q, want %q", text, want)
		}
		// The person's secrets opt-in does not reach past the organization's rule.
		text, _ = c.toolError(t, "form_input", map[string]any{"selector": "#pw-typed", "value": "S3cret-Managed-1", "tabId": tab})
		if !strings.Contains(text, "#pw-typed is a password field on "+origin+", and the person's organization does not let agents type secrets on this site (a managed policy)") {
			t.Errorf("form_input into a password field with the person's opt-in under the managed rule without: %q", text)
		}
		if res := c.call(t, "get_page_text", map[string]any{"tabId": tab}); res.IsError {
			t.Errorf("get_page_text, allowed by the managed rule: %s", describe(res))
		}
		// A client the organization made read-only.
		r := w.client(reader)
		r.call(t, "tabs_context_mcp", nil) // a call that needs no scope: the client gets its card in the popup
		text, _ = r.toolError(t, "navigate", map[string]any{"url": w.pages.url("form.html")})
		if !strings.Contains(text, "has the read-only scope in Browser Bridge, set by the person's organization") {
			t.Errorf("navigate from %s: %q", reader, text)
		}
	})

	t.Run("the popup shows what is managed, locked", func(t *testing.T) {
		popup.waitText(t, "managed settings", "Set by your organization: site rules, asking before irreversible clicks, the scope of remote clients, the scopes of named clients, how many calls the audit keeps.")
		var st struct {
			Checked, Disabled, Marked, AskDisabled, AskMarked bool
			AuditLink                                         string
		}
		popup.evalInto(t, `(() => { const c = document.getElementById('confirm-irreversible'), a = document.getElementById('ask-unlisted');
			return {checked: c.checked, disabled: c.disabled, marked: !document.getElementById('confirm-irreversible-managed').hidden,
				askDisabled: a.disabled, askMarked: !document.getElementById('ask-unlisted-managed').hidden,
				auditLink: document.getElementById('audit-link').getAttribute('href')}; })()`, &st)
		if !st.Checked || !st.Disabled || !st.Marked || st.AskDisabled || st.AskMarked || st.AuditLink != "options.html#audit" {
			t.Errorf("the popup's switches: %+v; want the irreversible-clicks switch on, disabled and marked, the unlisted one free, a link to options.html#audit", st)
		}
		// A click on the locked switch changes nothing.
		popup.click(t, "#confirm-irreversible")
		if got := popup.js(t, `chrome.storage.local.get('policy').then((g) => JSON.stringify([document.getElementById('confirm-irreversible').checked, g.policy.confirmIrreversible]))`); got != "[true,false]" {
			t.Errorf("after a click on the locked switch, [shown, the person's setting] = %s, want [true,false]", got)
		}
		// The read-only client's scope list: locked and marked.
		popup.waitJS(t, "the managed client's locked scope", popupWait, fmt.Sprintf(
			`[...document.querySelectorAll('#clients > li')].some((li) => li.querySelector('.name')?.textContent === %s &&
				li.querySelector('select.scope').disabled && li.querySelector('select.scope').value === 'read' &&
				li.querySelector('.client-scope .managed-mark')?.textContent === 'Set by your organization')`, jsString(reader)))
		popup.screenshot(t, filepath.Join(shots, "popup-managed.png"), popupWidth, popupMaxHeight)
		popup.darkScreenshot(t, filepath.Join(shots, "popup-managed-dark.png"), popupWidth, popupMaxHeight)
	})

	t.Run("the options page shows the organization's rules first, not editable", func(t *testing.T) {
		options := openExtensionPage(t, dt, "options.html")
		options.waitText(t, "managed rules", "Your organization sets the rules marked so", "Set by your organization", "Scripts: block", "no secrets",
			"(set by your organization)", "The newest 50 calls are kept")
		var rules []struct {
			Pattern, Managed string
			Selects          int
		}
		options.evalInto(t, `[...document.querySelectorAll('#site-rules > li.site-rule')].map((li) => ({pattern: li.dataset.pattern,
			managed: li.dataset.managed || '', selects: li.querySelectorAll('select, input, button').length}))`, &rules)
		if len(rules) != 2 || rules[0].Managed != "true" || rules[0].Selects != 0 || rules[1].Managed != "" || rules[1].Selects == 0 {
			t.Errorf("the site rules drawn: %+v; want the organization's first with no control, then the person's", rules)
		}
		options.screenshot(t, filepath.Join(shots, "options-managed.png"), 900, 1400)
	})

	t.Run("a policy changed while Chromium runs: the organization pauses agents", func(t *testing.T) {
		org["paused"] = true
		writeManagedPolicy(t, policyDir, org)
		popup.waitText(t, "paused by the organization", "Paused by your organization", "Only your IT department can resume them")
		if !popup.evalBool(t, `document.getElementById('pause').disabled`) {
			t.Error("the pause button can be pressed while the organization pauses agents")
		}
		c := w.client("e2e-managed-paused")
		text, _ := c.toolError(t, "tabs_context", nil)
		if !strings.Contains(text, "The person's organization paused all agents in Browser Bridge (a managed policy), so tabs_context was not run") {
			t.Errorf("a call while the organization pauses agents: %q", text)
		}
		var res struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		popup.evalInto(t, `chrome.runtime.sendMessage({type: 'agents.resume'})`, &res)
		if res.OK || !strings.Contains(res.Error, "only your IT department can resume them") {
			t.Errorf("resume while the organization pauses agents: %+v", res)
		}
		popup.screenshot(t, filepath.Join(shots, "popup-paused-by-organization.png"), popupWidth, popupMaxHeight)
		delete(org, "paused")
		writeManagedPolicy(t, policyDir, org)
		popup.waitText(t, "resumed by the organization", "Pause all agents")
		testutil.WaitWithin(t, popupWait, "", func() (bool, string) {
			_, err := c.try(bg(callWait), "tabs_context", nil)
			return err == nil, fmt.Sprintf("tabs_context after the organization lifted its pause: %v", err)
		})
	})
}

// managedPolicyDir makes the directory the test's Chromium sees as
// /etc/chromium (worldOptions.policyDir): a copy of the machine's
// /etc/chromium (its master_preferences) with an empty policies/managed.
// It skips the test, saying why, where a private mount namespace cannot be
// made here (unshare and mount need root or user namespaces).
func managedPolicyDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/etc/chromium"); err != nil || !fi.IsDir() {
		t.Skipf("skipped: /etc/chromium is not a directory here (%v), and the test may not create it; Chromium reads its policies below it", err)
	}
	dir := t.TempDir()
	probe := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", `mount --bind "$0" /etc/chromium`, dir)
	if out, err := probe.CombinedOutput(); err != nil {
		if os.Geteuid() == 0 {
			// As root (CI, this machine) the namespace must work: a
			// failure here is not a missing permission, so it fails.
			t.Fatalf("unshare --mount as root failed: %v: %s", err, strings.TrimSpace(string(out)))
		}
		t.Skipf("skipped: this test runs Chromium in a private mount namespace with its policy directory bind-mounted over /etc/chromium, "+
			"and that is not permitted here (unshare --mount: %v: %s); it needs root, or user namespaces", err, strings.TrimSpace(string(out)))
	}
	entries, err := os.ReadDir("/etc/chromium")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/etc/chromium", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "policies", "managed"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeManagedPolicy writes the extension's managed policy as an IT
// department deploys it on Linux (docs/managed-policy.md), replacing the
// file at once (a rename): Chromium watches the directory and reloads.
func writeManagedPolicy(t *testing.T, policyDir string, values map[string]any) {
	t.Helper()
	doc := map[string]any{"3rdparty": map[string]any{"extensions": map[string]any{extension.ID(): values}}}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// Written beside the directory Chromium reads, which takes every file in it.
	tmp := filepath.Join(policyDir, "browserbridge.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(policyDir, "policies", "managed", "browserbridge.json")); err != nil {
		t.Fatal(err)
	}
}

// evalBool evaluates expr in the page and returns it as a bool.
func (p *extPage) evalBool(t *testing.T, expr string) bool {
	t.Helper()
	var ok bool
	p.evalInto(t, "Boolean("+expr+")", &ok)
	return ok
}
