package authserver

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
)

// Signing in through a real OpenID Connect provider: mockoidc serves
// discovery, JWKS, authorization (it signs in whichever user the test
// queued, without a page) and token endpoints, and signs real RS256 ID
// tokens that go-oidc verifies.

type oidcWorld struct {
	*flowWorld
	mock *mockoidc.MockOIDC
	// failToken makes the provider's token endpoint refuse the next
	// exchanges (a provider that does not accept the code).
	failToken atomic.Bool
}

func newOIDCWorld(t *testing.T, with func(*IdentityConfig), opts ...flowOptions) *oidcWorld {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	ow := &oidcWorld{mock: m}
	err = m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == mockoidc.TokenEndpoint && ow.failToken.Load() {
				http.Error(w, `{"error":"invalid_grant","error_description":"no"}`, http.StatusBadRequest)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := newLoopbackListener()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	cfg := m.Config()
	id := IdentityConfig{OIDC: &OIDCConfig{
		Issuer:          cfg.Issuer,
		ClientID:        cfg.ClientID,
		ClientSecret:    cfg.ClientSecret,
		Name:            "Mock ID",
		AllowedSubjects: []string{"alice-sub"},
		AllowedEmails:   []string{"Bob@Example.com", "carol@example.com"},
	}}
	if with != nil {
		with(&id)
	}
	var opt flowOptions
	if len(opts) > 0 {
		opt = opts[0]
	}
	opt.identity = &id
	ow.flowWorld = newFlowWorld(t, opt)
	return ow
}

// providerBrowser follows redirects through the provider too, as a
// person's browser does.
func (ow *oidcWorld) providerBrowser() *webBrowser {
	b := ow.newBrowser()
	b.follow = []string{ow.mock.Addr()}
	return b
}

var (
	alice   = &mockoidc.MockUser{Subject: "alice-sub", Email: "alice@example.com", EmailVerified: false}
	bob     = &mockoidc.MockUser{Subject: "bob-sub", Email: "bob@example.com", EmailVerified: true}
	carol   = &mockoidc.MockUser{Subject: "carol-sub", Email: "carol@example.com", EmailVerified: false}
	mallory = &mockoidc.MockUser{Subject: "mallory-sub", Email: "mallory@example.com", EmailVerified: true}
)

func TestOIDCSignIn(t *testing.T) {
	ow := newOIDCWorld(t, nil)
	cases := []struct {
		name    string
		user    *mockoidc.MockUser
		status  int
		text    string
		display string
	}{
		{"an allowed subject", alice, http.StatusOK, "Allow this app?", "alice-sub"},
		{"an allowed verified email, in another case", bob, http.StatusOK, "Allow this app?", "bob@example.com"},
		{"an account on neither list", mallory, http.StatusForbidden, "The account mallory@example.com may not sign in here.", ""},
		{"an allowed email the provider has not verified", carol, http.StatusForbidden, "has not verified that email address", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := ow.providerBrowser()
			p := b.authorize(ow.authorizeParams())
			wantPage(t, p, http.StatusOK, "Sign in with Mock ID", `name="action" value="oidc"`)
			if strings.Contains(p.body, `name="password"`) || strings.Count(p.body, "<form") != 1 {
				t.Fatalf("want the provider's form alone, with no password configured:\n%s", p.body)
			}
			if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+ow.mock.Addr()+";") {
				t.Fatalf("the sign-in page's form-action does not allow the provider %s: %s", ow.mock.Addr(), csp)
			}
			ow.mock.QueueUser(tc.user)
			c := b.post("/oauth/signin", formOf(p, "action", "oidc"))
			wantPage(t, c, tc.status, tc.text)
			if tc.status != http.StatusOK {
				// Refused: no session either, the next app asks to sign in.
				wantPage(t, b.authorize(ow.authorizeParams()), http.StatusOK, "Sign in with Mock ID")
				return
			}
			wantPage(t, c, http.StatusOK, "Signed in as", tc.display)
			done := b.post("/oauth/consent", formOf(c, "decision", "approve"))
			q := done.location(t).Query()
			if q.Get("code") == "" || q.Get("state") != "st-123" || q.Get("iss") != ow.url {
				t.Fatalf("approve redirect query %v", q)
			}
			var code Code
			if _, err := ow.srv.getJSON(context.Background(), bucketCodes, hashSecret(q.Get("code")), &code); err != nil {
				t.Fatal(err)
			}
			want := Subject{ID: "oidc:" + ow.mock.Issuer() + "#" + tc.user.Subject, Display: tc.display, Method: "oidc"}
			if code.Subject != want {
				t.Fatalf("code subject %+v, want %+v", code.Subject, want)
			}
			// Signed in: the next app in this browser asks only for consent.
			wantPage(t, b.authorize(ow.authorizeParams()), http.StatusOK, "Allow this app?", tc.display)
		})
	}
}

