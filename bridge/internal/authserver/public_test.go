package authserver

import "testing"

func TestPublicOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, raw, base string
		hosts, others   []string // Host headers that name it, and that do not
	}{
		{"a name", "https://MCP.example.com/", "https://mcp.example.com",
			[]string{"mcp.example.com", "MCP.Example.COM", "mcp.example.com.", "mcp.example.com:443"},
			[]string{"mcp.example.com:8443", "evil.example.com", "", "mcp.example.com:80"}},
		{"a port", "https://mcp.example.com:8443", "https://mcp.example.com:8443",
			[]string{"mcp.example.com:8443", "MCP.example.com.:8443"},
			[]string{"mcp.example.com", "mcp.example.com:443"}},
		{"the default port written out", "http://localhost:80", "http://localhost",
			[]string{"localhost", "localhost:80"}, []string{"localhost:443"}},
		{"IPv6", "https://[2001:DB8::1]", "https://[2001:db8::1]",
			[]string{"[2001:db8::1]", "[2001:db8::1]:443", "[2001:DB8::1]"},
			[]string{"[2001:db8::2]", "[2001:db8::1]:8443", "2001:db8::1:443"}},
		{"IPv6 and a port", "https://[2001:db8::1]:8443", "https://[2001:db8::1]:8443",
			[]string{"[2001:db8::1]:8443"}, []string{"[2001:db8::1]", "[2001:db8::1]:443"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := NewPublicOrigin(tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if o.Base != tc.base {
				t.Fatalf("Base = %q, want %q", o.Base, tc.base)
			}
			for _, h := range tc.hosts {
				if !o.IsHost(h) {
					t.Errorf("IsHost(%q) = false, want true", h)
				}
			}
			for _, h := range tc.others {
				if o.IsHost(h) {
					t.Errorf("IsHost(%q) = true, want false", h)
				}
			}
		})
	}
	for _, raw := range []string{"https://mcp.example.com/mcp", "https://u@mcp.example.com", "https://mcp.example.com?x", "mcp.example.com"} {
		if _, err := NewPublicOrigin(raw); err == nil {
			t.Errorf("NewPublicOrigin(%q) accepted", raw)
		}
	}
}
