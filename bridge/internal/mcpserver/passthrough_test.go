package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decodedResponse is the response the fast path wrote before results were
// passed through, and still writes for the shapes that are not: the SDK
// decodes the browser's result, the bridge adds its _meta, and the
// response is encoded as the SDK encodes it. ok is false if the SDK
// cannot decode raw.
func decodedResponse(id, raw []byte, info browserInfoMeta) (resp []byte, ok bool) {
	var res mcp.CallToolResult
	if json.Unmarshal(raw, &res) != nil || res.InputRequests != nil {
		return nil, false
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[metaBrowser] = info
	if res.Content == nil && !res.NeedsInput() {
		res.Content = []mcp.Content{}
	}
	return response(id, &res, nil), true
}

// TestPassThroughMatchesDecoding: a result passed through is, byte for
// byte, what decoding it into the SDK's types and encoding it again gives,
// and every shape the pass-through does not take is left to that.
func TestPassThroughMatchesDecoding(t *testing.T) {
	infos := []browserInfoMeta{
		{ID: "instance-1", Name: "Chrome", Version: "142.0.7444.59"},
		{ID: "<id>&", Name: "Chr\"o\\me \u2028\u2029 é 😀 \x01\x7f", Version: "\xff\xfe"},
	}
	texts := []struct {
		raw  string // a JSON string token
		pass bool
	}{
		{`"x"`, true},
		{`""`, true},
		{`"plain ASCII text with spaces, digits 0-9 and ~ DEL:` + "\x7f" + `"`, true},
		{`"\"q\" \\ back\\slash"`, true},
		{`"\b\f\n\r\t"`, true},
		{`"\u0000\u0001\u001f\u001F\u0008\u000C\u000a\u000D\u0009"`, true},
		{`"<b>&amp;</b> literal"`, true},
		{`"\u003cb\u003e\u0026 escaped \u003C\u003E"`, true},
		{`"\/ solidus \/\/"`, true},
		{`"é ü ß 中文 😀 literal"`, true},
		{`"\u00e9 \u4e2d \uD83D\uDE00 \ud83d\ude00 escaped"`, true},
		{"\"\u2028 and \u2029 literal\"", true},
		{`"\u2028 and \u2029 escaped"`, true},
		{`"\u0041\u007f\u0080\u00ff\uffff\ufffd\ufeff"`, true},
		{"\"\xef\xbf\xbd literal U+FFFD\"", true},
		{`"lone \ud800 high, lone \udc00 low, \ud800\u0041 high then A, \udc00\ud800 reversed, \ud800\ud800\udc00 high then pair"`, true},
		{`"lone high at the end \ud83d"`, true},
		{"\"invalid UTF-8: \xff \xc3 \xed\xa0\x80 \xf4\x90\x80\x80\"", true},
		{`"\"\\\/\b\f\n\r\t\u1234"`, true},
		{`"long ` + strings.Repeat(`a<>&\n\u2028é`, 500) + `"`, true},
	}
	results := []struct {
		name string
		raw  string // %s is a text token
		pass bool
	}{
		{"one text", `{"content":[{"type":"text","text":%s}]}`, true},
		{"two texts", `{"content":[{"type":"text","text":%s},{"text":%s,"type":"text"}]}`, true},
		{"isError true first", `{"isError":true,"content":[{"type":"text","text":%s}]}`, true},
		{"isError true last", `{"content":[{"type":"text","text":%s}],"isError":true}`, true},
		{"isError false", `{"content":[{"type":"text","text":%s}],"isError":false}`, true},
		{"spaces", " {\n \"content\" : [ { \"type\" : \"text\" , \"text\" : %s } , {\"type\":\"text\",\"text\":%s} ] ,\t\"isError\" : true } \r\n", true},
		{"empty content", `{"content":[]}`, true},
		{"empty content, spaces", `{"content":[ ], "isError":true}`, true},
		{"no content", `{}`, false},
		{"only isError", `{"isError":true}`, false},
		{"null content", `{"content":null}`, false},
		{"content twice", `{"content":[],"content":[{"type":"text","text":%s}]}`, false},
		{"isError twice", `{"content":[],"isError":false,"isError":true}`, false},
		{"isError not a bool", `{"content":[],"isError":1}`, false},
		{"isError null", `{"content":[],"isError":null}`, false},
		{"_meta", `{"content":[{"type":"text","text":%s}],"_meta":{"a":1}}`, false},
		{"structuredContent", `{"content":[{"type":"text","text":%s}],"structuredContent":{"z":1,"a":2}}`, false},
		{"extra key", `{"content":[{"type":"text","text":%s}],"unknownField":42}`, false},
		{"key in another case", `{"Content":[{"type":"text","text":%s}]}`, false},
		{"escaped key", `{"cont\u0065nt":[{"type":"text","text":%s}]}`, false},
		{"text with annotations", `{"content":[{"type":"text","text":%s,"annotations":{"priority":1}}]}`, false},
		{"text with _meta", `{"content":[{"type":"text","text":%s,"_meta":{"k":"v"}}]}`, false},
		{"text without type", `{"content":[{"text":%s}]}`, false},
		{"text twice", `{"content":[{"type":"text","text":%s,"text":"again"}]}`, false},
		{"text not a string", `{"content":[{"type":"text","text":null}]}`, false},
		{"image", `{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`, false},
		{"text then image", `{"content":[{"type":"text","text":%s},{"type":"image","data":"aGk=","mimeType":"image/png"}]}`, false},
		{"resource link", `{"content":[{"type":"resource_link","uri":"bb://x","name":"x"}]}`, false},
		{"content not an array", `{"content":{"type":"text","text":%s}}`, false},
		{"not an object", `[{"content":[]}]`, false},
		{"the rich tool's", richResult, false},
	}
	ids := []string{"1", "-42", `"req-<&>"`}
	for _, rc := range results {
		for _, tc := range texts {
			raw := strings.ReplaceAll(rc.raw, "%s", tc.raw)
			if !json.Valid([]byte(raw)) {
				t.Fatalf("%s with %s: not JSON: %s", rc.name, tc.raw, raw)
			}
			for _, id := range ids {
				for _, info := range infos {
					meta := browserMetaJSON(info)
					got, isError, ok := appendPassThrough([]byte("kept"), []byte(id), []byte(raw), meta)
					want, decoded := decodedResponse([]byte(id), []byte(raw), info)
					if ok != (rc.pass && tc.pass) {
						t.Fatalf("%s: passed through: %v, want %v\n%s", rc.name, ok, rc.pass && tc.pass, raw)
					}
					if !strings.HasPrefix(string(got), "kept") {
						t.Fatalf("%s: appendPassThrough did not append: %q", rc.name, got)
					}
					if !ok {
						if string(got) != "kept" {
							t.Fatalf("%s: not passed through, yet wrote %q", rc.name, got)
						}
						continue
					}
					if !decoded {
						t.Fatalf("%s: passed through what the SDK cannot decode: %s", rc.name, raw)
					}
					if got := got[len("kept"):]; string(got) != string(want) {
						t.Fatalf("%s (id %s, browser %q): passed through\n%s\nthe SDK's\n%s", rc.name, id, info.Name, got, want)
					}
					if wantErr := strings.Contains(string(want), `"isError":true`); isError != wantErr {
						t.Fatalf("%s: isError %v, want %v", rc.name, isError, wantErr)
					}
				}
			}
		}
	}
}

// TestBrowserMetaJSON: the encoding of the browserbridge/browser _meta
// follows the browser that answered, including one that said hello again
// with other values.
func TestBrowserMetaJSON(t *testing.T) {
	for _, info := range []browserInfoMeta{
		{ID: "a", Name: "Chrome", Version: "1"},
		{ID: "a", Name: "Chrome", Version: "1"},
		{ID: "a", Name: "Chrome", Version: "2"},
		{ID: "b", Name: "<Edge>", Version: "2"},
		{ID: "a", Name: "Chrome", Version: "1"},
	} {
		want, _ := json.Marshal(info)
		if got := browserMetaJSON(info); string(got) != string(want) {
			t.Errorf("%+v: %s, want %s", info, got, want)
		}
	}
}

// TestFastPathCountsToolErrors: a result passed through with isError true
// is counted in CallErrors, as a decoded one is.
func TestFastPathCountsToolErrors(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	b.attach("instance-errors-1")
	c := b.rawSession(t, "2025-06-18")
	calls, errs, fast := b.mcps.stats.Calls.Load(), b.mcps.stats.CallErrors.Load(), b.mcps.stats.FastPath.Load()
	for i, tool := range []string{"echo", "fail", "rich", "empty", "fail"} {
		r := c.post(`{"jsonrpc":"2.0","id":`+string(rune('1'+i))+`,"method":"tools/call","params":{"name":"`+tool+`"}}`, nil)
		if r.status != 200 || !fastStream(r.body) {
			t.Fatalf("%s: %d, fast path %v\n%s", tool, r.status, fastStream(r.body), r.body)
		}
	}
	if got := b.mcps.stats.FastPath.Load() - fast; got != 5 {
		t.Errorf("fast path took %d calls, want 5", got)
	}
	if got := b.mcps.stats.Calls.Load() - calls; got != 5 {
		t.Errorf("counted %d calls, want 5", got)
	}
	if got := b.mcps.stats.CallErrors.Load() - errs; got != 2 {
		t.Errorf("counted %d call errors, want 2 (the two fails)", got)
	}
}

// FuzzAppendGoString: any JSON string comes out as json.Marshal writes
// what json.Unmarshal reads from it.
func FuzzAppendGoString(f *testing.F) {
	for _, s := range []string{`x`, `\"\\\/\b\f\n\r\t`, `\u0000\u001f\u003c\u2028\ud83d\ude00\ud800\udc00\udc00`, "<>&\u2028\u2029é\xff", `\ud800\u`, `\u12`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		token := []byte(`"` + body + `"`)
		got, ok := appendGoString(nil, token)
		var s string
		if err := json.Unmarshal(token, &s); err != nil {
			if ok {
				t.Fatalf("%q: the decoder refuses it (%v), appendGoString wrote %q", token, err, got)
			}
			return
		}
		if !ok {
			t.Fatalf("%q: valid JSON refused", token)
		}
		want, _ := json.Marshal(s)
		if string(got) != string(want) {
			t.Fatalf("%q: wrote %q, json.Marshal %q", token, got, want)
		}
		if !utf8.Valid(got) {
			t.Fatalf("%q: wrote invalid UTF-8 %q", token, got)
		}
	})
}

