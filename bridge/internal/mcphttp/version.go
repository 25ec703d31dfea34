package mcphttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
)

// The protocol versions, written once for every endpoint: which exist,
// which one a session is opened with, and which requests are of the
// stateless era.

// Versions are the MCP protocol versions the project speaks, oldest first:
// the go-sdk's list (mcpserver's tests hold the two equal). A server's
// discover result lists them in this order.
var Versions = []string{"2024-11-05", "2025-03-26", "2025-06-18", VersionLatestSession, VersionStateless}

// StreamableVersions are the Versions from the first one with Streamable
// HTTP (2025-03-26): what an endpoint that never spoke HTTP+SSE (the
// cloud proxy's) accepts.
var StreamableVersions = Versions[1:]

// VersionLatestSession is the newest version with sessions and
// initialize: what initialize answers a client asking for a version the
// endpoint does not speak (or for a stateless one).
const VersionLatestSession = "2025-11-25"

// Negotiate is the version an initialize asking for requested is answered
// with: requested if it is one of supported and has sessions, else
// VersionLatestSession.
func Negotiate(requested string, supported []string) string {
	if !IsStateless(requested) && slices.Contains(supported, requested) {
		return requested
	}
	return VersionLatestSession
}

// IsStateless reports whether a protocol version (an MCP-Protocol-Version
// header, a session's negotiated version) is of the stateless era:
// VersionStateless or later. It is the one rule every endpoint applies.
func IsStateless(version string) bool { return version >= VersionStateless }

// IsStatelessRequest reports whether a posted request is of the stateless
// era: its MCP-Protocol-Version header says so ([IsStateless]), or its
// params carry _meta[MetaProtocolVersion].
func IsStatelessRequest(h http.Header, params json.RawMessage) bool {
	return IsStateless(h.Get(HeaderProtocolVersion)) || MetaField(params, MetaProtocolVersion) != nil
}

// MetaField returns params._meta[key], if any, decoding params no deeper
// than its top level and _meta (and not at all when key is not in it).
func MetaField(params json.RawMessage, key string) json.RawMessage {
	if len(params) == 0 || !bytes.Contains(params, []byte(key)) {
		return nil
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p.Meta[key]
}

// CheckStandardHeaders checks a stateless request's Mcp-Method and
// Mcp-Name headers against its body (method and params): "" when they
// agree, or when the request is not of the stateless era by its header, or
// is no request (isRequest false); else the sentence to refuse it with.
// Mcp-Name names params.name of tools/call and prompts/get and params.uri
// of resources/read.
func CheckStandardHeaders(h http.Header, isRequest bool, method string, params json.RawMessage) string {
	if !isRequest || !IsStateless(h.Get(HeaderProtocolVersion)) {
		return ""
	}
	if got := h.Get(HeaderMethod); got != method {
		return fmt.Sprintf("the %s header (%q) must name the body's method %q", HeaderMethod, got, method)
	}
	if method != "tools/call" && method != "resources/read" && method != "prompts/get" {
		return ""
	}
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	_ = json.Unmarshal(params, &p)
	want := p.Name
	if method == "resources/read" {
		want = p.URI
	}
	if got := h.Get(HeaderName); got != want {
		return fmt.Sprintf("the %s header (%q) must name the body's %q", HeaderName, got, want)
	}
	return ""
}
