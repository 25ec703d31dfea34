package mcphttp

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// Header names. http.Header canonicalizes a name on Get and Set, and a
// name already in canonical form costs nothing, so those read on every
// request are written so: HeaderProtocolVersion is the specification's
// MCP-Protocol-Version and HeaderLastEventID its Last-Event-ID (messages
// spell them that way).
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	// HeaderMethod and HeaderName repeat a 2026-07-28 request's method and
	// what it names (tool, prompt, resource URI) for intermediaries.
	HeaderMethod      = "Mcp-Method"
	HeaderName        = "Mcp-Name"
	HeaderLastEventID = "Last-Event-Id"
)

// Protocol versions and the _meta key of the stateless era.
const (
	// VersionDefault is the version a request without
	// MCP-Protocol-Version speaks.
	VersionDefault = "2025-03-26"
	// VersionStateless is the first version without sessions, GET streams
	// or initialize: a request carries its version in
	// params._meta[MetaProtocolVersion] (and the header).
	VersionStateless = "2026-07-28"
	// MetaProtocolVersion is the _meta key of a stateless request's version.
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
)

// Media types.
const (
	ContentTypeJSON = "application/json"
	ContentTypeSSE  = "text/event-stream"
)

// Accepts reads the Accept header values of a request (r.Header.Values,
// every line of them) and reports whether each of application/json and
// text/event-stream is acceptable. It is the go-sdk's rule, to the letter:
// comma-separated media ranges, parameters (q-values too) ignored, case
// ignored, application/* and text/* match their type, */* matches both;
// no value matches nothing.
func Accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// CheckPOSTAccept reports whether a Streamable HTTP POST accepts both
// application/json and text/event-stream ([Accepts]); if not, it answers
// 406 with a JSON-RPC error and reports false.
func CheckPOSTAccept(w http.ResponseWriter, r *http.Request) bool {
	if jsonOK, streamOK := Accepts(r.Header.Values("Accept")); jsonOK && streamOK {
		return true
	}
	WriteError(w, http.StatusNotAcceptable, nil, rpccode.InvalidRequest,
		"Accept must list application/json and text/event-stream (Streamable HTTP); got "+quoteOrNone(r.Header.Values("Accept")))
	return false
}

// CheckGETAccept reports whether a GET that opens an event stream accepts
// text/event-stream ([Accepts]); if not, it answers 406 with a JSON-RPC
// error and reports false.
func CheckGETAccept(w http.ResponseWriter, r *http.Request) bool {
	if _, streamOK := Accepts(r.Header.Values("Accept")); streamOK {
		return true
	}
	WriteError(w, http.StatusNotAcceptable, nil, rpccode.InvalidRequest,
		"GET opens an event stream: Accept must list text/event-stream; got "+quoteOrNone(r.Header.Values("Accept")))
	return false
}

// IsJSON reports whether a Content-Type value is application/json, with
// any parameters (as the go-sdk reads it: an unparsable value is not).
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == ContentTypeJSON
}

// CheckContentType reports whether a posted body is declared
// application/json ([IsJSON]); if not (a missing Content-Type included), it
// answers 415 with a JSON-RPC error and reports false.
func CheckContentType(w http.ResponseWriter, r *http.Request) bool {
	if IsJSON(r.Header.Get("Content-Type")) {
		return true
	}
	WriteError(w, http.StatusUnsupportedMediaType, nil, rpccode.InvalidRequest,
		"Content-Type must be application/json; got "+quoteOrNone(r.Header.Values("Content-Type")))
	return false
}

// CheckVersion reports whether the request's MCP-Protocol-Version is absent
// (VersionDefault) or one of supported; if not, it answers 400 with a
// JSON-RPC error (with id, nil for null) naming the versions supported, and
// reports false.
func CheckVersion(w http.ResponseWriter, r *http.Request, id []byte, supported []string) bool {
	v := r.Header.Get(HeaderProtocolVersion)
	if v == "" || slices.Contains(supported, v) {
		return true
	}
	WriteError(w, http.StatusBadRequest, id, rpccode.InvalidRequest,
		fmt.Sprintf("unsupported MCP-Protocol-Version %q: this endpoint speaks %s", v, strings.Join(supported, ", ")))
	return false
}

// ReadBody reads a posted body of at most limit bytes. It answers a larger
// one 413 and a failed read 400 (-32700), with JSON-RPC errors, and reports
// false then.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			WriteError(w, http.StatusRequestEntityTooLarge, nil, rpccode.InvalidRequest, fmt.Sprintf("request body exceeds the %d-byte limit", mbe.Limit))
			return nil, false
		}
		WriteError(w, http.StatusBadRequest, nil, rpccode.ParseError, "could not read the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// SetStreamHeaders sets the headers of a Streamable HTTP response that is an
// event stream, as the go-sdk sets them.
func SetStreamHeaders(h http.Header) {
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", ContentTypeSSE)
	h.Set("Connection", "keep-alive")
}

// quoteOrNone quotes header values for a message, "none" when there are
// none.
func quoteOrNone(values []string) string {
	if len(values) == 0 || len(values) == 1 && values[0] == "" {
		return "none"
	}
	return fmt.Sprintf("%q", strings.Join(values, ", "))
}
