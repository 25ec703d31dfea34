package mcphttp

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ErrorBody is a JSON-RPC error response:
// {"jsonrpc":"2.0","id":<id>,"error":{"code":<code>,"message":<msg>}}. id is
// the raw id of the request answered; nil (a request whose id could not be
// read, or none) writes null.
func ErrorBody(id []byte, code int, msg string) []byte {
	if id == nil {
		id = []byte("null")
	}
	m, _ := json.Marshal(msg) // a string always encodes
	b := make([]byte, 0, len(id)+len(m)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = append(b, m...)
	return append(b, "}}"...)
}

// WriteError answers with HTTP status and a JSON-RPC error body
// ([ErrorBody]): the one way every HTTP endpoint of the project refuses a
// request, the guard's refusals included. Headers already set on w
// (Allow, Retry-After) go with it.
func WriteError(w http.ResponseWriter, status int, id []byte, code int, msg string) {
	body := ErrorBody(id, code, msg)
	h := w.Header()
	h.Set("Content-Type", ContentTypeJSON)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
