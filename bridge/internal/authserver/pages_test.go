package authserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/bcrypt"
)

// The person-facing flow, driven the way a browser drives it: an
// http.Client with a cookie jar against the real handler on a real socket,
// stopping at the redirect to the app.

const flowPassword = "correct horse battery"

// flowWorld is an authorization server on httptest with one registered
// client and one resource.
type flowWorld struct {
	t        *testing.T
	srv      *Server
	url      string
	client   Client
	resource Resource
	logs     *pageLogs
	clock    *flowClock
}

// pageLogs collects the server's log lines from handler goroutines.
type pageLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *pageLogs) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *pageLogs) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// flowClock is a clock the test moves (request expiry, the attempt
// window) instead of sleeping.
type flowClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *flowClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *flowClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testPasswordHash is a bcrypt hash of flowPassword at the lowest cost, so
// the tests do not spend seconds hashing.
var testPasswordHash = func() string {
	h, err := bcrypt.GenerateFromPassword([]byte(flowPassword), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return string(h)
}()

type flowOptions struct {
	identity   *IdentityConfig // nil: the password hash of flowPassword
	kv         KV
	clientName string
	redirects  []string
	wrap       func(http.Handler) http.Handler // around the server's handler
	limits     *Limits                         // nil: the defaults
}

func newFlowWorld(t *testing.T, opt flowOptions) *flowWorld {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	w := &flowWorld{t: t, url: issuer, logs: &pageLogs{},
		clock:    &flowClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		resource: Resource{URI: issuer + "/servers/memory/mcp", Name: `the MCP server "memory"`}}
	id := IdentityConfig{PasswordHash: testPasswordHash}
	if opt.identity != nil {
		id = *opt.identity
	}
	var limits Limits
	if opt.limits != nil {
		limits = *opt.limits
	}
	srv, err := New(Config{
		Issuer: issuer,
		KV:     opt.kv,
		Resources: func(uri string) (Resource, bool) {
			if uri == w.resource.URI {
				return w.resource, true
			}
			return Resource{}, false
		},
		Identity: id,
		Limits:   limits,
		Logger:   slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:      w.clock.now,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w.srv = srv
	ts.Config.Handler = srv.Handler()
	if opt.wrap != nil {
		ts.Config.Handler = opt.wrap(ts.Config.Handler)
	}
	ts.Start()
	t.Cleanup(func() { ts.Close(); srv.Close() })

	name := opt.clientName
	if name == "" {
		name = "Claude"
	}
	redirects := opt.redirects
	if redirects == nil {
		redirects = []string{"https://claude.ai/api/mcp/auth_callback"}
	}
	w.client = Client{ID: "client-" + randomToken("")[:12], Name: name, RedirectURIs: redirects,
		GrantTypes: []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethod: "none",
		CreatedAt: w.clock.now(), LastUsedAt: w.clock.now()}
	if _, err := srv.createJSON(context.Background(), bucketClients, w.client.ID, w.client, 0); err != nil {
		t.Fatalf("registering the test client: %v", err)
	}
	return w
}

// pkceChallenge is the S256 challenge of verifier (RFC 7636).
func pkceChallenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

const flowVerifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk-and-some-more"

// authorizeParams are a valid request for the world's client; tests
// change them.
func (w *flowWorld) authorizeParams() url.Values {
	return url.Values{
		"response_type":         {"code"},
		"client_id":             {w.client.ID},
		"redirect_uri":          {w.client.RedirectURIs[0]},
		"state":                 {"st-123"},
		"scope":                 {"mcp"},
		"resource":              {w.resource.URI},
		"code_challenge":        {pkceChallenge(flowVerifier)},
		"code_challenge_method": {"S256"},
	}
}

// webBrowser is a person's browser: its own cookie jar; it follows redirects
// except to the app's redirect URIs, where the test looks at the Location.
type webBrowser struct {
	t    *testing.T
	w    *flowWorld
	http *http.Client
	// follow are origins besides the server's whose redirects the browser
	// follows (an OIDC provider's).
	follow []string
}

func (w *flowWorld) newBrowser() *webBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		w.t.Fatal(err)
	}
	b := &webBrowser{t: w.t, w: w}
	b.http = &http.Client{Jar: jar, Timeout: time.Minute, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		origin := req.URL.Scheme + "://" + req.URL.Host
		if origin == w.url || contains(b.follow, origin) {
			return nil
		}
		return http.ErrUseLastResponse // the app's redirect URI: the test looks at it
	}}
	return b
}

// webPage is a response read whole.
type webPage struct {
	status int
	header http.Header
	body   string
}

func (p webPage) hidden(name string) string {
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(p.body)
	if m == nil {
		return ""
	}
	return m[1]
}

