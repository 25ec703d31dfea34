package authserver

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
)

// approveWith takes a fresh browser through sign-in and consent for an
// authorization request with params edited by edit, and returns the code
// the app is sent back with.
func (w *flowWorld) approveWith(edit func(url.Values)) string {
	w.t.Helper()
	b := w.newBrowser()
	q := w.authorizeParams()
	edit(q)
	p := b.authorize(q)
	wantPage(w.t, p, http.StatusOK, `name="password"`)
	c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
	wantPage(w.t, c, http.StatusOK, `value="approve"`)
	done := b.post("/oauth/consent", formOf(c, "decision", "approve"))
	if done.status != http.StatusSeeOther {
		w.t.Fatalf("approve: %d %s", done.status, done.body)
	}
	code := done.location(w.t).Query().Get("code")
	if code == "" {
		w.t.Fatalf("no code in %s", done.header.Get("Location"))
	}
	return code
}

// token posts a token request of the world's client and decodes the answer.
func (w *flowWorld) token(form url.Values) (int, map[string]any) {
	w.t.Helper()
	form.Set("client_id", w.client.ID)
	resp, err := http.PostForm(w.url+"/oauth/token", form)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		w.t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestScopesGranted: a scope this server does not know is not granted, and
// the token response says what was (RFC 6749 §3.3; issue 33, item 2: it
// used to echo "admin delete_everything" back as granted).
func TestScopesGranted(t *testing.T) {
	w := newFlowWorld(t, flowOptions{})
	for _, tc := range []struct {
		name, requested, granted string
	}{
		{"unknown scopes only", "admin delete_everything", "mcp"},
		{"known and unknown", "offline_access admin mcp mcp", "offline_access mcp"},
		{"none asked", "", "mcp"},
		{"the usual", "mcp offline_access", "mcp offline_access"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := w.approveWith(func(q url.Values) {
				if tc.requested == "" {
					q.Del("scope")
				} else {
					q.Set("scope", tc.requested)
				}
			})
			status, body := w.token(url.Values{"grant_type": {"authorization_code"}, "code": {code},
				"code_verifier": {flowVerifier}, "redirect_uri": {w.client.RedirectURIs[0]}})
			if status != http.StatusOK || body["scope"] != tc.granted {
				t.Fatalf("token response %d %v: want scope %q", status, body, tc.granted)
			}
			rt, _ := body["refresh_token"].(string)
			// A refresh keeps the grant; asking it for a scope never granted
			// is refused, whatever was asked at sign-in.
			status, body = w.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "scope": {"admin"}})
			if status != http.StatusBadRequest || body["error"] != errInvalidScope {
				t.Fatalf("refresh asking for admin: %d %v, want invalid_scope", status, body)
			}
			status, body = w.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
			if status != http.StatusOK || body["scope"] != tc.granted {
				t.Fatalf("refresh: %d %v, want scope %q", status, body, tc.granted)
			}
		})
	}
}
