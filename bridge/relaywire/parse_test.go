package relaywire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// parseReference is Parse as it was, on encoding/json: the behaviour the
// hand-written parser must keep.
func parseReference(data []byte) (*Message, Kind, *Error) {
	var m Message
	if err := json.Unmarshal(data, &m); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			return &Message{}, 0, Errorf(CodeInvalidRequest, "message is not a JSON-RPC 2.0 object (batches are not supported)")
		}
		if errors.As(err, &ute) {
			var idOnly struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(data, &idOnly)
			m = Message{}
			if CheckID(idOnly.ID) == nil {
				m.ID = idOnly.ID
			}
			return &m, 0, Errorf(CodeInvalidRequest, "message is not a JSON-RPC 2.0 request or response: field %s has the wrong type", ute.Field)
		}
		return &Message{}, 0, Errorf(CodeParseError, "message is not valid JSON: %v", err)
	}
	kind, perr := m.classify()
	return &m, kind, perr
}

// sameAsReference fails unless Parse and parseReference agree on data: the
// same kind, the same error code (and message, but for the wording of
// syntax errors), the same fields.
func sameAsReference(t *testing.T, data []byte) {
	t.Helper()
	got, gk, ge := Parse(data)
	want, wk, we := parseReference(data)
	if gk != wk || (ge == nil) != (we == nil) {
		t.Fatalf("%q: kind %d error %v, encoding/json: kind %d error %v", data, gk, ge, wk, we)
	}
	if ge != nil && (ge.Code != we.Code || ge.Code != CodeParseError && ge.Message != we.Message) {
		t.Fatalf("%q: error %v, encoding/json: %v", data, ge, we)
	}
	if (ge != nil && ge.Code == CodeParseError) != !json.Valid(data) {
		t.Fatalf("%q: parse error %v, but json.Valid says %v", data, ge, json.Valid(data))
	}
	raw := func(a, b json.RawMessage) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
	if got.JSONRPC != want.JSONRPC || got.Method != want.Method || got.ConnectionID != want.ConnectionID ||
		!raw(got.ID, want.ID) || !raw(got.Params, want.Params) || !raw(got.Result, want.Result) ||
		!raw(got.Error, want.Error) || !raw(got.RequestID, want.RequestID) {
		t.Fatalf("%q:\n got %+v\nwant %+v", data, got, want)
	}
}

