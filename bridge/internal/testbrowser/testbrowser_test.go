package testbrowser

import (
	"encoding/json"
	"testing"
)

// TestResultFrame: a reply written by appending says what the map-encoded
// reply says, and a result that is not JSON is left to json.Marshal.
func TestResultFrame(t *testing.T) {
	for _, tc := range []struct {
		id, raw string
		ok      bool
	}{
		{`"bridge:1"`, `{"content":[{"type":"text","text":"x"}]}`, true},
		{`7`, ` { "a" : [1, "<&>"] } `, true},
		{`"x"`, ``, true},
		{`"x"`, `{"a":`, false},
	} {
		frame, ok := resultFrame(json.RawMessage(tc.id), json.RawMessage(tc.raw))
		if ok != tc.ok {
			t.Fatalf("%s: ok %v, want %v", tc.raw, ok, tc.ok)
		}
		if !ok {
			continue
		}
		raw := json.RawMessage(tc.raw)
		if tc.raw == "" {
			raw = nil
		}
		want, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(tc.id), "result": raw})
		var got, wanted any
		if err := json.Unmarshal(frame, &got); err != nil {
			t.Fatalf("%s: %q is not JSON: %v", tc.raw, frame, err)
		}
		_ = json.Unmarshal(want, &wanted)
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(wanted)
		if string(g) != string(w) {
			t.Errorf("%s: %s, the map's %s", tc.raw, frame, want)
		}
	}
}

// TestDecodeMessage: the scan reads what json.Unmarshal reads.
func TestDecodeMessage(t *testing.T) {
	for _, frame := range messageSamples {
		checkDecodeMessage(t, frame)
	}
}

var messageSamples = []string{
	`{"jsonrpc":"2.0","id":"local-abc:1","method":"tools/call","params":{"_meta":{"browserbridge/session":{"client":"c","id":"local-abc"}},"arguments":{"text":"x"},"name":"echo"}}`,
	` { "jsonrpc" : "2.0" , "method" : "host.state" , "params" : { "state" : "connected" } } `,
	`{"jsonrpc":"2.0","id":7,"result":{"a":[1,"}",{"b":"\""}]}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"error":null,"result":null,"params":null}`,
	`{"id":1,"id":2,"method":"a","method":"b"}`,
	`{"jsonrpc":"2.0","Method":"other case","ID":3}`,
	`{"jsonrpc":"2.0","met\u0068od":"escaped key"}`,
	`{"jsonrpc":"2.0","method":"escaped \u00e9 value"}`,
	`{"jsonrpc":"2.0","method":5}`,
	"{\"method\":\"invalid UTF-8 \xff\"}",
	`{"extra":{"nested":[true,false,null]},"method":"m"}`,
	`{}`,
	`null`,
	`[]`,
	`"text"`,
	`{"method":`,
	`not JSON`,
}

func checkDecodeMessage(t *testing.T, frame string) {
	t.Helper()
	got, gotErr := decodeMessage([]byte(frame))
	var want Message
	wantErr := json.Unmarshal([]byte(frame), &want)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, json.Unmarshal's %v", frame, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) || (got.Error == nil) != (want.Error == nil) {
		t.Fatalf("%s: read %s, json.Unmarshal %s", frame, g, w)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, frame := range messageSamples {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, frame string) { checkDecodeMessage(t, frame) })
}
