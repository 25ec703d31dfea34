package relaywire

import (
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// Parse decodes and validates one message. On failure it returns an *Error
// to send back (CodeParseError or CodeInvalidRequest) and, when the id could
// be read and is valid, that id in the returned Message, so the error can be
// addressed to it. The Message's raw fields alias data. See Decode.
func Parse(data []byte) (*Message, Kind, *Error) {
	m := new(Message)
	kind, err := m.Decode(data)
	return m, kind, err
}

// Decode is Parse into m, which it resets first: the proxy's readers decode
// every message into the same Message and allocate nothing for it (but the
// method, unless it is one this package names or an MCP method the relay
// sees often). The raw fields of m alias data: they are valid as long as
// data is, and must be copied to outlive it.
//
// It accepts exactly what encoding/json accepts, and fills m as
// json.Unmarshal(data, m) would (keys matched exactly, else without regard
// to case, the last of repeated keys winning, a null leaving a string field
// alone); it only reads the top-level fields, validating the syntax of the
// rest without decoding it.
func (m *Message) Decode(data []byte) (Kind, *Error) {
	*m = Message{}
	p := parser{data: data}
	typeErr := ""
	i := p.space(0)
	if i < len(data) && data[i] == '{' {
		i = p.object(i, 1, func(key []byte, escaped bool, v []byte) {
			if f := m.assign(key, escaped, v); f != "" && typeErr == "" {
				typeErr = f
			}
		})
	} else {
		i = p.value(i, 0)
	}
	if p.err == nil {
		if i = p.space(i); i < len(data) {
			p.fail(i, "after the top-level value")
		}
	}
	if p.err != nil {
		*m = Message{}
		return 0, p.err
	}
	j := p.space(0)
	switch {
	case data[j] == 'n': // null: json.Unmarshal leaves m as it is
	case data[j] != '{':
		return 0, Errorf(CodeInvalidRequest, "message is not a JSON-RPC 2.0 object (batches are not supported)")
	case typeErr != "":
		id := m.ID
		*m = Message{}
		if CheckID(id) == nil {
			m.ID = id
		}
		return 0, Errorf(CodeInvalidRequest, "message is not a JSON-RPC 2.0 request or response: field %s has the wrong type", typeErr)
	}
	return m.classify()
}

// classify validates a decoded message and says what it is.
func (m *Message) classify() (Kind, *Error) {
	if m.ID != nil {
		if err := CheckID(m.ID); err != nil {
			m.ID = nil
			return 0, err
		}
	}
	if m.JSONRPC != "2.0" {
		return 0, Errorf(CodeInvalidRequest, `message is not a JSON-RPC 2.0 request or response: "jsonrpc" must be "2.0"`)
	}
	switch {
	case m.Method != "" && (m.Result != nil || m.Error != nil):
		return 0, Errorf(CodeInvalidRequest, "message is not a JSON-RPC 2.0 request or response: it has both a method and a result or error")
	case m.Method != "" && m.ID != nil:
		return KindRequest, nil
	case m.Method != "":
		return KindNotification, nil
	case m.ID == nil:
		return 0, Errorf(CodeInvalidRequest, "message is not a JSON-RPC 2.0 request or response: it has neither a method nor an id")
	case (m.Result == nil) == (m.Error == nil):
		return 0, Errorf(CodeInvalidRequest, "message is not a JSON-RPC 2.0 request or response: a reply needs exactly one of result and error")
	}
	return KindReply, nil
}

// Fields of Message, by JSON name.
const (
	fieldNone = iota
	fieldJSONRPC
	fieldID
	fieldMethod
	fieldParams
	fieldResult
	fieldError
	fieldConnectionID
	fieldRequestID
	fieldClient
)

var fieldNames = [...]string{
	fieldJSONRPC:      "jsonrpc",
	fieldID:           "id",
	fieldMethod:       "method",
	fieldParams:       "params",
	fieldResult:       "result",
	fieldError:        "error",
	fieldConnectionID: "connectionId",
	fieldRequestID:    "requestId",
	fieldClient:       "client",
}

// foldedFieldNames are fieldNames folded as encoding/json folds keys.
var foldedFieldNames = func() (f [len(fieldNames)]string) {
	for i, n := range fieldNames {
		f[i] = string(appendFoldedName(nil, []byte(n)))
	}
	return f
}()

// field finds the field a key names: its exact name, else one equal to it
// under case folding (encoding/json's rule).
func field(key []byte) int {
	switch string(key) {
	case "jsonrpc":
		return fieldJSONRPC
	case "id":
		return fieldID
	case "method":
		return fieldMethod
	case "params":
		return fieldParams
	case "result":
		return fieldResult
	case "error":
		return fieldError
	case "connectionId":
		return fieldConnectionID
	case "requestId":
		return fieldRequestID
	case "client":
		return fieldClient
	}
	var buf [32]byte
	folded := appendFoldedName(buf[:0], key)
	for f, n := range foldedFieldNames {
		if n != "" && string(folded) == n {
			return f
		}
	}
	return fieldNone
}

// assign stores the value v of the member key (its JSON string literal,
// quotes included; escaped if it holds escapes) into m. It returns the
// field's name if v has a type the field cannot hold (what json.Unmarshal
// reports as an UnmarshalTypeError).
func (m *Message) assign(key []byte, escaped bool, v []byte) string {
	name := key[1 : len(key)-1]
	if escaped {
		var s string
		if json.Unmarshal(key, &s) != nil {
			return ""
		}
		name = []byte(s)
	}
	f := field(name)
	switch f {
	case fieldID:
		m.ID = v
	case fieldParams:
		m.Params = v
	case fieldResult:
		m.Result = v
	case fieldError:
		m.Error = v
	case fieldRequestID:
		m.RequestID = v
	case fieldClient:
		m.Client = v
	case fieldJSONRPC, fieldMethod, fieldConnectionID:
		switch v[0] {
		case 'n': // null: unchanged
			return ""
		case '"':
		default:
			return fieldNames[f]
		}
		switch f {
		case fieldJSONRPC:
			if string(v) == `"2.0"` {
				m.JSONRPC = "2.0"
			} else {
				m.JSONRPC = decodeString(v)
			}
		case fieldMethod:
			m.Method = methodString(v)
		default:
			m.ConnectionID = decodeString(v)
		}
	}
	return ""
}

// decodeString returns the value of the valid JSON string v (quotes
// included) as encoding/json decodes it.
func decodeString(v []byte) string {
	if body := v[1 : len(v)-1]; !containsBackslash(body) && utf8.Valid(body) {
		return string(body)
	}
	var s string
	_ = json.Unmarshal(v, &s) // escapes, invalid UTF-8 (replaced by U+FFFD)
	return s
}

func containsBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// methodString is decodeString, without allocating for the methods the
// relay sees most.
func methodString(v []byte) string {
	switch string(v[1 : len(v)-1]) {
	case "tools/call":
		return "tools/call"
	case "tools/list":
		return "tools/list"
	case "resources/read":
		return "resources/read"
	case MethodProgress:
		return MethodProgress
	case MethodCancelled:
		return MethodCancelled
	case MethodToolsListChanged:
		return MethodToolsListChanged
	case MethodStatus:
		return MethodStatus
	case MethodDisconnected:
		return MethodDisconnected
	case MethodAuthenticate:
		return MethodAuthenticate
	case MethodAuthenticated:
		return MethodAuthenticated
	case MethodHandshake:
		return MethodHandshake
	case MethodListExtensions:
		return MethodListExtensions
	case MethodConnect:
		return MethodConnect
	case MethodDisconnect:
		return MethodDisconnect
	case "ping":
		return "ping"
	}
	return decodeString(v)
}

// appendFoldedName is encoding/json's key folding: ASCII letters to upper
// case, other runes to the smallest rune of their fold set.
func appendFoldedName(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// maxDepth is encoding/json's limit on nested arrays and objects.
const maxDepth = 10000

// parser checks JSON syntax (RFC 8259, as encoding/json's scanner does) and
// finds the spans of values. Its methods take the offset of what they parse
// and return the offset after it; after the first error they return at
// once, and err says what went wrong.
type parser struct {
	data []byte
	err  *Error
}

func (p *parser) fail(i int, context string) int {
	if p.err == nil {
		if i >= len(p.data) {
			p.err = Errorf(CodeParseError, "message is not valid JSON: unexpected end of JSON input")
		} else {
			p.err = Errorf(CodeParseError, "message is not valid JSON: invalid character %q %s (offset %d)", rune(p.data[i]), context, i)
		}
	}
	return len(p.data)
}

func (p *parser) space(i int) int {
	for i < len(p.data) {
		switch p.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value parses the value at i (no leading space) inside containers
// nested depth deep (0 at the top level).
func (p *parser) value(i, depth int) int {
	if i >= len(p.data) {
		return p.fail(i, "")
	}
	switch c := p.data[i]; {
	case c == '{':
		return p.object(i, depth+1, nil)
	case c == '[':
		return p.array(i, depth+1)
	case c == '"':
		end, _ := p.str(i)
		return end
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number(i)
	case c == 't':
		return p.literal(i, "true")
	case c == 'f':
		return p.literal(i, "false")
	case c == 'n':
		return p.literal(i, "null")
	}
	return p.fail(i, "looking for the beginning of a value")
}

func (p *parser) literal(i int, lit string) int {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(p.data) || p.data[i+k] != lit[k] {
			return p.fail(i+k, "in literal "+lit)
		}
	}
	return i + len(lit)
}

// object parses the object at i, the depth-th container. If member is
// set, it is handed each member: the key's string literal, whether it holds
// escapes, and the value's text.
func (p *parser) object(i, depth int, member func(key []byte, escaped bool, v []byte)) int {
	if depth > maxDepth {
		return p.fail(i, "exceeding the maximum depth")
	}
	i = p.space(i + 1)
	if i < len(p.data) && p.data[i] == '}' {
		return i + 1
	}
	for p.err == nil {
		if i >= len(p.data) || p.data[i] != '"' {
			return p.fail(i, "looking for the beginning of an object key string")
		}
		ks := i
		var escaped bool
		i, escaped = p.str(i)
		if p.err != nil {
			return i
		}
		key := p.data[ks:i]
		i = p.space(i)
		if i >= len(p.data) || p.data[i] != ':' {
			return p.fail(i, "after an object key")
		}
		i = p.space(i + 1)
		vs := i
		i = p.value(i, depth)
		if p.err != nil {
			return i
		}
		if member != nil {
			member(key, escaped, p.data[vs:i])
		}
		i = p.space(i)
		if i >= len(p.data) {
			return p.fail(i, "")
		}
		switch p.data[i] {
		case ',':
			i = p.space(i + 1)
		case '}':
			return i + 1
		default:
			return p.fail(i, "after an object key:value pair")
		}
	}
	return i
}

func (p *parser) array(i, depth int) int {
	if depth > maxDepth {
		return p.fail(i, "exceeding the maximum depth")
	}
	i = p.space(i + 1)
	if i < len(p.data) && p.data[i] == ']' {
		return i + 1
	}
	for p.err == nil {
		i = p.value(i, depth)
		if p.err != nil {
			return i
		}
		i = p.space(i)
		if i >= len(p.data) {
			return p.fail(i, "")
		}
		switch p.data[i] {
		case ',':
			i = p.space(i + 1)
		case ']':
			return i + 1
		default:
			return p.fail(i, "after an array element")
		}
	}
	return i
}

// str parses the string at i and reports whether it holds escapes.
func (p *parser) str(i int) (int, bool) {
	escaped := false
	for i++; i < len(p.data); i++ {
		c := p.data[i]
		switch {
		case c == '"':
			return i + 1, escaped
		case c < 0x20:
			return p.fail(i, "in a string literal"), escaped
		case c == '\\':
			escaped = true
			i++
			if i >= len(p.data) {
				return p.fail(i, ""), escaped
			}
			switch p.data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 1; k <= 4; k++ {
					if i+k >= len(p.data) || !isHex(p.data[i+k]) {
						return p.fail(i+k, `in a \u escape`), escaped
					}
				}
				i += 4
			default:
				return p.fail(i, "in a string escape code"), escaped
			}
		}
	}
	return p.fail(i, ""), escaped
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (p *parser) number(i int) int {
	d := p.data
	if d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return p.fail(i, "")
	case d[i] == '0':
		i++
	case '1' <= d[i] && d[i] <= '9':
		for i++; i < len(d) && '0' <= d[i] && d[i] <= '9'; i++ {
		}
	default:
		return p.fail(i, "in numeric literal")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return p.fail(i, "after decimal point in numeric literal")
		}
		for i++; i < len(d) && '0' <= d[i] && d[i] <= '9'; i++ {
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return p.fail(i, "in exponent of numeric literal")
		}
		for i++; i < len(d) && '0' <= d[i] && d[i] <= '9'; i++ {
		}
	}
	return i
}