func (p webPage) location(t *testing.T) *url.URL {
	t.Helper()
	loc := p.header.Get("Location")
	if loc == "" {
		t.Fatalf("no Location (status %d): %s", p.status, p.body)
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (b *webBrowser) do(req *http.Request) webPage {
	b.t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return webPage{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *webBrowser) get(rawURL string) webPage {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

func (b *webBrowser) authorize(q url.Values) webPage {
	b.t.Helper()
	return b.get(b.w.url + "/oauth/authorize?" + q.Encode())
}

// post sends a form the way a browser submits one of the pages' forms:
// from the page's own origin.
func (b *webBrowser) post(path string, form url.Values, header ...string) webPage {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.w.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "null") // what Fetch sends under Referrer-Policy: no-referrer
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	return b.do(req)
}

// formOf is the form a page's hidden fields make, plus extra fields.
func formOf(p webPage, kv ...string) url.Values {
	f := url.Values{"request": {p.hidden("request")}, "csrf": {p.hidden("csrf")}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

func wantPage(t *testing.T, p webPage, status int, contains ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d; body:\n%s", p.status, status, p.body)
	}
	for _, c := range contains {
		if !strings.Contains(p.body, c) {
			t.Fatalf("the page lacks %q:\n%s", c, p.body)
		}
	}
}

// signIn takes a fresh browser to the consent page.
func (w *flowWorld) signIn(b *webBrowser) webPage {
	w.t.Helper()
	p := b.authorize(w.authorizeParams())
	wantPage(w.t, p, http.StatusOK, `name="password"`)
	c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
	wantPage(w.t, c, http.StatusOK, `value="approve"`)
	return c
}

func TestPagesFullFlow(t *testing.T) {
	w := newFlowWorld(t, flowOptions{})
	b := w.newBrowser()

	p := b.authorize(w.authorizeParams())
	wantPage(t, p, http.StatusOK, "Claude", "the name the app gave itself", "https://claude.ai",
		"the MCP server &#34;memory&#34;", w.resource.URI, `name="password"`, `action="/oauth/signin"`)
	if strings.Contains(p.body, `name="code"`) || strings.Contains(p.body, `value="oidc"`) {
		t.Fatalf("the sign-in page offers ways that are not configured:\n%s", p.body)
	}
	if p.hidden("request") == "" || p.hidden("csrf") == "" {
		t.Fatalf("the sign-in form lacks request or csrf:\n%s", p.body)
	}
	cookie := requestCookieOf(t, w)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/oauth/" || cookie.Secure {
		t.Fatalf("request cookie %+v: want HttpOnly, SameSite=Lax, Path=/oauth/, not Secure on http", cookie)
	}

	wrong := b.post("/oauth/signin", formOf(p, "password", "correct horse battery?"))
	wantPage(t, wrong, http.StatusUnauthorized, "That password is not right. Try again.", `name="password"`)

	c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
	wantPage(t, c, http.StatusOK, "Allow this app?", "Signed in as", "owner", "Claude", "https://claude.ai",
		w.resource.URI, `value="approve"`, `value="deny"`, `action="/oauth/consent"`)

	done := b.post("/oauth/consent", formOf(c, "decision", "approve"))
	if done.status != http.StatusSeeOther {
		t.Fatalf("approve: status %d, want 303:\n%s", done.status, done.body)
	}
	loc := done.location(t)
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != "https://claude.ai/api/mcp/auth_callback" {
		t.Fatalf("redirected to %s", loc)
	}
	q := loc.Query()
	if q.Get("state") != "st-123" || q.Get("iss") != w.url || q.Get("code") == "" || q.Get("error") != "" {
		t.Fatalf("redirect query %v: want code, state st-123, iss %s", q, w.url)
	}
	var code Code
	if _, err := w.srv.getJSON(context.Background(), bucketCodes, hashSecret(q.Get("code")), &code); err != nil {
		t.Fatalf("the code is not in the store: %v", err)
	}
	if code.ClientID != w.client.ID || code.Resource != w.resource.URI || code.Subject.ID != "password:owner" ||
		code.CodeChallenge != pkceChallenge(flowVerifier) || code.RedirectURI != w.client.RedirectURIs[0] || code.Scope != "mcp" {
		t.Fatalf("stored code %+v does not match the request", code)
	}

	// Single use: the same consent form again, and the request's cookie is gone.
	again := b.post("/oauth/consent", formOf(c, "decision", "approve"))
	wantPage(t, again, http.StatusBadRequest, "already used, or it expired")
	if again.header.Get("Location") != "" {
		t.Fatalf("a spent request redirected to %s", again.header.Get("Location"))
	}
	if _, _, err := w.srv.kv.Get(context.Background(), bucketRequests, c.hidden("request")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the request is still stored after the decision: %v", err)
	}

	if logs := w.logs.String(); strings.Contains(logs, flowPassword) || strings.Contains(logs, q.Get("code")) ||
		strings.Contains(logs, c.hidden("csrf")) {
		t.Fatalf("a secret reached the log:\n%s", logs)
	}
}

func requestCookieOf(t *testing.T, w *flowWorld) *http.Cookie {
	t.Helper()
	// The jar hides attributes, so read them from a fresh authorize's
	// Set-Cookie instead of the jar.
	resp, err := http.Get(w.url + "/oauth/authorize?" + w.authorizeParams().Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, requestCookiePrefix) {
			return c
		}
	}
	t.Fatalf("authorize set no %s cookie", requestCookiePrefix)
	return nil
}

func TestPagesDeny(t *testing.T) {
	w := newFlowWorld(t, flowOptions{})
	b := w.newBrowser()
	c := w.signIn(b)
	p := b.post("/oauth/consent", formOf(c, "decision", "deny"))
	if p.status != http.StatusSeeOther {
		t.Fatalf("deny: status %d:\n%s", p.status, p.body)
	}
	q := p.location(t).Query()
	if q.Get("error") != "access_denied" || q.Get("state") != "st-123" || q.Get("iss") != w.url || q.Get("code") != "" {
		t.Fatalf("deny redirect query %v", q)
	}
	if n, _ := w.srv.kv.Count(context.Background(), bucketCodes); n != 0 {
		t.Fatalf("deny stored %d codes", n)
	}
	again := b.post("/oauth/consent", formOf(c, "decision", "approve"))
	wantPage(t, again, http.StatusBadRequest, "already used")
}

// TestPagesAuthorizeRefusals: before the client and redirect URI are known
// good, a page and never a redirect; after, back to the app with an error.
func TestPagesAuthorizeRefusals(t *testing.T) {
	w := newFlowWorld(t, flowOptions{redirects: []string{"https://claude.ai/api/mcp/auth_callback", "https://claude.com/api/mcp/auth_callback"}})
	cases := []struct {
		name   string
		change func(q url.Values)
		// a page:
		status int
		text   string
		// or a redirect with:
		errCode, desc string
	}{
		{name: "unregistered redirect URI", change: func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") },
			status: 400, text: "did not register"},
		{name: "redirect URI differing in the path", change: func(q url.Values) { q.Set("redirect_uri", "https://claude.ai/api/mcp/auth_callback/x") },
			status: 400, text: "did not register"},
		{name: "no redirect URI and two registered", change: func(q url.Values) { q.Del("redirect_uri") },
			status: 400, text: "registered more than one"},
		{name: "two redirect URIs", change: func(q url.Values) { q.Add("redirect_uri", "https://claude.com/api/mcp/auth_callback") },
			status: 400, text: "more than one redirect_uri"},
		{name: "unknown client", change: func(q url.Values) { q.Set("client_id", "nobody") },
			status: 400, text: "not registered with this server"},
		{name: "no client", change: func(q url.Values) { q.Del("client_id") },
			status: 400, text: "client_id is missing"},
		{name: "plain PKCE", change: func(q url.Values) { q.Set("code_challenge_method", "plain"); q.Set("code_challenge", flowVerifier) },
			errCode: "invalid_request", desc: "PKCE with S256 is required"},
		{name: "no PKCE method", change: func(q url.Values) { q.Del("code_challenge_method") },
			errCode: "invalid_request", desc: "PKCE with S256 is required"},
		{name: "no code challenge", change: func(q url.Values) { q.Del("code_challenge") },
			errCode: "invalid_request", desc: "PKCE with S256 is required"},
		{name: "malformed challenge", change: func(q url.Values) { q.Set("code_challenge", "short") },
			errCode: "invalid_request", desc: "43 characters"},
		{name: "no resource", change: func(q url.Values) { q.Del("resource") },
			errCode: "invalid_request", desc: "Send the MCP server URL as the resource parameter"},
		{name: "unknown resource", change: func(q url.Values) { q.Set("resource", w.url+"/servers/other/mcp") },
			errCode: "invalid_target", desc: "is not an MCP server"},
		{name: "two resources", change: func(q url.Values) { q.Add("resource", w.url+"/servers/other/mcp") },
			errCode: "invalid_target", desc: "one resource"},
		{name: "implicit flow", change: func(q url.Values) { q.Set("response_type", "token") },
			errCode: "unsupported_response_type", desc: "response_type=code"},
		{name: "two states", change: func(q url.Values) { q.Add("state", "other") },
			errCode: "invalid_request", desc: "state appears more than once"},
	}
	// Until a person has seen the app's consent page, every refusal is a
	// page of this server's: anyone can register a client with any
	// redirect URI, which would make this server an open redirector (RFC
	// 9700 §4.11.2). Once they have, refusals go back to the app.
	for _, tc := range cases {
		t.Run("unseen app: "+tc.name, func(t *testing.T) {
			q := w.authorizeParams()
			tc.change(q)
			p := w.newBrowser().authorize(q)
			text := tc.text
			if tc.errCode != "" {
				text = tc.desc
			}
			wantPage(t, p, http.StatusBadRequest, text)
			if p.header.Get("Location") != "" {
				t.Fatalf("refused by redirecting to %s", p.header.Get("Location"))
			}
		})
	}
	w.signIn(w.newBrowser()) // the consent page, seen once
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := w.authorizeParams()
			tc.change(q)
			p := w.newBrowser().authorize(q)
			if tc.errCode == "" {
				wantPage(t, p, tc.status, tc.text)
				if p.header.Get("Location") != "" {
					t.Fatalf("refused by redirecting to %s", p.header.Get("Location"))
				}
				if !strings.Contains(p.header.Get("Content-Type"), "text/html") {
					t.Fatalf("Content-Type %q, want a page", p.header.Get("Content-Type"))
				}
				return
			}
			if p.status != http.StatusFound {
				t.Fatalf("status %d, want 302:\n%s", p.status, p.body)
			}
			loc := p.location(t)
			if !strings.HasPrefix(loc.String(), "https://claude.ai/api/mcp/auth_callback?") {
				t.Fatalf("redirected to %s", loc)
			}
			got := loc.Query()
			if got.Get("error") != tc.errCode || !strings.Contains(got.Get("error_description"), tc.desc) ||
				got.Get("iss") != w.url || got.Get("code") != "" {
				t.Fatalf("redirect query %v: want error %s with %q", got, tc.errCode, tc.desc)
			}
			if wantState := q.Get("state"); len(q["state"]) == 1 && got.Get("state") != wantState {
				t.Fatalf("state %q, want %q", got.Get("state"), wantState)
			}
		})
	}
	if n, _ := w.srv.kv.Count(context.Background(), bucketRequests); n != 1 {
		t.Fatalf("refused requests left %d stored requests besides the signed-in one", n-1)
	}
}

