//go:build linux

package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

var resourceMetadataRE = regexp.MustCompile(`resource_metadata="([^"]+)"`)

// TestProxyHTTPPairingBrowser: a person runs `browserbridge pair` on the
// machine whose bridge relays to the proxy, and types the code into the
// proxy's sign-in page for claude.ai (its flow scripted as raw HTTP); the
// token then reaches their real browser through the proxy's /mcp. A code
// works once, a wrong one is refused, and guessing is held back.
func TestProxyHTTPPairingBrowser(t *testing.T) {
	p := startPublicProxy(t)
	w := startRelayedWorld(t, p, p.relay, "alice")
	endpoint := p.url("/mcp")

	// 401 and discovery, as claude.ai starts.
	a := rawMCP(t, endpoint, "", initializeJSON)
	if a.status != http.StatusUnauthorized {
		t.Fatalf("initialize without a token: %d %s, want 401", a.status, a.body)
	}
	m := resourceMetadataRE.FindStringSubmatch(a.header.Get("WWW-Authenticate"))
	if m == nil {
		t.Fatalf("the 401 names no resource metadata: WWW-Authenticate %q", a.header.Get("WWW-Authenticate"))
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	getJSONInto(t, m[1], &prm)
	if prm.Resource != endpoint || !slices.Equal(prm.AuthorizationServers, []string{p.public}) {
		t.Fatalf("resource metadata at %s: %+v, want resource %s and authorization server %s", m[1], prm, endpoint, p.public)
	}
	var as asMeta
	getJSONInto(t, p.url("/.well-known/oauth-authorization-server"), &as)
	if as.Issuer != p.public || as.RegistrationEndpoint != p.url("/oauth/register") || !slices.Contains(as.CodeChallengeMethodsSupported, "S256") {
		t.Fatalf("authorization server metadata: %+v", as)
	}

	// Pairing, registration, PKCE, the code field, consent, tokens.
	code := pair(t, w)
	f := startSignIn(t, p, registerClaude(t, p), endpoint)
	if a := f.typeCode(t, strings.ToLower(code)); a.status != http.StatusOK { // typed as a person might
		t.Fatalf("signing in with the pairing code: %d %s", a.status, clip(htmlText(a.body), 500))
	}
	first := f.exchange(t, f.approve(t))
	if first.Refresh == "" {
		t.Fatal("the token endpoint gave claude.ai no refresh token")
	}
	second := f.refresh(t, first.Refresh)
	if second.Access == first.Access || second.Refresh == "" || second.Refresh == first.Refresh {
		t.Fatalf("the refresh did not rotate the tokens (same access: %v, same refresh: %v)",
			second.Access == first.Access, second.Refresh == first.Refresh)
	}

	// The browser's tools, a page navigated and read back.
	cs := connectBearer(t, w, endpoint, second.Access, "claude-ai", nil)
	c := &client{w: w, cs: cs, name: "claude-ai"}
	at := &mcpAt{cs: cs, url: endpoint}
	names := strings.Fields(toolNames(t, at))
	for _, want := range append([]string{"list_browsers", "select_browser"}, spec004Tools...) {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list at %s lacks %s: %v", endpoint, want, names)
		}
	}
	tab := c.newTab(t, w.pages.url("index.html"))
	prose := w.pages.url("prose.html")
	c.navigate(t, tab, prose)
	text := testutil.Text(c.call(t, "get_page_text", map[string]any{"tabId": tab}))
	if !strings.Contains(text, "The last paragraph of the prose page.") {
		t.Errorf("get_page_text through the proxy does not have the page's text:\n%s", clip(text, 500))
	}
	tree := testutil.Text(c.call(t, "read_page", map[string]any{"tabId": tab}))
	if !strings.Contains(tree, "Long paragraphs") {
		t.Errorf("read_page through the proxy lacks the page's heading:\n%s", clip(tree, 500))
	}

	// The same code again, and a wrong one: refused with a sentence.
	g := startSignIn(t, p, registerClaude(t, p), endpoint)
	if a := g.typeCode(t, code); a.status != http.StatusUnauthorized || !strings.Contains(alertOf(a.body), "already used") {
		t.Errorf("the code used a second time: %d %q, want 401 saying it was already used", a.status, alertOf(a.body))
	}
	if a := g.typeCode(t, "ZZZZ-ZZZZ-ZZZZ"); a.status != http.StatusUnauthorized || !strings.Contains(alertOf(a.body), "not known") {
		t.Errorf("a wrong code: %d %q, want 401 saying it is not known", a.status, alertOf(a.body))
	}

	// The rotated refresh token is refused.
	if status, body := f.tokenRequest(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.Refresh}, "resource": {endpoint}}); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("the rotated refresh token: %d %v, want 400 invalid_grant", status, body)
	}

	// Guessing from one address: the pairing codes' own limit first (a
	// right code is refused too while it holds), then the sign-in's 429.
	var pairingLimited, tooMany int
	var fresh string
	for i := 1; i <= 40 && tooMany == 0; i++ {
		if (i-1)%4 == 0 { // a sign-in allows 5 attempts; open a new one before
			g = startSignIn(t, p, registerClaude(t, p), endpoint)
		}
		guess := "ZZZZ-ZZZZ-" + strings.ToUpper(randomHex(t, 2))
		if pairingLimited > 0 && fresh == "" {
			fresh = pair(t, w)
			guess = fresh
		}
		a := g.typeCode(t, guess)
		msg := alertOf(a.body)
		switch {
		case a.status == http.StatusTooManyRequests:
			tooMany = i
			if a.header.Get("Retry-After") == "" || !strings.Contains(msg, "Wait a minute") {
				t.Errorf("the 429 after %d guesses: Retry-After %q, sentence %q", i, a.header.Get("Retry-After"), msg)
			}
		case strings.Contains(msg, "Too many pairing codes tried from your network"):
			if pairingLimited == 0 {
				pairingLimited = i
			}
			if a.status != http.StatusUnauthorized && a.status != http.StatusTooManyRequests {
				t.Errorf("the pairing limit answered %d", a.status)
			}
		case guess == fresh:
			t.Fatalf("a right code during the pairing limit: %d %q, want refused by the limit", a.status, msg)
		case pairingLimited > 0:
			t.Fatalf("guess %d after the pairing limit held: %d %q, want still limited", i, a.status, msg)
		case a.status != http.StatusUnauthorized || !strings.Contains(msg, "not known"):
			t.Fatalf("guess %d: %d %q, want 401 not known", i, a.status, msg)
		}
	}
	if pairingLimited == 0 || tooMany == 0 || tooMany < pairingLimited {
		t.Fatalf("guessing: the pairing limit held from guess %d, 429 from guess %d; want both, the pairing limit first", pairingLimited, tooMany)
	}
	t.Logf("guessing (after 3 attempts): the pairing limit from guess %d, 429 from guess %d", pairingLimited, tooMany)

	noSecretsIn(t, p.out.String(), map[string]string{"pairing code": code, "access token": second.Access,
		"refresh token": second.Refresh, "fresh pairing code": fresh})
}

func getJSONInto(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// noSecretsIn fails the test when any of secrets appears in log.
func noSecretsIn(t *testing.T, log string, secrets map[string]string) {
	t.Helper()
	for what, s := range secrets {
		if s != "" && strings.Contains(log, s) {
			t.Errorf("the %s appears in the proxy's log", what)
		}
	}
}
