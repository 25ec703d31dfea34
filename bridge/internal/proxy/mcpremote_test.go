//go:build unix

package proxy

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestMCPRemoteProxy: mcp-remote (npm) signs in to the proxy's /mcp with
// the password mapped to alice (discovery from the 401, registration, its
// loopback callback, PKCE; the person's part played on the pages), and a
// tool call reaches alice's browser through it.
func TestMCPRemoteProxy(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	startBrowser(t, tp, "alice", "Chrome")
	cs := testutil.MCPRemote(t, tp.public()+"/mcp", passwordPerson().Redirect)
	ctx := testutil.Context(t, 2*time.Minute)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "through mcp-remote"}})
	if err != nil || testutil.Text(res) != "Chrome: through mcp-remote" {
		t.Fatalf("echo through mcp-remote: %v %q", err, testutil.Text(res))
	}
}
