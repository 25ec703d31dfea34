package authserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestRegister: RFC 7591 registration, accepted and refused metadata.
func TestRegister(t *testing.T) {
	e := newTestEnv(t, nil)
	redirect := func(uris ...string) map[string]any {
		return map[string]any{"redirect_uris": uris, "token_endpoint_auth_method": "none"}
	}
	for _, tc := range []struct {
		name   string
		meta   any
		status int
		err    string
		desc   string // in error_description
		check  func(t *testing.T, r testResponse)
	}{
		{name: "claude.ai, public", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "client_name": "Claude",
			"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}},
			status: 201, check: func(t *testing.T, r testResponse) {
				if !strings.HasPrefix(r.str("client_id"), "bbcl_") || r.str("client_secret") != "" || r.str("client_name") != "Claude" ||
					r.str("token_endpoint_auth_method") != "none" || joinList(r.body["redirect_uris"]) != claudeCallback ||
					joinList(r.body["grant_types"]) != "authorization_code refresh_token" || joinList(r.body["response_types"]) != "code" {
					t.Fatalf("response: %s", r.raw)
				}
				if r.body["client_id_issued_at"] != float64(newFakeClock().Now().Unix()) || r.body["client_secret_expires_at"] != float64(0) {
					t.Fatalf("timestamps: %s", r.raw)
				}
				if r.header.Get("Cache-Control") != "no-store" {
					t.Errorf("Cache-Control %q", r.header.Get("Cache-Control"))
				}
			}},
		{name: "client_secret_post gets a secret, stored hashed", meta: map[string]any{"redirect_uris": []string{claudeCallback},
			"token_endpoint_auth_method": "client_secret_post"}, status: 201, check: func(t *testing.T, r testResponse) {
			secret := r.str("client_secret")
			if !strings.HasPrefix(secret, "bbs_") {
				t.Fatalf("no secret: %s", r.raw)
			}
			raw, _, err := e.s.kv.Get(context.Background(), bucketClients, r.str("client_id"))
			if err != nil || bytes.Contains(raw, []byte(secret)) || !bytes.Contains(raw, []byte(hashSecret(secret))) {
				t.Fatalf("stored client (err %v): %s", err, raw)
			}
		}},
		{name: "defaults: client_secret_basic, both grants", meta: map[string]any{"redirect_uris": []string{claudeCallback}},
			status: 201, check: func(t *testing.T, r testResponse) {
				if r.str("token_endpoint_auth_method") != "client_secret_basic" || r.str("client_secret") == "" ||
					joinList(r.body["grant_types"]) != "authorization_code refresh_token" {
					t.Fatalf("response: %s", r.raw)
				}
			}},
		{name: "loopback redirects", meta: redirect("http://127.0.0.1:33418/callback", "http://[::1]:8080/cb", "http://localhost/cb"), status: 201},
		{name: "name bounded and cleaned", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "token_endpoint_auth_method": "none",
			"client_name": "  Evil\u202eemaNl\x07 " + strings.Repeat("x", 300)}, status: 201, check: func(t *testing.T, r testResponse) {
			name := r.str("client_name")
			if strings.ContainsAny(name, "\u202e\x07") || len([]rune(name)) != maxClientNameRunes || !strings.HasPrefix(name, "EvilemaNl xx") {
				t.Fatalf("client_name %q", name)
			}
		}},
		{name: "unknown scopes dropped", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "token_endpoint_auth_method": "none",
			"scope": "mcp admin mcp offline_access"}, status: 201, check: func(t *testing.T, r testResponse) {
			if r.str("scope") != "mcp offline_access" {
				t.Fatalf("scope %q", r.str("scope"))
			}
		}},
		{name: "unknown fields ignored", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "token_endpoint_auth_method": "none",
			"software_id": "x", "x-custom": map[string]any{"a": 1}}, status: 201},

		{name: "no redirect_uris", meta: map[string]any{"client_name": "x"}, status: 400, err: "invalid_redirect_uri", desc: "required"},
		{name: "http on a public host", meta: redirect("http://example.com/cb"), status: 400, err: "invalid_redirect_uri", desc: "use https"},
		// Native apps' private-use schemes (RFC 8252 §7.1; issue 33, item 1).
		{name: "cursor", meta: redirect("cursor://anysphere.cursor-retrieval/oauth/callback"), status: 201, check: func(t *testing.T, r testResponse) {
			if joinList(r.body["redirect_uris"]) != "cursor://anysphere.cursor-retrieval/oauth/callback" {
				t.Fatalf("redirect_uris: %s", r.raw)
			}
		}},
		{name: "vscode", meta: redirect("vscode://vscode.mcp-auth/callback?server=x"), status: 201},
		{name: "reverse domain", meta: redirect("com.example.app:/oauth2redirect"), status: 201},
		{name: "javascript", meta: redirect("javascript:alert(1)"), status: 400, err: "invalid_redirect_uri", desc: "names no app"},
		{name: "javascript upper case", meta: redirect("JavaScript:alert(1)"), status: 400, err: "invalid_redirect_uri", desc: "names no app"},
		{name: "data", meta: redirect("data:text/html,<script>alert(1)</script>"), status: 400, err: "invalid_redirect_uri", desc: "names no app"},
		{name: "file", meta: redirect("file:///etc/passwd"), status: 400, err: "invalid_redirect_uri", desc: "names no app"},
		{name: "about", meta: redirect("about:blank"), status: 400, err: "invalid_redirect_uri", desc: "names no app"},
		{name: "blob", meta: redirect("blob:https://claude.ai/0b5c5d2e"), status: 400, err: "invalid_redirect_uri", desc: "names no app"},
		{name: "vbscript", meta: redirect("vbscript:msgbox(1)"), status: 400, err: "invalid_redirect_uri", desc: "names no app"},
		{name: "no path", meta: redirect("com.example.app:callback"), status: 400, err: "invalid_redirect_uri", desc: "no path"},
		{name: "custom scheme with user info", meta: redirect("cursor://user@anysphere.cursor-retrieval/cb"), status: 400, err: "invalid_redirect_uri", desc: "user info"},
		{name: "fragment", meta: redirect("https://claude.ai/cb#frag"), status: 400, err: "invalid_redirect_uri", desc: "fragment"},
		{name: "relative", meta: redirect("/callback"), status: 400, err: "invalid_redirect_uri", desc: "absolute"},
		{name: "user info", meta: redirect("https://user:pw@claude.ai/cb"), status: 400, err: "invalid_redirect_uri", desc: "user info"},
		{name: "too many", meta: redirect(strings.Split(strings.Repeat(claudeCallback+" ", 21), " ")[:21]...), status: 400, err: "invalid_redirect_uri", desc: "more than"},
		{name: "implicit", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "grant_types": []string{"implicit"}}, status: 400, err: "invalid_client_metadata", desc: "implicit"},
		{name: "client_credentials", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "grant_types": []string{"authorization_code", "client_credentials"}}, status: 400, err: "invalid_client_metadata", desc: "client_credentials"},
		{name: "refresh alone", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "grant_types": []string{"refresh_token"}}, status: 400, err: "invalid_client_metadata", desc: "must include authorization_code"},
		{name: "response_types token", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "response_types": []string{"token"}}, status: 400, err: "invalid_client_metadata", desc: "implicit"},
		{name: "private_key_jwt", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "token_endpoint_auth_method": "private_key_jwt"}, status: 400, err: "invalid_client_metadata", desc: "not supported"},
		{name: "client_uri not https", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "client_uri": "javascript:alert(1)"}, status: 400, err: "invalid_client_metadata", desc: "client_uri"},
		{name: "wrong type", meta: `{"redirect_uris":"https://claude.ai/cb"}`, status: 400, err: "invalid_client_metadata", desc: "redirect_uris"},
		{name: "not JSON", meta: `redirect_uris=x`, status: 400, err: "invalid_client_metadata", desc: "not a JSON object"},
		{name: "two values", meta: `{"redirect_uris":["https://claude.ai/cb"]} {}`, status: 400, err: "invalid_client_metadata", desc: "more than one"},
		{name: "body too large", meta: map[string]any{"redirect_uris": []string{claudeCallback}, "client_name": strings.Repeat("x", 70<<10)}, status: 413, err: "invalid_client_metadata", desc: "KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.register(tc.meta)
			if tc.status == 201 {
				if r.status != 201 {
					t.Fatalf("%d %s", r.status, r.raw)
				}
			} else {
				wantOAuthError(t, r, tc.status, tc.err)
				if !strings.Contains(r.str("error_description"), tc.desc) {
					t.Errorf("error_description %q does not say %q", r.str("error_description"), tc.desc)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
	t.Run("content type", func(t *testing.T) {
		req, _ := http.NewRequest("POST", e.ts.URL+"/oauth/register", strings.NewReader(`{"redirect_uris":["https://claude.ai/cb"]}`))
		req.Header.Set("Content-Type", "text/plain")
		wantOAuthError(t, e.do(req), 400, "invalid_client_metadata")
	})
}

// TestRegisterLimit: at MaxClients live registrations, one that never
// obtained a token makes room; only clients that signed in fill the cap
// (503 with Retry-After), and one of those frees its slot when it goes
// unused for ClientIdleTTL. A registration that never obtains a token is
// gone after UnusedClientTTL.
func TestRegisterLimit(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.Limits.MaxClients = 2 })
	claude := func() testResponse {
		return e.register(map[string]any{"redirect_uris": []string{claudeCallback}, "token_endpoint_auth_method": "none"})
	}
	unused := e.registerClaude()
	e.clock.Advance(time.Minute)
	e.registerClaude()
	// A third pushes out the oldest unused one.
	third := claude()
	if third.status != http.StatusCreated {
		t.Fatalf("a third registration with two unused ones: %d %s", third.status, third.raw)
	}
	if r := e.exchange(unused, e.code(unused, e.resA.URI, testVerifier), testVerifier, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("the pushed-out registration still works: %d %s", r.status, r.raw)
	}
	// Two that signed in fill the cap.
	a := testClient{id: third.str("client_id")}
	e.tokens(a)
	b := testClient{id: claude().str("client_id")}
	e.tokens(b)
	r := claude()
	wantOAuthError(t, r, http.StatusServiceUnavailable, "temporarily_unavailable")
	if r.header.Get("Retry-After") == "" || !strings.Contains(r.str("error_description"), "maximum of 2") {
		t.Fatalf("refusal: %v %s", r.header, r.raw)
	}
	e.clock.Advance(30 * 24 * time.Hour) // both unused for 30 days
	if r := claude(); r.status != http.StatusCreated {
		t.Fatalf("after a registration expired: %d %s", r.status, r.raw)
	}

	t.Run("an unused registration expires", func(t *testing.T) {
		c := testClient{id: claude().str("client_id")}
		e.clock.Advance(time.Hour)
		if r := e.exchange(c, e.code(c, e.resA.URI, testVerifier), testVerifier, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("a registration unused for an hour still works: %d %s", r.status, r.raw)
		}
	})
}

