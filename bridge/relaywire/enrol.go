package relaywire

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// Enrolment: how a bridge gets its own credential for the proxy without
// anyone copying a token (docs/relay.md, "Enrolment"). Plain HTTPS with
// JSON bodies, beside the WebSockets:
//
//	operator                     proxy                         bridge
//	invite --user alice ──POST /enrol/invite (operator token)──▶ code, bound to alice
//	                     ◀── {code, user, expiresAt}
//	           (the code reaches alice by any channel)
//	                            ◀──POST /enrol {code}──────── relay join URL --code
//	                             ──{user, token, expiresAt}──▶ written to relay.token
//	                            ◀──POST /enrol/leave ──────── relay leave
//	                               (Bearer: that token)        the token is revoked
//
// Codes have the form of pairing codes (16 symbols, 80 bits), are single
// use, expire within minutes and are bound to the user named at invite.
// Every request carries a secret (an operator token, a code, a
// credential), so each is refused over plain HTTP unless it comes from
// loopback (or through a trusted reverse proxy, which terminates TLS).
const (
	PathEnrol       = "/enrol"
	PathEnrolInvite = "/enrol/invite"
	PathEnrolLeave  = "/enrol/leave"
)

// EnrolInviteRequest is the body of POST /enrol/invite.
type EnrolInviteRequest struct {
	User string `json:"user"`
}

// EnrolInviteResult answers EnrolInviteRequest.
type EnrolInviteResult struct {
	Code       string `json:"code"`
	User       string `json:"user"`
	ExpiresAt  string `json:"expiresAt"` // RFC 3339
	TTLSeconds int    `json:"ttlSeconds"`
	// PublicURL is the proxy's --public-url, if it has one: what the
	// person passes to `browserbridge relay join`.
	PublicURL string `json:"publicUrl,omitempty"`
}

// EnrolRequest is the body of POST /enrol.
type EnrolRequest struct {
	Code string `json:"code"`
}

// EnrolResult answers EnrolRequest: the bridge's credential, an access
// token of kind extension for User, with an id of its own (revocable
// alone).
type EnrolResult struct {
	User      string `json:"user"`
	Token     string `json:"token"`
	ExpiresAt string `json:"expiresAt"` // RFC 3339
}

// EnrolLeaveResult answers POST /enrol/leave.
type EnrolLeaveResult struct {
	Revoked bool   `json:"revoked"`
	User    string `json:"user"`
}

// EnrolError is the body of every refusal of the enrolment endpoints,
// with an HTTP status that says its class (400 bad request, 401/403
// credentials, 429 too many attempts, 503 try later).
type EnrolError struct {
	Error string `json:"error"`
}

// EnrolBaseURL checks a proxy's URL for the enrolment endpoints: https://,
// or http:// to a loopback address (secrets travel in every request); it
// returns the base, scheme://host[:port], without a trailing slash.
func EnrolBaseURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || u.Host == "" || u.Path != "" || u.RawQuery != "" {
		return "", fmt.Errorf("%q is not a proxy's base URL like https://proxy.example.com", raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !LoopbackHost(u.Hostname()) {
			return "", fmt.Errorf("%q would send secrets over plain http beyond this machine: use https:// (plain http works only on loopback)", raw)
		}
	default:
		return "", fmt.Errorf("%q: the scheme is https (or http on loopback)", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

// LoopbackHost reports whether the host name h (no port) is this
// machine's: localhost or a loopback address.
func LoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// RelayURLFor is the relay.url a bridge enrolled at the proxy base uses:
// the same host over WebSocket (wss:// for https://).
func RelayURLFor(base string) string {
	if rest, ok := strings.CutPrefix(base, "https://"); ok {
		return "wss://" + rest + "/"
	}
	return "ws://" + strings.TrimPrefix(base, "http://") + "/"
}