func TestPagesRedirectURIChoice(t *testing.T) {
	t.Run("the only registered one when none is given", func(t *testing.T) {
		w := newFlowWorld(t, flowOptions{})
		q := w.authorizeParams()
		q.Del("redirect_uri")
		b := w.newBrowser()
		p := b.authorize(q)
		wantPage(t, p, http.StatusOK, "https://claude.ai")
		c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
		done := b.post("/oauth/consent", formOf(c, "decision", "approve"))
		if loc := done.location(t); !strings.HasPrefix(loc.String(), "https://claude.ai/api/mcp/auth_callback?") {
			t.Fatalf("redirected to %s", loc)
		}
	})
	t.Run("a loopback IP literal on another port", func(t *testing.T) {
		w := newFlowWorld(t, flowOptions{redirects: []string{"http://127.0.0.1:33418/callback"}})
		for _, tc := range []struct {
			uri  string
			want int
		}{
			{"http://127.0.0.1:51234/callback", http.StatusOK},
			{"http://127.0.0.1:51234/other", http.StatusBadRequest},
			{"http://localhost:51234/callback", http.StatusBadRequest},
		} {
			q := w.authorizeParams()
			q.Set("redirect_uri", tc.uri)
			if p := w.newBrowser().authorize(q); p.status != tc.want {
				t.Errorf("%s: status %d, want %d", tc.uri, p.status, tc.want)
			}
		}
	})
}

