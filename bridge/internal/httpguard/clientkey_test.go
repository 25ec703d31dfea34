package httpguard

import (
	"net/netip"
	"testing"
)

// TestClientKey: every form an address reaches a limit in gives the same
// key, and a key passed on (the authorization server hands its key to the
// pairing codes' limit) is the same client, not a new one.
func TestClientKey(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"IPv4", "192.0.2.1", "192.0.2.1"},
		{"IPv4 with port", "192.0.2.1:4433", "192.0.2.1"},
		{"IPv4-mapped IPv6", "::ffff:192.0.2.1", "192.0.2.1"},
		{"IPv4-mapped with port", "[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"IPv6", "2001:db8:1:2::1", "2001:db8:1:2::/64"},
		{"IPv6, same /64", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"IPv6 with port", "[2001:db8:1:2::99]:4433", "2001:db8:1:2::/64"},
		{"IPv6 with zone", "fe80::1%eth0", "fe80::/64"},
		{"IPv6 with zone and port", "[fe80::1%eth0]:80", "fe80::/64"},
		{"a key already", "2001:db8:1:2::/64", "2001:db8:1:2::/64"},
		{"loopback", "[::1]:1", "::/64"},
		{"IPv6 prefix that is no key", "2001:db8::/32", "2001:db8::/32"},
		{"not an address", "pipe", "pipe"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClientKey(tc.in)
			if got != tc.want {
				t.Fatalf("ClientKey(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := ClientKey(got); again != got {
				t.Fatalf("ClientKey(ClientKey(%q)) = %q, want %q: a key passed on is another client", tc.in, again, got)
			}
		})
	}
}

func TestClientPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1":        "192.0.2.1/32",
		"::ffff:192.0.2.1": "192.0.2.1/32",
		"2001:db8:1:2::1":  "2001:db8:1:2::/64",
	} {
		if got := ClientPrefix(netip.MustParseAddr(in)).String(); got != want {
			t.Errorf("ClientPrefix(%s) = %s, want %s", in, got, want)
		}
	}
}
