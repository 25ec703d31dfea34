//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// SIGHUP makes serve read --secret-file again: after a rotation's first
// step the file lists the new key first, and a token signed with it is
// taken at once, as one signed with the old still is; the log names the
// cluster's key ids.
func TestServeReloadsSecretOnHangup(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	oldS, newS := strings.Repeat("o", 40), strings.Repeat("n", 40)
	os.WriteFile(secret, []byte(oldS), 0o600)
	n := startNode(t, "--secret-file", secret, "--nats", "embedded", "--node", "a", "--nats-store", filepath.Join(dir, "nats"))
	handshake := func(secretText string) error {
		keys, err := token.Parse([]byte(secretText))
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := keys.MintFor("alice", token.KindMCP, time.Hour, time.Now())
		ws, _, err := websocket.DefaultDialer.Dial("ws://"+n.addr+relaywire.PathMCP, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": relaywire.MethodHandshake, "params": relaywire.HandshakeParams{AccessToken: tok}})
		var m relaywire.Message
		ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := ws.ReadJSON(&m); err != nil {
			return err
		}
		if m.Error != nil {
			return fmt.Errorf("%s", m.Error)
		}
		return nil
	}
	if err := handshake(newS); err == nil {
		t.Fatal("a token of the new secret was taken before the reload")
	}
	os.WriteFile(secret, []byte(newS+"\n\n"+oldS+"\n"), 0o600)
	reloaded := n.logs.Seen("reloaded --secret-file")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	select {
	case <-reloaded:
	case <-time.After(30 * time.Second):
		t.Fatalf("no reload logged:\n%s", n.logs.String())
	}
	for _, s := range []string{newS, oldS} {
		if err := handshake(s); err != nil {
			t.Fatalf("after the reload, a token of %.1s…: %v", s, err)
		}
	}
	if !strings.Contains(n.logs.String(), "cluster_key_ids=") {
		t.Errorf("the reload's log line does not name the cluster's keys:\n%s", n.logs.String())
	}
}
