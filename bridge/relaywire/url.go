package relaywire

import (
	"fmt"
	"net/url"
	"strings"
)

// EndpointURL returns the URL to dial for one of the proxy's WebSocket
// endpoints, PathExtension or PathMCP, from the proxy URL a user gave in
// either form:
//
//   - the proxy's base URL, with or without a trailing slash:
//     wss://relay.example.com or wss://relay.example.com/;
//   - the endpoint's own URL, as the proxy prints it at start:
//     wss://relay.example.com/extension (with or without a trailing slash).
//
// Any other path (the other endpoint's included), a scheme other than ws
// or wss, a missing host, a query, a fragment or user info is an error
// whose text says which forms to use; callers should check the URL when
// they start, where the user sees it, rather than dial it over and over.
func EndpointURL(raw, endpoint string) (string, error) {
	if endpoint != PathExtension && endpoint != PathMCP {
		return "", fmt.Errorf("relaywire: %q is not a WebSocket endpoint of the proxy", endpoint)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %v", raw, err)
	}
	switch {
	case u.Scheme == "http" || u.Scheme == "https":
		ws := "ws"
		if u.Scheme == "https" {
			ws = "wss"
		}
		return "", fmt.Errorf("%q is an %s:// URL: the proxy is reached over WebSocket, %s://%s/", raw, u.Scheme, ws, u.Host)
	case u.Scheme != "ws" && u.Scheme != "wss", u.Host == "", u.Opaque != "":
		return "", fmt.Errorf("%q is not a WebSocket URL such as wss://relay.example.com/", raw)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("%q must not carry user info, a query or a fragment (tokens are given apart): use %s", raw, forms(u, endpoint))
	}
	switch strings.TrimSuffix(u.EscapedPath(), "/") {
	case "", endpoint:
	case otherEndpoint(endpoint):
		return "", fmt.Errorf("%q is the proxy's %s endpoint, not its %s one: use %s", raw, role(otherEndpoint(endpoint)), role(endpoint), forms(u, endpoint))
	default:
		return "", fmt.Errorf("%q: the proxy serves nothing at %q: use %s", raw, u.Path, forms(u, endpoint))
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: endpoint}).String(), nil
}

func otherEndpoint(endpoint string) string {
	if endpoint == PathMCP {
		return PathExtension
	}
	return PathMCP
}

// role names an endpoint by who connects there.
func role(endpoint string) string {
	if endpoint == PathMCP {
		return "MCP clients'"
	}
	return "extensions'"
}

// forms names the two URLs that are accepted for endpoint on u's host.
func forms(u *url.URL, endpoint string) string {
	base := u.Scheme + "://" + u.Host
	return base + "/ or " + base + endpoint
}
