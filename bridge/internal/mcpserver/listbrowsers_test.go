package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

func TestBrowserLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		info protocol.BrowserInfo
		want string
	}{
		{"a profile label", protocol.BrowserInfo{ID: "b1", Name: "Chrome", Version: "140.0", Profile: "Work", ExtensionVersion: "0.1.0", ConnectedAt: "2025-11-25T12:00:00Z"},
			`- b1: Chrome 140.0, profile "Work" (extension 0.1.0, connected 2025-11-25T12:00:00Z)`},
		{"no profile label", protocol.BrowserInfo{ID: "b2", Name: "Chromium", Version: "139.0", ExtensionVersion: "0.1.0", ConnectedAt: "2025-11-25T12:00:00Z"},
			`- b2: Chromium 139.0 (extension 0.1.0, connected 2025-11-25T12:00:00Z)`},
		{"only a name", protocol.BrowserInfo{ID: "b3", Name: "Edge"}, `- b3: Edge`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := browserLine(tc.info); got != tc.want {
				t.Errorf("browserLine(%+v)\n got %s\nwant %s", tc.info, got, tc.want)
			}
		})
	}
}

// TestListBrowsersWithoutProfile: a browser whose extension has no profile
// label (the default) is listed with what it said in hello, and no empty
// profile.
func TestListBrowsersWithoutProfile(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	c, err := ipc.Dial(context.Background(), b.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fe := testbrowser.Attach(c, func(method string, p json.RawMessage) (any, map[string]any) {
		if method == "tools/list" {
			return map[string]any{"tools": []any{}}, nil
		}
		return nil, map[string]any{"code": -32601, "message": "no " + method}
	})
	ctx := testutil.Context(t, 10*time.Second)
	if err := fe.AttachHost(ctx); err != nil {
		t.Fatal(err)
	}
	var hello protocol.HelloParams
	hello.InstanceID = "plain-browser-1"
	hello.Browser.Name, hello.Browser.Version = "Chromium", "139.0.7258.154"
	hello.Extension.ID, hello.Extension.Version = "test", "0.1.0"
	if m, err := fe.Call(ctx, protocol.Hello, hello); err != nil || m.Error != nil {
		t.Fatalf("hello: %v %v", err, m.Error)
	}
	testutil.WaitFor(t, "the browser registered", func() bool { return len(b.links.Browsers()) > 0 })

	cs := b.connect(eras[3], nil, "")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolListBrowsers})
	if err != nil || res.IsError {
		t.Fatalf("list_browsers = %+v, %v", res, err)
	}
	if res.StructuredContent != nil {
		t.Errorf("list_browsers has structuredContent %v; Claude Code would hand a model that in place of the text", res.StructuredContent)
	}
	text := testutil.Text(res)
	line := ""
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "- ") {
			line = l
		}
	}
	id := b.links.Browsers()[0].Info().ID
	if !strings.HasPrefix(line, "- "+id+": Chromium 139.0.7258.154 (extension 0.1.0, connected ") || !strings.HasSuffix(line, ") (used by this session)") {
		t.Errorf("list_browsers line for a browser without a profile label: %q", line)
	}
	if strings.Contains(text, "profile") {
		t.Errorf("list_browsers prints a profile the browser did not name:\n%s", text)
	}
}
