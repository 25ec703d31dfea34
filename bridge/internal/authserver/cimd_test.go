package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cimdClock is a clock the test moves by hand; the in-memory KV expires
// entries by it, so cache lifetimes are tested without waiting.
type cimdClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *cimdClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *cimdClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// cimdHost is an httptest TLS server standing for the host of clients'
// metadata documents; it counts the requests it gets.
type cimdHost struct {
	ts   *httptest.Server
	hits atomic.Int64
}

func newCIMDHost(t *testing.T, h http.HandlerFunc) *cimdHost {
	host := &cimdHost{}
	host.ts = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(host.ts.Close)
	return host
}

// serveJSON answers with doc as application/json.
func serveJSON(w http.ResponseWriter, doc any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// cimdDoc is a good document for id; tweak changes it.
func cimdDoc(id string, tweak func(map[string]any)) map[string]any {
	d := map[string]any{
		"client_id":                  id,
		"client_name":                "Example MCP Client",
		"client_uri":                 "https://app.example/",
		"redirect_uris":              []string{"https://app.example/callback", "http://127.0.0.1:33418/callback"},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
		"logo_uri":                   "https://app.example/logo.png", // ignored
	}
	if tweak != nil {
		tweak(d)
	}
	return d
}

// newCIMDServer builds the authorization server the way the brief's
// embedders do; tweak adjusts its Config.
func newCIMDServer(t *testing.T, tweak func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		Issuer: "https://as.example",
		Resources: func(uri string) (Resource, bool) {
			return Resource{URI: "https://as.example/mcp", Name: "test"}, uri == "https://as.example/mcp"
		},
		Identity: IdentityConfig{Password: "correct horse battery staple"},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// trusting lets the server reach host: its TLS client, and the test
// allowance for loopback.
func trusting(host *cimdHost) func(*Config) {
	return func(c *Config) {
		c.HTTPClient = host.ts.Client()
		c.AllowPrivateCIMD = true
	}
}

func cimdCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard only
	t.Cleanup(cancel)
	return ctx
}

// TestCIMDAcceptedAndCached: a good document becomes a public client, and
// is kept for its max-age: lookups within it make no request, the first
// after it fetches again.
func TestCIMDAcceptedAndCached(t *testing.T) {
	var id string
	host := newCIMDHost(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=600")
		serveJSON(w, cimdDoc(id, nil))
	})
	id = host.ts.URL + "/oauth/client.json"
	clock := &cimdClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s := newCIMDServer(t, func(c *Config) { trusting(host)(c); c.Now = clock.now })
	ctx := cimdCtx(t)

	c, err := s.fetchClientMetadata(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := Client{ID: id, Name: "Example MCP Client", URI: "https://app.example/",
		RedirectURIs: []string{"https://app.example/callback", "http://127.0.0.1:33418/callback"},
		GrantTypes:   []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethod: "none",
		CreatedAt: clock.now(), LastUsedAt: clock.now(), MetadataDocument: true}
	got, _ := json.Marshal(c)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Fatalf("client\n got %s\nwant %s", got, wantJSON)
	}
	if c.SecretHash != "" {
		t.Error("a metadata document client has a secret")
	}

	steps := []struct {
		name     string
		advance  time.Duration
		wantHits int64
	}{
		{"again at once", 0, 1},
		{"within max-age", 9 * time.Minute, 1},
		{"after max-age", 2 * time.Minute, 2},
		{"cached again", 0, 2},
	}
	for _, st := range steps {
		clock.advance(st.advance)
		if _, err := s.fetchClientMetadata(ctx, id); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if n := host.hits.Load(); n != st.wantHits {
			t.Fatalf("%s: %d requests to the document's host, want %d", st.name, n, st.wantHits)
		}
	}

	// lookupClient reaches the document through register.go's hook.
	c2, err := s.lookupClient(ctx, id)
	if err != nil || !c2.MetadataDocument || c2.ID != id {
		t.Fatalf("lookupClient: %+v, %v", c2, err)
	}
	if host.hits.Load() != 2 {
		t.Error("lookupClient fetched although the document is cached")
	}
}

// TestCIMDConcurrentLookupsShareOneFetch: many authorization requests
// naming one new client id cause one request to its host.
func TestCIMDConcurrentLookupsShareOneFetch(t *testing.T) {
	var id string
	host := newCIMDHost(t, func(w http.ResponseWriter, r *http.Request) { serveJSON(w, cimdDoc(id, nil)) })
	id = host.ts.URL + "/client"
	s := newCIMDServer(t, trusting(host))
	ctx := cimdCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := s.fetchClientMetadata(ctx, id)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := host.hits.Load(); n != 1 {
		t.Fatalf("%d requests for one document; want 1", n)
	}
}

