package relaywire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckKind(t *testing.T) {
	for _, tc := range []struct {
		name, kind, server string
		want               string
		err                string
	}{
		{"old extension: no kind", "", "", ExtensionKindBrowser, ""},
		{"browser", "browser", "", ExtensionKindBrowser, ""},
		{"server", "server", "everything", ExtensionKindServer, ""},
		{"server with dots and dashes", "server", "my.server-2_x", ExtensionKindServer, ""},
		{"server without a name", "server", "", "", "server is required"},
		{"browser with a server name", "browser", "everything", "", "only with kind"},
		{"no kind with a server name", "", "everything", "", "only with kind"},
		{"unknown kind", "robot", "", "", `kind must be "browser" or "server"`},
		{"upper case kind", "Server", "x", "", "kind must be"},
		{"slash in name", "server", "a/b", "", "URL paths"},
		{"backslash in name", "server", `a\b`, "", "URL paths"},
		{"space in name", "server", "a b", "", "URL paths"},
		{"control in name", "server", "a\x00b", "", "URL paths"},
		{"dot-dot", "server", "..", "", "not a name"},
		{"invalid UTF-8", "server", "a\xffb", "", "UTF-8"},
		{"too long", "server", strings.Repeat("a", MaxServerName+1), "", "the limit is 128"},
		{"longest", "server", strings.Repeat("a", MaxServerName), ExtensionKindServer, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckKind(tc.kind, tc.server)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("CheckKind(%q, %q) = %q, %v; want an error with %q", tc.kind, tc.server, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CheckKind(%q, %q) = %q, %v; want %q", tc.kind, tc.server, got, err, tc.want)
			}
		})
	}
}

// TestAuthenticateResultOldExtensionUnchanged: an extension that knows
// nothing of kinds writes, and is read, exactly as before.
func TestAuthenticateResultOldExtensionUnchanged(t *testing.T) {
	b, _ := json.Marshal(AuthenticateResult{Name: "Chrome 141", AccessToken: "t"})
	if string(b) != `{"name":"Chrome 141","accessToken":"t"}` {
		t.Fatalf("got %s", b)
	}
	b, _ = json.Marshal(ExtensionInfo{ID: "ext-1", Name: "Chrome", Connected: true})
	if string(b) != `{"id":"ext-1","name":"Chrome","connected":true}` {
		t.Fatalf("got %s", b)
	}
	var r AuthenticateResult
	if err := json.Unmarshal([]byte(`{"name":"e","accessToken":"t","kind":"server","server":"everything"}`), &r); err != nil || r.Kind != "server" || r.Server != "everything" || r.Replace {
		t.Fatalf("got %+v %v", r, err)
	}
	b, _ = json.Marshal(AuthenticateResult{Name: "e", AccessToken: "t", Kind: "server", Server: "everything", Replace: true})
	if string(b) != `{"name":"e","accessToken":"t","kind":"server","server":"everything","replace":true}` {
		t.Fatalf("got %s", b)
	}
}

func TestRoutedMessages(t *testing.T) {
	params := json.RawMessage(`{"messages":[],"maxTokens":5}`)
	for _, tc := range []struct {
		name        string
		frame       []byte
		kind        Kind
		id, reqID   string
		connID      string
		wantMethod  string
		wantIDIsExt bool
	}{
		{"request about a call", AppendRoutedRequest(nil, "ext:7", "conn-a:4", "", "sampling/createMessage", params),
			KindRequest, `"ext:7"`, `"conn-a:4"`, "", "sampling/createMessage", true},
		{"request about a connection", AppendRoutedRequest(nil, "ext:8", "", "conn-a", "roots/list", nil),
			KindRequest, `"ext:8"`, "", "conn-a", "roots/list", true},
		{"request about a string id", AppendRoutedRequest(nil, "ext:9", `conn-a:"x"`, "", "elicitation/create", params),
			KindRequest, `"ext:9"`, `"conn-a:\"x\""`, "", "elicitation/create", true},
		{"notification to a connection", AppendConnectionNotification(nil, "conn-b", "notifications/message", json.RawMessage(`{"level":"info"}`)),
			KindNotification, "", "", "conn-b", "notifications/message", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, kind, err := Parse(tc.frame)
			if err != nil || kind != tc.kind {
				t.Fatalf("Parse(%s) = %v, %v", tc.frame, kind, err)
			}
			if string(m.ID) != tc.id || string(m.RequestID) != tc.reqID || m.ConnectionID != tc.connID || m.Method != tc.wantMethod {
				t.Fatalf("Parse(%s) = id %s requestId %s connectionId %q method %q", tc.frame, m.ID, m.RequestID, m.ConnectionID, m.Method)
			}
			if IsExtID(m.ID) != tc.wantIDIsExt {
				t.Fatalf("IsExtID(%s) = %v", m.ID, !tc.wantIDIsExt)
			}
			if tc.reqID != "" {
				s, _ := IDString(m.RequestID)
				if c, _, ok := UnmapID(s); !ok || c != "conn-a" {
					t.Fatalf("requestId %s does not unmap to conn-a", m.RequestID)
				}
			}
		})
	}
}

