package authserver

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestExchangeRefusals: every way an authorization_code request is
// refused, each on a fresh code.
func TestExchangeRefusals(t *testing.T) {
	e := newTestEnv(t, nil)
	c := e.registerClaude()
	other := e.registerClaude()
	const otherVerifier = "0123456789012345678901234567890123456789abc"
	for _, tc := range []struct {
		name     string
		verifier string            // sent; the code's challenge is always testVerifier's
		extra    url.Values        // added to the form
		drop     string            // a parameter to leave out
		codeFor  *testClient       // the code's client (default c)
		before   func(code string) // runs between issuing and exchanging
		status   int
		err      string
		desc     string // in error_description
	}{
		{name: "wrong verifier", verifier: otherVerifier, status: 400, err: "invalid_grant", desc: "code_verifier does not match"},
		{name: "verifier too short", verifier: "abc", status: 400, err: "invalid_request", desc: "43 to 128"},
		{name: "verifier bad characters", verifier: strings.Repeat("a", 42) + "+", status: 400, err: "invalid_request", desc: "43 to 128"},
		{name: "no verifier", drop: "code_verifier", status: 400, err: "invalid_request", desc: "PKCE"},
		{name: "no code", drop: "code", status: 400, err: "invalid_request", desc: "code is missing"},
		{name: "unknown code", extra: url.Values{"code": {"bbc_nothing"}}, status: 400, err: "invalid_grant", desc: "unknown"},
		{name: "other redirect_uri", extra: url.Values{"redirect_uri": {"https://claude.ai/elsewhere"}}, status: 400, err: "invalid_grant", desc: "redirect_uri"},
		{name: "code of another client", codeFor: &other, status: 400, err: "invalid_grant", desc: "another client"},
		{name: "other resource", extra: url.Values{"resource": {e.resB.URI}}, status: 400, err: "invalid_target", desc: "sign in to that one"},
		{name: "unknown resource", extra: url.Values{"resource": {"https://elsewhere.example/mcp"}}, status: 400, err: "invalid_target", desc: ""},
		{name: "expired code", before: func(string) { e.clock.Advance(3 * time.Minute) }, status: 400, err: "invalid_grant", desc: "expired"},
		{name: "no grant_type", drop: "grant_type", status: 400, err: "invalid_request", desc: "grant_type"},
		{name: "password grant", extra: url.Values{"grant_type": {"password"}}, status: 400, err: "unsupported_grant_type", desc: "not supported"},
		{name: "no client_id", drop: "client_id", status: 401, err: "invalid_client", desc: "client_id is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := c
			if tc.codeFor != nil {
				owner = *tc.codeFor
			}
			code := e.code(owner, e.resA.URI, testVerifier)
			if tc.before != nil {
				tc.before(code)
			}
			verifier := tc.verifier
			if verifier == "" {
				verifier = testVerifier
			}
			f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
				"redirect_uri": {claudeCallback}, "client_id": {c.id}}
			for k, v := range tc.extra {
				f[k] = v
			}
			f.Del(tc.drop)
			r := e.post("/oauth/token", f, nil)
			wantOAuthError(t, r, tc.status, tc.err)
			if !strings.Contains(r.str("error_description"), tc.desc) {
				t.Errorf("error_description %q does not say %q", r.str("error_description"), tc.desc)
			}
		})
	}
}

// TestTokenRequestShape: what the token endpoint refuses before looking
// at any grant.
func TestTokenRequestShape(t *testing.T) {
	e := newTestEnv(t, nil)
	c := e.registerClaude()
	post := func(ct, body string) testResponse {
		req, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		return e.do(req)
	}
	form := "grant_type=authorization_code&client_id=" + url.QueryEscape(c.id) + "&code=x&code_verifier=" + testVerifier
	for _, tc := range []struct {
		name, ct, body string
		status         int
		err            string
	}{
		{"json body", "application/json", `{"grant_type":"authorization_code"}`, 400, "invalid_request"},
		{"repeated parameter", "application/x-www-form-urlencoded", form + "&code=y", 400, "invalid_request"},
		{"two resources", "application/x-www-form-urlencoded", form + "&resource=a&resource=b", 400, "invalid_target"},
		{"huge body", "application/x-www-form-urlencoded", form + "&pad=" + strings.Repeat("x", 70<<10), 413, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantOAuthError(t, post(tc.ct, tc.body), tc.status, tc.err)
		})
	}
	t.Run("GET", func(t *testing.T) {
		req, _ := http.NewRequest("GET", e.ts.URL+"/oauth/token", nil)
		if r := e.do(req); r.status != http.StatusMethodNotAllowed {
			t.Fatalf("GET /oauth/token: %d", r.status)
		}
	})
}