// FuzzPassThrough: whatever the browser answers, the pass-through writes
// what decoding and encoding writes, or leaves it to them. The answer is
// the raw input if that is JSON, else one built from it: two texts (the
// input cut in two, as the bodies of JSON strings) in an order and with an
// isError the input picks.
func FuzzPassThrough(f *testing.F) {
	f.Add(`{"content":[{"type":"text","text":"a<b>\u2028"}],"isError":true}`, "Chrome<1>")
	f.Add(`{"isError":false,"content":[{"text":"\ud83d\ude00","type":"text"},{"type":"text","text":""}]}`, "é")
	f.Add(`{"content":[]}`, "\xff")
	f.Add(richResult, "x")
	f.Add(`a\"b\u00e9<`, `\u2029\ud800`)
	f.Fuzz(func(t *testing.T, raw, name string) {
		if !json.Valid([]byte(raw)) {
			half := len(raw) / 2
			text1, text2 := raw[:half], raw[half:]
			shapes := []string{
				`{"content":[{"type":"text","text":"%1"},{"text":"%2","type":"text"}]}`,
				`{"isError":true,"content":[{"type":"text","text":"%1"}]}`,
				` {"content" : [ {"text":"%2", "type":"text"} ], "isError":false} `,
			}
			raw = strings.NewReplacer("%1", text1, "%2", text2).Replace(shapes[len(raw)%len(shapes)])
			if !json.Valid([]byte(raw)) {
				return
			}
		}
		info := browserInfoMeta{ID: "id", Name: name, Version: "1"}
		got, _, ok := appendPassThrough(nil, []byte("7"), []byte(raw), browserMetaJSON(info))
		if !ok {
			return
		}
		want, decoded := decodedResponse([]byte("7"), []byte(raw), info)
		if !decoded || string(got) != string(want) {
			t.Fatalf("%s: passed through\n%s\nthe SDK's (decoded %v)\n%s", raw, got, decoded, want)
		}
	})
}
