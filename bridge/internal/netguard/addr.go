package netguard

import (
	"net/netip"
)

// class is how an address or host name may be used.
type class int

const (
	public   class = iota // anyone may fetch it
	loopback              // this computer: AllowPrivateForTests lets it through
	private               // a private network: AllowPrivateForTests lets it through
	never                 // metadata, link-local, multicast, reserved…: refused always
)

// verdict is what an address or host is, when it must not be fetched.
type verdict struct {
	class  class
	phrase string // "loopback", "a private network address (10.0.0.0/8)"; "" for public
}

func (v verdict) refusedWith(opts Options) bool {
	switch v.class {
	case public:
		return false
	case loopback, private:
		return !opts.AllowPrivateForTests
	}
	return true
}

type v4Range struct {
	prefix netip.Prefix
	class  class
	phrase string
}

// v4Ranges are the IPv4 ranges that are never a server another server
// should fetch from: the extension's list (extension/remote/ssrf.js) plus the
// documentation ranges, the 6to4 relay anycast and Azure's platform address.
// A more specific entry comes before the range that contains it.
var v4Ranges = []v4Range{
	{mustPrefix("0.0.0.0/8"), never, `the unspecified "this network" range (0.0.0.0/8)`},
	{mustPrefix("10.0.0.0/8"), private, "a private network address (10.0.0.0/8)"},
	{mustPrefix("100.64.0.0/10"), never, "a carrier-grade NAT address (100.64.0.0/10)"},
	{mustPrefix("127.0.0.0/8"), loopback, "loopback"},
	{mustPrefix("168.63.129.16/32"), never, "the Azure platform address 168.63.129.16"},
	{mustPrefix("169.254.169.254/32"), never, "the cloud metadata address 169.254.169.254"},
	{mustPrefix("169.254.0.0/16"), never, "a link-local address (169.254.0.0/16)"},
	{mustPrefix("172.16.0.0/12"), private, "a private network address (172.16.0.0/12)"},
	{mustPrefix("192.0.0.0/24"), never, "an IETF protocol address (192.0.0.0/24)"},
	{mustPrefix("192.0.2.0/24"), never, "a documentation address (192.0.2.0/24)"},
	{mustPrefix("192.88.99.0/24"), never, "the deprecated 6to4 relay range (192.88.99.0/24)"},
	{mustPrefix("192.168.0.0/16"), private, "a private network address (192.168.0.0/16)"},
	{mustPrefix("198.18.0.0/15"), never, "a benchmarking address (198.18.0.0/15)"},
	{mustPrefix("198.51.100.0/24"), never, "a documentation address (198.51.100.0/24)"},
	{mustPrefix("203.0.113.0/24"), never, "a documentation address (203.0.113.0/24)"},
	{mustPrefix("224.0.0.0/4"), never, "a multicast address (224.0.0.0/4)"},
	{mustPrefix("255.255.255.255/32"), never, "the broadcast address 255.255.255.255"},
	{mustPrefix("240.0.0.0/4"), never, "a reserved address (240.0.0.0/4)"},
}

// v6Ranges are checked after the IPv4 embeddings (classify6).
var v6Ranges = []v4Range{
	{mustPrefix("100::/64"), never, "a discard-only address (100::/64)"},
	{mustPrefix("2001::/23"), never, "an IETF protocol address (2001::/23, Teredo and benchmarking among them)"},
	{mustPrefix("2001:db8::/32"), never, "a documentation address (2001:db8::/32)"},
	{mustPrefix("3fff::/20"), never, "a documentation address (3fff::/20)"},
	{mustPrefix("fd00:ec2::/32"), never, "the cloud metadata range fd00:ec2::/32"},
	{mustPrefix("fc00::/7"), private, "a unique local address (fc00::/7)"},
	{mustPrefix("fe80::/10"), never, "a link-local address (fe80::/10)"},
	{mustPrefix("fec0::/10"), never, "a site-local address (fec0::/10)"},
	{mustPrefix("ff00::/8"), never, "a multicast address (ff00::/8)"},
}

var (
	nat64        = mustPrefix("64:ff9b::/96")    // RFC 6052 well-known prefix
	nat64Local   = mustPrefix("64:ff9b:1::/48")  // RFC 8215 local-use prefix
	sixToFour    = mustPrefix("2002::/16")       // RFC 3056
	globalIPv6   = mustPrefix("2000::/3")        // every public unicast address today
	siitMapped   = mustPrefix("::ffff:0:0:0/96") // RFC 2765 IPv4-translated
	v4Compatible = mustPrefix("::/96")           // deprecated IPv4-compatible
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// Classify says what addr is when it must not be fetched — "loopback", or a
// phrase such as "a private network address (10.0.0.0/8)" — or "" when it
// is a public address. IPv6 addresses that embed an IPv4 address
// (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64, 6to4) are judged by
// the IPv4 address inside.
func Classify(addr netip.Addr) string { return classify(addr).phrase }

func classify(addr netip.Addr) verdict {
	addr = addr.WithZone("")
	if !addr.IsValid() {
		return verdict{never, "not an IP address"}
	}
	if addr.Is4() {
		return classify4(addr)
	}
	return classify6(addr)
}

func classify4(a netip.Addr) verdict {
	for _, r := range v4Ranges {
		if r.prefix.Contains(a) {
			return verdict{r.class, r.phrase}
		}
	}
	return verdict{}
}

func classify6(a netip.Addr) verdict {
	b := a.As16()
	switch {
	case a.IsUnspecified():
		return verdict{never, "the unspecified address (::)"}
	case a.IsLoopback():
		return verdict{loopback, "loopback"}
	case a.Is4In6(): // ::ffff:a.b.c.d
		return classify4(a.Unmap())
	case siitMapped.Contains(a): // ::ffff:0:a.b.c.d
		return classify4(v4At(b, 12))
	case v4Compatible.Contains(a): // ::a.b.c.d
		if v := classify4(v4At(b, 12)); v.class != public {
			return v
		}
		return verdict{never, "a deprecated IPv4-compatible address (::/96)"}
	case nat64.Contains(a):
		return classify4(v4At(b, 12))
	case nat64Local.Contains(a):
		// The operator picks the prefix length inside the /48, and with it
		// where the IPv4 address sits (RFC 6052, section 2.2). With octets
		// 6-11 zero it is the /96 form, the IPv4 address last; any other
		// form cannot be told from an address that hides one elsewhere.
		if b[6]|b[7]|b[8]|b[9]|b[10]|b[11] == 0 {
			return classify4(v4At(b, 12))
		}
		return verdict{never, "a local-use NAT64 address (64:ff9b:1::/48) not in the /96 form, whose IPv4 address cannot be told"}
	case sixToFour.Contains(a):
		return classify4(v4At(b, 2))
	}
	for _, r := range v6Ranges {
		if r.prefix.Contains(a) {
			return verdict{r.class, r.phrase}
		}
	}
	if !globalIPv6.Contains(a) {
		return verdict{never, "a reserved IPv6 address (outside 2000::/3)"}
	}
	return verdict{}
}

// v4At is the IPv4 address in b[i:i+4].
func v4At(b [16]byte, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]})
}