// TestCodeReuse: a code works once; its second use revokes what the
// first one produced.
func TestCodeReuse(t *testing.T) {
	e := newTestEnv(t, nil)
	c := e.registerClaude()
	code := e.code(c, e.resA.URI, testVerifier)
	r := e.exchange(c, code, testVerifier, nil)
	if r.status != http.StatusOK {
		t.Fatalf("first exchange: %d %s", r.status, r.raw)
	}
	access, refresh := r.str("access_token"), r.str("refresh_token")
	if r := e.call("/a/mcp", access); r.status != http.StatusOK {
		t.Fatalf("call: %d", r.status)
	}
	r = e.exchange(c, code, testVerifier, nil)
	wantOAuthError(t, r, http.StatusBadRequest, "invalid_grant")
	if !strings.Contains(r.str("error_description"), "already used") {
		t.Errorf("description: %q", r.str("error_description"))
	}
	if r := e.call("/a/mcp", access); r.status != http.StatusUnauthorized {
		t.Fatalf("access token of a reused code still works: %d", r.status)
	}
	wantOAuthError(t, e.refresh(c, refresh, nil), http.StatusBadRequest, "invalid_grant")
}

// TestClientAuthentication: public and confidential clients, each way of
// presenting a secret, and the refusals.
func TestClientAuthentication(t *testing.T) {
	e := newTestEnv(t, nil)
	regSecret := func(method string) testClient {
		r := e.register(map[string]any{"redirect_uris": []string{claudeCallback}, "token_endpoint_auth_method": method})
		if r.status != http.StatusCreated || r.str("client_secret") == "" {
			t.Fatalf("register %s: %d %s", method, r.status, r.raw)
		}
		return testClient{id: r.str("client_id"), secret: r.str("client_secret"), basic: method == "client_secret_basic"}
	}
	public := e.registerClaude()
	post := regSecret("client_secret_post")
	basic := regSecret("client_secret_basic")
	deleted := e.registerClaude()
	if err := e.s.kv.Delete(context.Background(), bucketClients, deleted.id); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		codeFor  testClient
		as       testClient
		header   string // a raw Authorization header instead
		status   int
		err      string
		basicWWW bool // a Basic challenge on the 401
	}{
		{name: "public", codeFor: public, as: public, status: 200},
		{name: "client_secret_post", codeFor: post, as: post, status: 200},
		{name: "client_secret_basic", codeFor: basic, as: basic, status: 200},
		{name: "post client using basic", codeFor: post, as: testClient{id: post.id, secret: post.secret, basic: true}, status: 200},
		{name: "basic client using post", codeFor: basic, as: testClient{id: basic.id, secret: basic.secret}, status: 200},
		{name: "unknown client", codeFor: public, as: testClient{id: "bbcl_nobody"}, status: 401, err: "invalid_client"},
		{name: "deleted registration", codeFor: deleted, as: deleted, status: 401, err: "invalid_client"},
		{name: "wrong secret", codeFor: post, as: testClient{id: post.id, secret: "bbs_wrong"}, status: 401, err: "invalid_client"},
		{name: "wrong secret in basic", codeFor: basic, as: testClient{id: basic.id, secret: "bbs_wrong", basic: true}, status: 401, err: "invalid_client", basicWWW: true},
		{name: "missing secret", codeFor: post, as: testClient{id: post.id}, status: 401, err: "invalid_client"},
		{name: "public client with a secret", codeFor: public, as: testClient{id: public.id, secret: "bbs_made_up"}, status: 401, err: "invalid_client"},
		{name: "public client, basic with empty password", codeFor: public, as: testClient{id: public.id, basic: true}, status: 200},
		{name: "basic and post together", codeFor: post, as: post, header: basicHeader(post.id, post.secret), status: 400, err: "invalid_request"},
		{name: "basic for another client_id", codeFor: post, as: testClient{id: public.id}, header: basicHeader(post.id, post.secret), status: 400, err: "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := url.Values{"grant_type": {"authorization_code"}, "code": {e.code(tc.codeFor, e.resA.URI, testVerifier)},
				"code_verifier": {testVerifier}, "redirect_uri": {claudeCallback}}
			f, pair := tc.as.auth(f)
			req, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader(f.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if pair != nil {
				req.SetBasicAuth(url.QueryEscape(pair[0]), url.QueryEscape(pair[1]))
			}
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			r := e.do(req)
			if tc.status == 200 {
				if r.status != 200 || r.str("access_token") == "" {
					t.Fatalf("%d %s", r.status, r.raw)
				}
				return
			}
			wantOAuthError(t, r, tc.status, tc.err)
			if got := strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic"); got != tc.basicWWW {
				t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
			}
		})
	}
}

