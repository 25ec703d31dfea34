package authserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkVerify is what the bearer check adds to every MCP request: one
// access token looked up by its hash, then its family, in each store.
// BenchmarkTokenExchange is a sign-in's last step (a code for tokens) and
// BenchmarkRefresh a rotation, which claude.ai does hourly.
func BenchmarkVerify(b *testing.B) {
	for _, kind := range []string{"memory", "bolt"} {
		b.Run("kv="+kind, func(b *testing.B) {
			s, res := benchServer(b, kind)
			access, _ := benchTokens(b, s, res)
			ctx := context.Background()
			for b.Loop() {
				if _, err := s.Verify(ctx, access, res.URI); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkProtect(b *testing.B) {
	s, res := benchServer(b, "memory")
	access, _ := benchTokens(b, s, res)
	h := s.Protect(res, "https://as.example/.well-known/oauth-protected-resource/mcp",
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	req := httptest.NewRequest(http.MethodPost, res.URI, nil)
	req.Header.Set("Authorization", "Bearer "+access)
	for b.Loop() {
		w := httptest.NewRecorder()
		r := req.Clone(req.Context())
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNoContent {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

func BenchmarkRefresh(b *testing.B) {
	for _, kind := range []string{"memory", "bolt"} {
		b.Run("kv="+kind, func(b *testing.B) {
			s, res := benchServer(b, kind)
			_, refresh := benchTokens(b, s, res)
			h := s.Handler()
			for b.Loop() {
				out := benchPost(b, h, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {benchClientID}})
				refresh = out["refresh_token"].(string)
			}
		})
	}
}

const benchClientID = "bench-client"

// benchServer is a server on kind's store with one public client
// registered and one resource.
func benchServer(b *testing.B, kind string) (*Server, Resource) {
	b.Helper()
	res := Resource{URI: "https://as.example/mcp", Name: "bench"}
	cfg := Config{Issuer: "https://as.example", Identity: IdentityConfig{Password: testPassword},
		Resources: func(uri string) (Resource, bool) { return res, uri == res.URI }}
	if kind == "bolt" {
		kv, err := OpenBoltKV(filepath.Join(b.TempDir(), "oauth.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg.KV = kv
	}
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	c := Client{ID: benchClientID, Name: "bench", RedirectURIs: []string{claudeCallback}, GrantTypes: []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethod: "none", CreatedAt: time.Now(), LastUsedAt: time.Now()}
	if _, err := s.createJSON(context.Background(), bucketClients, c.ID, c, 0); err != nil {
		b.Fatal(err)
	}
	return s, res
}

// benchTokens signs in once: a code, exchanged for an access and a
// refresh token.
func benchTokens(b *testing.B, s *Server, res Resource) (access, refresh string) {
	b.Helper()
	code, err := s.issueCode(context.Background(), &AuthRequest{ID: randomToken("bbq_"), ClientID: benchClientID,
		RedirectURI: claudeCallback, Resource: res.URI, Scope: "mcp", CodeChallenge: s256(testVerifier), CodeChallengeMethod: "S256",
		Subject: &Subject{ID: "password:owner", Method: "password"}, CreatedAt: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	out := benchPost(b, s.Handler(), "/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"code_verifier": {testVerifier}, "redirect_uri": {claudeCallback}, "client_id": {benchClientID}, "resource": {res.URI}})
	return out["access_token"].(string), out["refresh_token"].(string)
}

func benchPost(b *testing.B, h http.Handler, path string, form url.Values) map[string]any {
	b.Helper()
	req := httptest.NewRequest(http.MethodPost, "https://as.example"+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var out map[string]any
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &out) != nil {
		b.Fatalf("POST %s: %d %s", path, w.Code, w.Body)
	}
	return out
}
