package httpguard

import (
	"net/netip"
	"strings"
)

// ClientPrefix is the block a client's requests and connections are counted
// under: its IPv4 address (an IPv4-mapped IPv6 address is its IPv4
// address), or its IPv6 /64, which one household or server holds whole.
// The zone is dropped.
func ClientPrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64) // cannot fail for an IPv6 address and 64
		return p
	}
	return netip.PrefixFrom(a, a.BitLen())
}

// ClientKey is [ClientPrefix] as a string, for every limit kept per client
// address (the guard's rate limit, connlimit's connections, the
// authorization server's and the pairing codes' attempts): "192.0.2.1",
// "2001:db8:1:2::/64". addr may be an address, a host:port
// (http.Request.RemoteAddr, net.Addr.String) or a key already, which it
// returns unchanged, so that a key handed from one limit to another counts
// as the same client. Anything else ("" included) is its own key.
func ClientKey(addr string) string {
	if a, err := netip.ParseAddr(addr); err == nil {
		return clientKey(a)
	}
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return clientKey(ap.Addr())
	}
	if strings.Contains(addr, "/") {
		if p, err := netip.ParsePrefix(addr); err == nil && p.Addr().Is6() && p.Bits() == 64 && p.Masked() == p {
			return p.String()
		}
	}
	return addr
}

func clientKey(a netip.Addr) string {
	p := ClientPrefix(a)
	if p.Addr().Is4() {
		return p.Addr().String()
	}
	return p.String()
}