// TestOIDCCallbackRefusals walks the round trip hop by hop, so the test
// holds the URLs a browser would carry between the two servers.
func TestOIDCCallbackRefusals(t *testing.T) {
	ow := newOIDCWorld(t, nil)

	// toCallback signs in at the sign-in page and takes the browser to the
	// provider, stopping at the provider's redirect back here.
	toCallback := func(t *testing.T, b *webBrowser, user *mockoidc.MockUser) (signIn webPage, callback *url.URL) {
		t.Helper()
		p := b.authorize(ow.authorizeParams())
		ow.mock.QueueUser(user)
		toProvider := b.post("/oauth/signin", formOf(p, "action", "oidc"))
		if toProvider.status != http.StatusSeeOther {
			t.Fatalf("action=oidc: status %d:\n%s", toProvider.status, toProvider.body)
		}
		auth := toProvider.location(t)
		aq := auth.Query()
		if aq.Get("code_challenge_method") != "S256" || aq.Get("code_challenge") == "" || aq.Get("nonce") == "" ||
			aq.Get("state") == "" || aq.Get("redirect_uri") != ow.url+"/oauth/oidc/callback" || !strings.Contains(aq.Get("scope"), "openid") {
			t.Fatalf("authorization request to the provider lacks PKCE, nonce, state, scope or redirect: %s", auth)
		}
		// The provider keeps no cookies, so a client that stops at its
		// redirect stands in for the browser on this hop.
		stop := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := stop.Get(auth.String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		back, err := resp.Location()
		if resp.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(back.String(), ow.url+"/oauth/oidc/callback?") {
			t.Fatalf("provider: status %d, Location %v (%v)", resp.StatusCode, back, err)
		}
		return p, back
	}

	t.Run("a callback used twice", func(t *testing.T) {
		b := ow.newBrowser()
		_, cb := toCallback(t, b, bob)
		wantPage(t, b.get(cb.String()), http.StatusOK, "Allow this app?")
		again := b.get(cb.String())
		wantPage(t, again, http.StatusBadRequest, "already used")
	})
	t.Run("a callback finished in another browser", func(t *testing.T) {
		b := ow.newBrowser()
		_, cb := toCallback(t, b, bob)
		wantPage(t, ow.newBrowser().get(cb.String()), http.StatusForbidden, "started in another browser")
		// The rightful browser can still finish.
		wantPage(t, b.get(cb.String()), http.StatusOK, "Allow this app?")
	})
	t.Run("a forged state", func(t *testing.T) {
		b := ow.newBrowser()
		_, cb := toCallback(t, b, bob)
		q := cb.Query()
		id, _, _ := strings.Cut(q.Get("state"), ".")
		q.Set("state", id+"."+randomToken(""))
		cb.RawQuery = q.Encode()
		wantPage(t, b.get(cb.String()), http.StatusBadRequest, "does not belong to the current sign-in")
	})
	t.Run("no state", func(t *testing.T) {
		wantPage(t, ow.newBrowser().get(ow.url+"/oauth/oidc/callback?code=x"), http.StatusBadRequest, "already used, or it expired")
	})
	t.Run("the provider refuses", func(t *testing.T) {
		b := ow.newBrowser()
		_, cb := toCallback(t, b, bob)
		q := url.Values{"state": {cb.Query().Get("state")}, "error": {"access_denied"}, "error_description": {"the user cancelled"}}
		p := b.get(ow.url + "/oauth/oidc/callback?" + q.Encode())
		wantPage(t, p, http.StatusForbidden, "Mock ID did not sign you in: The user cancelled.", "Sign in with Mock ID")
		// The sign-in page is back: the person can try again.
		ow.mock.QueueUser(bob)
		wantPage(t, ow.providerBrowserWithJar(b).post("/oauth/signin", formOf(p, "action", "oidc")), http.StatusOK, "Allow this app?")
	})
	t.Run("the provider does not accept the code", func(t *testing.T) {
		b := ow.newBrowser()
		_, cb := toCallback(t, b, bob)
		ow.failToken.Store(true)
		defer ow.failToken.Store(false)
		wantPage(t, b.get(cb.String()), http.StatusBadGateway, "could not be finished")
	})
	t.Run("a code injected into another sign-in", func(t *testing.T) {
		// Two sign-ins in one browser; the provider's code for the first
		// comes back with the second's state. The provider refuses it:
		// it was issued for the first's PKCE challenge.
		b := ow.newBrowser()
		_, cb1 := toCallback(t, b, bob)
		_, cb2 := toCallback(t, b, bob)
		q := cb1.Query()
		q.Set("state", cb2.Query().Get("state"))
		cb2.RawQuery = q.Encode()
		wantPage(t, b.get(cb2.String()), http.StatusBadGateway, "did not accept the code")
	})
	if logs := ow.logs.String(); strings.Contains(logs, ow.mock.ClientSecret) {
		t.Fatalf("the client secret reached the log:\n%s", logs)
	}
}

func newLoopbackListener() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// providerBrowserWithJar is b following redirects through the provider.
func (ow *oidcWorld) providerBrowserWithJar(b *webBrowser) *webBrowser {
	nb := ow.providerBrowser()
	nb.http.Jar = b.http.Jar
	return nb
}

func TestOIDCProviderDown(t *testing.T) {
	ln, err := newLoopbackListener()
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String() + "/oidc"
	ln.Close() // nothing listens there now
	w := newFlowWorld(t, flowOptions{identity: &IdentityConfig{OIDC: &OIDCConfig{
		Issuer: issuer, ClientID: "c", AllowedEmails: []string{"a@example.com"}}}})
	b := w.newBrowser()
	p := b.authorize(w.authorizeParams())
	wantPage(t, p, http.StatusOK, "Sign in with 127.0.0.1")
	wantPage(t, b.post("/oauth/signin", formOf(p, "action", "oidc")), http.StatusBadGateway, "cannot be reached right now")
}

// TestOIDCInChromium: the "Sign in with …" post is answered with a
// redirect to the provider, on another origin, which Chromium lets
// through only if the sign-in page's form-action allows it; the provider
// sends the browser back, and consent and the app's redirect follow.
func TestOIDCInChromium(t *testing.T) {
	chromium := findChromium(t)
	callbacks := make(chan url.Values, 4)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/callback" {
			callbacks <- r.URL.Query()
		}
	}))
	t.Cleanup(app.Close)
	ow := newOIDCWorld(t, nil, flowOptions{redirects: []string{app.URL + "/callback"}})
	br := startChromium(t, chromium)
	page := br.newPage(t)
	page.navigate(t, ow.url+"/oauth/authorize?"+ow.authorizeParams().Encode())
	ow.mock.QueueUser(bob)
	page.submit(t, `document.querySelector('button[value=oidc]').click();`)
	if text := page.text(t); !strings.Contains(text, "Allow this app?") || !strings.Contains(text, "bob@example.com") {
		t.Fatalf("after the provider: %q", text)
	}
	page.eval(t, `document.querySelector('button[value=approve]').click();`)
	select {
	case q := <-callbacks:
		if q.Get("code") == "" || q.Get("iss") != ow.url {
			t.Fatalf("the app got %v", q)
		}
	case <-time.After(2 * time.Minute): // a deadlock guard
		t.Fatal("Chromium never reached the app's redirect URI")
	}
}