// TestRefreshRefusals: the refresh_token grant's checks.
func TestRefreshRefusals(t *testing.T) {
	e := newTestEnv(t, func(c *Config) {
		c.RefreshTokenTTL = 2 * time.Hour
		// noRefresh gets its first token after the clock moved hours on.
		c.Limits.UnusedClientTTL = 24 * time.Hour
	})
	c := e.registerClaude()
	other := e.registerClaude()
	noRefresh := func() testClient {
		r := e.register(map[string]any{"redirect_uris": []string{claudeCallback}, "token_endpoint_auth_method": "none",
			"grant_types": []string{"authorization_code"}})
		if r.status != http.StatusCreated {
			t.Fatalf("register: %d %s", r.status, r.raw)
		}
		return testClient{id: r.str("client_id")}
	}()
	for _, tc := range []struct {
		name   string
		as     *testClient
		extra  url.Values
		before func()
		err    string
		desc   string
	}{
		{name: "other resource", extra: url.Values{"resource": {e.resB.URI}}, err: "invalid_target", desc: "sign in to that one"},
		{name: "wider scope", extra: url.Values{"scope": {"mcp admin"}}, err: "invalid_scope", desc: "admin"},
		{name: "another client's token", as: &other, err: "invalid_grant", desc: "another client"},
		{name: "client without the refresh grant", as: &noRefresh, err: "unauthorized_client", desc: "refresh_token"},
		{name: "expired", before: func() { e.clock.Advance(3 * time.Hour) }, err: "invalid_grant", desc: "sign in again"},
		{name: "unknown", extra: url.Values{"refresh_token": {"bbr_nothing"}}, err: "invalid_grant", desc: "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, refresh := e.tokens(c)
			if tc.before != nil {
				tc.before()
			}
			as := c
			if tc.as != nil {
				as = *tc.as
			}
			f := url.Values{"refresh_token": {refresh}}
			for k, v := range tc.extra {
				f[k] = v
			}
			r := e.refresh(as, f.Get("refresh_token"), without(f, "refresh_token"))
			wantOAuthError(t, r, http.StatusBadRequest, tc.err)
			if !strings.Contains(r.str("error_description"), tc.desc) {
				t.Errorf("error_description %q does not say %q", r.str("error_description"), tc.desc)
			}
		})
	}
	t.Run("narrower scope", func(t *testing.T) {
		_, refresh := e.tokens(c)
		r := e.refresh(c, refresh, url.Values{"scope": {"mcp"}})
		if r.status != 200 || r.str("scope") != "mcp" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		// The family keeps what was granted: the next refresh may ask
		// for all of it again.
		if r := e.refresh(c, r.str("refresh_token"), url.Values{"scope": {"mcp offline_access"}}); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("no refresh token for a client without the grant", func(t *testing.T) {
		r := e.exchange(noRefresh, e.code(noRefresh, e.resA.URI, testVerifier), testVerifier, nil)
		if r.status != 200 || r.str("refresh_token") != "" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
}

func without(f url.Values, key string) url.Values {
	out := url.Values{}
	for k, v := range f {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// TestIdleRegistration: a client that keeps refreshing keeps its
// registration; one left alone for ClientIdleTTL is gone (invalid_client).
func TestIdleRegistration(t *testing.T) {
	e := newTestEnv(t, nil) // ClientIdleTTL and RefreshTokenTTL: 30 days
	c := e.registerClaude()
	_, refresh := e.tokens(c)
	for range 3 { // 87 days in all, never 30 unused
		e.clock.Advance(29 * 24 * time.Hour)
		r := e.refresh(c, refresh, nil)
		if r.status != http.StatusOK {
			t.Fatalf("refresh after 29 days: %d %s", r.status, r.raw)
		}
		refresh = r.str("refresh_token")
	}
	e.clock.Advance(30 * 24 * time.Hour)
	wantOAuthError(t, e.refresh(c, refresh, nil), http.StatusUnauthorized, "invalid_client")
}

// TestConcurrentRefresh: two uses of one refresh token at the same moment
// by its client (two windows of one app). Within the reuse grace both get
// the same new pair, which works; with the grace off, exactly one gets
// new tokens and the other is a reuse (invalid_grant), which ends the
// family as a later reuse would.
func TestConcurrentRefresh(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{
		{"grace", 0},
		{"no grace", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, func(c *Config) { c.RefreshReuseGrace = tc.grace })
			c := e.registerClaude()
			for round := range 20 {
				_, refresh := e.tokens(c)
				var (
					wg    sync.WaitGroup
					start = make(chan struct{})
					res   [2]testResponse
				)
				for i := range res {
					wg.Go(func() {
						<-start
						res[i] = e.refresh(c, refresh, nil)
					})
				}
				close(start)
				wg.Wait()
				ok, grant := 0, 0
				var access []string
				for _, r := range res {
					switch {
					case r.status == 200:
						ok++
						access = append(access, r.str("access_token"))
					case r.status == 400 && r.str("error") == "invalid_grant":
						grant++
					default:
						t.Fatalf("round %d: %d %s", round, r.status, r.raw)
					}
				}
				if tc.grace < 0 {
					if ok != 1 || grant != 1 {
						t.Fatalf("round %d: %d won and %d got invalid_grant, want 1 and 1", round, ok, grant)
					}
					if r := e.call("/a/mcp", access[0]); r.status != http.StatusUnauthorized {
						t.Fatalf("round %d: the family survived a reuse: %d", round, r.status)
					}
					continue
				}
				if ok != 2 || res[0].str("refresh_token") != res[1].str("refresh_token") || access[0] != access[1] {
					t.Fatalf("round %d: %s and %s; want the same new pair twice", round, res[0].raw, res[1].raw)
				}
				if r := e.call("/a/mcp", access[0]); r.status != http.StatusOK {
					t.Fatalf("round %d: the pair both got does not work: %d %s", round, r.status, r.raw)
				}
				if r := e.refresh(c, res[0].str("refresh_token"), nil); r.status != http.StatusOK {
					t.Fatalf("round %d: the shared new refresh token does not refresh: %d %s", round, r.status, r.raw)
				}
			}
		})
	}
}

// TestRefreshReuseGrace: the grace is for the same client, within its
// seconds, presenting the token the last rotation replaced; anything else
// is a reuse that ends the family. The store never holds the pair in the
// clear.
func TestRefreshReuseGrace(t *testing.T) {
	const grace = 5 * time.Second
	e := newTestEnv(t, func(c *Config) { c.RefreshReuseGrace = grace })
	c := e.registerClaude()
	revoked := func(t *testing.T, access string) {
		t.Helper()
		if r := e.call("/a/mcp", access); r.status != http.StatusUnauthorized {
			t.Fatalf("the family survived a reuse: %d", r.status)
		}
	}
	rotate := func(t *testing.T, refresh string) testResponse {
		t.Helper()
		r := e.refresh(c, refresh, nil)
		if r.status != http.StatusOK {
			t.Fatalf("refresh: %d %s", r.status, r.raw)
		}
		return r
	}

	t.Run("same client within the grace: the same pair, again and again", func(t *testing.T) {
		_, a := e.tokens(c)
		first := rotate(t, a)
		for _, after := range []time.Duration{0, grace / 2, grace / 2} {
			e.clock.Advance(after)
			again := rotate(t, a)
			if again.str("access_token") != first.str("access_token") || again.str("refresh_token") != first.str("refresh_token") ||
				again.str("scope") != first.str("scope") {
				t.Fatalf("within the grace: %s, want the pair of %s", again.raw, first.raw)
			}
			if again.body["expires_in"].(float64) > first.body["expires_in"].(float64) {
				t.Fatalf("the replayed access token lives longer than it did: %s", again.raw)
			}
		}
		for _, tok := range []string{first.str("access_token")} {
			if r := e.call("/a/mcp", tok); r.status != http.StatusOK {
				t.Fatalf("the pair does not work: %d", r.status)
			}
		}
		raw, _ := e.s.kv.List(context.Background(), bucketFamilies)
		for _, v := range raw {
			if strings.Contains(string(v), first.str("refresh_token")) || strings.Contains(string(v), first.str("access_token")) {
				t.Fatalf("a family holds a token in the clear: %s", v)
			}
		}
	})
	t.Run("same client after the grace: revoked", func(t *testing.T) {
		_, a := e.tokens(c)
		b := rotate(t, a)
		e.clock.Advance(grace + time.Second)
		wantOAuthError(t, e.refresh(c, a, nil), http.StatusBadRequest, "invalid_grant")
		revoked(t, b.str("access_token"))
	})
	t.Run("another client within the grace: revoked", func(t *testing.T) {
		_, a := e.tokens(c)
		b := rotate(t, a)
		other := e.registerClaude()
		wantOAuthError(t, e.refresh(other, a, nil), http.StatusBadRequest, "invalid_grant")
		revoked(t, b.str("access_token"))
		wantOAuthError(t, e.refresh(c, b.str("refresh_token"), nil), http.StatusBadRequest, "invalid_grant")
	})
	t.Run("a token two rotations old: revoked", func(t *testing.T) {
		_, a := e.tokens(c)
		b := rotate(t, a)
		cc := rotate(t, b.str("refresh_token"))
		wantOAuthError(t, e.refresh(c, a, nil), http.StatusBadRequest, "invalid_grant")
		revoked(t, cc.str("access_token"))
	})
	t.Run("within the grace after a revocation: nothing", func(t *testing.T) {
		_, a := e.tokens(c)
		b := rotate(t, a)
		if r := e.revoke(c, b.str("refresh_token"), "refresh_token"); r.status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.status, r.raw)
		}
		wantOAuthError(t, e.refresh(c, a, nil), http.StatusBadRequest, "invalid_grant")
	})
}

// TestConcurrentExchange: two exchanges of one code at the same moment;
// at most one gets tokens, and those die (the code was used twice).
func TestConcurrentExchange(t *testing.T) {
	e := newTestEnv(t, nil)
	c := e.registerClaude()
	for round := range 20 {
		code := e.code(c, e.resA.URI, testVerifier)
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			res   [2]testResponse
		)
		for i := range res {
			wg.Go(func() {
				<-start
				res[i] = e.exchange(c, code, testVerifier, nil)
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, r := range res {
			switch {
			case r.status == 200:
				won++
				if r := e.call("/a/mcp", r.str("access_token")); r.status != http.StatusUnauthorized {
					t.Fatalf("round %d: a token of a code used twice works: %d", round, r.status)
				}
			case r.status == 400 && r.str("error") == "invalid_grant":
			default:
				t.Fatalf("round %d: %d %s", round, r.status, r.raw)
			}
		}
		if won > 1 {
			t.Fatalf("round %d: both exchanges of one code got tokens", round)
		}
	}
}

// TestRevoke: RFC 7009 at /oauth/revoke.
func TestRevoke(t *testing.T) {
	e := newTestEnv(t, nil)
	c := e.registerClaude()
	other := e.registerClaude()

	t.Run("access token only", func(t *testing.T) {
		access, refresh := e.tokens(c)
		if r := e.revoke(c, access, ""); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if r := e.call("/a/mcp", access); r.status != 401 {
			t.Fatalf("revoked access token works: %d", r.status)
		}
		if r := e.refresh(c, refresh, nil); r.status != 200 {
			t.Fatalf("the refresh token died with its access token: %d %s", r.status, r.raw)
		}
	})
	t.Run("refresh token with a wrong hint", func(t *testing.T) {
		access, refresh := e.tokens(c)
		if r := e.revoke(c, refresh, "access_token"); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if r := e.call("/a/mcp", access); r.status != 401 {
			t.Fatalf("the family's access token works: %d", r.status)
		}
	})
	t.Run("another client's tokens: 200, no effect", func(t *testing.T) {
		access, refresh := e.tokens(c)
		for _, tok := range []string{access, refresh} {
			if r := e.revoke(other, tok, ""); r.status != 200 {
				t.Fatalf("%d %s", r.status, r.raw)
			}
		}
		if r := e.call("/a/mcp", access); r.status != 200 {
			t.Fatalf("another client revoked this one's token: %d", r.status)
		}
		if r := e.refresh(c, refresh, nil); r.status != 200 {
			t.Fatalf("another client revoked this one's family: %d %s", r.status, r.raw)
		}
	})
	t.Run("unknown token: 200", func(t *testing.T) {
		if r := e.revoke(c, "bba_unknown", "access_token"); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("no token", func(t *testing.T) {
		wantOAuthError(t, e.revoke(c, "", ""), 400, "invalid_request")
	})
	t.Run("unknown client", func(t *testing.T) {
		wantOAuthError(t, e.revoke(testClient{id: "bbcl_nobody"}, "bba_x", ""), 401, "invalid_client")
	})
}
