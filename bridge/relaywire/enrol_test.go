package relaywire

import (
	"strings"
	"testing"
)

func TestEnrolBaseURL(t *testing.T) {
	for _, tc := range []struct{ name, in, want, err string }{
		{"https", "https://proxy.example.com/", "https://proxy.example.com", ""},
		{"https with a port", "https://proxy.example.com:8443", "https://proxy.example.com:8443", ""},
		{"http on loopback", "http://127.0.0.1:8787", "http://127.0.0.1:8787", ""},
		{"http on IPv6 loopback", "http://[::1]:8787/", "http://[::1]:8787", ""},
		{"http on localhost", "http://localhost:8787", "http://localhost:8787", ""},
		{"http beyond loopback", "http://proxy.example.com", "", "plain http works only on loopback"},
		{"a WebSocket URL", "wss://proxy.example.com/", "", "the scheme is https"},
		{"a path", "https://proxy.example.com/mcp", "", "not a proxy's base URL"},
		{"no host", "https://", "", "not a proxy's base URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EnrolBaseURL(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("EnrolBaseURL(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("EnrolBaseURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
	if got := RelayURLFor("https://proxy.example.com"); got != "wss://proxy.example.com/" {
		t.Errorf("RelayURLFor(https) = %q", got)
	}
	if got := RelayURLFor("http://127.0.0.1:8787"); got != "ws://127.0.0.1:8787/" {
		t.Errorf("RelayURLFor(http) = %q", got)
	}
}
