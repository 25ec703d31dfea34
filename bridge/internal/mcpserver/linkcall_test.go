package mcpserver

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestLinkCallParamsEncode holds linkCallParams.encode, which copies the
// arguments and the session's _meta as they are, to json.Marshal's
// meaning: the same JSON value, and valid JSON, for every shape the link
// carries.
func TestLinkCallParamsEncode(t *testing.T) {
	session := json.RawMessage(`{"client":"claude-code","id":"local-ABC"}`)
	for _, tc := range []struct {
		name string
		p    linkCallParams
	}{
		{"plain", linkCallParams{Name: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}},
		{"no arguments", linkCallParams{Name: "tabs_context"}},
		{"null arguments", linkCallParams{Name: "tabs_context", Arguments: json.RawMessage(`null`)}},
		{"arguments with whitespace", linkCallParams{Name: "navigate", Arguments: json.RawMessage("{ \"url\" :\n \"https://example.com/?a=1&b=<2>\" }")}},
		{"nested arguments", linkCallParams{Name: "form_input", Arguments: json.RawMessage(`{"fields":[{"ref":"ref_1","value":"Ann"},{"selector":"#qty","value":3}]}`)}},
		{"name to escape", linkCallParams{Name: "a\"b\\c<d>&e\u2028f\x01é", Arguments: json.RawMessage(`{}`)}},
		{"progress token", linkCallParams{Name: "echo", Arguments: json.RawMessage(`{}`), Meta: linkCallMeta{ProgressToken: "local-ABC:7"}}},
		{"progress token to escape", linkCallParams{Name: "echo", Meta: linkCallMeta{ProgressToken: "local-\"x\":1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Meta.Session = session
			got := []byte(p.encode())
			if !json.Valid(got) {
				t.Fatalf("encode gave invalid JSON: %s", got)
			}
			want := p
			if len(want.Arguments) == 0 {
				want.Arguments = json.RawMessage("{}")
			}
			wantJSON, err := json.Marshal(&want)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(wantJSON, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("encode:\n  %s\njson.Marshal:\n  %s", got, wantJSON)
			}
		})
	}
}

// BenchmarkLinkCallParamsEncode compares encode with the json.Marshal it
// replaces, for a typical call.
func BenchmarkLinkCallParamsEncode(b *testing.B) {
	p := linkCallParams{Name: "form_input", Arguments: json.RawMessage(`{"fields":[{"ref":"ref_12","value":"Ann Example"},{"ref":"ref_13","value":"ann@example.com"}],"tabId":123456789}`),
		Meta: linkCallMeta{Session: json.RawMessage(`{"client":"claude-code","id":"local-ABCDEFGHIJKLMNOPQRSTUVWXYZ"}`)}}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.encode()
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&p)
		}
	})
}
