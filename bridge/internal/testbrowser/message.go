package testbrowser

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/browserbridge/browserbridge/bridge/internal/jsonscan"
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
	return jsonscan.EachMember(obj, func(key, val []byte) bool {
		switch string(key) {
		case "jsonrpc":
			return plainString(val, &m.JSONRPC)
		case "method":
			return plainString(val, &m.Method)
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
				if strings.EqualFold(string(key), field) {
					return false
				}
			}
		}
		return true
	})
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
