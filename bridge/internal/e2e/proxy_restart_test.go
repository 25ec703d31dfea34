//go:build linux

package e2e

import (
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
			checkSessionSurvivesRestart(t, c, tc.inflight, restartedProcess{
				what:     "the proxy",
				restart:  func() { p.restart(tc.sig) },
				stateDir: p.dir,
				// The server is reached through the bridge, whose relay
				// connects again on its own.
				back: func() { waitServerRelayed(t, w, relayedSince) },
				log:  p.out.String,
			})
		})
	}
}
