package mcphttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// acceptCases are the cases of the Accept rule: a request's Accept header
// values (nil: no header) and what Accepts says of them. (mcpserver's
// TestSDKAcceptRule holds Accepts to the go-sdk's server over every
// combination of a set of media ranges.)
var acceptCases = []struct {
	name         string
	values       []string
	json, stream bool
}{
	{"both", []string{"application/json, text/event-stream"}, true, true},
	{"both, reversed, no space", []string{"text/event-stream,application/json"}, true, true},
	{"both on two header lines", []string{"application/json", "text/event-stream"}, true, true},
	{"JSON only", []string{"application/json"}, true, false},
	{"event stream only", []string{"text/event-stream"}, false, true},
	{"no Accept", nil, false, false},
	{"empty Accept", []string{""}, false, false},
	{"neither", []string{"text/html"}, false, false},
	{"*/*", []string{"*/*"}, true, true},
	{"type wildcards", []string{"application/*, text/*"}, true, true},
	{"application/* only", []string{"application/*"}, true, false},
	{"text/* only", []string{"text/*"}, false, true},
	{"upper case", []string{"Application/JSON, TEXT/EVENT-STREAM"}, true, true},
	{"parameters ignored", []string{"application/json; charset=utf-8, text/event-stream;foo=bar"}, true, true},
	{"q=0 still counts", []string{"application/json;q=0, text/event-stream;q=0"}, true, true},
	{"q-values and */*", []string{"text/html;q=0.9, */*;q=0.1"}, true, true},
	{"spaces around", []string{"  application/json ;q=1 ,  text/event-stream  "}, true, true},
	{"a suffix is another type", []string{"application/json-seq, text/event-streams"}, false, false},
	{"a list with empty members", []string{",application/json,,text/event-stream,"}, true, true},
	{"the second line completes the first", []string{"text/html, application/json", "text/event-stream;q=0.5"}, true, true},
}

func TestAccepts(t *testing.T) {
	for _, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) {
			jsonOK, streamOK := Accepts(tc.values)
			if jsonOK != tc.json || streamOK != tc.stream {
				t.Fatalf("Accepts(%q) = %v, %v; want %v, %v", tc.values, jsonOK, streamOK, tc.json, tc.stream)
			}
		})
	}
}

// answer is what a check wrote.
type answer struct {
	status int
	code   int
	msg    string
}

func run(t *testing.T, check func(http.ResponseWriter, *http.Request) bool, r *http.Request) (bool, answer) {
	t.Helper()
	w := httptest.NewRecorder()
	ok := check(w, r)
	if ok {
		if w.Body.Len() != 0 || w.Code != http.StatusOK {
			t.Fatalf("a check that passed wrote %d %q", w.Code, w.Body)
		}
		return true, answer{}
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var body struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.JSONRPC != "2.0" {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	return false, answer{w.Code, body.Error.Code, body.Error.Message}
}

func request(method string, hdr map[string][]string) *http.Request {
	r := httptest.NewRequest(method, "/mcp", strings.NewReader("{}"))
	for k, v := range hdr {
		r.Header[http.CanonicalHeaderKey(k)] = v
	}
	return r
}

func TestCheckPOSTAndGETAccept(t *testing.T) {
	for _, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string][]string{}
			if tc.values != nil {
				hdr["Accept"] = tc.values
			}
			ok, a := run(t, CheckPOSTAccept, request(http.MethodPost, hdr))
			if ok != (tc.json && tc.stream) {
				t.Fatalf("POST passed: %v, want %v", ok, tc.json && tc.stream)
			}
			if !ok && (a.status != 406 || a.code != rpccode.InvalidRequest || !strings.Contains(a.msg, "application/json and text/event-stream")) {
				t.Fatalf("POST refused with %+v", a)
			}
			ok, a = run(t, CheckGETAccept, request(http.MethodGet, hdr))
			if ok != tc.stream {
				t.Fatalf("GET passed: %v, want %v", ok, tc.stream)
			}
			if !ok && (a.status != 406 || a.code != rpccode.InvalidRequest || !strings.Contains(a.msg, "text/event-stream")) {
				t.Fatalf("GET refused with %+v", a)
			}
		})
	}
}