// TestPagesCSRF: a form is accepted only from this site, from the browser
// that opened the request, with the request's token.
func TestPagesCSRF(t *testing.T) {
	w := newFlowWorld(t, flowOptions{})
	cases := []struct {
		name string
		send func(owner *webBrowser, p webPage) webPage
		want int
	}{
		{"right token, cookie and origin", func(b *webBrowser, p webPage) webPage {
			return b.post("/oauth/signin", formOf(p, "password", flowPassword))
		}, http.StatusOK},
		{"the page's own origin named", func(b *webBrowser, p webPage) webPage {
			return b.post("/oauth/signin", formOf(p, "password", flowPassword), "Origin", w.url)
		}, http.StatusOK},
		{"an old browser without fetch metadata", func(b *webBrowser, p webPage) webPage {
			return b.post("/oauth/signin", formOf(p, "password", flowPassword), "Origin", "", "Sec-Fetch-Site", "")
		}, http.StatusOK},
		{"wrong csrf token", func(b *webBrowser, p webPage) webPage {
			return b.post("/oauth/signin", formOf(p, "password", flowPassword, "csrf", randomToken("")))
		}, http.StatusForbidden},
		{"no csrf token", func(b *webBrowser, p webPage) webPage {
			f := formOf(p, "password", flowPassword)
			f.Del("csrf")
			return b.post("/oauth/signin", f)
		}, http.StatusForbidden},
		{"no cookie (a browser that never opened it)", func(_ *webBrowser, p webPage) webPage {
			return w.newBrowser().post("/oauth/signin", formOf(p, "password", flowPassword))
		}, http.StatusForbidden},
		{"a cookie from another browser's request", func(_ *webBrowser, p webPage) webPage {
			other := w.newBrowser()
			other.authorize(w.authorizeParams())
			return other.post("/oauth/signin", formOf(p, "password", flowPassword))
		}, http.StatusForbidden},
		{"a forged cookie of the same name", func(_ *webBrowser, p webPage) webPage {
			other := w.newBrowser()
			u, _ := url.Parse(w.url + "/oauth/")
			other.http.Jar.SetCookies(u, []*http.Cookie{{Name: requestCookiePrefix + p.hidden("request"), Value: randomToken(""), Path: "/oauth/"}})
			return other.post("/oauth/signin", formOf(p, "password", flowPassword))
		}, http.StatusForbidden},
		{"posted from another site", func(b *webBrowser, p webPage) webPage {
			return b.post("/oauth/signin", formOf(p, "password", flowPassword), "Origin", "https://evil.example", "Sec-Fetch-Site", "")
		}, http.StatusForbidden},
		{"fetch metadata says cross-site", func(b *webBrowser, p webPage) webPage {
			return b.post("/oauth/signin", formOf(p, "password", flowPassword), "Sec-Fetch-Site", "cross-site")
		}, http.StatusForbidden},
		{"consent from another browser", func(b *webBrowser, p webPage) webPage {
			c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
			return w.newBrowser().post("/oauth/consent", formOf(c, "decision", "approve"))
		}, http.StatusForbidden},
		{"consent with a wrong token", func(b *webBrowser, p webPage) webPage {
			c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
			return b.post("/oauth/consent", formOf(c, "decision", "approve", "csrf", "x"))
		}, http.StatusForbidden},
		{"consent before signing in", func(b *webBrowser, p webPage) webPage {
			return b.post("/oauth/consent", formOf(p, "decision", "approve"))
		}, http.StatusForbidden},
		{"an unknown request id", func(b *webBrowser, p webPage) webPage {
			return b.post("/oauth/signin", formOf(p, "password", flowPassword, "request", randomToken("")))
		}, http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := w.newBrowser()
			p := b.authorize(w.authorizeParams())
			wantPage(t, p, http.StatusOK)
			got := tc.send(b, p)
			if got.status != tc.want {
				t.Fatalf("status %d, want %d:\n%s", got.status, tc.want, got.body)
			}
			if got.header.Get("Location") != "" {
				t.Fatalf("redirected to %s", got.header.Get("Location"))
			}
			if tc.want == http.StatusForbidden && !strings.Contains(got.body, "Refused") && !strings.Contains(got.body, "Sign in before") {
				t.Fatalf("the refusal page says nothing useful:\n%s", got.body)
			}
		})
	}
	if n, _ := w.srv.kv.Count(context.Background(), bucketCodes); n != 0 {
		t.Fatalf("refused forms issued %d codes", n)
	}
}