// TestCIMDRefusedDocuments: each way a document cannot be used, in a
// sentence; the failure is remembered for 30 s (no second request), then
// asked again.
func TestCIMDRefusedDocuments(t *testing.T) {
	big := strings.Repeat("x", 65<<10)
	cases := []struct {
		name    string
		serve   func(w http.ResponseWriter, r *http.Request, id string)
		wantErr string
	}{
		{"client_id mismatch", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["client_id"] = "https://other.example/client" }))
		}, `its client_id is "https://other.example/client", not the URL it was fetched from`},
		{"client_id with a trailing slash", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["client_id"] = id + "/" }))
		}, "not the URL it was fetched from"},
		{"no client_id", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { delete(d, "client_id") }))
		}, "it has no client_id"},
		{"oversized", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["padding"] = big }))
		}, "it is larger than 64 KiB, the most this server reads"},
		{"oversized without Content-Length", func(w http.ResponseWriter, r *http.Request, id string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"padding":"`)
			w.(http.Flusher).Flush() // sends the header: chunked, no length
			io.WriteString(w, big+`"}`)
		}, "it is larger than 64 KiB"},
		{"served as HTML", func(w http.ResponseWriter, r *http.Request, id string) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<html>hello</html>")
		}, `it is served as "text/html; charset=utf-8", not as JSON (application/json)`},
		{"no Content-Type", func(w http.ResponseWriter, r *http.Request, id string) {
			w.Header()["Content-Type"] = nil
			w.Write([]byte{0x1f, 0x8b, 0, 0}) // sniffed as gzip, not JSON
		}, "not as JSON"},
		{"JSON type, not JSON", func(w http.ResponseWriter, r *http.Request, id string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "not json at all")
		}, "it is not a JSON object"},
		{"a JSON array", func(w http.ResponseWriter, r *http.Request, id string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `[1,2]`)
		}, "it is not a JSON object"},
		{"not found", func(w http.ResponseWriter, r *http.Request, id string) {
			http.NotFound(w, r)
		}, "its server answered 404 Not Found, not 200 OK"},
		{"redirected", func(w http.ResponseWriter, r *http.Request, id string) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, "answered 302 Found, not 200 OK; the document must be served at the client id URL itself, so redirects are not followed"},
		{"client_secret", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["client_secret"] = "s3cret" }))
		}, "it holds client_secret; a client identified by a metadata document is public"},
		{"client_secret_expires_at", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["client_secret_expires_at"] = 0 }))
		}, "it holds client_secret_expires_at"},
		{"client_secret_basic", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["token_endpoint_auth_method"] = "client_secret_basic" }))
		}, "client_secret_basic, which needs a shared secret that a metadata document cannot hold"},
		{"client_secret_post", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["token_endpoint_auth_method"] = "client_secret_post" }))
		}, "needs a shared secret"},
		{"private_key_jwt", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["token_endpoint_auth_method"] = "private_key_jwt" }))
		}, "private_key_jwt, which this server does not support"},
		{"unknown auth method", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["token_endpoint_auth_method"] = "tls_client_auth" }))
		}, `"tls_client_auth" is not supported`},
		{"no redirect_uris", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { delete(d, "redirect_uris") }))
		}, "it has no redirect_uris"},
		{"http redirect URI off loopback", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["redirect_uris"] = []string{"http://app.example/cb"} }))
		}, "in redirect_uris: Redirect URI \"http://app.example/cb\" uses http on a host other than this machine's loopback"},
		{"javascript redirect URI", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["redirect_uris"] = []string{"javascript:alert(1)"} }))
		}, `uses the scheme "javascript", which names no app`},
		{"client_credentials", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["grant_types"] = []string{"authorization_code", "client_credentials"} }))
		}, `its grant_types include "client_credentials"`},
		{"refresh_token alone", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["grant_types"] = []string{"refresh_token"} }))
		}, "leave out authorization_code"},
		{"implicit response type", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["response_types"] = []string{"token"} }))
		}, `its response_types include "token"`},
		{"client_name of the wrong type", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["client_name"] = 42 }))
		}, "its client_name has the wrong type"},
		{"client_uri not https", func(w http.ResponseWriter, r *http.Request, id string) {
			serveJSON(w, cimdDoc(id, func(d map[string]any) { d["client_uri"] = "javascript:alert(1)" }))
		}, "its client_uri is not an https URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var id string
			host := newCIMDHost(t, func(w http.ResponseWriter, r *http.Request) { c.serve(w, r, id) })
			id = host.ts.URL + "/client.json"
			clock := &cimdClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			s := newCIMDServer(t, func(cfg *Config) { trusting(host)(cfg); cfg.Now = clock.now })
			ctx := cimdCtx(t)

			_, err := s.fetchClientMetadata(ctx, id)
			wantCIMDError(t, err, id, c.wantErr)
			_, err = s.lookupClient(ctx, id)
			wantCIMDError(t, err, id, c.wantErr)
			if n := host.hits.Load(); n != 1 {
				t.Fatalf("%d requests; a failure must be remembered", n)
			}
			clock.advance(31 * time.Second)
			_, err = s.fetchClientMetadata(ctx, id)
			wantCIMDError(t, err, id, c.wantErr)
			if n := host.hits.Load(); n != 2 {
				t.Fatalf("%d requests; a failure is remembered for 30 s only", n)
			}
		})
	}
}

