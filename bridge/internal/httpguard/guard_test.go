package httpguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

const (
	extOrigin       = "chrome-extension://abcdefghijklmnopabcdefghijklmnop"
	inspectorOrigin = "http://localhost:6274"
	testToken       = "s3cret-token"
)

// baseOptions is a loopback bridge that two web origins may call.
func baseOptions() Options {
	return Options{
		ListenAddr:     "127.0.0.1:3456",
		AllowedOrigins: []string{extOrigin, inspectorOrigin},
	}
}

// nextHandler stands for the MCP endpoints: it reads the whole body, answers
// 413 itself when the guard's reader says it is too large, and otherwise
// answers 200 "ok <length>".
type nextHandler struct {
	mu    sync.Mutex
	calls int
}

func (n *nextHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	n.calls++
	n.mu.Unlock()
	if _, ok := w.(http.Flusher); !ok {
		mcphttp.WriteError(w, http.StatusInternalServerError, nil, -32603, "the guard hid http.Flusher")
		return
	}
	b, err := io.ReadAll(r.Body)
	if IsTooLarge(err) {
		mcphttp.WriteError(w, http.StatusRequestEntityTooLarge, nil, CodeRefused, "too large: "+err.Error())
		return
	}
	if err != nil {
		mcphttp.WriteError(w, http.StatusBadRequest, nil, CodeRefused, err.Error())
		return
	}
	fmt.Fprintf(w, "ok %d", len(b))
}

func (n *nextHandler) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls
}

// request describes one request a test case sends.
type request struct {
	method  string
	target  string // path and query; "/mcp" if empty
	host    string // "127.0.0.1:3456" if empty; "-" for an empty Host
	headers map[string]string
	body    string
	chunked bool // send the body with an unknown length
}

func (q request) build() *http.Request {
	method := q.method
	if method == "" {
		method = http.MethodPost
	}
	target := q.target
	if target == "" {
		target = "/mcp"
	}
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
		if q.chunked {
			body = io.MultiReader(body) // hides the length from NewRequest
		}
	}
	r := httptest.NewRequest(method, target, body)
	if q.chunked {
		r.ContentLength = -1
		r.TransferEncoding = []string{"chunked"}
	}
	switch q.host {
	case "":
		r.Host = "127.0.0.1:3456"
	case "-":
		r.Host = ""
	default:
		r.Host = q.host
	}
	for k, v := range q.headers {
		r.Header.Set(k, v)
	}
	return r
}

// rpcError is the body of a refusal.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// checkRefusal checks that rec holds a well-formed refusal whose message
// contains every string in wantMsg.
func checkRefusal(t *testing.T, rec *httptest.ResponseRecorder, wantMsg ...string) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var e rpcError
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("refusal body %q is not JSON: %v", rec.Body.String(), err)
	}
	if e.JSONRPC != "2.0" || string(e.ID) != "null" || e.Error.Code != CodeRefused {
		t.Errorf("refusal = %s, want jsonrpc 2.0, id null, code %d", rec.Body.String(), CodeRefused)
	}
	for _, w := range wantMsg {
		if !strings.Contains(e.Error.Message, w) {
			t.Errorf("message %q does not contain %q", e.Error.Message, w)
		}
	}
}

