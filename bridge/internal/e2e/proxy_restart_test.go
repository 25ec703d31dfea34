//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestProxySessionSurvivesRestart (issue 33, item 4): the TypeScript SDK's
// client signs in to the proxy (--oauth-state) with a pairing code, calls
// echo of a server a bridge relays (/servers/everything/mcp), starts a
// long call; the proxy process is restarted (SIGTERM, or SIGKILL as a
// crash, then the same command); after SIGTERM the long call ends with an
// error naming the restart; in both cases, once the bridge's relay is
// back, echo in the same session answers: the session was re-opened from
// its record beside the OAuth state, the server's gateway session
// initialized again with the client's own initialize. The record file
// holds no session id.
func TestProxySessionSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sig      syscall.Signal
		inflight []string // what the call in flight must end with (nil: not checked, as after a crash)
	}{
		{"clean stop", syscall.SIGTERM, []string{"restarting", "may or may not have happened"}},
		{"crash", syscall.SIGKILL, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPublicProxy(t)
			w := startRelayedWorld(t, p, p.relay, "alice")
			addEverything(t, w)
			relayedSince := waitServerRelayed(t, w, "")
			stopTogether(t, w)
			browser := startSignInBrowser(t)
			c := testutil.StartTSClient(t, p.url("/servers/"+gatewayServer+"/mcp"), testutil.TSClientOptions{Name: "e2e-ts-restart", OAuth: "loopback"})

			authorize := c.Next(t, "authorize")
			if err := signInWithPairing(browser, authorize.URL, pair(t, w)); err != nil {
				t.Fatal(err)
			}
			c.Next(t, "redirected")
			c.Next(t, "connected")
			before := c.Call(t, testutil.TSCall{Tool: "echo", Args: map[string]any{"message": "before the restart"}})
			if before.Text() != "Echo: before the restart" || before.SessionID == "" {
				t.Fatalf("before the restart: echo %q, session %q", before.Text(), before.SessionID)
			}
			// A long call, in flight when the proxy stops: restart once its
			// first progress came.
			long := c.Start(t, testutil.TSCall{Tool: "trigger-long-running-operation", Args: map[string]any{"duration": 600, "steps": 600}, Progress: true})
			c.Progress(t, long)

			p.restart(tc.sig)
			file := filepath.Join(p.dir, "oauth.db.sessions.json")
			records, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("the session records beside the OAuth state: %v", err)
			}
			if strings.Contains(string(records), before.SessionID) || !strings.Contains(string(records), "e2e-ts-restart") {
				t.Fatalf("the session records file should hold the session's record without its id: %s", clip(string(records), 400))
			}
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("the session records file's mode: %v %v; want 0600", fi.Mode(), err)
			}
			// After a clean stop the proxy answered the long call before it
			// exited; after a crash nothing did, and the SDK waits for its
			// broken stream's answer until its timeout: not awaited then.
			if tc.inflight != nil {
				inflight := c.Answer(t, long)
				for _, want := range tc.inflight {
					if !strings.Contains(inflight.Error, want) {
						t.Fatalf("the call in flight at the restart ended with %q (result %q); want an error naming the restart (%q)", inflight.Error, inflight.Text(), want)
					}
				}
			}
			// The server is reached through the bridge, whose relay
			// connects again on its own.
			waitServerRelayed(t, w, relayedSince)
			after := c.Call(t, testutil.TSCall{Tool: "echo", Args: map[string]any{"message": "after the restart"}})
			if after.Text() != "Echo: after the restart" || after.SessionID != before.SessionID {
				t.Fatalf("after the restart: echo %q in session %q; want the echo in the same session %q", after.Text(), after.SessionID, before.SessionID)
			}
			c.Close(t)
			if out := p.out.String(); !strings.Contains(out, "session re-opened after a restart") {
				t.Fatalf("the proxy's log does not show the session re-opened:\n%s", tail(out, 40))
			}
		})
	}
}
