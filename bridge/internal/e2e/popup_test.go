//go:build linux

package e2e

// Issue 14 end to end: the popup (popup.html in a tab of the real headless
// Chromium, driven through DevTools) in its main states: connected with no
// client; several real MCP clients with tool calls; ten clients (compact
// cards); the bridge unable to start (a port another program holds, then an
// invalid config: the host starts the real bridge, which fails); back to
// connected with no stale error; dark theme (prefers-color-scheme emulated).
// Each state's visible text is checked and a PNG of it saved into
// popup/ under $BROWSERBRIDGE_ARTIFACTS (default artifacts/ at the
// repository's root), for a person to look at; so is the options page.

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Time limits of the popup test.
const (
	// popupWait bounds each state change the popup must show. A failed
	// start is told within a few seconds, but the host starts a bridge at
	// most every 10 s, so the next state may take that long plus a busy
	// machine's slowness.
	popupWait = 60 * time.Second
	// popupWidth is the popup's width (ui.css, body.popup); popupMaxHeight
	// is the most Chrome gives a popup.
	popupWidth, popupMaxHeight = 380, 600
)

func TestPopup(t *testing.T) {
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	w := startWorld(t, worldOptions{listen: listen, hostStartsBridge: true})
	// Runs before w.stop: Chromium first, then the bridges the host started.
	t.Cleanup((&restartWorld{world: w}).stopBridges)
	dt := w.restartChromiumWithDevTools()
	shots := artifactsDir(t, "popup")

	popup := openExtensionPage(t, dt, "popup.html")
	popup.waitText(t, "connected, no client", "Connected to the bridge", "No MCP client has used this browser yet.")
	popup.noText(t, "connected, no client", "Recent tool calls", "Error", "could not start")
	popup.screenshot(t, filepath.Join(shots, "01-connected-no-clients.png"), popupWidth, popupMaxHeight)

	// Three real MCP clients, each with its own tab group and calls.
	claude, cursor, vscode := w.client("Claude Code"), w.client("Cursor"), w.client("VS Code")
	tab := claude.newTab(t, w.pages.url("index.html"))
	claude.navigate(t, tab, w.pages.url("form.html"))
	claude.call(t, "update_plan", map[string]any{"plan": []map[string]any{
		{"step": "Open the order form", "status": "completed"},
		{"step": "Fill in the delivery address", "status": "in_progress"},
		{"step": "Check the total before submitting", "status": "pending"},
	}})
	cursorTab := cursor.newTab(t, w.pages.url("long.html"))
	cursor.call(t, "get_page_text", map[string]any{"tabId": cursorTab})
	cursor.call(t, "turn_answer_start", map[string]any{"summary": "summarising the article"})
	vscode.call(t, "tabs_context_mcp", nil)
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	_, err := vscode.try(ctx, "navigate", map[string]any{"url": w.pages.url("index.html"), "tabId": 987654})
	cancel()
	if err == nil {
		t.Fatal("navigate in a tab that does not exist succeeded")
	}
	popup.waitText(t, "three clients", "Claude Code", "Cursor", "VS Code", "Recent tool calls", "Fill in the delivery address", "Answering: summarising the article")
	popup.waitJS(t, "three cards and the calls", popupWait,
		`document.querySelectorAll('#clients > li').length === 3 && document.querySelectorAll('#calls > li').length >= 7`)
	popup.noText(t, "three clients", "has used this browser yet", "No MCP client")
	// Each row: tool, target, outcome, time; the failed call says why.
	popup.front(t)
	rows := popup.js(t, `[...document.querySelectorAll('#calls > li')].map((li) => li.innerText.replace(/\s+/g, ' ')).join('\n')`)
	for _, want := range []string{"navigate 127.0.0.1:", "form.html", "VS Code · failed", "update_plan", "Claude Code · ok"} {
		if !strings.Contains(rows, want) {
			t.Errorf("the tool calls do not show %q:\n%s", want, rows)
		}
	}
	if got := popup.js(t, `[...document.querySelectorAll('#clients > li')].map((li) => li.dataset.colour).join(' ')`); len(strings.Fields(got)) != 3 || strings.Contains(got, "undefined") {
		t.Errorf("client cards' group colours = %q, want three", got)
	}
	popup.screenshot(t, filepath.Join(shots, "02-clients.png"), popupWidth, popupMaxHeight)
	popup.darkScreenshot(t, filepath.Join(shots, "03-clients-dark.png"), popupWidth, popupMaxHeight)

	// Ten clients: one line each, scrolling inside the list.
	more := []string{"Claude Desktop", "Windsurf", "Zed", "MCP Inspector", "Goose", "Cline", "Continue"}
	var clients = []*client{claude, cursor, vscode}
	for _, name := range more {
		c := w.client(name)
		c.call(t, "tabs_context_mcp", nil)
		clients = append(clients, c)
	}
	popup.waitJS(t, "ten compact cards", popupWait,
		`document.querySelectorAll('#clients > li').length === 10 && document.getElementById('clients').classList.contains('compact')`)
	var compact struct {
		Tallest              float64
		Scroll, Client, Body float64
	}
	popup.evalInto(t, `(() => { const l = document.getElementById('clients');
		return {tallest: Math.max(...[...l.children].map((li) => li.getBoundingClientRect().height)), scroll: l.scrollHeight, client: l.clientHeight,
			body: document.documentElement.scrollHeight}; })()`, &compact)
	if compact.Tallest > 44 || compact.Scroll <= compact.Client {
		t.Errorf("ten clients: tallest card %.0f px (want one line), list %.0f of %.0f px shown (want it to scroll)", compact.Tallest, compact.Client, compact.Scroll)
	}
	popup.screenshot(t, filepath.Join(shots, "04-ten-clients.png"), popupWidth, popupMaxHeight)
	for _, c := range clients {
		w.closeSession(c.cs)
	}
	popup.waitText(t, "clients gone, calls kept as history", "No MCP client is connected now.", "Recent tool calls")

	// The bridge cannot start: the config names a port another program
	// holds. The test stops its bridge; the host starts one, which fails.
	var held net.Listener
	held, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, heldPort, _ := net.SplitHostPort(held.Addr().String())
	configFile := filepath.Join(w.bbHome, "config", "config.json")
	w.writeConfig(t, fmt.Sprintf(`{"listen": %q}`, held.Addr().String()))
	stopGroup(w.serve)
	popup.waitText(t, "port taken", "The bridge could not start", "port "+heldPort+" is taken", `set "listen" in the config file`, configFile)
	popup.noText(t, "port taken", "Starting the bridge", "Connected to the bridge")
	if tone := popup.js(t, `document.getElementById('status').dataset.tone + ' ' + document.getElementById('status-label').textContent`); tone != "error Error" {
		t.Errorf("header while the bridge cannot start: %q, want the error tone", tone)
	}
	popup.screenshot(t, filepath.Join(shots, "05-bridge-failed-port.png"), popupWidth, popupMaxHeight)
	popup.darkScreenshot(t, filepath.Join(shots, "06-bridge-failed-port-dark.png"), popupWidth, popupMaxHeight)

	// An invalid config: the file and the error; the host tries again.
	w.writeConfig(t, fmt.Sprintf(`{"listen": %q, "lisen": "typo"}`, listen))
	popup.waitText(t, "invalid config", "The bridge could not start", `unknown key "lisen"`, configFile, "starts the bridge again by itself")
	popup.noText(t, "invalid config", "is taken", "Starting the bridge")
	popup.screenshot(t, filepath.Join(shots, "07-bridge-failed-config.png"), popupWidth, popupMaxHeight)

	// Fixed: the host's next start succeeds, and no error is left.
	w.writeConfig(t, fmt.Sprintf(`{"listen": %q}`, listen))
	popup.waitText(t, "connected again", "Connected to the bridge", "http://"+listen+"/mcp")
	popup.noText(t, "connected again", "could not start", "lisen", "Error", "exited")
	popup.screenshot(t, filepath.Join(shots, "08-connected-again.png"), popupWidth, popupMaxHeight)

	options := openExtensionPage(t, dt, "options.html")
	options.waitJS(t, "the options page's servers", popupWait, `document.querySelectorAll('#remote-list li.remote').length > 0`)
	options.screenshot(t, filepath.Join(shots, "09-options.png"), 760, 1400)
	options.darkScreenshot(t, filepath.Join(shots, "10-options-dark.png"), 760, 1400)
}