func wantCIMDError(t *testing.T, err error, id, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %q", want)
	}
	if !errors.Is(err, ErrClientMetadata) {
		t.Errorf("error %v is not ErrClientMetadata", err)
	}
	prefix := "the client's metadata document at " + echo(id) + " could not be used: "
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, want) || !strings.HasSuffix(msg, ".") {
		t.Fatalf("error\n %s\nwant %s…%s…", msg, prefix, want)
	}
}

// TestCIMDAcceptedVariants: what a document may leave out or overdo.
func TestCIMDAcceptedVariants(t *testing.T) {
	long := strings.Repeat("é", 300)
	cases := []struct {
		name  string
		tweak func(map[string]any)
		check func(t *testing.T, c *Client)
	}{
		{"minimal", func(d map[string]any) {
			for _, k := range []string{"client_name", "client_uri", "grant_types", "response_types", "token_endpoint_auth_method", "logo_uri"} {
				delete(d, k)
			}
		}, func(t *testing.T, c *Client) {
			if strings.Join(c.GrantTypes, " ") != "authorization_code refresh_token" || c.TokenEndpointAuthMethod != "none" {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{"long client_name is capped", func(d map[string]any) { d["client_name"] = long + "\u202e" }, func(t *testing.T, c *Client) {
			if n := len([]rune(c.Name)); n != maxClientNameRunes || strings.ContainsRune(c.Name, '\u202e') {
				t.Errorf("name of %d runes: %q", n, c.Name)
			}
		}},
		{"localhost redirect URI", func(d map[string]any) { d["redirect_uris"] = []string{"http://localhost:8080/cb"} }, func(t *testing.T, c *Client) {
			if c.RedirectURIs[0] != "http://localhost:8080/cb" {
				t.Errorf("%v", c.RedirectURIs)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var id string
			host := newCIMDHost(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				_ = json.NewEncoder(w).Encode(cimdDoc(id, c.tweak))
			})
			id = host.ts.URL + "/client.json?v=2" // a query is discouraged, not forbidden
			cl, err := newCIMDServer(t, trusting(host)).fetchClientMetadata(cimdCtx(t), id)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, cl)
		})
	}
}

// TestCIMDSlowDocument: a host that never answers is given up on with a
// sentence, and that is remembered like any failure.
func TestCIMDSlowDocument(t *testing.T) {
	release := make(chan struct{})
	host := newCIMDHost(t, func(w http.ResponseWriter, r *http.Request) {
		select { // until the test ends, or the server gives up
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // before newCIMDHost's ts.Close
	id := host.ts.URL + "/client.json"
	s := newCIMDServer(t, trusting(host))

	// Long enough for the request to reach the host on a busy machine (a
	// TLS handshake alone took over 50 ms under load), so that the one
	// request counted below is the one that timed out.
	_, err := s.fetchClientMetadataWithin(cimdCtx(t), id, 2*time.Second)
	wantCIMDError(t, err, id, "it did not arrive within 2s")
	_, err = s.fetchClientMetadata(cimdCtx(t), id)
	wantCIMDError(t, err, id, "it did not arrive within 2s")
	if n := host.hits.Load(); n != 1 {
		t.Fatalf("%d requests; the timeout must be remembered", n)
	}
}

// TestCIMDPrivateAddressRefused: a client whose document lives on a
// private address is refused, with the SSRF sentence, before any request.
func TestCIMDPrivateAddressRefused(t *testing.T) {
	var id string
	host := newCIMDHost(t, func(w http.ResponseWriter, r *http.Request) { serveJSON(w, cimdDoc(id, nil)) })
	id = host.ts.URL + "/client.json"
	const ssrf = "this server refuses to fetch it (SSRF protection): "
	cases := []struct {
		name   string
		id     string
		tweak  func(*Config)
		reason string
	}{
		{"private network", "https://10.0.0.1/client", nil, ssrf + "it points at a private network address (10.0.0.0/8)"},
		{"loopback, its TLS client but no test allowance", id, func(c *Config) { c.HTTPClient = host.ts.Client() },
			ssrf + "it points at this computer (loopback)"},
		{"loopback, no test allowance", id, nil, ssrf + "it points at this computer (loopback)"},
		{"cloud metadata", "https://169.254.169.254/latest/meta-data/client", func(c *Config) { c.AllowPrivateCIMD = true },
			ssrf + "it points at the cloud metadata address 169.254.169.254"},
		{"metadata name", "https://metadata.google.internal/client", nil, ssrf + "it points at a cloud metadata service"},
		{"localhost", "https://localhost/client", nil, ssrf + "it points at this computer (loopback)"},
		{"mapped IPv6", "https://[::ffff:192.168.1.1]/client", nil, ssrf + "it points at a private network address (192.168.0.0/16)"},
		{"short IPv4 form", "https://127.1/client", nil, ssrf + "it points at this computer (loopback)"},
		{"internal name", "https://clients.corp/client", nil, ssrf + "it points at a private network name (.corp)"},
		{"credentials", "https://user:pw@app.example/client", nil, ssrf + "it carries a user name or password"},
		{"http", "http://app.example/client", nil, "it is not an https URL"},
		{"no path", "https://app.example", nil, "it has no path"},
		{"root path", "https://app.example/", nil, "it has no path"},
		{"fragment", "https://app.example/client#x", nil, "it has a fragment"},
		{"dot segment", "https://app.example/a/../client", nil, "a . or .. segment"},
		{"encoded dot segment", "https://app.example/a/%2e%2e/client", nil, "a . or .. segment"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newCIMDServer(t, c.tweak)
			_, err := s.fetchClientMetadata(cimdCtx(t), c.id)
			wantCIMDError(t, err, c.id, c.reason)
		})
	}
	if n := host.hits.Load(); n != 0 {
		t.Fatalf("the loopback host got %d requests; want none", n)
	}
}

// TestCIMDDefaultClientWithAllowance: without HTTPClient the netguard
// client is used; the test allowance lets it connect to loopback, where
// the failure is the test certificate's, not the address's.
func TestCIMDDefaultClientWithAllowance(t *testing.T) {
	host := newCIMDHost(t, func(w http.ResponseWriter, r *http.Request) {})
	id := host.ts.URL + "/client.json"
	s := newCIMDServer(t, func(c *Config) { c.AllowPrivateCIMD = true })
	_, err := s.fetchClientMetadata(cimdCtx(t), id)
	wantCIMDError(t, err, id, "it could not be fetched: tls: failed to verify certificate")
	if strings.Contains(err.Error(), "SSRF") {
		t.Fatalf("refused as SSRF under the allowance: %v", err)
	}
}

func TestCIMDCacheAge(t *testing.T) {
	cases := []struct {
		name   string
		header []string
		want   time.Duration
	}{
		{"none", nil, 5 * time.Minute},
		{"max-age", []string{"public, max-age=600"}, 10 * time.Minute},
		{"below a minute", []string{"max-age=5"}, time.Minute},
		{"zero", []string{"max-age=0"}, time.Minute},
		{"no-store", []string{"no-store"}, time.Minute},
		{"no-cache wins", []string{"max-age=600, no-cache"}, time.Minute},
		{"above a day", []string{"max-age=31536000"}, 24 * time.Hour},
		{"huge", []string{"max-age=99999999999999999999"}, 5 * time.Minute},
		{"garbage", []string{"max-age=soon"}, 5 * time.Minute},
		{"quoted", []string{`max-age="120"`}, 2 * time.Minute},
		{"two headers", []string{"public", "max-age=3600"}, time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range c.header {
				h.Add("Cache-Control", v)
			}
			if got := cimdCacheAge(h); got != c.want {
				t.Errorf("cimdCacheAge(%q) = %s, want %s", c.header, got, c.want)
			}
		})
	}
}