func TestRefusalNamesWhatCame(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		says   string
	}{
		{"none", nil, "got none"},
		{"empty", []string{""}, "got none"},
		{"one", []string{"text/html"}, `got "text/html"`},
		{"every line", []string{"text/html", "image/png"}, `got "text/html, image/png"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, a := run(t, CheckPOSTAccept, request(http.MethodPost, map[string][]string{"Accept": tc.values}))
			if !strings.HasSuffix(a.msg, tc.says) {
				t.Fatalf("message %q does not end %q", a.msg, tc.says)
			}
		})
	}
}

func TestCheckContentType(t *testing.T) {
	for _, tc := range []struct {
		name string
		ct   []string
		ok   bool
	}{
		{"json", []string{"application/json"}, true},
		{"with charset", []string{"application/json; charset=utf-8"}, true},
		{"upper case", []string{"Application/JSON"}, true},
		{"missing", nil, false},
		{"empty", []string{""}, false},
		{"text", []string{"text/plain"}, false},
		{"json-seq", []string{"application/json-seq"}, false},
		{"unparsable", []string{"application/json; charset"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string][]string{}
			if tc.ct != nil {
				hdr["Content-Type"] = tc.ct
			}
			ok, a := run(t, CheckContentType, request(http.MethodPost, hdr))
			if ok != tc.ok {
				t.Fatalf("passed %v, want %v", ok, tc.ok)
			}
			if !ok && (a.status != 415 || a.code != rpccode.InvalidRequest || !strings.HasPrefix(a.msg, "Content-Type must be application/json; got ")) {
				t.Fatalf("refused with %+v", a)
			}
		})
	}
}

func TestCheckVersion(t *testing.T) {
	supported := []string{"2025-06-18", "2025-11-25"}
	for _, tc := range []struct {
		name    string
		version string
		ok      bool
	}{
		{"absent means 2025-03-26", "", true},
		{"listed", "2025-11-25", true},
		{"not listed", "2025-03-26", false},
		{"nonsense", "yesterday", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request(http.MethodPost, nil)
			if tc.version != "" {
				r.Header.Set("mcp-protocol-version", tc.version) // any spelling
			}
			ok, a := run(t, func(w http.ResponseWriter, r *http.Request) bool { return CheckVersion(w, r, []byte(`"a"`), supported) }, r)
			if ok != tc.ok {
				t.Fatalf("passed %v, want %v", ok, tc.ok)
			}
			if !ok && (a.status != 400 || a.code != rpccode.InvalidRequest || !strings.Contains(a.msg, `"`+tc.version+`"`) || !strings.Contains(a.msg, "2025-06-18, 2025-11-25")) {
				t.Fatalf("refused with %+v", a)
			}
		})
	}
}

func TestReadBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		ok     bool
		status int
		code   int
	}{
		{"within the limit", strings.Repeat("a", 16), true, 0, 0},
		{"over the limit", strings.Repeat("a", 17), false, 413, rpccode.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tc.body))
			var got []byte
			ok, a := run(t, func(w http.ResponseWriter, r *http.Request) bool {
				var ok bool
				got, ok = ReadBody(w, r, 16)
				return ok
			}, r)
			if ok != tc.ok || a.status != tc.status || a.code != tc.code {
				t.Fatalf("got %v %+v, want %v %d %d", ok, a, tc.ok, tc.status, tc.code)
			}
			if ok && string(got) != tc.body {
				t.Fatalf("body %q", got)
			}
		})
	}
}

func TestErrorBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   []byte
		code int
		msg  string
		want string
	}{
		{"null id", nil, rpccode.ParseError, "bad", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}`},
		{"string id", []byte(`"x-1"`), rpccode.SessionNotFound, "gone", `{"jsonrpc":"2.0","id":"x-1","error":{"code":-32001,"message":"gone"}}`},
		{"number id, text to escape", []byte("7"), rpccode.InvalidRequest, "a \"b\" <c>\n", `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"a \"b\" \u003cc\u003e\n"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(ErrorBody(tc.id, tc.code, tc.msg)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// The names read on every request are in canonical form, so that
// http.Header's Get needs no conversion (and no allocation).
func TestHeaderNamesCanonical(t *testing.T) {
	for _, name := range []string{HeaderSessionID, HeaderProtocolVersion, HeaderMethod, HeaderName, HeaderLastEventID} {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("%q is not canonical (%q)", name, c)
		}
	}
}