func TestGuard(t *testing.T) {
	withToken := func(o *Options) { o.Token = testToken }
	bearer := map[string]string{"Authorization": "Bearer " + testToken}

	tests := []struct {
		name       string
		opts       func(*Options)
		req        request
		wantStatus int
		wantNext   bool              // whether the request reached the next handler
		wantMsg    []string          // substrings of a refusal's message
		wantHeader map[string]string // "" means the header must be absent
	}{
		// Host.
		{name: "host/listen address", req: request{host: "127.0.0.1:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/localhost", req: request{host: "localhost:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/localhost upper case", req: request{host: "LocalHost:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/ipv6 loopback", req: request{host: "[::1]:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/rebinding name", req: request{host: "evil.example:3456"}, wantStatus: 403,
			wantMsg: []string{`"evil.example:3456"`, "is not this bridge", "DNS rebinding"}},
		{name: "host/rebinding name resolving to loopback", req: request{host: "127.0.0.1.nip.io:3456"}, wantStatus: 403,
			wantMsg: []string{"DNS rebinding"}},
		{name: "host/localhost with a trailing dot", req: request{host: "localhost.:3456"}, wantStatus: 403},
		{name: "host/rebinding name without port", req: request{host: "evil.example"}, wantStatus: 403},
		{name: "host/wrong port", req: request{host: "localhost:3457"}, wantStatus: 403},
		{name: "host/no port", req: request{host: "localhost"}, wantStatus: 403},
		{name: "host/empty", req: request{host: "-"}, wantStatus: 403},
		{name: "host/garbage", req: request{host: "localhost:3456/x"}, wantStatus: 403},
		{name: "host/allowed extra name with listen port",
			opts: func(o *Options) { o.AllowedHosts = []string{"Bridge.LAN"} },
			req:  request{host: "bridge.lan:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/allowed extra name without port",
			opts: func(o *Options) { o.AllowedHosts = []string{"bridge.lan"} },
			req:  request{host: "bridge.lan"}, wantStatus: 200, wantNext: true},
		{name: "host/allowed extra name on another port",
			opts: func(o *Options) { o.AllowedHosts = []string{"bridge.lan"} },
			req:  request{host: "bridge.lan:9999"}, wantStatus: 403},
		{name: "host/allowed extra host:port",
			opts: func(o *Options) { o.AllowedHosts = []string{"proxy.lan:8443"} },
			req:  request{host: "proxy.lan:8443"}, wantStatus: 200, wantNext: true},
		{name: "host/suffix: one label under it",
			opts: func(o *Options) { o.HostSuffixes = []string{"mcp.example.com"} },
			req:  request{host: "memory.mcp.example.com:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/suffix: without port",
			opts: func(o *Options) { o.HostSuffixes = []string{"mcp.example.com"} },
			req:  request{host: "Memory.MCP.example.com"}, wantStatus: 200, wantNext: true},
		{name: "host/suffix: two labels under it",
			opts: func(o *Options) { o.HostSuffixes = []string{"mcp.example.com"} },
			req:  request{host: "a.memory.mcp.example.com"}, wantStatus: 403},
		{name: "host/suffix: the suffix itself",
			opts: func(o *Options) { o.HostSuffixes = []string{"mcp.example.com"} },
			req:  request{host: "mcp.example.com"}, wantStatus: 403},
		{name: "host/suffix: another port",
			opts: func(o *Options) { o.HostSuffixes = []string{"mcp.example.com"} },
			req:  request{host: "memory.mcp.example.com:9999"}, wantStatus: 403},
		{name: "host/suffix: look-alike",
			opts: func(o *Options) { o.HostSuffixes = []string{"mcp.example.com"} },
			req:  request{host: "memory.evilmcp.example.com"}, wantStatus: 403},
		{name: "host/ipv6 listen, ipv6 host",
			opts: func(o *Options) { o.ListenAddr = "[::1]:3456" },
			req:  request{host: "[::1]:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/ipv6 listen, long-form ipv6 host",
			opts: func(o *Options) { o.ListenAddr = "[::1]:3456" },
			req:  request{host: "[0:0:0:0:0:0:0:1]:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/ipv6 listen, localhost",
			opts: func(o *Options) { o.ListenAddr = "[::1]:3456" },
			req:  request{host: "localhost:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/ipv6 listen, rebinding name",
			opts: func(o *Options) { o.ListenAddr = "[::1]:3456" },
			req:  request{host: "evil.example:3456"}, wantStatus: 403},
		{name: "host/localhost listen",
			opts: func(o *Options) { o.ListenAddr = "localhost:3456" },
			req:  request{host: "127.0.0.1:3456"}, wantStatus: 200, wantNext: true},
		{name: "host/port 80 listen accepts no port",
			opts: func(o *Options) { o.ListenAddr = "127.0.0.1:80" },
			req:  request{host: "localhost"}, wantStatus: 200, wantNext: true},
		{name: "host/all interfaces with token accepts any host",
			opts: func(o *Options) { o.ListenAddr = "0.0.0.0:3456"; o.Token = testToken },
			req:  request{host: "machine.lan:3456", headers: bearer}, wantStatus: 200, wantNext: true},
		{name: "host/LAN address with token",
			opts: func(o *Options) { o.ListenAddr = "192.168.1.5:3456"; o.Token = testToken },
			req:  request{host: "192.168.1.5:3456", headers: bearer}, wantStatus: 200, wantNext: true},
		{name: "host/LAN address with token refuses a rebinding name",
			opts: func(o *Options) { o.ListenAddr = "192.168.1.5:3456"; o.Token = testToken },
			req:  request{host: "evil.example:3456", headers: bearer}, wantStatus: 403},

		// Origin and CORS.
		{name: "origin/absent", req: request{}, wantStatus: 200, wantNext: true,
			wantHeader: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "origin/allowed extension", req: request{headers: map[string]string{"Origin": extOrigin}},
			wantStatus: 200, wantNext: true,
			wantHeader: map[string]string{
				"Access-Control-Allow-Origin":   extOrigin,
				"Access-Control-Expose-Headers": "Mcp-Session-Id",
				"Vary":                          "Origin",
				"Access-Control-Allow-Methods":  "",
			}},
		{name: "origin/allowed, other case", req: request{headers: map[string]string{"Origin": "HTTP://LOCALHOST:6274"}},
			wantStatus: 200, wantNext: true,
			wantHeader: map[string]string{"Access-Control-Allow-Origin": "HTTP://LOCALHOST:6274"}},
		{name: "origin/refused", req: request{headers: map[string]string{"Origin": "https://evil.example"}},
			wantStatus: 403, wantMsg: []string{`"https://evil.example"`, `"allowed_origins"`},
			wantHeader: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "origin/refused, other port", req: request{headers: map[string]string{"Origin": "http://localhost:6275"}},
			wantStatus: 403},
		{name: "origin/null", req: request{headers: map[string]string{"Origin": "null"}},
			wantStatus: 403, wantMsg: []string{"Origin: null", "allowed_origins"}},
		{name: "origin/the bridge's own origin", req: request{host: "127.0.0.1:3456", headers: map[string]string{"Origin": "http://127.0.0.1:3456"}},
			wantStatus: 200, wantNext: true, wantHeader: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "origin/own origin still needs the token",
			opts: func(o *Options) { o.Token = testToken },
			req:  request{host: "localhost:3456", headers: map[string]string{"Origin": "http://localhost:3456"}}, wantStatus: 401},
		{name: "origin/own host but https is another origin", req: request{host: "localhost:3456", headers: map[string]string{"Origin": "https://localhost:3456"}},
			wantStatus: 403},
		{name: "origin/empty", req: request{headers: map[string]string{"Origin": ""}}, wantStatus: 403},
		{name: "origin/none configured",
			opts: func(o *Options) { o.AllowedOrigins = nil },
			req:  request{headers: map[string]string{"Origin": extOrigin}}, wantStatus: 403},
		{name: "origin/checked after host",
			req:        request{host: "evil.example:3456", headers: map[string]string{"Origin": extOrigin}},
			wantStatus: 403, wantMsg: []string{"DNS rebinding"}},
		{name: "preflight/allowed",
			req: request{method: http.MethodOptions, headers: map[string]string{
				"Origin": inspectorOrigin, "Access-Control-Request-Method": "POST",
				"Access-Control-Request-Headers": "content-type,mcp-session-id"}},
			wantStatus: 204,
			wantHeader: map[string]string{
				"Access-Control-Allow-Origin":   inspectorOrigin,
				"Vary":                          "Origin",
				"Access-Control-Allow-Methods":  "GET, POST, DELETE, OPTIONS",
				"Access-Control-Allow-Headers":  "Content-Type, Authorization, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name",
				"Access-Control-Expose-Headers": "Mcp-Session-Id",
				"Access-Control-Max-Age":        "600",
			}},
		{name: "preflight/allowed needs no token", opts: withToken,
			req: request{method: http.MethodOptions, headers: map[string]string{
				"Origin": extOrigin, "Access-Control-Request-Method": "POST"}},
			wantStatus: 204, wantHeader: map[string]string{"Access-Control-Allow-Origin": extOrigin}},
		{name: "preflight/refused origin",
			req: request{method: http.MethodOptions, headers: map[string]string{
				"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}},
			wantStatus: 403, wantHeader: map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": ""}},
		{name: "preflight/bad host",
			req: request{method: http.MethodOptions, host: "evil.example:3456", headers: map[string]string{
				"Origin": extOrigin, "Access-Control-Request-Method": "POST"}},
			wantStatus: 403},
		{name: "options without origin is passed on", req: request{method: http.MethodOptions},
			wantStatus: 200, wantNext: true},

		// Token.
		{name: "token/none configured, none sent", req: request{}, wantStatus: 200, wantNext: true},
		{name: "token/right", opts: withToken, req: request{headers: bearer}, wantStatus: 200, wantNext: true},
		{name: "token/right, scheme in lower case", opts: withToken,
			req: request{headers: map[string]string{"Authorization": "bearer " + testToken}}, wantStatus: 200, wantNext: true},
		{name: "token/missing", opts: withToken, req: request{}, wantStatus: 401,
			wantMsg:    []string{"Authorization: Bearer", `"token"`, "BROWSERBRIDGE_TOKEN"},
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="browserbridge"`}},
		{name: "token/wrong", opts: withToken,
			req:        request{headers: map[string]string{"Authorization": "Bearer " + testToken + "x"}},
			wantStatus: 401, wantMsg: []string{"wrong"},
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="browserbridge"`}},
		{name: "token/prefix of the right one", opts: withToken,
			req:        request{headers: map[string]string{"Authorization": "Bearer " + testToken[:4]}},
			wantStatus: 401},
		{name: "token/empty bearer", opts: withToken,
			req: request{headers: map[string]string{"Authorization": "Bearer "}}, wantStatus: 401},
		{name: "token/basic scheme", opts: withToken,
			req:        request{headers: map[string]string{"Authorization": "Basic " + testToken}},
			wantStatus: 401, wantMsg: []string{"not a bearer token"},
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="browserbridge"`}},
		{name: "token/in query is not accepted", opts: withToken,
			req:        request{target: "/mcp?token=" + testToken},
			wantStatus: 401, wantMsg: []string{"never in the URL"},
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="browserbridge"`}},
		{name: "token/in query as access_token is not accepted", opts: withToken,
			req:        request{method: http.MethodGet, target: "/sse?access_token=" + testToken},
			wantStatus: 401, wantMsg: []string{"never in the URL"}},
		{name: "token/refusal carries CORS headers for an allowed origin", opts: withToken,
			req:        request{headers: map[string]string{"Origin": extOrigin}},
			wantStatus: 401, wantHeader: map[string]string{"Access-Control-Allow-Origin": extOrigin}},
		{name: "token/health GET is exempt", opts: withToken,
			req: request{method: http.MethodGet, target: "/health"}, wantStatus: 200, wantNext: true},
		{name: "token/health HEAD is exempt", opts: withToken,
			req: request{method: http.MethodHead, target: "/health"}, wantStatus: 200, wantNext: true},
		{name: "token/health POST is not exempt", opts: withToken,
			req: request{method: http.MethodPost, target: "/health"}, wantStatus: 401},
		{name: "token/other paths are not exempt", opts: withToken,
			req: request{method: http.MethodGet, target: "/healthz"}, wantStatus: 401},
		{name: "token/tools is not exempt", opts: withToken,
			req: request{method: http.MethodGet, target: "/tools"}, wantStatus: 401},
		{name: "token/health is not exempt from the host check", opts: withToken,
			req:        request{method: http.MethodGet, target: "/health", host: "evil.example:3456"},
			wantStatus: 403, wantMsg: []string{"DNS rebinding"}},
		{name: "token/health is not exempt from the origin check", opts: withToken,
			req:        request{method: http.MethodGet, target: "/health", headers: map[string]string{"Origin": "https://evil.example"}},
			wantStatus: 403, wantMsg: []string{"allowed_origins"}},

		// Body.
		{name: "body/under the limit",
			opts: func(o *Options) { o.MaxBodyBytes = 16 },
			req:  request{body: strings.Repeat("x", 15)}, wantStatus: 200, wantNext: true},
		{name: "body/at the limit",
			opts: func(o *Options) { o.MaxBodyBytes = 16 },
			req:  request{body: strings.Repeat("x", 16)}, wantStatus: 200, wantNext: true},
		{name: "body/Content-Length over the limit",
			opts: func(o *Options) { o.MaxBodyBytes = 16 },
			req:  request{body: strings.Repeat("x", 17)}, wantStatus: 413,
			wantMsg: []string{"17 bytes", "at most 16 bytes"}},
		{name: "body/chunked over the limit",
			opts: func(o *Options) { o.MaxBodyBytes = 16 },
			req:  request{body: strings.Repeat("x", 64), chunked: true}, wantStatus: 413, wantNext: true,
			wantMsg: []string{"too large"}},
		{name: "body/chunked at the limit",
			opts: func(o *Options) { o.MaxBodyBytes = 16 },
			req:  request{body: strings.Repeat("x", 16), chunked: true}, wantStatus: 200, wantNext: true},
		{name: "body/default limit is 4 MiB",
			req:        request{body: strings.Repeat("x", 4<<20+1)},
			wantStatus: 413, wantMsg: []string{"4194304 bytes (4 MiB)"}},
		{name: "body/default limit admits 4 MiB",
			req:        request{body: strings.Repeat("x", 4<<20)},
			wantStatus: 200, wantNext: true},
		{name: "body/checked after the token",
			opts: func(o *Options) { o.MaxBodyBytes = 16; o.Token = testToken },
			req:  request{body: strings.Repeat("x", 17)}, wantStatus: 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := baseOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			next := &nextHandler{}
			h, err := New(opts, next)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tc.req.build())

			if rec.Code != tc.wantStatus {
				t.Errorf("status = %d, want %d; body %s", rec.Code, tc.wantStatus, rec.Body.String())
			}
			if got := next.count() == 1; got != tc.wantNext {
				t.Errorf("next handler called = %v, want %v", got, tc.wantNext)
			}
			if rec.Code >= 400 {
				checkRefusal(t, rec, tc.wantMsg...)
			}
			for k, want := range tc.wantHeader {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestNew(t *testing.T) {
	anyOrigin := func(*http.Request) BrowserPolicy { return AnyOrigin }
	tests := []struct {
		name    string
		opts    Options
		wantErr []string // substrings of the error; nil means no error
		wantIs  error
	}{
		{name: "loopback IPv4 without token", opts: Options{ListenAddr: "127.0.0.1:3456"}},
		{name: "loopback IPv6 without token", opts: Options{ListenAddr: "[::1]:3456"}},
		{name: "localhost without token", opts: Options{ListenAddr: "localhost:3456"}},
		{name: "other loopback address without token", opts: Options{ListenAddr: "127.0.0.2:3456"}},
		{name: "LAN address with token", opts: Options{ListenAddr: "192.168.1.5:3456", Token: testToken}},
		{name: "all interfaces with token", opts: Options{ListenAddr: "0.0.0.0:3456", Token: testToken}},
		{name: "LAN address without token", opts: Options{ListenAddr: "192.168.1.5:3456"},
			wantErr: []string{`"192.168.1.5:3456"`, "not a loopback address", `"token"`, "BROWSERBRIDGE_TOKEN"}, wantIs: ErrTokenRequired},
		{name: "all IPv4 interfaces without token", opts: Options{ListenAddr: "0.0.0.0:3456"},
			wantErr: []string{`"token"`, "BROWSERBRIDGE_TOKEN"}, wantIs: ErrTokenRequired},
		{name: "all IPv6 interfaces without token", opts: Options{ListenAddr: "[::]:3456"}, wantIs: ErrTokenRequired},
		{name: "empty host without token", opts: Options{ListenAddr: ":3456"}, wantIs: ErrTokenRequired},
		{name: "host name without token", opts: Options{ListenAddr: "machine.lan:3456"}, wantIs: ErrTokenRequired},
		{name: "empty listen address", opts: Options{}, wantErr: []string{"listen address is empty"}},
		{name: "listen address without port", opts: Options{ListenAddr: "127.0.0.1"}, wantErr: []string{"missing port"}},
		{name: "port 0", opts: Options{ListenAddr: "127.0.0.1:0"}, wantErr: []string{"port 0", "1 to 65535"}},
		{name: "token with spaces", opts: Options{ListenAddr: "127.0.0.1:3456", Token: " x "}, wantErr: []string{"white space"}},
		{name: "origin null", opts: Options{ListenAddr: "127.0.0.1:3456", AllowedOrigins: []string{"null"}},
			wantErr: []string{"allowed_origins", `"null"`}},
		{name: "origin wildcard", opts: Options{ListenAddr: "127.0.0.1:3456", AllowedOrigins: []string{"*"}},
			wantErr: []string{"allowed_origins", "scheme://host"}},
		{name: "origin with path", opts: Options{ListenAddr: "127.0.0.1:3456", AllowedOrigins: []string{"https://a.example/x"}},
			wantErr: []string{"allowed_origins"}},
		{name: "origin with trailing slash", opts: Options{ListenAddr: "127.0.0.1:3456", AllowedOrigins: []string{extOrigin + "/"}}},
		{name: "bad allowed host", opts: Options{ListenAddr: "127.0.0.1:3456", AllowedHosts: []string{"a/b"}},
			wantErr: []string{`allowed host "a/b"`}},
		{name: "bare IPv6 allowed host", opts: Options{ListenAddr: "127.0.0.1:3456", AllowedHosts: []string{"fe80::1"}},
			wantErr: []string{"allowed host"}},
		{name: "negative body limit", opts: Options{ListenAddr: "127.0.0.1:3456", MaxBodyBytes: -1}, wantErr: []string{"MaxBodyBytes"}},
		{name: "negative rate", opts: Options{ListenAddr: "127.0.0.1:3456", RatePerSecond: -1}, wantErr: []string{"RatePerSecond"}},
		{name: "NaN rate", opts: Options{ListenAddr: "127.0.0.1:3456", RatePerSecond: math.NaN()}, wantErr: []string{"RatePerSecond"}},
		{name: "infinite rate", opts: Options{ListenAddr: "127.0.0.1:3456", RatePerSecond: math.Inf(1)}, wantErr: []string{"RatePerSecond"}},
		{name: "negative burst", opts: Options{ListenAddr: "127.0.0.1:3456", RatePerSecond: 1, Burst: -1}, wantErr: []string{"Burst"}},
		{name: "all interfaces authenticated by another layer", opts: Options{ListenAddr: "0.0.0.0:3456", AuthenticatedBy: "OAuth"}},
		{name: "authenticated by another layer and a token", opts: Options{ListenAddr: "0.0.0.0:3456", AuthenticatedBy: "OAuth", Token: testToken},
			wantErr: []string{"authenticated by OAuth", `"token"`, "second way in", "BROWSERBRIDGE_TOKEN"}},
		{name: "browser policy without authentication", opts: Options{ListenAddr: "127.0.0.1:3456", Browsers: anyOrigin},
			wantErr: []string{"Browsers", "Token or AuthenticatedBy"}},
		{name: "browser policy with a token", opts: Options{ListenAddr: "127.0.0.1:3456", Token: testToken, Browsers: anyOrigin}},
		{name: "browser policy authenticated by another layer", opts: Options{ListenAddr: "127.0.0.1:3456", AuthenticatedBy: "OAuth", Browsers: anyOrigin}},
		{name: "trusted proxies", opts: Options{ListenAddr: "127.0.0.1:3456", TrustedProxies: []netip.Prefix{
			netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("fd00::/8")}}},
		{name: "trusting every IPv4 address", opts: Options{ListenAddr: "127.0.0.1:3456", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}},
			wantErr: []string{"TrustedProxies[0]", "every address"}},
		{name: "trusting every IPv6 address", opts: Options{ListenAddr: "127.0.0.1:3456", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::/0")}},
			wantErr: []string{"every address"}},
		{name: "trusting every mapped IPv4 address", opts: Options{ListenAddr: "127.0.0.1:3456", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:0.0.0.0/96")}},
			wantErr: []string{"every address"}},
		{name: "an invalid trusted prefix", opts: Options{ListenAddr: "127.0.0.1:3456", TrustedProxies: []netip.Prefix{{}}},
			wantErr: []string{"TrustedProxies[0]", "not a valid prefix"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(tc.opts, http.NotFoundHandler())
			if tc.wantErr == nil && tc.wantIs == nil {
				if err != nil || h == nil {
					t.Fatalf("New = %v, %v; want a handler", h, err)
				}
				return
			}
			if err == nil {
				t.Fatal("New succeeded; want an error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q is not %v", err, tc.wantIs)
			}
		})
	}

	t.Run("nil next handler", func(t *testing.T) {
		if _, err := New(baseOptions(), nil); err == nil {
			t.Error("New accepted a nil handler")
		}
	})
}

// fakeClock is a settable clock for the rate limiter.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestRateLimit(t *testing.T) {
	type step struct {
		advance         time.Duration // before the request
		session         string        // Mcp-Session-Id header
		query           string        // appended to /mcp
		remote          string        // RemoteAddr; "192.0.2.1:1234" by default
		wantStatus      int
		wantRetryAfter  string
		wantRetryInBody string
	}
	tests := []struct {
		name  string
		rate  float64
		burst int
		steps []step
	}{
		{name: "burst, refusal, recovery", rate: 1, burst: 2, steps: []step{
			{wantStatus: 200},
			{wantStatus: 200},
			{wantStatus: 429, wantRetryAfter: "1", wantRetryInBody: "retry after 1 second."},
			{advance: 500 * time.Millisecond, wantStatus: 429, wantRetryAfter: "1"},
			{advance: 500 * time.Millisecond, wantStatus: 200},
			{wantStatus: 429, wantRetryAfter: "1"},
			{advance: 10 * time.Second, wantStatus: 200}, // refilled to the burst, not beyond
			{wantStatus: 200},
			{wantStatus: 429},
		}},
		{name: "Retry-After rounds up to whole seconds", rate: 0.25, burst: 1, steps: []step{
			{wantStatus: 200},
			{wantStatus: 429, wantRetryAfter: "4", wantRetryInBody: "retry after 4 seconds."},
			{advance: 3900 * time.Millisecond, wantStatus: 429, wantRetryAfter: "1"},
			{advance: 100 * time.Millisecond, wantStatus: 200},
		}},
		{name: "burst 0 means the rate rounded up", rate: 2.5, steps: []step{
			{wantStatus: 200}, {wantStatus: 200}, {wantStatus: 200},
			{wantStatus: 429, wantRetryAfter: "1"},
		}},
		{name: "an invented Mcp-Session-Id does not escape the address's limit", rate: 1, burst: 1, steps: []step{
			{session: "a", wantStatus: 200},
			{session: "b", wantStatus: 429},
			{session: "c", wantStatus: 429},
			{wantStatus: 429},
		}},
		{name: "an invented ?sessionId= does not escape the address's limit", rate: 1, burst: 1, steps: []step{
			{query: "?sessionId=abc", wantStatus: 200},
			{query: "?sessionId=def", wantStatus: 429},
			{query: "?sessionId=ghi", session: "jkl", wantStatus: 429},
		}},
		{name: "IP addresses have their own buckets", rate: 1, burst: 1, steps: []step{
			{remote: "192.0.2.1:1000", wantStatus: 200},
			{remote: "192.0.2.1:2000", wantStatus: 429}, // another port, same client
			{remote: "192.0.2.2:1000", wantStatus: 200},
			{remote: "[::ffff:192.0.2.2]:1000", wantStatus: 429}, // IPv4 in IPv6 is the same address
			{remote: "[::1]:1000", wantStatus: 200},              // loopback: its own limit, here none
			{remote: "127.0.0.1:1000", wantStatus: 200},
		}},
		{name: "an IPv6 /64 is one peer", rate: 1, burst: 1, steps: []step{
			{remote: "[2001:db8:1:2::1]:1000", wantStatus: 200},
			{remote: "[2001:db8:1:2:ffff::9]:1000", wantStatus: 429},
			{remote: "[fe80::1%eth0]:1000", wantStatus: 200},
			{remote: "[2001:db8:1:3::1]:1000", wantStatus: 200},
		}},
		{name: "a RemoteAddr that is not ip:port is one peer beyond loopback", rate: 1, burst: 1, steps: []step{
			{remote: "@", wantStatus: 200},
			{remote: "pipe", wantStatus: 429},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			opts := baseOptions()
			opts.RatePerSecond, opts.Burst, opts.Now = tc.rate, tc.burst, clock.Now
			h, err := New(opts, &nextHandler{})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				clock.Advance(s.advance)
				r := request{method: http.MethodGet, target: "/mcp" + s.query}.build()
				if s.session != "" {
					r.Header.Set("Mcp-Session-Id", s.session)
				}
				r.RemoteAddr = "192.0.2.1:1234"
				if s.remote != "" {
					r.RemoteAddr = s.remote
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				if rec.Code != s.wantStatus {
					t.Fatalf("step %d: status = %d, want %d; body %s", i, rec.Code, s.wantStatus, rec.Body.String())
				}
				if rec.Code == http.StatusTooManyRequests {
					checkRefusal(t, rec, "Too many requests")
					if ra := rec.Header().Get("Retry-After"); ra == "" || ra == "0" {
						t.Errorf("step %d: Retry-After = %q, want at least 1", i, ra)
					}
				}
				if s.wantRetryAfter != "" {
					if ra := rec.Header().Get("Retry-After"); ra != s.wantRetryAfter {
						t.Errorf("step %d: Retry-After = %q, want %q", i, ra, s.wantRetryAfter)
					}
				}
				if s.wantRetryInBody != "" && !strings.Contains(rec.Body.String(), s.wantRetryInBody) {
					t.Errorf("step %d: body %s does not contain %q", i, rec.Body.String(), s.wantRetryInBody)
				}
			}
		})
	}
}

func TestRateLimitNoLimit(t *testing.T) {
	h, err := New(baseOptions(), &nextHandler{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request{method: http.MethodGet}.build())
		if rec.Code != 200 {
			t.Fatalf("request %d: status %d with no rate limit", i, rec.Code)
		}
	}
}

func TestLimiterEviction(t *testing.T) {
	t.Run("the table is bounded and drops the least recently used", func(t *testing.T) {
		clock := newFakeClock()
		l := NewLimiter[string](1, 1, 0, 100, clock.Now)
		l.Reserve("first")
		l.Reserve("kept")
		for i := range 98 {
			l.Reserve(fmt.Sprint("client-", i))
		}
		if n := l.size(); n != 100 {
			t.Fatalf("size = %d, want 100", n)
		}
		if _, ok := l.Reserve("kept"); ok { // used again: now the most recent
			t.Fatal("a second request at once passed a burst of 1")
		}
		for i := range 150 {
			l.Reserve(fmt.Sprint("new-", i))
			if n := l.size(); n > 100 {
				t.Fatalf("size = %d after %d new keys, want at most 100", n, i+1)
			}
			if i == 0 {
				l.mu.Lock()
				_, first := l.index["first"]
				_, kept := l.index["kept"]
				l.mu.Unlock()
				if first || !kept {
					t.Fatalf("after one eviction: first kept %v, kept kept %v; want the least recently used (first) gone", first, kept)
				}
			}
		}
		checkList(t, l)
	})
	t.Run("a forgotten client starts with a full bucket", func(t *testing.T) {
		clock := newFakeClock()
		l := NewLimiter[string](1, 2, 0, 2, clock.Now)
		l.Reserve("a")
		l.Reserve("a")
		if _, ok := l.Reserve("a"); ok {
			t.Fatal("third request passed a burst of 2")
		}
		l.Reserve("b")
		l.Reserve("c") // evicts a
		if _, ok := l.Reserve("a"); !ok {
			t.Fatal("a forgotten client was refused")
		}
	})
	t.Run("a clock stepping back refills nothing", func(t *testing.T) {
		clock := newFakeClock()
		l := NewLimiter[string](1, 1, 0, maxClients, clock.Now)
		if _, ok := l.Reserve("a"); !ok {
			t.Fatal("first request refused")
		}
		clock.Advance(-time.Hour)
		if _, ok := l.Reserve("a"); ok {
			t.Fatal("a clock stepping back refilled the bucket")
		}
		clock.Advance(time.Hour + time.Second)
		if _, ok := l.Reserve("a"); !ok {
			t.Fatal("request refused a second after the first")
		}
	})
}

// checkList checks that the limiter's list runs through every slot once,
// both ways, and agrees with its index.
func checkList[K comparable](t *testing.T, l *Limiter[K]) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := make(map[int32]bool)
	prev := int32(-1)
	for i := l.head; i >= 0; i = l.slots[i].next {
		if seen[i] {
			t.Fatalf("slot %d twice in the list", i)
		}
		seen[i] = true
		if l.slots[i].prev != prev {
			t.Fatalf("slot %d: prev = %d, want %d", i, l.slots[i].prev, prev)
		}
		if j, ok := l.index[l.slots[i].key]; !ok || j != i {
			t.Fatalf("slot %d is indexed at %d (%v)", i, j, ok)
		}
		prev = i
	}
	if prev != l.tail {
		t.Fatalf("the list ends at %d, the tail is %d", prev, l.tail)
	}
	if len(seen) != len(l.index) || len(seen) != len(l.slots) {
		t.Fatalf("%d slots listed, %d indexed, %d allocated", len(seen), len(l.index), len(l.slots))
	}
}

func TestConcurrentRequests(t *testing.T) {
	opts := baseOptions()
	opts.Token = testToken
	opts.RatePerSecond, opts.Burst = 1e6, 1e6
	next := &nextHandler{}
	h, err := New(opts, next)
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				r := request{body: `{"jsonrpc":"2.0"}`, headers: map[string]string{
					"Authorization": "Bearer " + testToken, "Origin": extOrigin,
					"Mcp-Session-Id": fmt.Sprint("s", (w+i)%5)}}.build()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				if rec.Code != 200 {
					t.Errorf("status %d: %s", rec.Code, rec.Body.String())
					return
				}
			}
		})
	}
	wg.Wait()
	if n := next.count(); n != workers*each {
		t.Errorf("next called %d times, want %d", n, workers*each)
	}
}

// TestOverHTTP runs the guard in a real server, so the body limit meets a
// real chunked request and Host comes from the wire.
func TestOverHTTP(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	opts := baseOptions()
	opts.ListenAddr = srv.Listener.Addr().String()
	opts.Token = testToken
	opts.MaxBodyBytes = 1024
	h, err := New(opts, &nextHandler{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)

	tests := []struct {
		name       string
		body       io.Reader
		host       string
		wantStatus int
	}{
		{name: "small body", body: strings.NewReader("hello"), wantStatus: 200},
		{name: "chunked over the limit", body: io.MultiReader(strings.NewReader(strings.Repeat("x", 4096))), wantStatus: 413},
		{name: "Content-Length over the limit", body: bytes.NewReader(make([]byte, 4096)), wantStatus: 413},
		{name: "rebinding host", body: strings.NewReader("hello"), host: "evil.example", wantStatus: 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				b, _ := io.ReadAll(resp.Body)
				t.Errorf("status = %d, want %d; body %s", resp.StatusCode, tc.wantStatus, b)
			}
		})
	}
}

func TestLogging(t *testing.T) {
	var buf bytes.Buffer
	opts := baseOptions()
	opts.Token = testToken
	opts.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	h, err := New(opts, &nextHandler{})
	if err != nil {
		t.Fatal(err)
	}

	r := request{target: "/mcp?token=" + testToken + "x", headers: map[string]string{"Origin": extOrigin}}.build()
	h.ServeHTTP(httptest.NewRecorder(), r)
	line := buf.String()
	for _, want := range []string{"request refused", "reason=unauthorized", "status=401", "path=/mcp", "origin=" + extOrigin} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q does not contain %q", line, want)
		}
	}
	if strings.Contains(line, testToken) {
		t.Errorf("log %q holds the token", line)
	}

	buf.Reset()
	h.ServeHTTP(httptest.NewRecorder(), request{headers: map[string]string{"Authorization": "Bearer " + testToken}}.build())
	if buf.Len() != 0 {
		t.Errorf("an accepted request was logged: %q", buf.String())
	}
}

func TestIsTooLarge(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "other error", err: io.ErrUnexpectedEOF, want: false},
		{name: "MaxBytesError", err: &http.MaxBytesError{Limit: 1}, want: true},
		{name: "wrapped MaxBytesError", err: fmt.Errorf("decoding request: %w", &http.MaxBytesError{Limit: 1}), want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsTooLarge(tc.err); got != tc.want {
				t.Errorf("IsTooLarge(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
