package authserver

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestPagesAdmit: a person who proves who they are but whom Admit refuses
// (the proxy: a subject mapped to no user) stays on the sign-in page with
// Admit's sentence, 403, and nothing is issued: no consent page, no code;
// a browser session from before the refusal does not skip it either.
func TestPagesAdmit(t *testing.T) {
	var refuse atomic.Bool
	w := newFlowWorld(t, flowOptions{identity: &IdentityConfig{PasswordHash: testPasswordHash,
		Admit: func(s Subject) error {
			if refuse.Load() {
				return errors.New("you are signed in as " + s.Display + ", whom this server maps to no user")
			}
			return nil
		}}})
	b := w.newBrowser()
	w.signIn(b) // admitted: a browser session starts

	refuse.Store(true)
	p := b.authorize(w.authorizeParams())
	wantPage(t, p, http.StatusOK, `name="password"`) // the session does not skip the check
	c := b.post("/oauth/signin", formOf(p, "password", flowPassword))
	wantPage(t, c, http.StatusForbidden, "You are signed in as owner, whom this server maps to no user.", `name="password"`)
	if strings.Contains(c.body, `value="approve"`) {
		t.Fatal("a refused subject was shown the consent page")
	}
	// Nor can the refused request be approved by posting the consent form.
	done := b.post("/oauth/consent", formOf(c, "decision", "approve"))
	if done.status == http.StatusSeeOther || done.header.Get("Location") != "" {
		t.Fatalf("a refused subject's request was approved: %d %s", done.status, done.header.Get("Location"))
	}
}
