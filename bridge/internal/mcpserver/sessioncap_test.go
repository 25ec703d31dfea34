package mcpserver

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestSessionCaps: a flood of initializes from one client never holds
// more than its cap (its own oldest idle sessions make room), another
// client's session survives the flood, and a bridge full of another
// client's sessions refuses with 503, Retry-After and a JSON-RPC error.
func TestSessionCaps(t *testing.T) {
	table := sessionlimit.New(sessionlimit.Options{Max: 20, PerClient: 8})
	b := newBridge(t, Options{}, HTTPOptions{Sessions: table})
	b.attach("instance-caps")
	initialize := func(client string) rawReply {
		c := &rawClient{t: t, url: b.srv.URL + "/mcp", version: "2025-06-18"}
		return c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+client+`","version":"1"}}}`, nil)
	}
	keeper := b.rawSession(t, "2025-06-18") // clientInfo.name "raw"
	for i := range 2000 {
		if r := initialize("flood"); r.status != http.StatusOK {
			t.Fatalf("initialize %d of a one-shot client: %d %s", i, r.status, r.body)
		}
	}
	if st := table.Stats(); st.Sessions > 9 || st.Evicted < 1990 {
		t.Fatalf("after the flood: %+v; want at most 8 flood sessions + 1", st)
	}
	// An evicted session leaves the live index when the SDK has closed
	// it, which may be a moment after the table let it go.
	testutil.WaitFor(t, "at most 9 sessions live after the flood", func() bool { return b.st.live.Len() <= 9 })
	if r := keeper.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); r.status != http.StatusOK {
		t.Fatalf("the other client's session did not survive the flood: %d %s", r.status, r.body)
	}

	for i := range 20 { // fill the bridge with other clients' sessions
		initialize(fmt.Sprintf("filler-%d", i))
	}
	r := initialize("late")
	_, code, msg := rpcError(t, r.body)
	if r.status != http.StatusServiceUnavailable || code != -32000 || r.header.Get("Retry-After") == "" || !strings.Contains(msg, "limit") {
		t.Fatalf("a full bridge answered %d %q (Retry-After %q)", r.status, r.body, r.header.Get("Retry-After"))
	}
}
