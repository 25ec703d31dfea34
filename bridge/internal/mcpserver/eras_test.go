package mcpserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestBadArgumentsPerEra: arguments the browser's inputSchema refuses are
// a JSON-RPC -32602 up to 2025-06-18 and a tool error the model can read
// from 2025-11-25 (SEP-1303), on the fast path and the SDK's path alike;
// an unknown tool is -32602 in every era. Issue 31, item 11.
func TestBadArgumentsPerEra(t *testing.T) {
	for _, path := range []string{"fast", "sdk"} {
		t.Run(path, func(t *testing.T) {
			b := newBridge(t, Options{}, HTTPOptions{})
			b.st.noFastPath.Store(path == "sdk")
			b.attach("instance-args-1")
			for _, e := range eras {
				t.Run(e.name, func(t *testing.T) {
					cs := b.connect(e, nil, "")
					ctx := testutil.Context(t, 10*time.Second)
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": 42}})
					toolError := e.version == "" || e.version >= "2025-11-25"
					switch {
					case toolError && err != nil:
						t.Fatalf("bad arguments: want a tool error, got %v", err)
					case toolError:
						if !res.IsError || !strings.Contains(testutil.Text(res), "text: expected a string") ||
							!strings.Contains(testutil.Text(res), "inputSchema") {
							t.Fatalf("bad arguments: isError %v, %q", res.IsError, testutil.Text(res))
						}
					default:
						var werr *jsonrpc.Error
						if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "text: expected a string") {
							t.Fatalf("bad arguments: want -32602 naming the argument, got %v, %v", res, err)
						}
					}
					_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
					var werr *jsonrpc.Error
					if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
						t.Fatalf("unknown tool: want -32602, got %v", err)
					}
				})
			}
		})
	}
}

// TestCacheFieldsPerEra: tools/list carries ttlMs and cacheScope only from
// 2026-07-28, the first version whose schema has them, as seen on the wire.
func TestCacheFieldsPerEra(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	b.attach("instance-cache-1")
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			var wire testbrowser.SyncBuffer
			c := mcp.NewClient(&mcp.Implementation{Name: "test-" + e.name, Version: "1"}, nil)
			tr := &mcp.LoggingTransport{Transport: e.transport(b.srv.URL), Writer: &wire}
			cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: e.version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			if _, err := cs.ListTools(testutil.Context(t, 10*time.Second), nil); err != nil {
				t.Fatal(err)
			}
			var listed string
			for _, line := range strings.Split(wire.String(), "\n") {
				if strings.Contains(line, `"tools":[`) {
					listed = line
				}
			}
			if listed == "" {
				t.Fatalf("no tools/list result on the wire:\n%s", wire.String())
			}
			want := e.version == ""
			for _, field := range []string{`"ttlMs":`, `"cacheScope":`} {
				if got := strings.Contains(listed, field); got != want {
					t.Errorf("tools/list has %s: %v, want %v", field, got, want)
				}
			}
		})
	}
}
