package testbrowser

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// decodeMessage reads a frame as json.Unmarshal into a Message reads it.
// The common message (plain keys and method, as the bridge writes them) is
// split into its members by a scan, with no decoding into Go values: the
// benchmarks' extension reads every call this way, and their figures are to
// be the bridge's, not this stand-in's. Anything else goes to
// json.Unmarshal. The raw members share the frame's bytes.
func decodeMessage(frame []byte) (Message, error) {
	var m Message
	if json.Valid(frame) && scanMessage(frame, &m) {
		return m, nil
	}
	m = Message{}
	err := json.Unmarshal(frame, &m)
	return m, err
}

// scanMessage fills m from a valid JSON object, reporting false if it
// holds anything json.Unmarshal might read otherwise: a key with escapes
// or in another case than Message's, a method or jsonrpc that is not a
// plain string.
func scanMessage(obj []byte, m *Message) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) && obj[i] == '"' {
		j := i + 1
		for j < len(obj) && obj[j] != '"' {
			if obj[j] == '\\' {
				return false
			}
			j++
		}
		key := string(obj[i+1 : j])
		i = skipSpace(obj, j+1) // at the colon
		i = skipSpace(obj, i+1)
		end := skipValue(obj, i)
		val := obj[i:end]
		switch key {
		case "jsonrpc":
			if !plainString(val, &m.JSONRPC) {
				return false
			}
		case "method":
			if !plainString(val, &m.Method) {
				return false
			}
		case "id":
			m.ID = val
		case "params":
			m.Params = val
		case "result":
			m.Result = val
		case "error":
			if string(val) == "null" {
				m.Error = nil
			} else {
				raw := json.RawMessage(val)
				m.Error = &raw
			}
		default:
			for _, field := range [...]string{"jsonrpc", "method", "id", "params", "result", "error"} {
				if strings.EqualFold(key, field) {
					return false
				}
			}
		}
		i = skipSpace(obj, end)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return true
}

// plainString sets *dst to the JSON string val if it has no escapes and
// is valid UTF-8.
func plainString(val []byte, dst *string) bool {
	if len(val) < 2 || val[0] != '"' || strings.IndexByte(string(val[1:len(val)-1]), '\\') >= 0 || !utf8.Valid(val) {
		return false // (json.Unmarshal would replace invalid UTF-8)
	}
	*dst = string(val[1 : len(val)-1])
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at b[i], which must
// be valid JSON.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
		i++
	}
	return i
}

// skipString returns the end of the JSON string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}
