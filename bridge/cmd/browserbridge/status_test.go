package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// holdServerName registers, as another bridge of user would, a server
// extension for server named name, and keeps it until the test ends.
func holdServerName(t *testing.T, keys *token.Keys, proxyURL, user, server, name string) {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(proxyURL+relaywire.PathExtension, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	tok, err := keys.MintFor(user, token.KindExtension, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var auth relaywire.Message
	if err := ws.ReadJSON(&auth); err != nil || auth.Method != relaywire.MethodAuthenticate {
		t.Fatalf("authenticate: %+v %v", auth, err)
	}
	res := relaywire.AuthenticateResult{Name: name, AccessToken: tok, Kind: relaywire.ExtensionKindServer, Server: server}
	ws.WriteMessage(websocket.TextMessage, relaywire.AppendResult(nil, auth.ID, relaywire.MarshalParams(res)))
	var m relaywire.Message
	if err := ws.ReadJSON(&m); err != nil || m.Method != relaywire.MethodAuthenticated {
		t.Fatalf("authenticated: %+v %v", m, err)
	}
}

// TestStatusShowsServerNameTaken: a bridge whose gateway server's name
// another bridge of the user holds at the proxy says so in `status`, with
// the proxy's sentence, and `status --json` gives the state and sentence.
func TestStatusShowsServerNameTaken(t *testing.T) {
	_, keys, proxyURL := pairProxy(t, false)
	holdServerName(t, keys, proxyURL, "alice", "notes", "notes (other bridge)")
	w := newWorld(t)
	tok, err := keys.MintFor("alice", token.KindExtension, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"listen": "127.0.0.1:0",
		"relay":      map[string]any{"url": proxyURL, "token": tok, "name": "cli-bridge"},
		"mcpServers": map[string]any{"notes": map[string]any{"command": filepath.Join(w.home, "no-such-server")}}})
	if err := os.WriteFile(filepath.Join(w.home, "bb", "config", "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	w.serve()

	var notes protocol.RelayInfo
	testutil.WaitFor(t, "notes to be "+relay.StateNameTaken, func() bool {
		out, _ := w.cli("status", "--json")
		var st protocol.StatusResult
		json.Unmarshal([]byte(out), &st)
		for _, r := range st.RelayServers {
			if r.Server == "notes" {
				notes = r
			}
		}
		return notes.State == relay.StateNameTaken
	})
	want := `server name "notes" is already offered by "notes (other bridge)"`
	if !strings.Contains(notes.Error, want) {
		t.Fatalf("status --json: notes's error %q does not say %q", notes.Error, want)
	}
	out, code := w.cli("status")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	t.Logf("status:\n%s", out)
	line := `notes as "notes (cli-bridge)": not offered through the relay: ` + want
	if !strings.Contains(out, line) || !strings.Contains(out, "relay.replace_servers") {
		t.Fatalf("status does not say %q:\n%s", line, out)
	}
}