// TestOpenRedirectClosed: a client anyone registered, with a redirect URI
// of their choosing, gets its authorization errors on this server's page,
// not at that URI, until the person has seen its consent page (RFC 9700
// §4.11.2); from then on they go back to it, as OAuth says.
func TestOpenRedirectClosed(t *testing.T) {
	w := newFlowWorld(t, flowOptions{})
	reg, _ := json.Marshal(map[string]any{"redirect_uris": []string{"https://attacker.example/next"}, "token_endpoint_auth_method": "none", "client_name": "Totally Claude"})
	resp, err := http.Post(w.url+"/oauth/register", "application/json", bytes.NewReader(reg))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %v %v", resp.StatusCode, body, err)
	}
	q := w.authorizeParams()
	q.Set("client_id", body["client_id"].(string))
	q.Set("redirect_uri", "https://attacker.example/next")
	bad := func() url.Values {
		b := url.Values{}
		for k, v := range q {
			b[k] = v
		}
		b.Set("response_type", "token")
		return b
	}()

	p := w.newBrowser().authorize(bad)
	wantPage(t, p, http.StatusBadRequest, "This sign-in link is broken", "response_type=code")
	if loc := p.header.Get("Location"); loc != "" {
		t.Fatalf("an unseen app's error redirected to %s", loc)
	}

	b := w.newBrowser()
	p = b.authorize(q)
	wantPage(t, p, http.StatusOK, `name="password"`)
	wantPage(t, b.post("/oauth/signin", formOf(p, "password", flowPassword)), http.StatusOK, "Totally Claude", "https://attacker.example")

	p = w.newBrowser().authorize(bad)
	if p.status != http.StatusFound || !strings.HasPrefix(p.header.Get("Location"), "https://attacker.example/next?") ||
		!strings.Contains(p.header.Get("Location"), "error=unsupported_response_type") {
		t.Fatalf("after its consent page, an error did not go back to the app: %d %q", p.status, p.header.Get("Location"))
	}
}
