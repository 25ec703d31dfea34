package httpguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// hostPort is a Host header value in canonical form: host lower-cased, an IP
// address in its shortest form without brackets, and port a decimal number
// without leading zeros, or "" when the header names none.
type hostPort struct {
	host, port string
}

// splitListenAddr splits the address the bridge listens on into a host
// (possibly empty, meaning all interfaces) and a port, which must be a real
// one: the guard cannot check Host headers against port 0.
func splitListenAddr(addr string) (host, port string, err error) {
	if addr == "" {
		return "", "", errors.New("listen address is empty; pass the address the bridge is bound to, such as 127.0.0.1:3456")
	}
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("listen address %q: %w", addr, err)
	}
	port, err = canonicalPort(port)
	if err != nil {
		return "", "", fmt.Errorf("listen address %q: %w", addr, err)
	}
	return strings.ToLower(host), port, nil
}

// canonicalPort checks that p is a TCP port number from 1 to 65535 and
// returns it without leading zeros.
func canonicalPort(p string) (string, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", fmt.Errorf("port %q is not a number from 1 to 65535 (for a listener on port 0, pass the address it was given)", p)
	}
	return strconv.FormatUint(n, 10), nil
}

// isLoopbackHost reports whether host (from a listen address) reaches this
// machine only.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// isUnspecifiedHost reports whether host (from a listen address) means every
// interface.
func isUnspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

// canonicalHost lower-cases a host name and writes an IP address in its
// shortest form, without zone.
func canonicalHost(host string) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().WithZone("").String()
	}
	return strings.ToLower(host)
}

// parseHost parses a Host header value (or an AllowedHosts entry):
// "host", "host:port", "[ipv6]" or "[ipv6]:port".
func parseHost(s string) (hostPort, error) {
	if s == "" {
		return hostPort{}, errors.New("empty host")
	}
	if strings.ContainsAny(s, "/@?#%\\ \t\r\n") {
		return hostPort{}, errors.New("not a host name or address")
	}
	var host, port string
	if h, p, err := net.SplitHostPort(s); err == nil {
		cp, err := canonicalPort(p)
		if err != nil {
			return hostPort{}, err
		}
		host, port = h, cp
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if strings.Contains(s, ":") || strings.Contains(s, "[") || strings.Contains(s, "]") {
		return hostPort{}, errors.New("not a host name or address")
	} else {
		host = s
	}
	if host == "" {
		return hostPort{}, errors.New("empty host")
	}
	if strings.Contains(host, ":") {
		// Only an IPv6 address may hold a colon, and only in brackets.
		if _, err := netip.ParseAddr(host); err != nil {
			return hostPort{}, errors.New("not a host name or address")
		}
	}
	return hostPort{canonicalHost(host), port}, nil
}

// normalizeOrigin checks that o is "scheme://host[:port]" (a trailing slash
// is tolerated, as browser manifests write extension origins with one) and
// returns it lower-cased, without the scheme's default port.
func normalizeOrigin(o string) (string, error) {
	const want = "it must be scheme://host[:port], such as chrome-extension://<extension id> or http://localhost:6274"
	u, err := url.Parse(o)
	if err != nil {
		return "", fmt.Errorf("%w; %s", err, want)
	}
	if u.Scheme == "" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" ||
		(u.Path != "" && u.Path != "/") {
		return "", errors.New(want)
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Host)
	switch {
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		host = strings.TrimSuffix(host, ":80")
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		host = strings.TrimSuffix(host, ":443")
	}
	return scheme + "://" + host, nil
}
