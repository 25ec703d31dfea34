package netguard

import (
	"errors"
	"regexp"
	"testing"
)

// TestCheckURLRefuses holds the extension's cases (extension/test/
// remote-ssrf.test.js) and the ones this package adds; each refusal is a
// sentence that names the URL and the reason.
func TestCheckURLRefuses(t *testing.T) {
	cases := []struct {
		name, url string
		reason    string // a regexp the sentence must match
	}{
		{"private 10/8", "https://10.0.0.1/mcp", `private network address \(10\.0\.0\.0/8\)`},
		{"private 172.16/12", "https://172.31.255.254/", `172\.16\.0\.0/12`},
		{"private 192.168/16", "https://192.168.1.10/", `192\.168\.0\.0/16`},
		{"loopback", "https://127.0.0.1/", `this computer \(loopback\)`},
		{"loopback in 127/8", "https://127.8.9.10/", `loopback`},
		{"link-local", "https://169.254.1.1/", `link-local address \(169\.254\.0\.0/16\)`},
		{"metadata address", "https://169.254.169.254/latest/meta-data/", `cloud metadata address 169\.254\.169\.254`},
		{"this network", "https://0.0.0.0/", `0\.0\.0\.0/8`},
		{"CGNAT", "https://100.100.100.200/", `carrier-grade NAT`},
		{"multicast", "https://224.0.0.1/", `multicast`},
		{"documentation", "https://192.0.2.10/", `documentation address`},
		{"documentation v6", "https://[2001:db8::1]/", `documentation address \(2001:db8::/32\)`},
		{"loopback v6", "https://[::1]/", `loopback`},
		{"unspecified v6", "https://[::]/", `unspecified`},
		{"ULA", "https://[fc00::1]/", `unique local address \(fc00::/7\)`},
		{"link-local v6", "https://[fe80::1]/", `link-local address \(fe80::/10\)`},
		{"mapped loopback", "https://[::ffff:127.0.0.1]/", `loopback`},
		{"mapped private", "https://[::ffff:10.1.2.3]/", `10\.0\.0\.0/8`},
		{"mapped hex", "https://[::ffff:c0a8:0101]/", `192\.168\.0\.0/16`},
		{"compatible", "https://[::10.0.0.1]/", `10\.0\.0\.0/8`},
		{"NAT64", "https://[64:ff9b::a9fe:a9fe]/", `169\.254\.169\.254`},
		{"local NAT64", "https://[64:ff9b:1::a00:1]/", `10\.0\.0\.0/8`},
		{"6to4", "https://[2002:0a00:0001::1]/", `10\.0\.0\.0/8`},
		{"AWS metadata v6", "https://[fd00:ec2::254]/", `metadata`},
		{"zone", "https://[fe80::1%25eth0]/", `network interface`},
		// IPv4 written the other ways URL parsers and inet_aton accept.
		{"one number", "https://2130706433/", `loopback`},
		{"hex and short", "https://0x7f.1/", `loopback`},
		{"octal", "https://0177.0.0.1/", `loopback`},
		{"short", "https://127.1/", `loopback`},
		{"short private", "https://10.1/", `10\.0\.0\.0/8`},
		{"public in another form", "https://0x5db8d822/", `93\.184\.216\.34 in another form than a\.b\.c\.d`},
		{"leading zero", "https://010.0.0.1/", `another form`},
		{"number out of range", "https://1.2.3.256/", `not a valid host name`},
		// Names.
		{"localhost", "https://localhost/", `loopback`},
		{"under localhost", "https://app.localhost/", `loopback`},
		{"GCP metadata", "https://metadata.google.internal/computeMetadata/v1/", `cloud metadata service`},
		{"trailing dot", "https://metadata.google.internal./", `cloud metadata service`},
		{"upper case", "https://METADATA.GOOGLE.INTERNAL/", `cloud metadata service`},
		{"metadata single label", "https://metadata/", `cloud metadata service`},
		{"metadata.goog", "https://metadata.goog/", `cloud metadata service`},
		{"single label", "https://intranet/", `no dot in the host name`},
		{".local", "https://printer.local/", `private network name \(\.local\)`},
		{".internal", "https://db.corp.internal/", `private network name`},
		{".home.arpa", "https://nas.home.arpa/", `private network name`},
		{"non-ASCII", "https://printer.ｌｏｃａｌ/", `not ASCII`},
		{"odd characters", "https://exa$mple.com/", `not a valid host name`},
		// Schemes and credentials.
		{"http", "http://example.com/mcp", `it is not https`},
		{"javascript", "javascript:alert(1)", `only https URLs are allowed, not javascript:`},
		{"file", "file:///etc/passwd", `only https URLs are allowed, not file:`},
		{"data", "data:text/html,hi", `not data:`},
		{"ftp", "ftp://example.com/", `not ftp:`},
		{"credentials", "https://user:pass@example.com/", `user name or password`},
		{"not a URL", "not a url", `it is not a URL`},
		{"a command", "open -a Calculator", `it is not a URL`},
		{"no host", "https:///path", `no host`},
		{"http to loopback outside tests", "http://127.0.0.1:8080/", `allowed only for loopback addresses in tests`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CheckURL(c.url, Options{})
			if err == nil {
				t.Fatalf("CheckURL(%q) passed; want it refused", c.url)
			}
			if !errors.Is(err, ErrRefused) {
				t.Errorf("error %v is not ErrRefused", err)
			}
			msg := err.Error()
			if !regexp.MustCompile(`^Refused the URL .+: .+\.$`).MatchString(msg) {
				t.Errorf("%q is not a refusal sentence", msg)
			}
			if !regexp.MustCompile(c.reason).MatchString(msg) {
				t.Errorf("CheckURL(%q) = %q; want it to say %s", c.url, msg, c.reason)
			}
		})
	}
}

