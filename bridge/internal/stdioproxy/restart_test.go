package stdioproxy

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// restartWords start the tool error a restarted bridge answers a resumed
// call with (mcpserver's restartSentence).
const restartWords = "Browser Bridge restarted while this call was running"

// TestRealBridgeRestart SIGKILLs a real `browserbridge serve` under a live
// stdio client, with a call in flight, and starts it again on the same
// port and state directory. The client keeps its session: the proxy sends
// the same Mcp-Session-Id before and after, no second initialize reaches
// the bridge, the new process says it resumed the session, and the
// extension sees the same browserbridge/session id (the key of the tab
// group) in calls before and after. The call in flight gets the bridge's
// own answer when its stream had an event id (from 2025-11-25, a priming
// event), CodeInterrupted otherwise. When the restarted bridge cannot keep
// the session (its records are gone, so it answers 404), the proxy starts
// a new one and the client carries on there.
func TestRealBridgeRestart(t *testing.T) {
	for _, tc := range []struct {
		name        string
		version     string
		dropRecords bool   // delete the session records before the restart
		primed      bool   // the call's stream opens with a priming event (an event id) before its answer
		inFlight    string // what the error of the call in flight at the kill says
	}{
		{"2025-11-25, same session, call in flight resumed", "2025-11-25", false, true, restartWords},
		{"2025-06-18, same session, call in flight without event id", "2025-06-18", false, false, msgInterrupted},
		{"2025-11-25, records lost, new session", "2025-11-25", true, true, msgInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRealBridge(t)
			b.start()
			ext := startExtension(t, b)
			reqs := newRequestLog()
			pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: bridgeWaitFor, HTTPClient: &http.Client{Transport: reqs}})
			cs := pr.connect(t, tc.version, nil)

			before := whoami(t, cs, "before the restart")
			if !strings.HasPrefix(before, "local-") {
				t.Fatalf("the extension saw session %q, want a local- id", before)
			}
			for len(reqs.callRead) > 0 {
				<-reqs.callRead // whoami's
			}
			inFlight := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*bridgeWaitFor)
				defer cancel()
				_, err := callText(ctx, cs, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{}})
				inFlight <- err
			}()
			receive(t, ext.started, "the call in flight to reach the extension")
			if tc.primed {
				// The bridge sends the priming event a moment after the
				// call starts: the proxy must have it for the call to be
				// resumable.
				receive(t, reqs.callRead, "the proxy to read the call's priming event")
			}

			killed := time.Now()
			b.kill()
			if tc.dropRecords {
				records, _ := filepath.Glob(filepath.Join(b.sessionDir(), "*.json"))
				if len(records) == 0 {
					t.Fatalf("no session record in %s to drop", b.sessionDir())
				}
				for _, r := range records {
					if err := os.Remove(r); err != nil {
						t.Fatal(err)
					}
				}
			}
			b.start()
			after := whoami(t, cs, "after the restart")
			t.Logf("SIGKILL to the first successful call through the proxy: %v", time.Since(killed).Round(time.Millisecond))

			select {
			case err := <-inFlight:
				if err == nil || !strings.Contains(err.Error(), tc.inFlight) {
					t.Errorf("the call in flight at the kill returned %v, want an error saying %q", err, tc.inFlight)
				}
			case <-time.After(bridgeWaitFor):
				t.Errorf("the call in flight at the kill got no answer")
			}
			if again := whoami(t, cs, "once more"); again != after {
				t.Errorf("session changed between two calls after the restart: %q, then %q", after, again)
			}

			sessions, inits := reqs.sessions(), reqs.count(methodInitialize)
			if !tc.dropRecords {
				if after != before {
					t.Errorf("the extension saw session %q after the restart, %q before: the client lost its tab group", after, before)
				}
				if len(sessions) != 1 || inits != 1 {
					t.Errorf("the proxy used %d session ids and sent %d initialize requests, want 1 and 1; requests:\n%s", len(sessions), inits, reqs)
				}
				if !strings.Contains(b.log(b.processes()), "MCP session resumed after a bridge restart") {
					t.Errorf("the restarted bridge did not resume the session")
				}
			} else {
				if after == before {
					t.Errorf("the extension saw session %q before and after, want a new session once the bridge lost it", after)
				}
				if len(sessions) != 2 || inits != 2 {
					t.Errorf("the proxy used %d session ids and sent %d initialize requests, want 2 and 2; requests:\n%s", len(sessions), inits, reqs)
				}
			}
		})
	}
}

// whoami calls the extension's whoami tool and returns the session id the
// extension saw. Until the bridge has a browser with the tool (at start,
// or while the host reconnects), the bridge fails the call; it tries again
// until one succeeds. An error from the proxy itself fails the test: a
// call after the restart must get through.
func whoami(t *testing.T, cs *mcp.ClientSession, when string) string {
	t.Helper()
	var got, last string
	testutil.WaitFor(t, "whoami "+when+" to get through", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), bridgeWaitFor)
		defer cancel()
		var err error
		if got, err = callText(ctx, cs, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}}); err == nil {
			return true
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) && (we.Code == CodeInterrupted || we.Code == CodeBridgeUnavailable) {
			t.Fatalf("whoami %s: the proxy failed the call: %v", when, err)
		}
		if err.Error() != last { // each new error once: the tries come fast
			last = err.Error()
			t.Logf("whoami %s: %v (trying again)", when, err)
		}
		return false
	})
	return got
}
