package netguard

import (
	"net/netip"
	"strings"
	"testing"
)

// TestClassify walks every refused range at its edges, the IPv6 forms that
// embed an IPv4 address, and public neighbours that must pass.
func TestClassify(t *testing.T) {
	cases := []struct {
		name, addr string
		want       string // a part of the phrase; "" means public
	}{
		// IPv4, range by range, first and last address.
		{"this network first", "0.0.0.0", "0.0.0.0/8"},
		{"this network last", "0.255.255.255", "0.0.0.0/8"},
		{"10/8 first", "10.0.0.0", "private network address (10.0.0.0/8)"},
		{"10/8 last", "10.255.255.255", "10.0.0.0/8"},
		{"below 10/8", "9.255.255.255", ""},
		{"above 10/8", "11.0.0.0", ""},
		{"CGNAT first", "100.64.0.0", "carrier-grade NAT address (100.64.0.0/10)"},
		{"CGNAT last", "100.127.255.255", "100.64.0.0/10"},
		{"below CGNAT", "100.63.255.255", ""},
		{"above CGNAT", "100.128.0.0", ""},
		{"loopback", "127.0.0.1", "loopback"},
		{"loopback anywhere in 127/8", "127.8.9.10", "loopback"},
		{"below loopback", "126.255.255.255", ""},
		{"above loopback", "128.0.0.0", ""},
		{"Azure platform", "168.63.129.16", "Azure platform address"},
		{"metadata", "169.254.169.254", "cloud metadata address 169.254.169.254"},
		{"link-local first", "169.254.0.0", "link-local address (169.254.0.0/16)"},
		{"link-local last", "169.254.255.255", "169.254.0.0/16"},
		{"below link-local", "169.253.255.255", ""},
		{"above link-local", "169.255.0.0", ""},
		{"172.16/12 first", "172.16.0.0", "private network address (172.16.0.0/12)"},
		{"172.16/12 last", "172.31.255.255", "172.16.0.0/12"},
		{"below 172.16/12", "172.15.255.255", ""},
		{"above 172.16/12", "172.32.0.0", ""},
		{"IETF protocol", "192.0.0.8", "IETF protocol address (192.0.0.0/24)"},
		{"TEST-NET-1", "192.0.2.1", "documentation address (192.0.2.0/24)"},
		{"6to4 relay", "192.88.99.1", "192.88.99.0/24"},
		{"192.168/16 first", "192.168.0.0", "private network address (192.168.0.0/16)"},
		{"192.168/16 last", "192.168.255.255", "192.168.0.0/16"},
		{"above 192.168/16", "192.169.0.1", ""},
		{"benchmarking first", "198.18.0.0", "benchmarking address (198.18.0.0/15)"},
		{"benchmarking last", "198.19.255.255", "198.18.0.0/15"},
		{"above benchmarking", "198.20.0.0", ""},
		{"TEST-NET-2", "198.51.100.7", "documentation address (198.51.100.0/24)"},
		{"TEST-NET-3", "203.0.113.200", "documentation address (203.0.113.0/24)"},
		{"multicast first", "224.0.0.1", "multicast address (224.0.0.0/4)"},
		{"multicast last", "239.255.255.255", "224.0.0.0/4"},
		{"reserved", "240.0.0.1", "reserved address (240.0.0.0/4)"},
		{"broadcast", "255.255.255.255", "broadcast address"},
		{"public v4", "93.184.216.34", ""},
		{"public DNS", "8.8.8.8", ""},
		{"below multicast", "223.255.255.255", ""},

		// IPv6 of its own.
		{"unspecified", "::", "unspecified address (::)"},
		{"loopback v6", "::1", "loopback"},
		{"ULA first", "fc00::", "unique local address (fc00::/7)"},
		{"ULA", "fd12:3456:789a::1", "fc00::/7"},
		{"ULA last", "fdff:ffff::", "fc00::/7"},
		{"below ULA", "fbff::1", "outside 2000::/3"},
		{"AWS metadata v6", "fd00:ec2::254", "cloud metadata range fd00:ec2::/32"},
		{"link-local v6", "fe80::1", "link-local address (fe80::/10)"},
		{"link-local v6 last", "febf:ffff::1", "fe80::/10"},
		{"site-local", "fec0::1", "site-local address (fec0::/10)"},
		{"multicast v6", "ff02::1", "multicast address (ff00::/8)"},
		{"documentation v6", "2001:db8::1", "documentation address (2001:db8::/32)"},
		{"documentation v6 3fff", "3fff::1", "3fff::/20"},
		{"Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::/23"},
		{"benchmarking v6", "2001:2::1", "2001::/23"},
		{"discard-only", "100::1", "discard-only address (100::/64)"},
		{"outside 2000::/3", "4000::1", "outside 2000::/3"},
		{"public v6", "2606:4700:4700::1111", ""},
		{"public v6 after 2001::/23", "2001:200::1", ""},

		// IPv6 judged by the IPv4 address inside.
		{"mapped loopback", "::ffff:127.0.0.1", "loopback"},
		{"mapped private", "::ffff:10.1.2.3", "10.0.0.0/8"},
		{"mapped metadata", "::ffff:169.254.169.254", "169.254.169.254"},
		{"mapped hex", "::ffff:c0a8:101", "192.168.0.0/16"},
		{"mapped public", "::ffff:8.8.8.8", ""},
		{"IPv4-translated", "::ffff:0:10.0.0.1", "10.0.0.0/8"},
		{"compatible loopback", "::127.0.0.1", "loopback"},
		{"compatible private", "::192.168.1.1", "192.168.0.0/16"},
		{"compatible public", "::8.8.8.8", "deprecated IPv4-compatible address"},
		{"NAT64 metadata", "64:ff9b::a9fe:a9fe", "169.254.169.254"},
		{"NAT64 private", "64:ff9b::10.0.0.1", "10.0.0.0/8"},
		{"NAT64 public", "64:ff9b::8.8.8.8", ""},
		{"local NAT64 /96 loopback", "64:ff9b:1::127.0.0.1", "loopback"},
		{"local NAT64 /96 private", "64:ff9b:1::172.16.0.1", "172.16.0.0/12"},
		{"local NAT64 /96 public", "64:ff9b:1::8.8.8.8", ""},
		{"local NAT64 /48 form", "64:ff9b:1:a00:1::", "64:ff9b:1::/48"},
		{"6to4 private", "2002:a00:1::1", "10.0.0.0/8"},
		{"6to4 metadata", "2002:a9fe:a9fe::", "169.254.169.254"},
		{"6to4 public", "2002:808:808::1", ""},

		{"zone does not hide link-local", "fe80::1%eth0", "fe80::/10"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := netip.ParseAddr(c.addr)
			if err != nil {
				t.Fatalf("test address %q: %v", c.addr, err)
			}
			got := Classify(a)
			switch {
			case c.want == "" && got != "":
				t.Errorf("Classify(%s) = %q, want public", c.addr, got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("Classify(%s) = %q, want it to say %q", c.addr, got, c.want)
			}
		})
	}
}

// TestAllowPrivateForTests: the test allowance opens loopback and private
// networks, and nothing else.
func TestAllowPrivateForTests(t *testing.T) {
	allow := Options{AllowPrivateForTests: true}
	cases := []struct {
		addr    string
		allowed bool
	}{
		{"127.0.0.1", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"10.0.0.1", true},
		{"172.16.0.1", true},
		{"192.168.1.1", true},
		{"fd00::1", true},
		{"169.254.169.254", false},
		{"fd00:ec2::254", false},
		{"169.254.1.1", false},
		{"fe80::1", false},
		{"100.64.0.1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"224.0.0.1", false},
		{"192.0.2.1", false},
	}
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			v := classify(netip.MustParseAddr(c.addr))
			if v.refusedWith(Options{}) == false {
				t.Fatalf("%s passes without the allowance", c.addr)
			}
			if got := !v.refusedWith(allow); got != c.allowed {
				t.Errorf("%s allowed in tests = %v, want %v", c.addr, got, c.allowed)
			}
		})
	}
}
