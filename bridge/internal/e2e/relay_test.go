//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// TestRelayE2E drives real headless Chromium through the cloud relay: the
// proxy (in this process), the world's `browserbridge serve` with a relay
// block in its config.json, and a remote client that is the real
// `browserbridge connect` on stdio, spoken to with the Go SDK.
func TestRelayE2E(t *testing.T) {
	start := time.Now()
	proxyURL, mint := startTestProxy(t)
	w := startWorld(t, worldOptions{relay: &relayOptions{url: proxyURL, token: mint(token.KindExtension)}})
	t.Logf("world up in %v", time.Since(start).Round(time.Millisecond))
	extID := relayExtensionID(t, w, proxyURL)
	t.Logf("relay connected (extension %s) %v after start", extID, time.Since(start).Round(time.Millisecond))
	c, cmd := connectRemote(t, w, proxyURL, mint(token.KindMCP), extID)
	cs := c.cs

	// tools/list: the extension's tools, through the proxy.
	lctx, lcancel := context.WithTimeout(context.Background(), callWait)
	tools, err := cs.ListTools(lctx, nil)
	lcancel()
	if err != nil {
		t.Fatalf("tools/list through connect: %v", err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	var missing []string
	for _, want := range spec004Tools {
		if !slices.Contains(names, want) {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("tools/list through the relay lacks %s (offered: %s)", strings.Join(missing, ", "), strings.Join(names, ", "))
	}

	// tabs_create, then navigate: the real browser moves.
	index, form := w.pages.url("index.html"), w.pages.url("form.html")
	res := c.call(t, "tabs_create", map[string]any{"url": index})
	tab, ok := tabIDOf(res)
	if !ok {
		t.Fatalf("tabs_create through the relay gave no tab id: %s", describe(res))
	}
	c.waitURL(t, tab, index)
	c.navigate(t, tab, form)
	if got := c.tabOf(t, tab); got.URL != form || got.Title != "E2E form" {
		t.Fatalf("after navigate through the relay, the tab is at %q titled %q, want %q titled \"E2E form\"", got.URL, got.Title, form)
	}
	// A remote client's default scope (issue 29) reads and acts but runs no
	// script until the person allows it in the popup: javascript_tool is a
	// tool error that says so.
	if text, _ := c.toolError(t, "javascript_tool", map[string]any{"code": "1 + 1", "tabId": tab}); !strings.Contains(text, "javascript_tool needs the full (scripts, uploads, dev tools) scope, and e2e-relay (remote) has the read and act scope") {
		t.Errorf("javascript_tool from a remote client: %q, want the scope's refusal", text)
	}
	t.Logf("navigated through the relay %v after start", time.Since(start).Round(time.Millisecond))

	// The relay session's tab is in a group of its own: a local session's
	// tab is in another.
	local := w.client("e2e-local-beside-relay")
	localTab := local.newTab(t, index)
	relayGroup, localGroup := -1, -1
	for _, ti := range c.tabs(t, "tabs_context") {
		switch ti.TabID {
		case tab:
			relayGroup = ti.GroupID
			if !ti.InThisSession || ti.GroupID < 0 {
				t.Errorf("tabs_context of the relay session shows its tab as %+v", ti)
			}
		case localTab:
			localGroup = ti.GroupID
			if ti.InThisSession || ti.Session != "e2e-local-beside-relay" {
				t.Errorf("tabs_context of the relay session shows the local session's tab as %+v", ti)
			}
		}
	}
	if relayGroup < 0 || localGroup < 0 || relayGroup == localGroup {
		t.Errorf("relay session's tab in group %d, local session's in %d: want two distinct groups", relayGroup, localGroup)
	}
	for _, ti := range local.tabs(t, "tabs_context") {
		if ti.TabID == tab && (ti.Session != "e2e-relay" || ti.InThisSession) {
			t.Errorf("the local session sees the relay session's tab as %+v, want session \"e2e-relay\" (its client's name, issue 31)", ti)
		}
	}
	if mine := c.tabs(t, "tabs_context_mcp"); len(mine) != 1 || mine[0].TabID != tab {
		t.Errorf("tabs_context_mcp of the relay session = %+v, want only tab %d", mine, tab)
	}

	// The bridge counts the remote client as a peer of its relay link.
	st, err := w.status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Relay) != 1 || st.Relay[0].Peers < 1 {
		t.Errorf("relay status after connect: %s", relayJSON(st.Relay))
	}

	// Closing the remote client ends `browserbridge connect` (the SDK's
	// transport closes its stdin and waits for it).
	w.closeSession(cs)
	if cmd.ProcessState == nil {
		t.Errorf("browserbridge connect still runs after its client closed stdin")
	}
	// Its session ended with it (session_ended on its key): its tab leaves
	// its group, as a local session's does when it ends.
	testutil.WaitWithin(t, relayWait, "", func() (bool, string) {
		tabs, err := tryTabs(local, "tabs_context")
		if err != nil {
			return false, err.Error()
		}
		for _, ti := range tabs {
			if ti.TabID == tab && ti.GroupID == relayGroup {
				return false, fmt.Sprintf("the ended connect session's tab %d is still in its group %d (%q)", tab, relayGroup, ti.Session)
			}
		}
		return true, ""
	})
	t.Logf("TestRelayE2E %v", time.Since(start).Round(time.Millisecond))
}

// startTestProxy runs the cloud proxy in this process until the test ends
// (registered before a world's cleanup, so it stops after the world) and
// returns its URL and a minter of its tokens for the user "e2e-user".
func startTestProxy(t *testing.T) (string, func(token.Kind) string) {
	t.Helper()
	keys, err := token.NewHS256([]byte("e2e-relay-secret-0123456789abcdef0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Keys: keys, ShutdownGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	proxyDone := make(chan error, 1)
	go func() { proxyDone <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-proxyDone; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	mint := func(kind token.Kind) string {
		tok, err := keys.MintFor("e2e-user", kind, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return "ws://" + ln.Addr().String(), mint
}

// relayExtensionID waits until the world's bridge has registered its
// browser with the proxy at proxyURL and returns the proxy's id for it.
func relayExtensionID(t *testing.T, w *world, proxyURL string) string {
	t.Helper()
	var extID string
	testutil.WaitWithin(t, 15*time.Second, "", func() (bool, string) {
		st, err := w.status()
		if err != nil {
			return false, err.Error()
		}
		for _, r := range st.Relay {
			if r.State == relay.StateConnected && r.ExtensionID != "" && r.UserID == "e2e-user" && r.URL == proxyURL {
				extID = r.ExtensionID
				return true, ""
			}
		}
		return false, "relay status: " + relayJSON(st.Relay)
	})
	return extID
}

// connectRemote starts a remote client: the real `browserbridge connect`
// on stdio, spoken to with the Go SDK, reaching the browser extID through
// the proxy. The world closes it before its leftover check.
func connectRemote(t *testing.T, w *world, proxyURL, mcpToken, extID string) (*client, *exec.Cmd) {
	t.Helper()
	connectErr := &testbrowser.SyncBuffer{}
	cmd := exec.Command(bins.Bridge, "connect", "--proxy", proxyURL, "--token", mcpToken, "--extension", extID)
	cmd.Env = w.env
	cmd.Stderr = connectErr
	mc := mcp.NewClient(&mcp.Implementation{Name: "e2e-relay", Version: "1.0"}, nil)
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	cs, err := mc.Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	ccancel()
	if err != nil {
		w.fatalWithLogs("MCP connect to `browserbridge connect`: %v\nits stderr:\n%s", err, connectErr.String())
	}
	w.mu.Lock()
	w.sessions = append(w.sessions, cs)
	w.mu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- browserbridge connect stderr ---\n%s", tail(connectErr.String(), 80))
		}
	})
	return &client{w: w, cs: cs, name: "e2e-relay", remote: true}, cmd
}

func relayJSON(v []protocol.RelayInfo) string {
	b, _ := json.Marshal(v)
	return string(b)
}
