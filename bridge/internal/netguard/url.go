package netguard

import (
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// ErrRefused is what every refusal of this package matches (errors.Is).
var ErrRefused = errors.New("netguard: refused")

// RefusedError is a refusal: what was refused and why, as a sentence in
// the extension's words ("Refused the URL https://10.0.0.1/x: it points at
// a private network address (10.0.0.0/8).").
type RefusedError struct {
	// What names the thing refused ("the client metadata document", "the
	// redirect target"); "" when Target says it all (a host name at dial
	// time).
	What string
	// Target is the URL without its query (which may carry secrets), or the
	// host name or address.
	Target string
	// Reason is the why, a clause starting "it …".
	Reason string
}

func (e *RefusedError) Error() string {
	s := "Refused "
	if e.What != "" {
		s += e.What + " "
	}
	return s + e.Target + ": " + e.Reason + "."
}

// Is makes errors.Is(err, ErrRefused) true for every RefusedError.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// metadataHosts are host names of cloud metadata services, refused
// whatever they resolve to.
var metadataHosts = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
	"metadata.azure.internal":    true,
	"metadata.tencentyun.com":    true,
	"metadata.oraclecloud.com":   true,
}

// internalSuffixes only ever name something on a private network.
var internalSuffixes = []string{".internal", ".local", ".localdomain", ".home.arpa", ".intranet", ".corp", ".lan"}

// CheckURL checks raw before it is fetched, by what the URL says (the
// addresses a name resolves to are checked when connecting: NewDialer):
// https only (plain http only to loopback under AllowPrivateForTests), no
// user name or password, no metadata, single-label or internal-only host
// name, and no IP address in a refused range. It returns the parsed URL, or
// a *RefusedError.
func CheckURL(raw string, opts Options) (*url.URL, error) {
	what := opts.purpose()
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return nil, &RefusedError{what, shorten(raw), "it is not a URL"}
	}
	if err := checkParsed(u, what, opts); err != nil {
		return nil, err
	}
	return u, nil
}

// checkParsed is CheckURL for a parsed URL (redirect targets, requests).
func checkParsed(u *url.URL, what string, opts Options) error {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return &RefusedError{what, scheme + ":…", "only https URLs are allowed, not " + scheme + ":"}
	}
	shown := Shown(u)
	if u.Opaque != "" || u.Host == "" {
		return &RefusedError{what, shown, "it has no host"}
	}
	if u.User != nil {
		return &RefusedError{what, shown, "it carries a user name or password"}
	}
	v, bad := classifyHost(u.Hostname())
	if bad != "" {
		return &RefusedError{what, shown, bad}
	}
	if scheme == "http" && !(opts.AllowPrivateForTests && v.class == loopback) {
		if v.class == loopback {
			return &RefusedError{what, shown, "plain http is allowed only for loopback addresses in tests (AllowPrivateForTests); use https"}
		}
		return &RefusedError{what, shown, "it is not https"}
	}
	if v.refusedWith(opts) {
		if v.class == loopback {
			return &RefusedError{what, shown, "it points at this computer (loopback)"}
		}
		return &RefusedError{what, shown, "it points at " + v.phrase}
	}
	return nil
}

// classifyHost says what host (u.Hostname(): no brackets) points at, or,
// in bad, why it is no host name at all.
func classifyHost(host string) (v verdict, bad string) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "" {
		return v, "it has no host"
	}
	if strings.Contains(h, "%") {
		// fe80::1%eth0: a zone names one of this computer's interfaces.
		return v, "it names a network interface (an IPv6 zone)"
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return classify(a), ""
	}
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			// The WHATWG parser would map it with IDNA (fullwidth
			// "ｌｏｃａｌ" is "local"); rather than map it differently,
			// ask for the form DNS sees.
			return v, "its host name is not ASCII; write it in its xn-- (punycode) form"
		}
	}
	if endsInNumber(h) {
		// 2130706433, 0x7f.1, 0177.0.0.1, 127.1: what browsers and
		// inet_aton read as an IPv4 address.
		a, ok := parseLooseIPv4(h)
		if !ok {
			return v, "it is not a valid host name"
		}
		if v := classify4(a); v.class != public {
			return v, ""
		}
		return v, "it writes the IPv4 address " + a.String() + " in another form than a.b.c.d"
	}
	if !validHostName(h) {
		return v, "it is not a valid host name"
	}
	switch {
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return verdict{loopback, "loopback"}, ""
	case metadataHosts[h]:
		return verdict{never, "a cloud metadata service"}, ""
	case !strings.Contains(h, "."):
		return verdict{never, "a local network name (no dot in the host name)"}, ""
	}
	for _, s := range internalSuffixes {
		if strings.HasSuffix(h, s) {
			return verdict{never, "a private network name (" + s + ")"}, ""
		}
	}
	return verdict{}, ""
}

// validHostName: labels of letters, digits, '-' and '_' (seen in real
// names), none empty.
func validHostName(h string) bool {
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return len(h) <= 253
}

// endsInNumber is the WHATWG URL rule: a host whose last label is a
// number (decimal, or 0x hex) is an IPv4 address, or invalid.
func endsInNumber(h string) bool {
	parts := strings.Split(h, ".")
	last := parts[len(parts)-1]
	if last == "" && len(parts) > 1 {
		last = parts[len(parts)-2]
	}
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		return isHex(last[2:])
	}
	return strings.Trim(last, "0123456789") == ""
}

// parseLooseIPv4 reads 1 to 4 parts, each decimal, octal (leading 0) or hex
// (0x), the last one filling the remaining bytes, as WHATWG and inet_aton do.
func parseLooseIPv4(h string) (netip.Addr, bool) {
	parts := strings.Split(strings.TrimSuffix(h, "."), ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(digits, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v += n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// shorten keeps sentences readable when a URL is long.
func shorten(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
