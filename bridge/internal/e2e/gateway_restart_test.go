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

// TestGatewaySessionSurvivesRestart (issue 33): the TypeScript SDK's client
// signs in to the public gateway (its OAuth state in a file), calls echo,
// starts a long call; the gateway process is restarted (SIGTERM, or
// SIGKILL as a crash, then the same command); after SIGTERM the long call
// ends with an error naming the restart; in both cases
// echo in the same session answers: the session was re-opened from its
// record, its per-session server-everything started again with the
// client's own initialize. The record file holds no session id.
func TestGatewaySessionSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		// inflight is what the call in flight at the restart must end
		// with: after a clean stop, an error naming the restart; after a
		// crash, whatever the broken connection gives (not checked).
		inflight []string
	}{
		{"clean stop", syscall.SIGTERM, []string{"restarting", "may or may not have happened"}},
		{"crash", syscall.SIGKILL, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := startPublicGateway(t, gatewayOptions{perSession: true})
			browser := startSignInBrowser(t)
			c := testutil.StartTSClient(t, gw.serverURL(gatewayServer), testutil.TSClientOptions{Name: "e2e-ts-restart", OAuth: "loopback"})
			authorize := c.Next(t, "authorize")
			if _, err := browser.signIn(authorize.URL, gw.password); err != nil {
				t.Fatal(err)
			}
			checkSessionSurvivesRestart(t, c, tc.inflight, restartedProcess{
				what:     "the gateway",
				restart:  func() { gw.restart(tc.sig) },
				stateDir: gw.dir,
				log:      gw.out.String,
			})
		})
	}
}

// A restartedProcess is the endpoint checkSessionSurvivesRestart restarts.
type restartedProcess struct {
	what     string // "the gateway", for messages
	restart  func() // stops the process (as the case says) and starts it again with the same state file
	stateDir string // where oauth.db and its sessions' records are
	back     func() // waits until what the session reaches is served again; nil: at once
	log      func() string
}

// checkSessionSurvivesRestart is what the public gateway's and the proxy's
// restart tests check, once the client has been sent to sign in: echo
// answers; a long call runs; the process restarts; the records file beside
// the OAuth state holds the session's record but not its id, mode 0600; the
// long call ends with an error containing each of inflight (nil: not
// awaited: after a crash nothing answers it, and the SDK waits for its
// broken stream until its timeout); echo answers in the same session; the
// log says the session was re-opened.
func checkSessionSurvivesRestart(t *testing.T, c *testutil.TSClient, inflight []string, p restartedProcess) {
	t.Helper()
	c.Next(t, "redirected")
	c.Next(t, "connected")
	before := c.Call(t, testutil.TSCall{Tool: "echo", Args: map[string]any{"message": "before the restart"}})
	if before.Text() != "Echo: before the restart" || before.SessionID == "" {
		t.Fatalf("before the restart: echo %q, session %q", before.Text(), before.SessionID)
	}
	// A long call, in flight when the process stops: restart once its
	// first progress came.
	long := c.Start(t, testutil.TSCall{Tool: "trigger-long-running-operation", Args: map[string]any{"duration": 600, "steps": 600}, Progress: true})
	c.Progress(t, long)

	p.restart()
	file := filepath.Join(p.stateDir, "oauth.db.sessions.json")
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
	if inflight != nil {
		answer := c.Answer(t, long)
		for _, want := range inflight {
			if !strings.Contains(answer.Error, want) {
				t.Fatalf("the call in flight at the restart ended with %q (result %q); want an error naming the restart (%q)", answer.Error, answer.Text(), want)
			}
		}
	}
	if p.back != nil {
		p.back()
	}
	after := c.Call(t, testutil.TSCall{Tool: "echo", Args: map[string]any{"message": "after the restart"}})
	if after.Text() != "Echo: after the restart" || after.SessionID != before.SessionID {
		t.Fatalf("after the restart: echo %q in session %q; want the echo in the same session %q", after.Text(), after.SessionID, before.SessionID)
	}
	c.Close(t)
	if out := p.log(); !strings.Contains(out, "session re-opened after a restart") {
		t.Fatalf("%s's log does not show the session re-opened:\n%s", p.what, tail(out, 40))
	}
}
