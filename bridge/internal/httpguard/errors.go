package httpguard

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// WriteError answers with status and a JSON-RPC error response whose id is
// null: {"jsonrpc":"2.0","id":null,"error":{"code":code,"message":msg}}.
// msg should be a sentence a person can act on. Handlers behind the guard may
// use it for their own transport-level refusals, with CodeRefused.
func WriteError(w http.ResponseWriter, status int, code int, msg string) {
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	type response struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      *int     `json:"id"` // always null
		Error   rpcError `json:"error"`
	}
	body, err := json.Marshal(response{JSONRPC: "2.0", Error: rpcError{Code: code, Message: msg}})
	if err != nil {
		// Marshalling an int and strings does not fail; should it ever,
		// the client still gets a well-formed error.
		body = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error."}}`)
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// IsTooLarge reports whether err comes from reading a request body beyond
// the guard's limit. A handler that sees it should answer
// WriteError(w, http.StatusRequestEntityTooLarge, CodeRefused, ...).
func IsTooLarge(err error) bool {
	var tooLarge *http.MaxBytesError
	return errors.As(err, &tooLarge)
}