func TestPagesClientNameEscaped(t *testing.T) {
	w := newFlowWorld(t, flowOptions{clientName: `<script>alert(1)</script>`})
	b := w.newBrowser()
	p := b.authorize(w.authorizeParams())
	c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
	for name, pg := range map[string]webPage{"sign-in": p, "consent": c} {
		if strings.Contains(pg.body, "<script") {
			t.Fatalf("%s page carries the name unescaped:\n%s", name, pg.body)
		}
		if !strings.Contains(pg.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatalf("%s page lacks the escaped name:\n%s", name, pg.body)
		}
	}
}

func TestPagesSecurityHeaders(t *testing.T) {
	w := newFlowWorld(t, flowOptions{redirects: []string{"http://127.0.0.1:33418/callback"}})
	b := w.newBrowser()
	p := b.authorize(w.authorizeParams())
	c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
	refused := w.newBrowser().post("/oauth/signin", formOf(p))
	for _, tc := range []struct {
		name       string
		pg         webPage
		formAction string
	}{
		{"sign-in", p, "form-action 'self';"},
		{"consent", c, "form-action 'self' http://127.0.0.1:33418;"},
		{"refusal", refused, "form-action 'self';"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.pg.header
			csp := h.Get("Content-Security-Policy")
			m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(tc.pg.body)
			if m == nil {
				t.Fatalf("no inline style:\n%s", tc.pg.body)
			}
			sum := sha256.Sum256([]byte(m[1]))
			want := "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
				tc.formAction + " frame-ancestors 'none'; base-uri 'none'"
			if csp != want {
				t.Fatalf("CSP\n got %s\nwant %s", csp, want)
			}
			for k, v := range map[string]string{"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
				"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"} {
				if h.Get(k) != v {
					t.Errorf("%s: %q, want %q", k, h.Get(k), v)
				}
			}
			if strings.Contains(tc.pg.body, "<script") || strings.Contains(tc.pg.body, " style=") {
				t.Errorf("the page has a script or an inline style attribute, which its CSP blocks")
			}
		})
	}
}

