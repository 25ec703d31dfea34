package mcphttp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// A Message is what an endpoint reads of every JSON-RPC message: its head
// (id, method), enough to route it and rewrite its id, and its params and
// result as raw bytes, never decoded beyond what is asked of them, so that
// a 20 MiB payload is copied through whatever its size.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`

	// What params name, decoded once by ParamName and ParamURI: a
	// stateless request's headers are checked against them, then the
	// request is routed by them.
	namesRead       bool
	name, uri       string
	nameErr, uriErr error
}

// ParamName returns params.name ("" when absent); an error when params is
// not an object or name not a string.
func (m *Message) ParamName() (string, error) {
	m.readNames()
	return m.name, m.nameErr
}

// ParamURI returns params.uri as ParamName returns params.name.
func (m *Message) ParamURI() (string, error) {
	m.readNames()
	return m.uri, m.uriErr
}

func (m *Message) readNames() {
	if m.namesRead {
		return
	}
	m.namesRead = true
	var p struct {
		Name json.RawMessage `json:"name"`
		URI  json.RawMessage `json:"uri"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		m.nameErr, m.uriErr = err, err
		return
	}
	if p.Name != nil {
		m.nameErr = json.Unmarshal(p.Name, &m.name)
	}
	if p.URI != nil {
		m.uriErr = json.Unmarshal(p.URI, &m.uri)
	}
}

// A Kind is what a JSON-RPC message is.
type Kind int

// The kinds of message.
const (
	KindInvalid Kind = iota
	KindRequest
	KindNotification
	KindResponse
)

// Kind classifies a decoded message. ParseMessage refuses a null id from
// clients; a null id read elsewhere (a stdio server's answer to a line it
// could not parse) makes no request or response.
func (m *Message) Kind() Kind {
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && hasID:
		return KindRequest
	case m.Method != "":
		return KindNotification
	case hasID && (m.Result != nil || m.Error != nil):
		return KindResponse
	}
	return KindInvalid
}

// ParseMessage decodes one message a client posted; the error is the
// sentence to answer with the JSON-RPC code.
func ParseMessage(data []byte) (*Message, int, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		return nil, rpccode.InvalidRequest, fmt.Errorf("JSON-RPC batches are not supported (removed in MCP 2025-06-18): send one message per request")
	}
	var m Message
	if err := json.Unmarshal(data, &m); err != nil {
		if !json.Valid(data) {
			return nil, rpccode.ParseError, fmt.Errorf("the message is not valid JSON")
		}
		return nil, rpccode.InvalidRequest, fmt.Errorf("the message is not a JSON-RPC 2.0 object: %v", err)
	}
	if m.JSONRPC != "2.0" {
		return &m, rpccode.InvalidRequest, fmt.Errorf(`"jsonrpc" must be "2.0"`)
	}
	if string(bytes.TrimSpace(m.ID)) == "null" {
		// Not a notification: JSON-RPC 2.0 keeps a null id for the error
		// answering a message whose id could not be read.
		return &m, rpccode.InvalidRequest, fmt.Errorf(`"id" must not be null: a request's id is a string or a number, and a notification has no "id" member at all`)
	}
	if m.Kind() == KindInvalid {
		return &m, rpccode.InvalidRequest, fmt.Errorf("a JSON-RPC message needs a method (request or notification) or an id with a result or error (response)")
	}
	if m.ID != nil && !ValidID(m.ID) {
		return &m, rpccode.InvalidRequest, fmt.Errorf("a JSON-RPC id must be a string or a number")
	}
	return &m, 0, nil
}

// ValidID reports whether a raw id can be echoed in an answer: a string, a
// number or null.
func ValidID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return string(id) == "null"
}

// AppendResponse appends a response carrying result, or rpcErr (a raw
// error object) when it is set, splicing the raw parts so that a large
// result is copied once and never re-encoded.
func AppendResponse(b []byte, id json.RawMessage, result, rpcErr json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	if rpcErr != nil {
		b = append(b, `,"error":`...)
		b = append(b, rpcErr...)
	} else {
		b = append(b, `,"result":`...)
		b = append(b, result...)
	}
	return append(b, '}')
}
