package httpguard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// publicOptions is a guard in front of an OAuth-protected server on every
// interface, as the public gateway uses it: /mcp takes any origin (its
// bearer token is the credential), /oauth/ pages check their own forms,
// everything else is checked as on the local bridge.
func publicOptions() Options {
	return Options{
		ListenAddr:      "0.0.0.0:3456",
		AllowedHosts:    []string{"mcp.example.com"},
		AllowedOrigins:  []string{inspectorOrigin},
		AuthenticatedBy: "OAuth",
		Browsers: func(r *http.Request) BrowserPolicy {
			switch {
			case r.URL.Path == "/mcp":
				return AnyOrigin
			case strings.HasPrefix(r.URL.Path, "/oauth/"):
				return HandlerChecksBrowsers
			}
			return CheckBrowsers
		},
	}
}

func TestBrowserPolicy(t *testing.T) {
	const host = "mcp.example.com"
	crossSite := func(origin string) map[string]string {
		return map[string]string{"Origin": origin, "Sec-Fetch-Site": "cross-site"}
	}
	preflight := map[string]string{"Origin": extOrigin, "Sec-Fetch-Site": "cross-site",
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version"}
	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantNext   bool
		wantCORS   string   // Access-Control-Allow-Origin; "" = none
		wantHeader []string // "Name: substring" pairs
		wantMsg    []string // for refusals
	}{
		// AnyOrigin (/mcp).
		{name: "extension origin", req: request{target: "/mcp", host: host, headers: crossSite(extOrigin)},
			wantStatus: 200, wantNext: true, wantCORS: extOrigin,
			wantHeader: []string{"Access-Control-Expose-Headers: Mcp-Session-Id", "Access-Control-Expose-Headers: WWW-Authenticate", "Vary: Origin"}},
		{name: "any web origin", req: request{target: "/mcp", host: host, headers: crossSite("https://client.example")},
			wantStatus: 200, wantNext: true, wantCORS: "https://client.example"},
		{name: "opaque origin", req: request{target: "/mcp", host: host, headers: crossSite("null")},
			wantStatus: 200, wantNext: true, wantCORS: "null"},
		{name: "preflight answered here", req: request{method: http.MethodOptions, target: "/mcp", host: host, headers: preflight},
			wantStatus: 204, wantCORS: extOrigin,
			wantHeader: []string{"Access-Control-Allow-Headers: Authorization", "Access-Control-Allow-Headers: Mcp-Session-Id",
				"Access-Control-Allow-Methods: POST", "Access-Control-Expose-Headers: WWW-Authenticate"}},
		{name: "no Origin: not a page, no CORS", req: request{target: "/mcp", host: host},
			wantStatus: 200, wantNext: true},
		{name: "a value that is no origin gets no CORS", req: request{target: "/mcp", host: host, headers: map[string]string{"Origin": "not an origin"}},
			wantStatus: 200, wantNext: true},
		{name: "Host still checked", req: request{target: "/mcp", host: "attacker.example", headers: crossSite(extOrigin)},
			wantStatus: 403, wantMsg: []string{"DNS rebinding"}},

		// HandlerChecksBrowsers (/oauth/).
		{name: "sign-in form posted with Origin null", req: request{target: "/oauth/signin", host: host,
			headers: map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}},
			wantStatus: 200, wantNext: true},
		{name: "authorize page opened from another site", req: request{method: http.MethodGet, target: "/oauth/authorize", host: host,
			headers: map[string]string{"Sec-Fetch-Site": "cross-site"}},
			wantStatus: 200, wantNext: true},
		{name: "the handler's own pages get no CORS from the guard", req: request{target: "/oauth/signin", host: host, headers: crossSite(extOrigin)},
			wantStatus: 200, wantNext: true},
		{name: "a preflight goes to the handler", req: request{method: http.MethodOptions, target: "/oauth/signin", host: host, headers: preflight},
			wantStatus: 200, wantNext: true},

		// CheckBrowsers (anything else), as on the local bridge.
		{name: "checked route refuses another origin", req: request{method: http.MethodGet, target: "/health", host: host, headers: crossSite("https://attacker.example")},
			wantStatus: 403, wantMsg: []string{"allowed_origins"}},
		{name: "checked route refuses a cross-site request", req: request{method: http.MethodGet, target: "/servers/", host: host,
			headers: map[string]string{"Sec-Fetch-Site": "cross-site"}},
			wantStatus: 403, wantMsg: []string{"cross-site"}},
		{name: "checked route takes an allowed origin", req: request{method: http.MethodGet, target: "/servers/", host: host, headers: crossSite(inspectorOrigin)},
			wantStatus: 200, wantNext: true, wantCORS: inspectorOrigin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := &nextHandler{}
			h, err := New(publicOptions(), next)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tc.req.build())
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body)
			}
			if got := next.count() == 1; got != tc.wantNext {
				t.Errorf("handler called: %v, want %v", got, tc.wantNext)
			}
			if got := rec.Header().Get("Access-Control-Allow-Origin"); got != tc.wantCORS {
				t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, tc.wantCORS)
			}
			if got := rec.Header().Get("Access-Control-Allow-Credentials"); got != "" {
				t.Errorf("Access-Control-Allow-Credentials = %q: no route lets a page use the browser's credentials", got)
			}
			for _, hv := range tc.wantHeader {
				name, sub, _ := strings.Cut(hv, ": ")
				if got := strings.Join(rec.Header().Values(name), ", "); !strings.Contains(got, sub) {
					t.Errorf("%s = %q, want it to contain %q", name, got, sub)
				}
			}
			if tc.wantMsg != nil {
				checkRefusal(t, rec, tc.wantMsg...)
			}
		})
	}
}

// TestAuthenticatedByHosts: a guard on every interface whose requests
// another layer authenticates still accepts only the Host names it knows,
// unlike a token-protected one (which takes any Host, since the token is
// required anyway).
func TestAuthenticatedByHosts(t *testing.T) {
	h, err := New(publicOptions(), &nextHandler{})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{
		"mcp.example.com":      200,
		"mcp.example.com:3456": 200,
		"127.0.0.1:3456":       200,
		"localhost:3456":       200,
		"attacker.example":     403,
		"mcp.example.com:8080": 403,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request{method: http.MethodGet, target: "/health", host: host}.build())
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
	}
}