func TestCheckURLPasses(t *testing.T) {
	for _, u := range []string{
		"https://mcp.notion.com/mcp",
		"https://example.com:8443/sse?x=1",
		"https://93.184.216.34/",
		"https://172.15.255.255/",
		"https://172.32.0.1/",
		"https://192.169.0.1/",
		"https://169.253.255.255/",
		"https://100.63.255.255/",
		"https://[2606:4700:4700::1111]/",
		"https://[::ffff:8.8.8.8]/",
		"https://[64:ff9b::8.8.8.8]/",
		"https://xn--bcher-kva.example/",
		"https://_acme.example.com/",
		"HTTPS://Example.COM/Path",
	} {
		t.Run(u, func(t *testing.T) {
			got, err := CheckURL(u, Options{})
			if err != nil {
				t.Fatalf("CheckURL(%q): %v", u, err)
			}
			if got.Host == "" {
				t.Errorf("CheckURL(%q) returned a URL without a host", u)
			}
		})
	}
}

// TestCheckURLInTests: the test allowance opens loopback (http too) and
// private networks, nothing else.
func TestCheckURLInTests(t *testing.T) {
	opts := Options{AllowPrivateForTests: true}
	cases := []struct {
		name, url string
		reason    string // "" means allowed
	}{
		{"http localhost", "http://localhost:3000/mcp", ""},
		{"http loopback", "http://127.0.0.1:8080/", ""},
		{"http loopback v6", "http://[::1]:9/", ""},
		{"https localhost", "https://localhost/", ""},
		{"mapped loopback", "http://[::ffff:127.0.0.1]/", ""},
		{"https private", "https://10.0.0.1/client", ""},
		{"https ULA", "https://[fd00::1]/", ""},
		{"http public", "http://example.com/", `not https`},
		{"http private", "http://10.0.0.1/", `not https`},
		{"metadata address", "https://169.254.169.254/", `metadata`},
		{"metadata name", "https://metadata.google.internal/", `metadata`},
		{"link-local", "https://169.254.1.1/", `link-local`},
		{"javascript", "javascript:alert(1)", `javascript:`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CheckURL(c.url, opts)
			if c.reason == "" {
				if err != nil {
					t.Fatalf("CheckURL(%q) in tests: %v", c.url, err)
				}
				return
			}
			if err == nil || !regexp.MustCompile(c.reason).MatchString(err.Error()) {
				t.Fatalf("CheckURL(%q) in tests = %v; want a refusal saying %s", c.url, err, c.reason)
			}
		})
	}
}

func TestCheckURLSentence(t *testing.T) {
	_, err := CheckURL("http://auth.example.com/authorize?secret=1", Options{Purpose: "the client metadata document"})
	const want = "Refused the client metadata document http://auth.example.com/authorize: it is not https."
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s (the query, which may hold secrets, left out)", err, want)
	}
}

func TestParseLooseIPv4(t *testing.T) {
	cases := []struct {
		in   string
		want string // "" means not an address
	}{
		{"2130706433", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"10.1.2", "10.1.0.2"},
		{"0x", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"4294967296", ""},
		{"1.2.3.256", ""},
		{"256.1", ""},
		{"1.2.3.4.5", ""},
		{"08.1.1.1", ""},
		{"0xg.1", ""},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			a, ok := parseLooseIPv4(c.in)
			switch {
			case c.want == "" && ok:
				t.Errorf("parseLooseIPv4(%q) = %s; want no address", c.in, a)
			case c.want != "" && (!ok || a.String() != c.want):
				t.Errorf("parseLooseIPv4(%q) = %s, %v; want %s", c.in, a, ok, c.want)
			}
		})
	}
}
