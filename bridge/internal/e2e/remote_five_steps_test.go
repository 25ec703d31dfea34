//go:build linux

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// Issue 31: remote reach in five steps, each the line the step before it
// printed, against real processes: the built browserbridge-proxy, the
// world's bridge and Chromium with the real extension.
//
//	operator: 1 browserbridge-proxy init    2 … serve (as init prints it)    3 … invite --user alice (as init prints it)
//	person:   4 browserbridge relay join URL --code CODE (as invite prints it)    5 browserbridge pair,
//	          then in the MCP client: add the connector, type the code, approve
//
// and then a tool call from the remote client reads a page in alice's
// browser.

var (
	initServeLine  = regexp.MustCompile(`(?m)^\s+(browserbridge-proxy serve .*)$`)
	initInviteLine = regexp.MustCompile(`(?m)^\s+(browserbridge-proxy invite .*)$`)
	inviteJoinLine = regexp.MustCompile(`(?m)^\s+browserbridge (relay join \S+ --code [0-9A-Z-]{19})$`)
)

func TestRemoteInFiveSteps(t *testing.T) {
	bin := proxyBinary(t)
	p := &publicProxy{t: t, dir: t.TempDir(), out: &testbrowser.SyncBuffer{}, exited: make(chan struct{})}
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p.public, p.relay = "http://"+listen, "ws://"+listen
	operatorDir := filepath.Join(p.dir, "operator")

	// 1. init, on the operator's machine.
	out := runProxy(t, bin, "init", "--dir", operatorDir, "--listen", listen, "--public-url", p.public)
	serveLine, inviteLine := initServeLine.FindStringSubmatch(out), initInviteLine.FindStringSubmatch(out)
	if serveLine == nil || inviteLine == nil {
		t.Fatalf("init does not print the serve and invite commands:\n%s", out)
	}
	if st, err := os.Stat(filepath.Join(operatorDir, "secret")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("init's secret: %v %v", st, err)
	}

	// 2. serve, as init printed it (its OAuth state in memory: this test
	// signs in once).
	serveArgs := strings.Fields(serveLine[1])[1:]
	p.launch(bin, serveArgs...)

	// 3. invite, as init printed it, for alice.
	out = runProxy(t, bin, append(strings.Fields(inviteLine[1])[1:], "--user", "alice")...)
	join := inviteJoinLine.FindStringSubmatch(out)
	if join == nil {
		t.Fatalf("invite does not print the join command:\n%s", out)
	}

	// The person: Browser Bridge installed, Chromium with the extension,
	// no relay yet. The host may start a bridge, as for a user, since
	// relay join restarts it.
	rw := startRestartWorld(t)
	w := rw.world
	t.Cleanup(func() { killBridgeOf(w) }) // runs before stopBridges: the bridge relay join started

	// 4. relay join, as invite printed it.
	out, code := w.cli(strings.Fields(join[1])...)
	if code != 0 || !strings.Contains(out, "enrolled at "+p.public+" as alice") {
		t.Fatalf("relay join: exit %d\n%s", code, out)
	}
	waitRelayConnected(t, w, "alice")
	if out, code := w.cli("relay", "status"); code != 0 || !strings.Contains(out, "as alice (credential from enrolment") || !strings.Contains(out, ": connected to "+p.relay) {
		t.Fatalf("relay status: exit %d\n%s", code, out)
	}

	// 5. pair; in the MCP client: add the connector, type the code, approve.
	endpoint := p.url("/mcp")
	_, tokens := signInWithCode(t, p, endpoint, pair(t, w))

	// A remote tool call reaches alice's browser.
	cs := connectBearer(t, w, endpoint, tokens.Access, "claude-ai", nil)
	c := &client{w: w, cs: cs, name: "claude-ai", remote: true}
	tab := c.newTab(t, w.pages.url("prose.html"))
	if text := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab})); !strings.Contains(text, "The last paragraph of the prose page.") {
		t.Fatalf("get_page_text through the proxy:\n%s", clip(text, 500))
	}

	// Leaving revokes the credential at the proxy: the relay goes, and the
	// proxy refuses the credential from now on (a copy of it included).
	cfg, err := os.ReadFile(filepath.Join(w.bbHome, "config", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	credential := regexp.MustCompile(`"token": ?"([^"]+)"`).FindSubmatch(cfg)
	if credential == nil {
		t.Fatalf("no relay token in the config:\n%s", cfg)
	}
	if out, code := w.cli("relay", "leave"); code != 0 || !strings.Contains(out, "revoked this bridge's credential") {
		t.Fatalf("relay leave: exit %d\n%s", code, out)
	}
	testutil.WaitWithin(t, relayWait, "", func() (bool, string) {
		st, err := w.status()
		if err != nil {
			return false, err.Error()
		}
		return len(st.Relay) == 0, "relay status: " + relayJSON(st.Relay)
	})
	ext := relayExtensionRefusal(t, p.relay, string(credential[1]))
	if !strings.Contains(ext, "revoked") {
		t.Fatalf("the proxy's answer to the revoked credential: %q", ext)
	}
}

// runProxy runs the built browserbridge-proxy and returns its output.
func runProxy(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("browserbridge-proxy %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// killBridgeOf ends the bridge that answers in w (one a lifecycle command
// started, detached), and waits for it to go.
func killBridgeOf(w *world) {
	st, err := w.status()
	if err != nil || st.PID == 0 {
		return
	}
	_ = syscall.Kill(st.PID, syscall.SIGTERM)
	for deadline := time.Now().Add(stopWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(st.PID, 0) != nil {
			return
		}
	}
	_ = syscall.Kill(st.PID, syscall.SIGKILL)
}

// relayExtensionRefusal authenticates at the proxy's extensions' endpoint
// with tok, as a bridge's relay does, and returns why the proxy closed the
// connection ("" if it took the token).
func relayExtensionRefusal(t *testing.T, relayURL, tok string) string {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(relayURL+relaywire.PathExtension, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(callWait))
	var auth relaywire.Message
	if err := ws.ReadJSON(&auth); err != nil || auth.Method != relaywire.MethodAuthenticate {
		t.Fatalf("the proxy's first message: %+v %v", auth, err)
	}
	ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": auth.ID, "result": relaywire.AuthenticateResult{Name: "a copy", AccessToken: tok}})
	for {
		var m relaywire.Message
		if err := ws.ReadJSON(&m); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Text
			}
			t.Fatalf("reading the proxy's answer: %v", err)
		}
		if m.Method == relaywire.MethodAuthenticated {
			return ""
		}
	}
}
