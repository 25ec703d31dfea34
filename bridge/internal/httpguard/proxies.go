package httpguard

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// headerXForwardedFor is the header a reverse proxy (Caddy, Traefik,
// nginx's $proxy_add_x_forwarded_for) writes the address it was called
// from into, appended to whatever the request carried before.
const headerXForwardedFor = "X-Forwarded-For"

// maxForwardedHops bounds how many X-Forwarded-For entries one request
// makes the guard read: a chain of trusted proxies is a few hops long,
// and a client must not make the guard parse a megabyte of header.
const maxForwardedHops = 16

// proxyPeerKey holds, in a request's context, the address of the trusted
// proxy it arrived through, for the refusal log.
type proxyPeerKey struct{}

// trustedProxies is Options.TrustedProxies, each prefix masked and unmapped.
type trustedProxies []netip.Prefix

func newTrustedProxies(list []netip.Prefix) (trustedProxies, error) {
	var t trustedProxies
	for i, p := range list {
		if !p.IsValid() {
			return nil, fmt.Errorf("TrustedProxies[%d] is not a valid prefix", i)
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			// ::ffff:10.0.0.0/104 is 10.0.0.0/8: peers are compared unmapped.
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		if p.Bits() == 0 {
			// Trusting every address would let any client write the
			// address it is counted under.
			return nil, fmt.Errorf("TrustedProxies[%d] is %s, every address: any client could then choose the address it is counted under", i, p)
		}
		t = append(t, p)
	}
	return t, nil
}

func (t trustedProxies) contains(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// client returns the address a request from peer is attributed to: peer
// itself unless peer is a trusted proxy; then the right-most address of
// xff (the X-Forwarded-For header's lines, in order) that is not a trusted
// proxy, since each trusted proxy vouches only for the address it appends:
// everything to its left was written by whoever called it, possibly the
// client itself. When every address is a trusted proxy, the left-most one;
// when an entry cannot be read, or the chain is longer than
// maxForwardedHops, the last trusted hop read, since what lies beyond it
// names no one reliably.
func (t trustedProxies) client(peer netip.Addr, xff []string) netip.Addr {
	if !t.contains(peer) {
		return peer
	}
	addr, hops := peer, 0
	for i := len(xff) - 1; i >= 0; i-- {
		// Entries right to left; an empty one ("a,,b", "a, ") is malformed,
		// an empty line holds none.
		line, more := xff[i], xff[i] != ""
		for more {
			var entry string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				line, entry = line[:j], line[j+1:]
			} else {
				entry, more = line, false
			}
			if hops++; hops > maxForwardedHops {
				return addr
			}
			a, ok := parseForwardedAddr(entry)
			if !ok {
				return addr
			}
			if !t.contains(a) {
				return a
			}
			addr = a
		}
	}
	return addr
}

// parseForwardedAddr reads one X-Forwarded-For entry: an IP address,
// optionally with a port as some proxies write it ("192.0.2.1:4711",
// "[2001:db8::1]:4711", "[2001:db8::1]"). A zone, a name or "unknown" is
// not an address.
func parseForwardedAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), a.Zone() == ""
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), ap.Addr().Zone() == ""
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return a.Unmap(), a.Zone() == ""
		}
	}
	return netip.Addr{}, false
}

// fromProxy returns r as the handlers behind the guard see it: when r came
// from a trusted proxy on behalf of another address, a copy whose
// RemoteAddr is that address with port 0 (the client's port is not
// forwarded), and whose context remembers the proxy's own address.
// Otherwise r itself.
func (g *guard) fromProxy(r *http.Request) *http.Request { return g.proxies.fromProxy(r) }

// TrustedProxies is the guard's rule for reverse proxies (Options.TrustedProxies)
// for servers that count clients before or beside a guard: the cloud
// proxy's listener, sign-in and pairing limits. One rule, so that the
// gateway and the proxy cannot drift apart on whom they believe. A nil
// *TrustedProxies trusts no one.
type TrustedProxies struct{ t trustedProxies }

// NewTrustedProxies checks the list as Options.TrustedProxies is checked
// (a prefix of every address is refused); an empty list gives nil.
func NewTrustedProxies(list []netip.Prefix) (*TrustedProxies, error) {
	t, err := newTrustedProxies(list)
	if err != nil || len(t) == 0 {
		return nil, err
	}
	return &TrustedProxies{t}, nil
}

// Trusts reports whether a direct peer is one of the trusted proxies.
func (p *TrustedProxies) Trusts(peer netip.Addr) bool {
	return p != nil && p.t.contains(peer.Unmap())
}

// FromProxy returns r with its RemoteAddr set to the client a trusted proxy
// vouches for (port 0), as the guard's handlers see it; r itself when its
// peer is no trusted proxy or it carries no X-Forwarded-For.
func (p *TrustedProxies) FromProxy(r *http.Request) *http.Request {
	if p == nil {
		return r
	}
	return p.t.fromProxy(r)
}

func (t trustedProxies) fromProxy(r *http.Request) *http.Request {
	xff := r.Header[headerXForwardedFor]
	if len(xff) == 0 {
		return r
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r
	}
	peer := ap.Addr().Unmap()
	client := t.client(peer, xff)
	if client == peer {
		return r
	}
	r2 := r.WithContext(context.WithValue(r.Context(), proxyPeerKey{}, r.RemoteAddr))
	r2.RemoteAddr = netip.AddrPortFrom(client, 0).String()
	return r2
}

// ClientIP is the address r is attributed to: the host of its RemoteAddr,
// which the guard has set to the client's address when r came through one
// of Options.TrustedProxies. Handlers behind the guard use it for limits
// per address (the authorization server's sign-in limits, for one).
func ClientIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
