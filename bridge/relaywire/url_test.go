package relaywire

import (
	"fmt"
	"strings"
	"testing"
)

func TestEndpointURL(t *testing.T) {
	for _, tc := range []struct {
		name, raw, endpoint string
		want                string // the URL to dial; "" for an error
		errHas              []string
	}{
		{"base", "wss://relay.example.com", PathExtension, "wss://relay.example.com/extension", nil},
		{"base with slash", "wss://relay.example.com/", PathExtension, "wss://relay.example.com/extension", nil},
		{"endpoint", "wss://relay.example.com/extension", PathExtension, "wss://relay.example.com/extension", nil},
		{"endpoint with slash", "wss://relay.example.com/extension/", PathExtension, "wss://relay.example.com/extension", nil},
		{"ws with port", "ws://127.0.0.1:8787", PathExtension, "ws://127.0.0.1:8787/extension", nil},
		{"ipv6", "ws://[::1]:8787/", PathMCP, "ws://[::1]:8787/mcp", nil},
		{"mcp base", "wss://relay.example.com/", PathMCP, "wss://relay.example.com/mcp", nil},
		{"mcp endpoint", "wss://relay.example.com/mcp", PathMCP, "wss://relay.example.com/mcp", nil},
		{"mcp endpoint with slash", "ws://localhost:8787/mcp/", PathMCP, "ws://localhost:8787/mcp", nil},

		{"the other endpoint", "wss://relay.example.com/mcp", PathExtension, "",
			[]string{"MCP clients' endpoint", "wss://relay.example.com/ or wss://relay.example.com/extension"}},
		{"the other endpoint, reversed", "wss://relay.example.com/extension", PathMCP, "",
			[]string{"extensions' endpoint", "wss://relay.example.com/ or wss://relay.example.com/mcp"}},
		{"another path", "wss://relay.example.com/relay", PathExtension, "",
			[]string{`serves nothing at "/relay"`, "wss://relay.example.com/ or wss://relay.example.com/extension"}},
		{"endpoint under a path", "wss://relay.example.com/x/extension", PathExtension, "", []string{`serves nothing at "/x/extension"`}},
		{"double slash", "wss://relay.example.com//", PathExtension, "", []string{"serves nothing"}},
		{"https", "https://relay.example.com/", PathMCP, "", []string{"https:// URL", "wss://relay.example.com/"}},
		{"http", "http://127.0.0.1:8787", PathExtension, "", []string{"ws://127.0.0.1:8787/"}},
		{"no scheme", "relay.example.com", PathExtension, "", []string{"not a WebSocket URL"}},
		{"no host", "wss:///extension", PathExtension, "", []string{"not a WebSocket URL"}},
		{"empty", "", PathMCP, "", []string{"not a WebSocket URL"}},
		{"query", "wss://relay.example.com/?token=x", PathExtension, "", []string{"query"}},
		{"empty query", "wss://relay.example.com/extension?", PathExtension, "", []string{"query"}},
		{"fragment", "wss://relay.example.com/#x", PathExtension, "", []string{"fragment"}},
		{"user info", "wss://u:p@relay.example.com/", PathExtension, "", []string{"user info"}},
		{"not a URL", "wss://relay example.com/", PathExtension, "", []string{"not a URL"}},
		{"not an endpoint", "wss://relay.example.com/", "/health", "", []string{"not a WebSocket endpoint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EndpointURL(tc.raw, tc.endpoint)
			if tc.want != "" {
				if err != nil || got != tc.want {
					t.Fatalf("EndpointURL(%q, %q) = %q, %v; want %q", tc.raw, tc.endpoint, got, err, tc.want)
				}
				// The URL it returns is accepted as it is.
				if again, err := EndpointURL(got, tc.endpoint); err != nil || again != got {
					t.Errorf("EndpointURL(%q) = %q, %v; want it unchanged", got, again, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("EndpointURL(%q, %q) = %q, want an error", tc.raw, tc.endpoint, got)
			}
			for _, w := range tc.errHas {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("EndpointURL(%q, %q) error %q does not say %q", tc.raw, tc.endpoint, err, w)
				}
			}
		})
	}
}

func ExampleEndpointURL() {
	for _, raw := range []string{"wss://relay.example.com", "wss://relay.example.com/", "wss://relay.example.com/extension", "wss://relay.example.com/mcp"} {
		fmt.Println(EndpointURL(raw, PathExtension))
	}
	// Output:
	// wss://relay.example.com/extension <nil>
	// wss://relay.example.com/extension <nil>
	// wss://relay.example.com/extension <nil>
	//  "wss://relay.example.com/mcp" is the proxy's MCP clients' endpoint, not its extensions' one: use wss://relay.example.com/ or wss://relay.example.com/extension
}
