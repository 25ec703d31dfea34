// Package netguard keeps the server's own outgoing requests — fetching a
// client's metadata document, an upstream's metadata — away from what only
// the server can reach: loopback, private networks, cloud metadata
// services, link-local and every other internal or reserved range (SSRF).
//
// Its rules are the browser extension's (extension/remote/ssrf.js), so a URL
// the extension refuses is refused here too, with the same kind of sentence:
// https only; no user name or password in the URL; no metadata host names,
// single-label names or internal-only suffixes; no IP literal in a refused
// range, IPv6 addresses that embed an IPv4 address (mapped, compatible,
// NAT64, 6to4) judged by the IPv4 address inside. It is stricter in two
// places: documentation ranges (192.0.2.0/24, 2001:db8::/32, …) are refused,
// and so is every IPv6 address outside 2000::/3.
//
// Unlike an extension, a server can see what DNS answers: the dialer
// (NewDialer) checks the address it is about to connect to, after
// resolution, so a public name that resolves to 10.0.0.1 — or starts doing
// so between two lookups (DNS rebinding) — is refused too. NewClient puts it
// together: that dialer, no proxy from the environment, TLS 1.2 or later,
// timeouts, and redirects checked like the first URL.
//
// Options.AllowPrivateForTests lets loopback and private networks through,
// for tests against httptest servers; nothing in production sets it.
package netguard
