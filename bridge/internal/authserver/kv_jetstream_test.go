package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/natsembed/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream store's own tests are in its package, jetstreamkv; here
// are the ones that need this package's insides: the sign-in flow's
// helpers and the benchmark's.

// NewJetStreamKVForTests is jetstreamkv.New, which this package's tests
// cannot import (jetstreamkv imports authserver, a cycle): it is set by
// kv_external_test.go, in package authserver_test, before any test runs.
var NewJetStreamKVForTests func(js jetstream.JetStream, prefix string, replicas int, now func() time.Time) (KV, error)

// newJetStreamKV opens a JetStream store through NewJetStreamKVForTests.
func newJetStreamKV(js jetstream.JetStream, prefix string, replicas int, now func() time.Time) (KV, error) {
	if NewJetStreamKVForTests == nil {
		return nil, errors.New("NewJetStreamKVForTests is not set (kv_external_test.go sets it)")
	}
	return NewJetStreamKVForTests(js, prefix, replicas, now)
}

// TestJetStreamSignInAcrossNodes: the point of the shared store. Two
// authorization servers (two proxy nodes, each with its own NATS
// connection) behind one origin, as a load balancer puts them: the app
// registers on one, the person's authorize, sign-in and consent land on
// alternate nodes, the code is exchanged on the other, the refresh on the
// first, and each node takes the other's access token.
func TestJetStreamSignInAcrossNodes(t *testing.T) {
	natsURL := natstest.Start(t)
	clock := &flowClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	lb := httptest.NewUnstartedServer(nil)
	issuer := "http://" + lb.Listener.Addr().String()
	resource := Resource{URI: issuer + "/servers/memory/mcp", Name: `the MCP server "memory"`}
	logs := &pageLogs{}
	var nodes [2]*Server
	for i := range nodes {
		kv, err := newJetStreamKV(natstest.JetStream(t, natsURL), "cluster", 1, clock.now)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{
			Issuer: issuer,
			KV:     kv,
			Resources: func(uri string) (Resource, bool) {
				return resource, uri == resource.URI
			},
			Identity: IdentityConfig{PasswordHash: testPasswordHash},
			Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}).WithAttrs([]slog.Attr{slog.Int("node", i)})),
			Now:      clock.now,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		nodes[i] = s
	}
	// The load balancer: each request goes to the node the test names.
	var next atomic.Int32
	var served [2]atomic.Int32
	lb.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := next.Load()
		served[n].Add(1)
		nodes[n].Handler().ServeHTTP(w, r)
	})
	lb.Start()
	t.Cleanup(lb.Close)
	on := func(n int32) { next.Store(n) }

	// Registration on node 0.
	on(0)
	body, _ := json.Marshal(map[string]any{"redirect_uris": []string{claudeCallback}, "client_name": "Claude",
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}})
	res, err := http.Post(issuer+"/oauth/register", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	_ = json.NewDecoder(res.Body).Decode(&reg)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || reg.ClientID == "" {
		t.Fatalf("register on node 0: %d %+v", res.StatusCode, reg)
	}

	// The person: authorize on node 1, sign in on node 0, consent on node 1.
	w := &flowWorld{t: t, url: issuer, resource: resource, logs: logs, clock: clock,
		client: Client{ID: reg.ClientID, RedirectURIs: []string{claudeCallback}}}
	b := w.newBrowser()
	on(1)
	p := b.authorize(w.authorizeParams())
	wantPage(t, p, http.StatusOK, "Claude", `name="password"`)
	on(0)
	c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
	wantPage(t, c, http.StatusOK, `value="approve"`)
	on(1)
	done := b.post("/oauth/consent", formOf(c, "decision", "approve"))
	if done.status != http.StatusSeeOther {
		t.Fatalf("consent on node 1: %d\n%s", done.status, done.body)
	}
	code := done.location(t).Query().Get("code")
	if code == "" {
		t.Fatalf("no code in %s", done.location(t))
	}

	// The app: the code exchanged on node 0, the refresh on node 1.
	token := func(form url.Values) (int, map[string]any) {
		t.Helper()
		res, err := http.PostForm(issuer+"/oauth/token", form)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	on(0)
	st, tok := token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {flowVerifier},
		"redirect_uri": {claudeCallback}, "client_id": {reg.ClientID}, "resource": {resource.URI}})
	if st != http.StatusOK {
		t.Fatalf("exchange on node 0: %d %v", st, tok)
	}
	access, _ := tok["access_token"].(string)
	refresh, _ := tok["refresh_token"].(string)
	for i, n := range nodes {
		if _, err := n.Verify(context.Background(), access, resource.URI); err != nil {
			t.Fatalf("node %d refuses the access token node 0 issued: %v", i, err)
		}
	}
	on(1)
	st, tok = token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {reg.ClientID}})
	if st != http.StatusOK {
		t.Fatalf("refresh on node 1: %d %v", st, tok)
	}
	access2, _ := tok["access_token"].(string)
	if _, err := nodes[0].Verify(context.Background(), access2, resource.URI); err != nil {
		t.Fatalf("node 0 refuses the access token node 1 issued: %v", err)
	}
	on(0)
	// Within the reuse grace the same client gets the same pair, on any
	// node (the rotation is in the shared family).
	if st, out := token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {reg.ClientID}}); st != http.StatusOK || out["access_token"] != access2 {
		t.Fatalf("the rotated refresh token again within its grace, on the other node: %d %v, want 200 and the same pair", st, out)
	}
	clock.add(defaultRefreshGrace + time.Second)
	if st, out := token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {reg.ClientID}}); st != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("the rotated refresh token again past its grace, on the other node: %d %v, want 400 invalid_grant", st, out)
	}
	// That reuse ended the family on every node.
	for i, n := range nodes {
		if _, err := n.Verify(context.Background(), access2, resource.URI); err == nil {
			t.Fatalf("node %d still takes an access token of a family ended by a reuse", i)
		}
	}
	on(1)
	if st, again := token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {flowVerifier},
		"redirect_uri": {claudeCallback}, "client_id": {reg.ClientID}}); st != http.StatusBadRequest || again["error"] != "invalid_grant" {
		t.Fatalf("the code a second time, on the other node: %d %v, want 400 invalid_grant", st, again)
	}
	if served[0].Load() == 0 || served[1].Load() == 0 {
		t.Fatalf("requests served per node: %d, %d; the flow did not cross nodes", served[0].Load(), served[1].Load())
	}
}

