package authserver

import (
	"net/http"
	"strings"
	"testing"
)

// TestPagesPrivateUseScheme: a native app registered with its own scheme
// (Cursor's cursor://, a reverse-domain one) is sent back there with its
// code, state and iss; the consent page names where, and its CSP lets the
// form's redirect go there (issue 33, item 1).
func TestPagesPrivateUseScheme(t *testing.T) {
	for _, tc := range []struct {
		name, redirect, shown, csp string
	}{
		{"cursor", "cursor://anysphere.cursor-retrieval/oauth/callback", "cursor://anysphere.cursor-retrieval", "cursor:"},
		{"reverse domain", "com.example.app:/oauth2redirect", "com.example.app:", "com.example.app:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newFlowWorld(t, flowOptions{clientName: "Cursor", redirects: []string{tc.redirect}})
			b := w.newBrowser()
			c := w.signIn(b)
			wantPage(t, c, http.StatusOK, "Cursor", "<code>"+tc.shown+"</code>")
			if csp := c.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+tc.csp) {
				t.Fatalf("the consent page's CSP does not let its form go to %s: %s", tc.csp, csp)
			}
			done := b.post("/oauth/consent", formOf(c, "decision", "approve"))
			if done.status != http.StatusSeeOther {
				t.Fatalf("approve: %d %s", done.status, done.body)
			}
			loc := done.location(t)
			q := loc.Query()
			loc.RawQuery = ""
			if loc.String() != tc.redirect || q.Get("code") == "" || q.Get("state") != "st-123" || q.Get("iss") != w.url {
				t.Fatalf("sent back to %s with %v; want %s with a code, the state and iss", done.header.Get("Location"), q, tc.redirect)
			}
			status, body := w.token(map[string][]string{"grant_type": {"authorization_code"}, "code": {q.Get("code")},
				"code_verifier": {flowVerifier}, "redirect_uri": {tc.redirect}})
			if status != http.StatusOK || body["access_token"] == nil {
				t.Fatalf("exchange: %d %v", status, body)
			}
		})
	}
}
