package authserver

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// A PublicOrigin is where a service protected by this package is published
// (the public gateway, the proxy's MCP endpoint): its issuer, and the
// origin every Resource URI and every request's Host must name.
type PublicOrigin struct {
	// Base is scheme://host[:port], lower case, without the scheme's
	// default port and with an IPv6 address in brackets.
	Base   string
	Scheme string
	// Host is Base's host[:port].
	Host string
	// Port is Base's port, "" for the scheme's default.
	Port string
}

// NewPublicOrigin reads a public URL, scheme://host[:port] with nothing
// after the host but an optional "/".
func NewPublicOrigin(raw string) (PublicOrigin, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return PublicOrigin{}, fmt.Errorf("the public URL %q must be scheme://host[:port], with no path, query or user", raw)
	}
	o := PublicOrigin{Scheme: strings.ToLower(u.Scheme), Port: u.Port()}
	name := strings.ToLower(u.Hostname())
	if strings.Contains(name, ":") {
		name = "[" + name + "]"
	}
	if o.Port == DefaultPort(o.Scheme) {
		o.Port = ""
	}
	o.Host = name
	if o.Port != "" {
		o.Host = name + ":" + o.Port
	}
	o.Base = o.Scheme + "://" + o.Host
	return o, nil
}

// IsHost reports whether a Host header (or a URL's host) names the public
// host: without regard to case, brackets, a trailing dot or the scheme's
// default port written out.
func (o PublicOrigin) IsHost(host string) bool {
	name, port := o.splitHost(host)
	want, wantPort := o.splitHost(o.Host)
	return name != "" && name == want && port == wantPort
}

// HasPort reports whether port (a URL's, "" for none) is the public URL's,
// its default written out or not.
func (o PublicOrigin) HasPort(port string) bool {
	if port == DefaultPort(o.Scheme) {
		port = ""
	}
	return port == o.Port
}

// splitHost splits a Host value into its lower-case name (no brackets, no
// trailing dot) and its port, "" for none or the scheme's default.
func (o PublicOrigin) splitHost(host string) (string, string) {
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = host, ""
	}
	if port == DefaultPort(o.Scheme) {
		port = ""
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), "."), port
}

// ResourceURL parses a `resource` a client asks a token for, when it is a
// plain URL of the public scheme (no user, query or fragment); which host
// and path it names is the caller's to check.
func (o PublicOrigin) ResourceURL(uri string) (*url.URL, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || !strings.EqualFold(u.Scheme, o.Scheme) {
		return nil, false
	}
	return u, true
}

// DefaultPort is the port of a scheme's URLs that name none.
func DefaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// NotFound answers a path that is no route of a public service: 404 with a
// JSON-RPC error whose message says where the routes are.
func NotFound(w http.ResponseWriter, msg string) {
	mcphttp.WriteError(w, http.StatusNotFound, nil, rpccode.InvalidRequest, msg)
}