// artifactsDir is the folder sub (popup, audit, managed) of
// $BROWSERBRIDGE_ARTIFACTS, else of artifacts/ at the repository's root
// (gitignored); created if missing.
func artifactsDir(t *testing.T, sub string) string {
	t.Helper()
	root := os.Getenv("BROWSERBRIDGE_ARTIFACTS")
	if root == "" {
		root = filepath.Join("..", "..", "..", "artifacts")
	}
	dir, err := filepath.Abs(filepath.Join(root, sub))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeConfig replaces the bridge's config.json.
func (w *world) writeConfig(t *testing.T, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(w.bbHome, "config", "config.json"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// restartChromiumWithDevTools restarts the world's Chromium on the same
// profile with --remote-debugging-port=0 and returns DevTools' address
// once the bridge lists the browser again.
func (w *world) restartChromiumWithDevTools() devtoolsAddr {
	w.tb.Helper()
	stopGroup(w.chrome)
	return w.startChromiumWithDevTools()
}

// visibleText is what a person sees of the page: document.body.innerText
// (hidden elements have none).
func (p *extPage) visibleText(t *testing.T) string {
	t.Helper()
	p.front(t)
	return p.js(t, `document.body ? document.body.innerText : ""`)
}

// front makes the page's tab the one shown: Chromium may throttle or
// freeze a tab in the background, and the clients' tabs take the front.
func (p *extPage) front(t *testing.T) {
	t.Helper()
	if err := p.conn.call("Page.bringToFront", map[string]any{}, &struct{}{}); err != nil {
		t.Fatalf("DevTools: %v", err)
	}
}

// waitText waits until the page shows every one of want.
func (p *extPage) waitText(t *testing.T, state string, want ...string) {
	t.Helper()
	var text string
	deadline := time.Now().Add(popupWait)
	for {
		text = p.visibleText(t)
		missing := ""
		for _, s := range want {
			if !strings.Contains(text, s) {
				missing = s
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %v the page does not show %q; it shows:\n%s", state, popupWait, missing, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// noText fails the test if the page shows any of unwanted.
func (p *extPage) noText(t *testing.T, state string, unwanted ...string) {
	t.Helper()
	text := p.visibleText(t)
	for _, s := range unwanted {
		if strings.Contains(text, s) {
			t.Errorf("%s: the page shows %q, which is not true now:\n%s", state, s, text)
		}
	}
}

// screenshot saves a PNG of the page at width CSS pixels (twice as many
// device pixels), as tall as its content up to maxHeight.
func (p *extPage) screenshot(t *testing.T, file string, width, maxHeight int) {
	t.Helper()
	metrics := func(height int) {
		if err := p.conn.call("Emulation.setDeviceMetricsOverride", map[string]any{
			"width": width, "height": height, "deviceScaleFactor": 2, "mobile": false,
		}, &struct{}{}); err != nil {
			t.Fatalf("DevTools: %v", err)
		}
	}
	metrics(maxHeight)
	var h float64
	p.evalInto(t, `new Promise((r) => requestAnimationFrame(() => r(document.body.getBoundingClientRect().height)))`, &h)
	metrics(min(int(h+0.5), maxHeight))
	p.front(t)
	var shot struct {
		Data string `json:"data"`
	}
	if err := p.conn.call("Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		t.Fatalf("DevTools: %v", err)
	}
	b, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", file)
}

// darkScreenshot is screenshot with prefers-color-scheme: dark emulated;
// it checks that the page turned dark, and turns the emulation off again.
func (p *extPage) darkScreenshot(t *testing.T, file string, width, maxHeight int) {
	t.Helper()
	emulate := func(scheme string) {
		if err := p.conn.call("Emulation.setEmulatedMedia", map[string]any{
			"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}},
		}, &struct{}{}); err != nil {
			t.Fatalf("DevTools: %v", err)
		}
	}
	emulate("dark")
	defer emulate("")
	var bg string
	p.evalInto(t, `getComputedStyle(document.body).backgroundColor`, &bg)
	var rgb [3]int
	if _, err := fmt.Sscanf(bg, "rgb(%d, %d, %d)", &rgb[0], &rgb[1], &rgb[2]); err != nil || rgb[0]+rgb[1]+rgb[2] > 3*80 {
		t.Errorf("with prefers-color-scheme: dark the page's background is %q, not dark", bg)
	}
	p.screenshot(t, file, width, maxHeight)
}

// TestPopupRelayAndStopped (issue 31, item 12): with a cloud relay, the
// popup says which proxy and user the browser is reachable through and the
// servers offered there; "Connection details" does not repeat the MCP URL;
// once the bridge is stopped the client cards lose their disconnect
// button; the options page says what turning a preset remote server on does.
func TestPopupRelayAndStopped(t *testing.T) {
	p := startPublicProxy(t)
	w := startWorld(t, worldOptions{
		relay:            &relayOptions{url: p.relay, token: p.mint("alice", "extension")},
		listen:           "127.0.0.1:" + strconv.Itoa(freePort(t)),
		hostStartsBridge: true,
	})
	t.Cleanup((&restartWorld{world: w}).stopBridges)
	dt := w.restartChromiumWithDevTools()
	waitRelayConnected(t, w, "alice")

	popup := openExtensionPage(t, dt, "popup.html")
	c := w.client("Claude Code")
	c.call(t, "tabs_context_mcp", nil)
	popup.waitJS(t, "the relay's line", popupWait,
		`!document.getElementById('relay').hidden && document.getElementById('relay-summary').textContent.includes(' as alice')`)
	popup.js(t, `document.getElementById('relay').open = true`)
	facts := popup.js(t, `document.getElementById('relay-facts').innerText`)
	for _, want := range []string{p.relay, "alice", "Servers offered"} {
		if !strings.Contains(facts, want) {
			t.Errorf("the relay's details lack %q:\n%s", want, facts)
		}
	}
	if details := popup.js(t, `document.getElementById('facts').textContent`); strings.Contains(details, "/mcp") {
		t.Errorf("Connection details repeat the MCP URL: %q", details)
	}
	popup.waitJS(t, "a card with its disconnect button", popupWait,
		`[...document.querySelectorAll('#clients > li')].some((li) => li.innerText.includes('Claude Code') && li.querySelector('button.danger'))`)

	if out, code := w.cli("stop"); code != 0 {
		w.fatalWithLogs("browserbridge stop: exit %d: %s", code, out)
	}
	popup.waitText(t, "stopped", "The bridge is stopped")
	popup.waitJS(t, "no disconnect button while stopped", popupWait,
		`document.querySelectorAll('#clients > li').length > 0 && document.querySelectorAll('#clients button.danger').length === 0 && document.getElementById('relay').hidden`)

	options := openExtensionPage(t, dt, "options.html")
	options.waitText(t, "preset servers off", "Off: nothing is sent to https://mcp.notion.com/mcp", "mcp_notion_<tool>")
}
