package httpguard

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSecFetchSite(t *testing.T) {
	const crossSiteMsg = "Sec-Fetch-Site: cross-site"
	tests := []struct {
		name    string
		method  string
		target  string
		site    string // "" for no header
		origin  string
		want    int
		wantMsg string
	}{
		// Values a browser sends.
		{name: "absent: not a browser", site: "", want: 200},
		{name: "none: typed by the user", site: "none", want: 200},
		{name: "same-origin", site: "same-origin", want: 200},
		{name: "same-site, no Origin: a page of this machine", site: "same-site", want: 200},
		{name: "same-site with an allowed Origin", site: "same-site", origin: inspectorOrigin, want: 200},
		{name: "same-site still meets the Origin check", site: "same-site", origin: "http://localhost:9999", want: 403, wantMsg: `Origin "http://localhost:9999" may not call`},
		{name: "cross-site, no Origin", site: "cross-site", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site, an Origin not listed", site: "cross-site", origin: "https://attacker.example", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site, the bridge's own Origin", site: "cross-site", origin: "http://127.0.0.1:3456", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site, a listed Origin", site: "cross-site", origin: inspectorOrigin, want: 200},
		{name: "cross-site, a listed extension", site: "cross-site", origin: extOrigin, want: 200},
		{name: "cross-site preflight of a listed Origin", method: http.MethodOptions, site: "cross-site", origin: inspectorOrigin, want: 204},
		{name: "cross-site preflight, no listed Origin", method: http.MethodOptions, site: "cross-site", origin: "https://attacker.example", want: 403, wantMsg: crossSiteMsg},
		{name: "a value no browser sends", site: "evil", want: 403, wantMsg: `Sec-Fetch-Site "evil" is not a value browsers send`},
		{name: "values are lower case", site: "Cross-Site", want: 403, wantMsg: "is not a value browsers send"},

		// Every route but the health probe.
		{name: "cross-site GET /sse", method: http.MethodGet, target: "/sse", site: "cross-site", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site POST /message", target: "/message?sessionId=abc", site: "cross-site", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site GET /mcp", method: http.MethodGet, site: "cross-site", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site DELETE /mcp", method: http.MethodDelete, site: "cross-site", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site GET /metrics", method: http.MethodGet, target: "/metrics", site: "cross-site", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site GET /tools", method: http.MethodGet, target: "/tools", site: "cross-site", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site GET /servers/memory/mcp", method: http.MethodGet, target: "/servers/memory/mcp", site: "cross-site", want: 403, wantMsg: crossSiteMsg},
		{name: "cross-site GET /health", method: http.MethodGet, target: "/health", site: "cross-site", want: 200},
		{name: "cross-site HEAD /health", method: http.MethodHead, target: "/health", site: "cross-site", want: 200},
		{name: "cross-site POST /health is no probe", target: "/health", site: "cross-site", want: 403, wantMsg: crossSiteMsg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := &nextHandler{}
			h, err := New(baseOptions(), next)
			if err != nil {
				t.Fatal(err)
			}
			headers := map[string]string{}
			if tc.site != "" {
				headers["Sec-Fetch-Site"] = tc.site
			}
			if tc.origin != "" {
				headers["Origin"] = tc.origin
			}
			if tc.method == http.MethodOptions {
				headers["Access-Control-Request-Method"] = "POST"
			}
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			body := ""
			if method == http.MethodPost {
				body = "{}"
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, request{method: method, target: tc.target, headers: headers, body: body}.build())
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body.String())
			}
			if tc.want == http.StatusForbidden {
				checkRefusal(t, rec, tc.wantMsg)
				if next.count() != 0 {
					t.Error("a refused request reached the endpoint")
				}
			}
		})
	}
}

// TestSecFetchSiteOnTheWire sends the header as browsers write it (lower
// case) over a real connection: the guard must see it.
func TestSecFetchSiteOnTheWire(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	opts := baseOptions()
	opts.ListenAddr = srv.Listener.Addr().String()
	h, err := New(opts, &nextHandler{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		site string
		want int
	}{{"cross-site", 403}, {"same-site", 200}, {"none", 200}} {
		t.Run(tc.site, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(conn, "GET /sse HTTP/1.1\r\nhost: %s\r\nsec-fetch-site: %s\r\nsec-fetch-mode: no-cors\r\nconnection: close\r\n\r\n", srv.Listener.Addr(), tc.site)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, b)
			}
			if tc.want == 403 && (!strings.Contains(string(b), `"code":-32000`) || !strings.Contains(string(b), "Sec-Fetch-Site")) {
				t.Errorf("refusal is not a JSON-RPC error naming the header: %s", b)
			}
		})
	}
}