var parseCases = []string{
	// Ordinary messages.
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`,
	`{"jsonrpc":"2.0","id":"conn-abc:1","result":{"content":[{"type":"text","text":"hi"}]}}`,
	`{"jsonrpc":"2.0","id":"conn-abc:\"1\"","error":{"code":-32000,"message":"no"}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","requestId":"conn-a:4","params":{"progressToken":"t","progress":1}}`,
	`{"jsonrpc":"2.0","id":5,"method":"createTab","connectionId":"conn-x","params":[1,2,{"a":[]}]}`,
	" \t\r\n{ \"jsonrpc\" : \"2.0\" , \"id\" : 7 , \"method\" : \"m\" } \n",
	`{}`, `{"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","id":1}`, `{"jsonrpc":"2.0","id":1,"result":null}`,
	`{"jsonrpc":"2.0","id":"a","result":{},"error":{}}`, `{"jsonrpc":"2.0","method":"m","result":1}`,
	// Keys: case folding, escapes, repeats, unknown ones.
	`{"JSONRPC":"2.0","ID":1,"Method":"m"}`, `{"jsonRPC":"2.0","iD":1,"METHOD":"m","PARAMS":{}}`,
	`{"jſonrpc":"2.0","id":1,"method":"m"}`, `{"jsonrpc":"2.0","id":1,"method":"m","connectionid":"c","requeſtid":"r"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\u212a\"}", `{"jsonrpc":"2.0","\u0069d":1,"m\u0065thod":"m"}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"a","method":"b"}`, `{"jsonrpc":"2.0","id":1,"ID":2,"method":"m"}`,
	`{"jsonrpc":"2.0","ID":1,"id":2,"method":"m"}`, `{"jsonrpc":"2.0","id":1,"method":"m","x":{"y":[1,2,3]},"":0}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","méthod":"n"}`, `{"jsonrpc":"2.0","id":1,"method":"m","\ud800":1}`,
	// Null and wrong types.
	`{"jsonrpc":"2.0","id":null,"method":"m"}`, `{"jsonrpc":null,"id":1,"method":"m"}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","method":null}`, `{"jsonrpc":"2.0","id":1,"method":5}`,
	`{"jsonrpc":2,"id":1,"method":"m"}`, `{"jsonrpc":"2.0","id":1,"method":"m","connectionId":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":[],"jsonrpc":true}`, `{"jsonrpc":"2.0","id":{"a":1},"method":5}`,
	`{"jsonrpc":"2.0","id":"ok","method":false}`, `{"jsonrpc":"2.0","id":true,"method":"m"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"m"}`, `{"jsonrpc":"2.0","id":1.5e3,"method":"m"}`,
	`{"jsonrpc":"2.0","id":-0,"method":"m"}`, `{"jsonrpc":"2.0","id":"` + strings.Repeat("x", 300) + `","method":"m"}`,
	`{"jsonrpc":"2.0","id":"proxy:1","method":"m"}`,
	// Strings: escapes, invalid UTF-8, surrogates.
	`{"jsonrpc":"2.0","id":1,"method":"a\"b\\c\/d\b\f\n\r\t\u00e9"}`, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}",
	`{"jsonrpc":"2.0","id":1,"method":"\ud800"}`, `{"jsonrpc":"2.0","id":1,"method":"\ud83d\ude00"}`,
	`{"jsonrpc":"2\u002e0","id":1,"method":"m"}`, "{\"jsonrpc\":\"2.0\",\"id\":\"\xc3\",\"method\":\"m\"}",
	// Top level.
	`null`, ` null `, `[]`, `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, `"x"`, `1`, `true`, `false`,
	// Syntax errors.
	``, ` `, `{`, `}`, `{"jsonrpc":"2.0","id":1,`, `{"jsonrpc":"2.0",}`, `{"jsonrpc" "2.0"}`, `{jsonrpc:"2.0"}`,
	`{"a":1}x`, `{"a":1}{}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":1e+}`, `{"a":+1}`,
	`{"a":tru}`, `{"a":nul}`, `{"a":True}`, `{"a":"\x"}`, `{"a":"\u12g4"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}",
	`{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{"a":{"b":1,}}`, `{"a":"unterminated}`, `{"a":[}`, "{\"a\":1}\x00",
	"\ufeff{}", `{"a":NaN}`, `{"a":Infinity}`, `{'a':1}`,
	// Depth.
	`{"params":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`,
	`{"params":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"params":` + strings.Repeat(`{"a":`, 9999) + `1` + strings.Repeat("}", 9999) + `}`,
	`{"params":` + strings.Repeat(`{"a":`, 9998) + `1` + strings.Repeat("}", 9998) + `}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

func TestParseMatchesEncodingJSON(t *testing.T) {
	for _, c := range parseCases {
		name := c
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) { sameAsReference(t, []byte(c)) })
	}
}

// FuzzParse: the hand-written parser agrees with encoding/json on every
// input: it accepts what encoding/json accepts, with the same fields, and
// refuses what it refuses, with the same error.
func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		if len(c) < 1000 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsReference(t, data) })
}

// TestDecodeAllocations: a forwarded request, a reply and a progress
// notification decode without allocating.
func TestDecodeAllocations(t *testing.T) {
	for _, c := range []string{
		`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"navigate","arguments":{"url":"https://example.com"}}}`,
		`{"jsonrpc":"2.0","id":"conn-70dfcdd7-ff5e-448e-b274-59c1f6a0d7c8:17","result":{"content":[{"type":"text","text":"ok"}]}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","requestId":"conn-a:4","params":{"progressToken":"t","progress":1}}`,
	} {
		var m Message
		data := []byte(c)
		if n := testing.AllocsPerRun(100, func() { m.Decode(data) }); n != 0 {
			t.Errorf("%s: %v allocations", c, n)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":"conn-70dfcdd7-ff5e-448e-b274-59c1f6a0d7c8:17","result":{"content":[{"type":"text","text":"a page of text with \"quotes\" and \u00e9"}],"isError":false}}`)
	b.Run("Decode", func(b *testing.B) {
		var m Message
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			m.Decode(data)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			parseReference(data)
		}
	})
}
