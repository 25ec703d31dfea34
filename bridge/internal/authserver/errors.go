package authserver

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// OAuth error codes: RFC 6749 §5.2 (token endpoint), RFC 8707 §2
// (invalid_target), RFC 7591 §3.2.2 (registration).
const (
	errInvalidRequest         = "invalid_request"
	errInvalidClient          = "invalid_client"
	errInvalidGrant           = "invalid_grant"
	errUnauthorizedClient     = "unauthorized_client"
	errUnsupportedGrantType   = "unsupported_grant_type"
	errInvalidScope           = "invalid_scope"
	errInvalidTarget          = "invalid_target"
	errServerError            = "server_error"
	errTemporarilyUnavailable = "temporarily_unavailable"
	errInvalidRedirectURI     = "invalid_redirect_uri"
	errInvalidClientMetadata  = "invalid_client_metadata"
)

// codeRefused is the JSON-RPC code of a protected resource's 401 and 400
// bodies: the server-range code (-32000) httpguard answers every
// HTTP-level refusal with, so an MCP client sees one shape for "not let
// in" whichever layer said it. (-32001 is SessionNotFound in rpccode,
// which SDK clients answer by starting a session, not by signing in.)
const codeRefused = -32000

// oauthError is an OAuth error response: HTTP status, the RFC's error
// code and a sentence for the person reading the client's log.
type oauthError struct {
	status      int
	code        string
	description string
	// basic: the client tried HTTP Basic; a 401 then carries a Basic
	// challenge (RFC 6749 §5.2).
	basic bool
}

func (e *oauthError) Error() string { return e.code + ": " + e.description }

// oauthErr builds a 400 (401 for invalid_client, 500 for server_error).
func oauthErr(code, format string, args ...any) *oauthError {
	status := http.StatusBadRequest
	switch code {
	case errInvalidClient:
		status = http.StatusUnauthorized
	case errServerError:
		status = http.StatusInternalServerError
	}
	return &oauthError{status: status, code: code, description: fmt.Sprintf(format, args...)}
}

// storeErr is the answer when the store failed: the detail goes to the
// log, the client gets a sentence.
func storeErr() *oauthError {
	return oauthErr(errServerError, "The authorization server could not read or write its state; try again in a moment.")
}

// writeOAuthError answers with e as RFC 6749 §5.2 JSON.
func writeOAuthError(w http.ResponseWriter, e *oauthError) {
	if e.status == http.StatusUnauthorized && e.basic {
		w.Header().Set("WWW-Authenticate", `Basic realm="oauth"`)
	}
	writeJSON(w, e.status, struct {
		Error       string `json:"error"`
		Description string `json:"error_description,omitempty"`
	}{e.code, e.description})
}

// writeJSON answers with v as JSON, never to be cached: every answer of
// the token, registration and revocation endpoints may carry a secret
// or is about one (RFC 6749 §5.1, RFC 7591 §3.2.1).
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"server_error","error_description":"The answer could not be encoded."}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
