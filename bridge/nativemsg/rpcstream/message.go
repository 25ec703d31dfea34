package rpcstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/browserbridge/browserbridge/bridge/internal/jsonscan"
	"github.com/sourcegraph/jsonrpc2"
)

// wireMessage is one frame's JSON-RPC message split into its members, each
// the member's raw JSON text within the frame, nil when absent. A null
// method, id or error counts as absent, as jsonrpc2 reads them; a null
// params or result is kept ("null").
type wireMessage struct {
	id, method, params, result, error []byte
}

// errNotMessage wraps the reasons a valid JSON frame is not a JSON-RPC
// message.
var errNotMessage = errors.New("message is not a JSON-RPC 2.0 request or response")

// parseMessage splits frame into its top-level members in one pass. The
// frame must be valid JSON (json.Valid): the scan relies on it to skip
// values without checking them again.
func parseMessage(frame []byte) (wireMessage, error) {
	var m wireMessage
	switch i := jsonscan.SkipSpace(frame, 0); {
	case i < len(frame) && frame[i] == '[':
		return m, fmt.Errorf("%w: batches are not accepted on this link", errNotMessage)
	case i >= len(frame) || frame[i] != '{':
		return m, fmt.Errorf("%w: it is not a JSON object", errNotMessage)
	}
	jsonscan.EachMemberToken(frame, func(key, val []byte) bool {
		m.set(key, val)
		return true
	})
	return m, m.check()
}

// set records one member; a later duplicate wins, as with encoding/json.
func (m *wireMessage) set(key, value []byte) {
	name := key[1 : len(key)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		var s string
		if json.Unmarshal(key, &s) != nil {
			return
		}
		name = []byte(s)
	}
	null := string(value) == "null"
	switch string(name) {
	case "id":
		m.id = orNil(value, null)
	case "method":
		m.method = orNil(value, null)
	case "params":
		m.params = value
	case "result":
		m.result = value
	case "error":
		m.error = orNil(value, null)
	}
}

func orNil(value []byte, null bool) []byte {
	if null {
		return nil
	}
	return value
}

// check holds the message to what jsonrpc2 accepts: a method (a request or
// notification) or a result or error (a response), not both.
func (m *wireMessage) check() error {
	isRequest, isResponse := m.method != nil, m.result != nil || m.error != nil
	switch {
	case isRequest && isResponse:
		return fmt.Errorf("%w: it has both a method and a result or error", errNotMessage)
	case !isRequest && !isResponse:
		return fmt.Errorf("%w: it has neither a method nor a result or error", errNotMessage)
	case isRequest && m.method[0] != '"':
		return fmt.Errorf("%w: its method is not a string", errNotMessage)
	}
	return nil
}

func (m *wireMessage) isRequest() bool { return m.method != nil }

// request is the request or notification m holds, as jsonrpc2 would give it
// to a handler: Params nil when absent, "null" when null; no id, or a null
// one, makes a notification.
func (m *wireMessage) request() (*jsonrpc2.Request, error) {
	method, err := unquote(m.method)
	if err != nil {
		return nil, fmt.Errorf("%w: its method: %v", errNotMessage, err)
	}
	req := &jsonrpc2.Request{Method: method, Notif: m.id == nil}
	switch {
	case m.id == nil:
	case m.id[0] == '"':
		if req.ID.Str, err = unquote(m.id); err != nil {
			return nil, fmt.Errorf("%w: its id: %v", errNotMessage, err)
		}
		req.ID.IsString = true
	default:
		// jsonrpc2 takes any int64 and keeps its bits.
		n, err := strconv.ParseInt(string(m.id), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: its id %s is neither a string nor an integer", errNotMessage, excerpt(m.id))
		}
		req.ID.Num = uint64(n)
	}
	if m.params != nil {
		params := json.RawMessage(m.params)
		req.Params = &params
	}
	return req, nil
}

// responseID is the id of the call a response answers, decoded, and
// whether it is a string: the link's calls all have string ids, so any
// other id answers none of them. An id without escapes is the frame's own
// bytes, to be looked up without a copy.
func (m *wireMessage) responseID() (id []byte, isString bool, err error) {
	switch {
	case m.id == nil:
		return nil, false, nil
	case m.id[0] == '"':
		if inner := m.id[1 : len(m.id)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			return inner, true, nil
		}
		s, err := unquote(m.id)
		if err != nil {
			return nil, false, fmt.Errorf("%w: its id: %v", errNotMessage, err)
		}
		return []byte(s), true, nil
	}
	if _, err := strconv.ParseUint(string(m.id), 10, 64); err != nil {
		return nil, false, fmt.Errorf("%w: its id %s is neither a string nor an unsigned integer", errNotMessage, excerpt(m.id))
	}
	return nil, false, nil
}

// responseError is the error member of a response, nil for a result.
func (m *wireMessage) responseError() (*jsonrpc2.Error, error) {
	if m.error == nil {
		return nil, nil
	}
	e := new(jsonrpc2.Error)
	if err := json.Unmarshal(m.error, e); err != nil {
		return nil, fmt.Errorf("%w: its error: %v", errNotMessage, err)
	}
	return e, nil
}

// unquote decodes a JSON string token. A token without escapes and of
// valid UTF-8 is its own text; others go through encoding/json, which
// also replaces invalid UTF-8 as it does everywhere else.
func unquote(token []byte) (string, error) {
	inner := token[1 : len(token)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(token, &s)
	return s, err
}

// appendRequest appends a request (or, with no id, a notification) with
// params already encoded (nil: none) in the bytes jsonrpc2 writes for it.
func appendRequest(b []byte, id *string, method string, params []byte) []byte {
	b = append(b, '{')
	if id != nil {
		b = append(b, `"id":`...)
		b = appendString(b, *id)
		b = append(b, ',')
	}
	b = append(b, `"jsonrpc":"2.0","method":`...)
	b = appendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// appendResult appends a successful response, as jsonrpc2 writes it.
func appendResult(b []byte, id jsonrpc2.ID, result []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendID(b, id)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, `,"jsonrpc":"2.0"}`...)
}

// appendError appends an error response, as jsonrpc2 writes it.
func appendError(b []byte, id jsonrpc2.ID, e *jsonrpc2.Error) ([]byte, error) {
	enc, err := json.Marshal(e)
	if err != nil {
		return b, fmt.Errorf("encoding error reply: %w", err)
	}
	b = append(b, `{"id":`...)
	b = appendID(b, id)
	b = append(b, `,"error":`...)
	b = append(b, enc...)
	return append(b, `,"jsonrpc":"2.0"}`...), nil
}

func appendID(b []byte, id jsonrpc2.ID) []byte {
	if id.IsString {
		return appendString(b, id.Str)
	}
	return strconv.AppendUint(b, id.Num, 10)
}

// appendString appends s as a JSON string in encoding/json's escaping
// (HTML characters and U+2028/U+2029 escaped, invalid UTF-8 replaced), so
// the bytes are those json.Marshal writes. The link's ids and methods are
// plain ASCII, which is copied as it is.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s) // a string always encodes
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// excerpt is b for an error message: at most its first 64 bytes, so that
// the answer to a bad frame (and the log line about it) never grows with
// the frame.
func excerpt(b []byte) string {
	const most = 64
	if len(b) <= most {
		return string(b)
	}
	return strings.ToValidUTF8(string(b[:most]), "") + fmt.Sprintf("… (%d bytes)", len(b))
}
