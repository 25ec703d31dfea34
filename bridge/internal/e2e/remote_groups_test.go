//go:build linux

package e2e

import (
	"fmt"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestProxyHTTPRemoteGroupsAcrossRestart: remote clients' tab groups follow
// local sessions' rule across a restart of the bridge: kept while the
// session can resume (its next call finds its tab in its group), released
// once it cannot (its session ended at the proxy: the tab leaves its group,
// as on session.ended).
func TestProxyHTTPRemoteGroupsAcrossRestart(t *testing.T) {
	p := startPublicProxy(t)
	rw := startRestartableRelayedWorld(t, p, "alice")
	endpoint := p.url("/mcp")
	_, tok := signInWithCode(t, p, endpoint, pair(t, rw.world))
	remote := func(name string) *client {
		return &client{w: rw.world, cs: connectBearer(t, rw.world, endpoint, tok.Access, name, nil), name: name, remote: true}
	}
	stays, leaves := remote("e2e-stays"), remote("e2e-leaves")
	page := rw.pages.url("index.html")
	stays.call(t, "navigate", map[string]any{"url": page})
	leaves.call(t, "navigate", map[string]any{"url": rw.pages.url("form.html")})
	stayTab, leaveTab := stays.tabs(t, "tabs_context_mcp"), leaves.tabs(t, "tabs_context_mcp")
	if len(stayTab) != 1 || len(leaveTab) != 1 || stayTab[0].GroupID < 0 || leaveTab[0].GroupID < 0 || stayTab[0].GroupID == leaveTab[0].GroupID {
		t.Fatalf("the remote clients' tabs: %+v and %+v; want one each, in a group of its own", stayTab, leaveTab)
	}

	rw.restartBridge(t)
	waitRelayConnected(t, rw.world, "alice")

	// The leaver's session ends at the proxy (DELETE) after the restart.
	rw.closeSession(leaves.cs)
	observer := rw.client("e2e-observer") // a local client: tabs_context shows every tab
	testutil.WaitWithin(t, relayWait, "", func() (bool, string) {
		tabs, err := tryTabs(observer, "tabs_context")
		if err != nil {
			return false, err.Error()
		}
		for _, tab := range tabs {
			if tab.TabID == leaveTab[0].TabID && tab.GroupID == leaveTab[0].GroupID {
				return false, fmt.Sprintf("the ended remote session's tab %d is still in its group %d (%q)", tab.TabID, tab.GroupID, tab.Session)
			}
		}
		return true, ""
	})
	after := stays.tabs(t, "tabs_context_mcp")
	if len(after) != 1 || after[0].TabID != stayTab[0].TabID || after[0].GroupID != stayTab[0].GroupID {
		t.Fatalf("after the restart the remaining remote client's tabs are %+v; before: %+v", after, stayTab)
	}
}
