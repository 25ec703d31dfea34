package mcphttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct {
		name, requested string
		supported       []string
		want            string
	}{
		{"spoken", "2025-06-18", Versions, "2025-06-18"},
		{"oldest", "2024-11-05", Versions, "2024-11-05"},
		{"not spoken by the proxy", "2024-11-05", StreamableVersions, VersionLatestSession},
		{"unknown", "1999-01-01", Versions, VersionLatestSession},
		{"stateless has no initialize", VersionStateless, Versions, VersionLatestSession},
		{"none", "", Versions, VersionLatestSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Negotiate(tc.requested, tc.supported); got != tc.want {
				t.Errorf("Negotiate(%q) = %q, want %q", tc.requested, got, tc.want)
			}
		})
	}
}

func TestIsStatelessRequest(t *testing.T) {
	meta := json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)
	for _, tc := range []struct {
		name   string
		header string
		params json.RawMessage
		want   bool
	}{
		{"header", VersionStateless, nil, true},
		{"a later header", "2027-01-01", nil, true},
		{"meta", "", meta, true},
		{"session era", "2025-11-25", json.RawMessage(`{"name":"x"}`), false},
		{"key outside _meta", "", json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), false},
		{"no params", "", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set(HeaderProtocolVersion, tc.header)
			}
			if got := IsStatelessRequest(h, tc.params); got != tc.want {
				t.Errorf("IsStatelessRequest = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckStandardHeaders(t *testing.T) {
	call := json.RawMessage(`{"name":"echo","arguments":{}}`)
	read := json.RawMessage(`{"uri":"file:///a"}`)
	for _, tc := range []struct {
		name             string
		version, method  string
		mcpName          string
		isRequest        bool
		bodyMethod       string
		params           json.RawMessage
		wantErrSubstring string // "" for agreement
	}{
		{"agree", VersionStateless, "tools/call", "echo", true, "tools/call", call, ""},
		{"uri", VersionStateless, "resources/read", "file:///a", true, "resources/read", read, ""},
		{"no name needed", VersionStateless, "tools/list", "", true, "tools/list", nil, ""},
		{"method differs", VersionStateless, "tools/call", "echo", true, "tools/list", nil, "must name the body's method"},
		{"name differs", VersionStateless, "tools/call", "other", true, "tools/call", call, `must name the body's "echo"`},
		{"session era: not checked", "2025-11-25", "x", "y", true, "tools/call", call, ""},
		{"notification: not checked", VersionStateless, "x", "", false, "notifications/cancelled", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(HeaderProtocolVersion, tc.version)
			h.Set(HeaderMethod, tc.method)
			h.Set(HeaderName, tc.mcpName)
			got := CheckStandardHeaders(h, tc.isRequest, tc.bodyMethod, tc.params)
			if (got == "") != (tc.wantErrSubstring == "") || !strings.Contains(got, tc.wantErrSubstring) {
				t.Errorf("CheckStandardHeaders = %q, want one with %q", got, tc.wantErrSubstring)
			}
		})
	}
}

// TestWriteError holds the bytes of a refusal, the same from every
// endpoint and from the guard in front of them.
func TestWriteError(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   []byte
		want string
	}{
		{"no id", nil, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"a \"quoted\" \u003cmessage\u003e"}}`},
		{"the request's id", []byte(`"a-1"`), `{"jsonrpc":"2.0","id":"a-1","error":{"code":-32000,"message":"a \"quoted\" \u003cmessage\u003e"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteError(rec, http.StatusRequestEntityTooLarge, tc.id, -32000, `a "quoted" <message>`)
			if rec.Code != 413 || rec.Body.String() != tc.want {
				t.Errorf("got %d %s, want 413 %s", rec.Code, rec.Body, tc.want)
			}
			for k, v := range map[string]string{"Content-Type": "application/json", "Content-Length": strconv.Itoa(len(tc.want)), "X-Content-Type-Options": "nosniff"} {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}