// BenchmarkJetStreamKV: what the shared store costs where it is used most,
// beside BenchmarkVerify and BenchmarkRefresh's memory and bolt: the bearer
// check of every MCP request (two reads) and a refresh (reads, a
// compare-and-swap, creates), against a NATS server in this process.
func BenchmarkJetStreamKV(b *testing.B) {
	res := Resource{URI: "https://as.example/mcp", Name: "bench"}
	kv, err := newJetStreamKV(natstest.JetStream(b, natstest.Start(b)), "bench", 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Issuer: "https://as.example", Identity: IdentityConfig{Password: testPassword}, KV: kv,
		Resources: func(uri string) (Resource, bool) { return res, uri == res.URI }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	c := Client{ID: benchClientID, Name: "bench", RedirectURIs: []string{claudeCallback}, GrantTypes: []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethod: "none", CreatedAt: time.Now(), LastUsedAt: time.Now()}
	if _, err := s.createJSON(context.Background(), bucketClients, c.ID, c, time.Hour); err != nil {
		b.Fatal(err)
	}
	access, refresh := benchTokens(b, s, res)
	b.Run("verify", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			if _, err := s.Verify(ctx, access, res.URI); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("refresh", func(b *testing.B) {
		h := s.Handler()
		for b.Loop() {
			out := benchPost(b, h, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {benchClientID}})
			refresh = out["refresh_token"].(string)
		}
	})
}