func TestPagesCSPSource(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://claude.ai/api/mcp/auth_callback", "https://claude.ai"},
		{"http://127.0.0.1:33418/callback?x=1", "http://127.0.0.1:33418"},
		{"http://[::1]:8080/cb", "http://[::1]:8080"},
		{"cursor://anysphere.cursor-retrieval/oauth/callback", "cursor:"},
		{"HTTPS://Claude.AI/cb", "https://Claude.AI"},
		{"https://a.example;script-src/x", ""},
		{"https://a.example%20b/x", ""},
		{"/relative", ""},
		{"java script:alert(1)", ""},
	} {
		if got := cspSource(tc.in); got != tc.want {
			t.Errorf("cspSource(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestPagesRateLimit: five attempts a minute per request, twenty per
// address; the limit holds even for the right password, and lifts when
// the window has passed.
func TestPagesRateLimit(t *testing.T) {
	t.Run("per request", func(t *testing.T) {
		w := newFlowWorld(t, flowOptions{})
		b := w.newBrowser()
		p := b.authorize(w.authorizeParams())
		for i := range attemptsPerRequest {
			got := b.post("/oauth/signin", formOf(p, "password", "wrong password "+string(rune('a'+i))))
			wantPage(t, got, http.StatusUnauthorized, "not right")
		}
		got := b.post("/oauth/signin", formOf(p, "password", flowPassword))
		wantPage(t, got, http.StatusTooManyRequests, "Too many attempts on this sign-in. Wait a minute")
		if got.header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		// Another request in the same webBrowser is not held back by this one.
		other := b.authorize(w.authorizeParams())
		wantPage(t, b.post("/oauth/signin", formOf(other, "password", flowPassword)), http.StatusOK, "Allow this app?")

		w.clock.add(attemptWindow)
		wantPage(t, b.post("/oauth/signin", formOf(p, "password", flowPassword)), http.StatusOK, "Allow this app?")
	})
	t.Run("per address", func(t *testing.T) {
		w := newFlowWorld(t, flowOptions{})
		b := w.newBrowser()
		for n := 0; n < attemptsPerAddress; {
			p := b.authorize(w.authorizeParams())
			for range attemptsPerRequest - 1 {
				if n == attemptsPerAddress {
					break
				}
				wantPage(t, b.post("/oauth/signin", formOf(p, "password", "wrong password!")), http.StatusUnauthorized)
				n++
			}
		}
		p := b.authorize(w.authorizeParams())
		wantPage(t, b.post("/oauth/signin", formOf(p, "password", flowPassword)), http.StatusTooManyRequests,
			"Too many sign-in attempts from your network")
	})
}

// TestPagesOpenRequestsLimit: opening sign-in requests needs no password
// but stores an entry each, so one address opens a bounded number a
// minute, and the store keeps a bounded number of them (its newest).
func TestPagesOpenRequestsLimit(t *testing.T) {
	w := newFlowWorld(t, flowOptions{})
	b := w.newBrowser()
	for range requestsPerAddress {
		wantPage(t, b.authorize(w.authorizeParams()), http.StatusOK)
	}
	p := b.authorize(w.authorizeParams())
	wantPage(t, p, http.StatusTooManyRequests, "Too many sign-ins were started from your network")
	if p.header.Get("Location") != "" {
		t.Fatalf("redirected to %s", p.header.Get("Location"))
	}
	if n, _ := w.srv.kv.Count(context.Background(), bucketRequests); n != defaultMaxSignInsPerAddress {
		t.Fatalf("%d requests stored, want %d", n, defaultMaxSignInsPerAddress)
	}
	w.clock.add(attemptWindow)
	wantPage(t, b.authorize(w.authorizeParams()), http.StatusOK)
}

func TestPagesRequestExpires(t *testing.T) {
	w := newFlowWorld(t, flowOptions{})
	b := w.newBrowser()
	p := b.authorize(w.authorizeParams())
	w.clock.add(w.srv.requestTTL() + time.Second)
	wantPage(t, b.post("/oauth/signin", formOf(p, "password", flowPassword)), http.StatusBadRequest, "expired")
}

// TestPagesSignInSession: a webBrowser that signed in goes straight to
// consent next time, until it chooses another account, the session
// expires, or the sign-in configuration changes.
func TestPagesSignInSession(t *testing.T) {
	kv := NewMemoryKV(nil)
	w := newFlowWorld(t, flowOptions{kv: kv})
	b := w.newBrowser()
	c := w.signIn(b)
	b.post("/oauth/consent", formOf(c, "decision", "approve"))

	again := b.authorize(w.authorizeParams())
	wantPage(t, again, http.StatusOK, "Allow this app?", "owner", "Use another account")
	done := b.post("/oauth/consent", formOf(again, "decision", "approve"))
	if done.status != http.StatusSeeOther || done.location(t).Query().Get("code") == "" {
		t.Fatalf("approve from a session: status %d, Location %q", done.status, done.header.Get("Location"))
	}

	// Another webBrowser has no session.
	wantPage(t, w.newBrowser().authorize(w.authorizeParams()), http.StatusOK, `name="password"`)

	// "Use another account" ends the session.
	third := b.authorize(w.authorizeParams())
	sw := b.post("/oauth/consent", formOf(third, "decision", "switch"))
	wantPage(t, sw, http.StatusOK, `name="password"`)
	wantPage(t, b.post("/oauth/consent", formOf(third, "decision", "approve")), http.StatusForbidden, "Sign in before")
	wantPage(t, b.authorize(w.authorizeParams()), http.StatusOK, `name="password"`)

	t.Run("a changed password ends sessions", func(t *testing.T) {
		w := newFlowWorld(t, flowOptions{kv: kv})
		b := w.newBrowser()
		w.signIn(b)
		wantPage(t, b.authorize(w.authorizeParams()), http.StatusOK, "Allow this app?")
		// The same store, another server with another password: the
		// browser's session cookie is for the old one.
		w2 := newFlowWorld(t, flowOptions{kv: kv, identity: &IdentityConfig{Password: "another long password"}})
		b2 := w2.newBrowser()
		b2.http.Jar = b.http.Jar
		wantPage(t, b2.authorize(w2.authorizeParams()), http.StatusOK, `name="password"`)
	})
	t.Run("sessions off", func(t *testing.T) {
		w := newFlowWorld(t, flowOptions{identity: &IdentityConfig{PasswordHash: testPasswordHash, SessionTTL: -1}})
		b := w.newBrowser()
		w.signIn(b)
		wantPage(t, b.authorize(w.authorizeParams()), http.StatusOK, `name="password"`)
	})
	t.Run("a session expires", func(t *testing.T) {
		w := newFlowWorld(t, flowOptions{identity: &IdentityConfig{PasswordHash: testPasswordHash, SessionTTL: time.Hour}})
		b := w.newBrowser()
		w.signIn(b)
		w.clock.add(time.Hour)
		wantPage(t, b.authorize(w.authorizeParams()), http.StatusOK, `name="password"`)
	})
}

// TestPagesConcurrentApprove: of two approvals of one request racing,
// exactly one gets a code.
func TestPagesConcurrentApprove(t *testing.T) {
	w := newFlowWorld(t, flowOptions{})
	b := w.newBrowser()
	c := w.signIn(b)
	const n = 8
	results := make(chan webPage, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- b.post("/oauth/consent", formOf(c, "decision", "approve"))
		}()
	}
	wg.Wait()
	close(results)
	codes := 0
	for p := range results {
		if p.status == http.StatusSeeOther {
			codes++
		} else if p.status != http.StatusBadRequest && p.status != http.StatusConflict {
			t.Errorf("status %d:\n%s", p.status, p.body)
		}
	}
	if codes != 1 {
		t.Fatalf("%d approvals got a code, want 1", codes)
	}
}

// TestPagesInChromium signs in and approves in headless Chromium, the
// redirect URI on another origin than the server: Chromium applies
// form-action to the redirect that answers the consent post, so this holds
// the CSP to allowing the app's origin. The control run takes that origin
// out of the consent page's CSP and sees Chromium block the redirect, so
// the first run is known to test something.
func TestPagesInChromium(t *testing.T) {
	chromium := findChromium(t)
	callbacks := make(chan url.Values, 4)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r) // the favicon
			return
		}
		callbacks <- r.URL.Query()
		_, _ = io.WriteString(w, "back at the app")
	}))
	t.Cleanup(app.Close)

	var stripCSP atomic.Bool
	posts := make(chan http.Header, 16)
	w := newFlowWorld(t, flowOptions{redirects: []string{app.URL + "/callback"}, wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				posts <- r.Header.Clone()
			}
			if stripCSP.Load() {
				rw = &cspRewriter{ResponseWriter: rw, drop: " " + app.URL}
			}
			next.ServeHTTP(rw, r)
		})
	}})
	br := startChromium(t, chromium)

	run := func(t *testing.T) *cdpPage {
		page := br.newPage(t)
		// Signed out each time: the first run leaves a sign-in session.
		page.call(t, "Network.clearBrowserCookies", nil)
		page.navigate(t, w.url+"/oauth/authorize?"+w.authorizeParams().Encode())
		if text := page.text(t); !strings.Contains(text, "Sign in to connect an app") {
			t.Fatalf("sign-in page: %q", text)
		}
		page.submit(t, fmt.Sprintf(`document.querySelector('#password').value = %q;
			document.querySelector('#password').form.requestSubmit();`, flowPassword))
		if text := page.text(t); !strings.Contains(text, "Allow this app?") {
			t.Fatalf("consent page: %q", text)
		}
		// Reported by the page itself: a blocked redirect leaves the
		// consent page in place and fires this event on it.
		page.eval(t, `document.addEventListener('securitypolicyviolation',
			e => console.log('csp-violation ' + e.effectiveDirective + ' ' + e.blockedURI));`)
		page.eval(t, `document.querySelector('button[value=approve]').click();`)
		return page
	}

	t.Run("the consent post redirects to the app", func(t *testing.T) {
		run(t)
		select {
		case q := <-callbacks:
			if q.Get("code") == "" || q.Get("state") != "st-123" || q.Get("iss") != w.url {
				t.Fatalf("the app got %v", q)
			}
		case <-time.After(2 * time.Minute): // a deadlock guard, not a timing assertion
			t.Fatal("Chromium never reached the app's redirect URI")
		}
		// The form posts as Chromium sends them: Origin "null" under
		// Referrer-Policy: no-referrer, Sec-Fetch-Site same-origin.
		for range 2 {
			h := <-posts
			if h.Get("Origin") != "null" || h.Get("Sec-Fetch-Site") != "same-origin" {
				t.Errorf("a form post with Origin %q and Sec-Fetch-Site %q", h.Get("Origin"), h.Get("Sec-Fetch-Site"))
			}
		}
	})
	t.Run("control: without the app's origin in form-action Chromium blocks it", func(t *testing.T) {
		stripCSP.Store(true)
		defer stripCSP.Store(false)
		page := run(t)
		msg := page.waitConsole(t, "csp-violation")
		if !strings.Contains(msg, "form-action") {
			t.Fatalf("violation %q, want form-action", msg)
		}
		select {
		case q := <-callbacks:
			t.Fatalf("the redirect reached the app despite the CSP: %v", q)
		default:
		}
	})
}