func TestIsExtIDAndControlMethods(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{`"ext:1"`, true}, {`"ext:"`, true}, {`"ext-1"`, false}, {`"proxy:1"`, false}, {`1`, false}, {`"EXT:1"`, false}, {``, false},
	} {
		if got := IsExtID(json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("IsExtID(%s) = %v, want %v", tc.raw, got, tc.want)
		}
	}
	for _, m := range []string{MethodAuthenticate, MethodConnect, MethodPairingCode, MethodConnectionClosed, MethodStatus, MethodServerNameTaken, MethodSessionEnded} {
		if !IsControlMethod(m) {
			t.Errorf("IsControlMethod(%q) = false", m)
		}
	}
	for _, m := range []string{"sampling/createMessage", "tools/call", "notifications/progress"} {
		if IsControlMethod(m) {
			t.Errorf("IsControlMethod(%q) = true", m)
		}
	}
}

func TestPairingCodeFormat(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"as shown", "ABCD-EFGH-JKMN-PQRS", "ABCDEFGHJKMNPQRS"},
		{"lower case", "abcd-efgh-jkmn-pqrs", "ABCDEFGHJKMNPQRS"},
		{"no dashes", "ABCDEFGHJKMNPQRS", "ABCDEFGHJKMNPQRS"},
		{"spaces", " abcd efgh jkmn pqrs ", "ABCDEFGHJKMNPQRS"},
		{"look-alikes read as digits", "O0IL-abcd-efgh-jkmn", "0011ABCDEFGHJKMN"},
		{"digits", "0123-4567-89XY-Z000", "0123456789XYZ000"},
		{"U is not in the alphabet", "ABCD-EFGH-JKMN-PQRU", ""},
		{"too short", "ABCD-EFGH-JKMN-PQR", ""},
		{"too long", "ABCD-EFGH-JKMN-PQRST", ""},
		{"an old code of 12", "ABCD-EFGH-JKMN", "old"},
		{"punctuation", "ABCD.EFGH.JKMN.PQRS", ""},
		{"empty", "", ""},
		{"non-ASCII", "ÀBCD-EFGH-JKMN-PQRS", ""},
		{"junk", strings.Repeat("A", 1000), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizePairingCode(tc.in)
			if tc.want == "old" {
				if !errors.Is(err, ErrPairingCodeOld) || !errors.Is(err, ErrPairingCodeFormat) || !strings.Contains(err.Error(), "run `browserbridge pair` again") {
					t.Fatalf("NormalizePairingCode(%q) = %q, %v; want ErrPairingCodeOld, a format error with what to do", tc.in, got, err)
				}
				return
			}
			if tc.want == "" {
				if errors.Is(err, ErrPairingCodeOld) {
					t.Fatalf("NormalizePairingCode(%q): %v, but it is not of the old length", tc.in, err)
				}
				if !errors.Is(err, ErrPairingCodeFormat) {
					t.Fatalf("NormalizePairingCode(%q) = %q, %v; want ErrPairingCodeFormat", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("NormalizePairingCode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			if back, err := NormalizePairingCode(FormatPairingCode(got)); err != nil || back != got {
				t.Fatalf("round trip of %q through %q: %q %v", got, FormatPairingCode(got), back, err)
			}
		})
	}
	if got := FormatPairingCode("ABCDEFGHJKMNPQRS"); got != "ABCD-EFGH-JKMN-PQRS" {
		t.Fatalf("FormatPairingCode = %q", got)
	}
	if len(PairingAlphabet) != 32 || PairingCodeBits < 80 {
		t.Fatalf("alphabet of %d symbols, %d bits", len(PairingAlphabet), PairingCodeBits)
	}
	for _, c := range "ILOU" {
		if strings.ContainsRune(PairingAlphabet, c) {
			t.Fatalf("the alphabet holds the ambiguous %c", c)
		}
	}
}
