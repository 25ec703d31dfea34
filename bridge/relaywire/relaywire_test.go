package relaywire

import (
	"encoding/json"
	"testing"
)

func TestMapIDRoundTrip(t *testing.T) {
	for _, tc := range []struct{ name, raw, mapped string }{
		{"number", `1`, `conn-abc:1`},
		{"string that looks like a number", `"1"`, `conn-abc:"1"`},
		{"uuid", `"550e8400-e29b-41d4-a716-446655440000"`, `conn-abc:"550e8400-e29b-41d4-a716-446655440000"`},
		{"float text kept", `1.50`, `conn-abc:1.50`},
		{"exponent kept", `1e3`, `conn-abc:1e3`},
		{"string with colon and escapes", `"a:b\u0041\""`, `conn-abc:"a:b\u0041\""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := MapID("conn-abc", json.RawMessage(tc.raw))
			if m != tc.mapped {
				t.Fatalf("MapID = %q, want %q", m, tc.mapped)
			}
			// Through JSON as the extension echoes it.
			frame := AppendRequest(nil, m, "x", nil)
			msg, kind, err := Parse(frame)
			if err != nil || kind != KindRequest {
				t.Fatalf("Parse(%s): %v", frame, err)
			}
			s, _ := IDString(msg.ID)
			conn, orig, ok := UnmapID(s)
			if !ok || conn != "conn-abc" || string(orig) != tc.raw {
				t.Fatalf("UnmapID(%q) = %q %s %v", s, conn, orig, ok)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		kind     Kind
		code     int
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"m"}`, KindRequest, 0},
		{"notification", `{"jsonrpc":"2.0","method":"m"}`, KindNotification, 0},
		{"result", `{"jsonrpc":"2.0","id":"a","result":null}`, KindReply, 0},
		{"error", `{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"x"}}`, KindReply, 0},
		{"both", `{"jsonrpc":"2.0","id":"a","result":{},"error":{}}`, 0, CodeInvalidRequest},
		{"bare id", `{"jsonrpc":"2.0","id":"a"}`, 0, CodeInvalidRequest},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"m"}`, 0, CodeInvalidRequest},
		{"not json", `{`, 0, CodeParseError},
		{"batch", `[]`, 0, CodeInvalidRequest},
		{"version 1", `{"jsonrpc":"1.0","id":1,"method":"m"}`, 0, CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, kind, err := Parse([]byte(tc.in))
			code := 0
			if err != nil {
				code = err.Code
			}
			if kind != tc.kind || code != tc.code {
				t.Fatalf("got kind %d code %d", kind, code)
			}
		})
	}
}

func TestReserved(t *testing.T) {
	for raw, want := range map[string]bool{`"proxy:1"`: true, `"ext:2"`: true, `"conn-a:1"`: false, `1`: false, `"extension"`: false} {
		if got := IsReservedID(json.RawMessage(raw)); got != want {
			t.Errorf("IsReservedID(%s) = %v", raw, got)
		}
	}
}

// FuzzMapID: any valid id survives the mapping and a JSON round trip byte
// for byte.
func FuzzMapID(f *testing.F) {
	for _, s := range []string{`1`, `"1"`, `-0.5e+7`, `"\u00e9:"`, `"proxy:1"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		msg, kind, perr := Parse([]byte(`{"jsonrpc":"2.0","id":` + raw + `,"method":"m"}`))
		if perr != nil || kind != KindRequest || CheckClientID(msg.ID) != nil { // Parse ran CheckID
			return // refused before it is mapped, as the proxy does
		}
		frame := AppendRequest(nil, MapID("conn-x", msg.ID), "m", nil)
		back, _, perr := Parse(frame)
		if perr != nil {
			t.Fatalf("mapped frame %s: %v", frame, perr)
		}
		s, _ := IDString(back.ID)
		conn, orig, ok := UnmapID(s)
		if !ok || conn != "conn-x" || string(orig) != string(msg.ID) {
			t.Fatalf("%s → %q → %s", msg.ID, s, orig)
		}
	})
}