// cspRewriter takes a source out of the Content-Security-Policy a handler
// writes (the control run of TestPagesInChromium).
type cspRewriter struct {
	http.ResponseWriter
	drop string
}

func (c *cspRewriter) WriteHeader(status int) {
	h := c.Header()
	h.Set("Content-Security-Policy", strings.ReplaceAll(h.Get("Content-Security-Policy"), c.drop, ""))
	c.ResponseWriter.WriteHeader(status)
}

func findChromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	// As in the e2e suite, a missing browser is a failure, not a skip:
	// `make test` (.ci/run) installs Debian's chromium.
	t.Fatal("no Chromium on this machine: apt-get install chromium (or run with -short)")
	return ""
}

// chromiumBrowser is headless Chromium driven through DevTools.
type chromiumBrowser struct {
	devtools string // host:port
	cmd      *exec.Cmd
}

func startChromium(t *testing.T, bin string) *chromiumBrowser {
	t.Helper()
	cmd := exec.Command(bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--no-default-browser-check", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--password-store=basic", "--remote-debugging-port=0",
		"--user-data-dir="+t.TempDir(), "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := &chromiumBrowser{cmd: cmd}
	exited := make(chan struct{})
	// Chromium says where DevTools listens on stderr; the rest of stderr
	// is drained so it never blocks on a full pipe.
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "DevTools listening on "); ok {
				found <- rest
			}
		}
		close(found)
		_ = cmd.Wait()
		close(exited)
	}()
	var browserWS string
	select {
	case ws, ok := <-found:
		if !ok {
			t.Fatal("Chromium exited without starting DevTools")
		}
		browserWS = ws
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("Chromium did not start DevTools")
	}
	br.devtools = strings.TrimPrefix(browserWS, "ws://")
	br.devtools, _, _ = strings.Cut(br.devtools, "/")
	// Closed the orderly way, so that it has finished writing its profile
	// (a t.TempDir, removed after this) when it exits.
	t.Cleanup(func() {
		if ws, _, err := websocket.DefaultDialer.Dial(browserWS, nil); err == nil {
			_ = ws.WriteJSON(map[string]any{"id": 1, "method": "Browser.close"})
			defer ws.Close()
		}
		select {
		case <-exited:
		case <-time.After(time.Minute): // a guard: kill what did not close
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return br
}

// cdpPage is one tab's DevTools connection: one reader goroutine hands
// command answers to their callers and events to a channel.
type cdpPage struct {
	ws      *websocket.Conn
	mu      sync.Mutex
	next    int
	answers map[int]chan cdpMessage
	events  chan cdpMessage
}

type cdpMessage struct {
	ID     int             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (br *chromiumBrowser) newPage(t *testing.T) *cdpPage {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, "http://"+br.devtools+"/json/new?about:blank", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var target struct {
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&target); err != nil {
		t.Fatalf("DevTools /json/new: %v", err)
	}
	ws, _, err := websocket.DefaultDialer.Dial(target.WebSocketDebuggerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &cdpPage{ws: ws, answers: map[int]chan cdpMessage{}, events: make(chan cdpMessage, 256)}
	go p.read()
	t.Cleanup(func() { _ = ws.Close() })
	p.call(t, "Page.enable", nil)
	p.call(t, "Runtime.enable", nil)
	return p
}

func (p *cdpPage) read() {
	defer close(p.events)
	for {
		var m cdpMessage
		if err := p.ws.ReadJSON(&m); err != nil {
			return
		}
		if m.ID == 0 {
			select {
			case p.events <- m:
			default: // nobody waits for this kind; drop it
			}
			continue
		}
		p.mu.Lock()
		ch := p.answers[m.ID]
		delete(p.answers, m.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

func (p *cdpPage) call(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	p.mu.Lock()
	p.next++
	id := p.next
	ch := make(chan cdpMessage, 1)
	p.answers[id] = ch
	err := p.ws.WriteJSON(map[string]any{"id": id, "method": method, "params": params})
	p.mu.Unlock()
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			t.Fatalf("%s: %s", method, m.Error.Message)
		}
		return m.Result
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: no answer from Chromium", method)
		return nil
	}
}

// waitEvent waits for the next event named method.
func (p *cdpPage) waitEvent(t *testing.T, method string) json.RawMessage {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case m, ok := <-p.events:
			if !ok {
				t.Fatalf("DevTools closed while waiting for %s", method)
			}
			if m.Method == method {
				return m.Params
			}
		case <-deadline:
			t.Fatalf("no %s from Chromium", method)
		}
	}
}

func (p *cdpPage) navigate(t *testing.T, u string) {
	t.Helper()
	p.call(t, "Page.navigate", map[string]any{"url": u})
	p.waitEvent(t, "Page.loadEventFired")
}

// submit runs script, which submits a form, and waits for the next page.
func (p *cdpPage) submit(t *testing.T, script string) {
	t.Helper()
	p.eval(t, script)
	p.waitEvent(t, "Page.loadEventFired")
}

func (p *cdpPage) eval(t *testing.T, expr string) json.RawMessage {
	t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(p.call(t, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}), &r); err != nil {
		t.Fatal(err)
	}
	if r.ExceptionDetails != nil {
		t.Fatalf("evaluating %q: %s", expr, r.ExceptionDetails.Text)
	}
	return r.Result.Value
}

func (p *cdpPage) text(t *testing.T) string {
	t.Helper()
	var s string
	_ = json.Unmarshal(p.eval(t, `document.body.innerText`), &s)
	return s
}

// waitConsole waits for a console message starting with prefix.
func (p *cdpPage) waitConsole(t *testing.T, prefix string) string {
	t.Helper()
	for {
		var ev struct {
			Args []struct {
				Value any `json:"value"`
			} `json:"args"`
		}
		_ = json.Unmarshal(p.waitEvent(t, "Runtime.consoleAPICalled"), &ev)
		if len(ev.Args) > 0 {
			if s, ok := ev.Args[0].Value.(string); ok && strings.HasPrefix(s, prefix) {
				return s
			}
		}
	}
}
