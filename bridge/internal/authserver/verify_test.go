package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestProtect: the bearer check in front of a resource.
func TestProtect(t *testing.T) {
	e := newTestEnv(t, nil)
	c := e.registerClaude()
	access, _ := e.tokens(c)
	expired, _ := e.tokens(c)
	challenge := `Bearer resource_metadata="` + e.metaA + `", scope="mcp"`

	for _, tc := range []struct {
		name    string
		path    string
		header  []string // Authorization values
		query   string
		before  func()
		status  int
		www     string // WWW-Authenticate prefix
		message string // in the JSON-RPC error message
	}{
		{name: "valid", path: "/a/mcp", header: []string{"Bearer " + access}, status: 200},
		{name: "lower-case scheme", path: "/a/mcp", header: []string{"bearer " + access}, status: 200},
		{name: "no token", path: "/a/mcp", status: 401, www: challenge, message: "requires an OAuth access token"},
		{name: "basic scheme", path: "/a/mcp", header: []string{basicHeader("a", "b")}, status: 401, www: challenge, message: "Bearer"},
		{name: "unknown token", path: "/a/mcp", header: []string{"Bearer bba_nothing"}, status: 401,
			www: challenge + `, error="invalid_token", error_description="The access token is unknown`, message: "unknown or has expired"},
		{name: "token for another resource", path: "/b/mcp", header: []string{"Bearer " + access}, status: 401,
			www:     `Bearer resource_metadata="` + e.ts.URL + `/.well-known/oauth-protected-resource/b/mcp", scope="mcp", error="invalid_token"`,
			message: "issued for another resource, not " + e.resB.URI},
		{name: "token in the query", path: "/a/mcp", query: "access_token=" + access, status: 400, www: challenge + `, error="invalid_request"`, message: "Authorization header"},
		{name: "two headers", path: "/a/mcp", header: []string{"Bearer " + access, "Bearer " + access}, status: 400, message: "one Authorization header"},
		{name: "expired", path: "/a/mcp", header: []string{"Bearer " + expired}, before: func() { e.clock.Advance(61 * time.Minute) },
			status: 401, www: challenge + `, error="invalid_token"`, message: "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			u := e.ts.URL + tc.path
			if tc.query != "" {
				u += "?" + tc.query
			}
			req, _ := http.NewRequest("POST", u, strings.NewReader("{}"))
			for _, h := range tc.header {
				req.Header.Add("Authorization", h)
			}
			r := e.do(req)
			if r.status != tc.status {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			if tc.status == 200 {
				if g := <-e.called; g == nil || g.Resource != e.resA.URI {
					t.Fatalf("grant %+v", g)
				}
				return
			}
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), tc.www) {
				t.Errorf("WWW-Authenticate %q, want it to start %q", r.header.Get("WWW-Authenticate"), tc.www)
			}
			var body struct {
				JSONRPC string `json:"jsonrpc"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.raw), &body); err != nil || body.JSONRPC != "2.0" || body.Error.Code != codeRefused ||
				!strings.Contains(body.Error.Message, tc.message) {
				t.Errorf("body %s (err %v), want a JSON-RPC error saying %q", r.raw, err, tc.message)
			}
		})
	}
	t.Run("the SDK reads the challenge", func(t *testing.T) {
		cs, err := oauthex.ParseWWWAuthenticate([]string{bearerChallenge(e.metaA, "invalid_token", `a "quoted" \ text`)})
		if err != nil || len(cs) != 1 || cs[0].Params["resource_metadata"] != e.metaA || cs[0].Params["error"] != "invalid_token" {
			t.Fatalf("%+v %v", cs, err)
		}
	})
}

// TestVerify: Verify's answers, called directly as the proxy does.
func TestVerify(t *testing.T) {
	e := newTestEnv(t, nil)
	c := e.registerClaude()
	access, _ := e.tokens(c)
	ctx := context.Background()

	g, err := e.s.Verify(ctx, access, e.resA.URI)
	if err != nil || g.ClientID != c.id || g.Subject.ID != "password:owner" || strings.Join(g.Scopes, " ") != "mcp offline_access" ||
		g.FamilyID == "" || !g.ExpiresAt.Equal(e.clock.Now().Add(time.Hour)) {
		t.Fatalf("Verify: %+v, %v", g, err)
	}
	for _, tc := range []struct{ name, token, resource, says string }{
		{"empty", "", e.resA.URI, "No access token"},
		{"unknown", "bba_x", e.resA.URI, "unknown"},
		{"other resource", access, e.resB.URI, "another resource"},
		{"a refresh token is no access token", "bbr_x", e.resA.URI, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.Verify(ctx, tc.token, tc.resource)
			if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err %v, want ErrInvalidToken saying %q", err, tc.says)
			}
		})
	}
	if GrantFrom(ctx) != nil {
		t.Fatal("GrantFrom of a context Protect did not make")
	}
}

// TestResourceMetadata: RFC 9728 metadata, as the Go SDK's client reads it.
func TestResourceMetadata(t *testing.T) {
	e := newTestEnv(t, nil)
	md, err := oauthex.GetProtectedResourceMetadata(context.Background(), e.metaA, e.resA.URI, e.ts.Client())
	if err != nil {
		t.Fatal(err)
	}
	if md.Resource != e.resA.URI || strings.Join(md.AuthorizationServers, " ") != e.ts.URL ||
		strings.Join(md.BearerMethodsSupported, " ") != "header" || strings.Join(md.ScopesSupported, " ") != "mcp" || md.ResourceName != "a" {
		t.Fatalf("metadata %+v", md)
	}
	for _, tc := range []struct {
		method string
		status int
	}{{"GET", 200}, {"HEAD", 200}, {"OPTIONS", 204}, {"POST", 405}} {
		t.Run(tc.method, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, e.metaA, nil)
			r := e.do(req)
			if r.status != tc.status || r.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("%d %v", r.status, r.header)
			}
			if tc.method == "GET" && !strings.Contains(r.header.Get("Cache-Control"), "max-age") {
				t.Errorf("Cache-Control %q", r.header.Get("Cache-Control"))
			}
		})
	}
}
