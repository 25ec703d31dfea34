package mcphttp

import (
	"net/http"
	"slices"
)

// What an endpoint does differently per protocol version, beside
// negotiation (version.go): the rules written once for every endpoint.

// VersionPrimingEvents is the first protocol version whose Streamable
// HTTP streams open with a priming event (an event with an id and no
// data, SEP-1699), so that a client can resume a stream that broke before
// its first message.
const VersionPrimingEvents = "2025-11-25"

// PrimesStreams reports whether a stream of a request speaking version
// opens with a priming event.
func PrimesStreams(version string) bool { return version >= VersionPrimingEvents }

// RequestVersion is the protocol version a Streamable HTTP request speaks:
// its MCP-Protocol-Version header, VersionDefault without one.
func RequestVersion(h http.Header) string {
	if v := h.Get(HeaderProtocolVersion); v != "" {
		return v
	}
	return VersionDefault
}

// IsSessionVersion reports whether a request's MCP-Protocol-Version
// header ("" for none) names a Streamable HTTP version with sessions:
// one of StreamableVersions before the stateless era.
func IsSessionVersion(header string) bool {
	return header == "" || !IsStateless(header) && slices.Contains(StreamableVersions, header)
}
