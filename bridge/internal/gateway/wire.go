package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// envelope is what the gateway reads of every JSON-RPC message: enough to
// route it and rewrite its id, never the payload itself, which is copied
// through as raw bytes whatever its size.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`

	// What params name, decoded once by paramName and paramURI: a
	// stateless request's headers are checked against them, then the
	// request is routed by them.
	namesRead       bool
	name, uri       string
	nameErr, uriErr error
}

// paramName returns params.name ("" when absent); an error when params is
// not an object or name not a string.
func (e *envelope) paramName() (string, error) {
	e.readNames()
	return e.name, e.nameErr
}

// paramURI returns params.uri as paramName returns params.name.
func (e *envelope) paramURI() (string, error) {
	e.readNames()
	return e.uri, e.uriErr
}

func (e *envelope) readNames() {
	if e.namesRead {
		return
	}
	e.namesRead = true
	var p struct {
		Name json.RawMessage `json:"name"`
		URI  json.RawMessage `json:"uri"`
	}
	if err := json.Unmarshal(e.Params, &p); err != nil {
		e.nameErr, e.uriErr = err, err
		return
	}
	if p.Name != nil {
		e.nameErr = json.Unmarshal(p.Name, &e.name)
	}
	if p.URI != nil {
		e.uriErr = json.Unmarshal(p.URI, &e.uri)
	}
}

type msgKind int

const (
	kindInvalid msgKind = iota
	kindRequest
	kindNotification
	kindResponse
)

// kind classifies a decoded message. parseMessage refuses a null id from
// clients; a child's null id (its answer to a line it could not parse)
// makes no request or response.
func (e *envelope) kind() msgKind {
	hasID := len(e.ID) > 0 && string(e.ID) != "null"
	switch {
	case e.Method != "" && hasID:
		return kindRequest
	case e.Method != "":
		return kindNotification
	case hasID && (e.Result != nil || e.Error != nil):
		return kindResponse
	}
	return kindInvalid
}

// parseMessage decodes one message; the error is the sentence to answer.
func parseMessage(data []byte) (*envelope, int, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		return nil, rpccode.InvalidRequest, fmt.Errorf("JSON-RPC batches are not supported (removed in MCP 2025-06-18): send one message per request")
	}
	var e envelope
	if err := json.Unmarshal(data, &e); err != nil {
		if !json.Valid(data) {
			return nil, rpccode.ParseError, fmt.Errorf("the message is not valid JSON")
		}
		return nil, rpccode.InvalidRequest, fmt.Errorf("the message is not a JSON-RPC 2.0 object: %v", err)
	}
	if e.JSONRPC != "2.0" {
		return &e, rpccode.InvalidRequest, fmt.Errorf(`"jsonrpc" must be "2.0"`)
	}
	if string(bytes.TrimSpace(e.ID)) == "null" {
		// Not a notification: JSON-RPC 2.0 keeps a null id for the error
		// answering a message whose id could not be read.
		return &e, rpccode.InvalidRequest, fmt.Errorf(`"id" must not be null: a request's id is a string or a number, and a notification has no "id" member at all`)
	}
	if e.kind() == kindInvalid {
		return &e, rpccode.InvalidRequest, fmt.Errorf("a JSON-RPC message needs a method (request or notification) or an id with a result or error (response)")
	}
	if e.ID != nil && !validID(e.ID) {
		return &e, rpccode.InvalidRequest, fmt.Errorf("a JSON-RPC id must be a string or a number")
	}
	return &e, 0, nil
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return string(id) == "null"
}

// The builders below write messages by splicing raw parts, so a 20 MiB
// result is copied once and never re-encoded.

func appendRequest(b []byte, id json.RawMessage, method string, params json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"method":`...)
	b = strconv.AppendQuote(b, method)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

func appendNotification(b []byte, method string, params json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0","method":`...)
	b = strconv.AppendQuote(b, method)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// appendResponse writes a response carrying the result or the error (raw).
func appendResponse(b []byte, id json.RawMessage, result, rpcErr json.RawMessage) []byte {
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

// setMetaField returns params with _meta[key] set to value (nil: removed).
// Only params' top level and its _meta are decoded.
func setMetaField(params json.RawMessage, key string, value json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if len(params) > 0 {
		if err := json.Unmarshal(params, &top); err != nil {
			return nil, fmt.Errorf("params must be an object: %w", err)
		}
	}
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	if raw, ok := top["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("params._meta must be an object: %w", err)
		}
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	if value == nil {
		delete(meta, key)
	} else {
		meta[key] = value
	}
	if len(meta) == 0 {
		delete(top, "_meta")
	} else {
		m, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		top["_meta"] = m
	}
	return json.Marshal(top)
}

// setField returns the object obj with key set to value.
func setField(obj json.RawMessage, key string, value any) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(obj, &top); err != nil {
		return nil, err
	}
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	top[key] = v
	return json.Marshal(top)
}

// idKey turns a raw JSON-RPC id into a map key that tells 1 from "1".
func idKey(id json.RawMessage) string { return string(bytes.TrimSpace(id)) }
