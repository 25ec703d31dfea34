package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// pairProxy is a real proxy in this process, with pairing on or off.
func pairProxy(t *testing.T, pairing bool) (*proxy.Server, *token.Keys, string) {
	t.Helper()
	keys, err := token.NewHS256([]byte(strings.Repeat("p", 40)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if pairing {
		srv.ConfigurePairing(proxy.PairingOptions{MCPURL: "https://proxy.example.com/mcp"})
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Close()
	})
	return srv, keys, "ws://" + strings.TrimPrefix(hs.URL, "http://")
}

// relayConfig writes the world's config with a relay to proxyURL for user.
func (w *world) relayConfig(keys *token.Keys, proxyURL, user string) {
	w.t.Helper()
	tok, err := keys.MintFor(user, token.KindExtension, time.Hour, time.Now())
	if err != nil {
		w.t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"listen": "127.0.0.1:0", "relay": map[string]any{"url": proxyURL, "token": tok}})
	if err := os.WriteFile(filepath.Join(w.home, "bb", "config", "config.json"), cfg, 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// attachBrowser attaches a fake browser to the world's bridge: the relay
// connects to the proxy for it.
func (w *world) attachBrowser() {
	w.t.Helper()
	c, err := ipc.Dial(context.Background(), w.socket)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { c.Close() })
	b := testbrowser.Attach(c, func(string, json.RawMessage) (any, map[string]any) {
		return map[string]any{"tools": []any{}}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Hello(ctx, "pair-test-browser"); err != nil {
		w.t.Fatal(err)
	}
}

// waitRelayState polls `status --json` until the browser's relay
// connection is in state.
func (w *world) waitRelayState(state string) {
	w.t.Helper()
	testutil.WaitFor(w.t, "the relay to reach "+state, func() bool {
		out, _ := w.cli("status", "--json")
		var st protocol.StatusResult
		return json.Unmarshal([]byte(out), &st) == nil && len(st.Relay) > 0 && st.Relay[0].State == state
	})
}

var codeLine = regexp.MustCompile(`^Code: ([0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}) \(valid until \d\d:\d\d UTC, single use\)$`)

// TestPair: `browserbridge pair` prints, as its last line, a code that the
// proxy's sign-in redeems once for the bridge's user, after a line saying
// where to type it.
func TestPair(t *testing.T) {
	srv, keys, proxyURL := pairProxy(t, true)
	w := newWorld(t)
	w.relayConfig(keys, proxyURL, "alice")
	w.serve()
	w.attachBrowser()
	w.waitRelayState("connected")

	out, code := w.cli("pair")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	m := codeLine.FindStringSubmatch(last)
	if code != 0 || m == nil || len(lines) < 2 {
		t.Fatalf("pair: exit %d, output:\n%s", code, out)
	}
	before := strings.Join(lines[:len(lines)-1], "\n")
	for _, want := range []string{"https://proxy.example.com/mcp", `"Pairing code"`, "alice", proxyURL} {
		if !strings.Contains(before, want) {
			t.Errorf("the lines before the code do not say %q:\n%s", want, out)
		}
	}
	user, err := srv.RedeemPairingCode(strings.ToLower(m[1]), "192.0.2.10")
	if err != nil || user != "alice" {
		t.Fatalf("redeeming %s: %q %v", m[1], user, err)
	}
	if _, err := srv.RedeemPairingCode(m[1], "192.0.2.10"); !errors.Is(err, proxy.ErrPairingUsed) {
		t.Fatalf("a second use: %v", err)
	}

	t.Run("json", func(t *testing.T) {
		out, code := w.cli("pair", "--json")
		var res struct {
			Code, ExpiresAt string
			UserID          string `json:"user_id"`
			SignInURL       string `json:"sign_in_url"`
		}
		if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.UserID != "alice" || res.SignInURL != "https://proxy.example.com/mcp" {
			t.Fatalf("pair --json: exit %d %v\n%s", code, err, out)
		}
		if user, err := srv.RedeemPairingCode(res.Code, "192.0.2.11"); err != nil || user != "alice" {
			t.Fatalf("redeeming the JSON's code: %q %v", user, err)
		}
	})
}

// TestPairRefusals: each way `pair` can fail says what to do.
func TestPairRefusals(t *testing.T) {
	t.Run("no bridge", func(t *testing.T) {
		w := newWorld(t)
		out, code := w.cli("pair")
		if code != 1 || !strings.Contains(out, "The bridge is not running") || !strings.Contains(out, "start") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("no relay configured", func(t *testing.T) {
		w := newWorld(t)
		w.serve()
		out, code := w.cli("pair")
		if code != 1 || !strings.Contains(out, `"relay.url"`) || !strings.Contains(out, "browserbridge status") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("relay not connected", func(t *testing.T) {
		_, keys, _ := pairProxy(t, true)
		w := newWorld(t)
		w.relayConfig(keys, "ws://"+testutil.ClosedAddr(t), "alice")
		w.serve()
		w.attachBrowser()
		w.waitRelayState("disconnected")
		out, code := w.cli("pair")
		if code != 1 || !strings.Contains(out, "not connected to the proxy") || !strings.Contains(out, "browserbridge status") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("the proxy offers no pairing", func(t *testing.T) {
		_, keys, proxyURL := pairProxy(t, false)
		w := newWorld(t)
		w.relayConfig(keys, proxyURL, "alice")
		w.serve()
		w.attachBrowser()
		w.waitRelayState("connected")
		out, code := w.cli("pair")
		if code != 1 || !strings.Contains(out, "does not hand out pairing codes") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
}
