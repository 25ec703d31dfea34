package authserver

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestIdentityConfigRefused(t *testing.T) {
	okOIDC := func() *OIDCConfig {
		return &OIDCConfig{Issuer: "https://accounts.example.com", ClientID: "c", AllowedEmails: []string{"a@example.com"}}
	}
	cases := []struct {
		name string
		id   IdentityConfig
		want string // "" accepted
	}{
		{"no way to sign in", IdentityConfig{}, "no way to sign in is configured"},
		{"a short password", IdentityConfig{Password: "hunter2hunt"}, "too short to face the internet"},
		{"a password of 12 characters", IdentityConfig{Password: "hunter2hunte"}, ""},
		{"12 characters, not 12 bytes", IdentityConfig{Password: "ééééééé"}, "too short to face the internet"},
		{"a hash that is not bcrypt", IdentityConfig{PasswordHash: "5f4dcc3b5aa765d61d8327deb882cf99"}, "not a bcrypt hash"},
		{"a bcrypt hash", IdentityConfig{PasswordHash: testPasswordHash}, ""},
		{"both a hash and a password", IdentityConfig{PasswordHash: testPasswordHash, Password: flowPassword}, "not both"},
		{"pairing codes alone", IdentityConfig{PairingCode: func(string, string) (Subject, error) { return Subject{}, nil }}, ""},
		{"OIDC", IdentityConfig{OIDC: okOIDC()}, ""},
		{"OIDC allowing anyone", IdentityConfig{OIDC: &OIDCConfig{Issuer: "https://accounts.example.com", ClientID: "c"}}, "allowed subjects or allowed emails"},
		{"OIDC allowing only blanks", IdentityConfig{OIDC: &OIDCConfig{Issuer: "https://accounts.example.com", ClientID: "c", AllowedSubjects: []string{" "}}}, "allowed subjects or allowed emails"},
		{"OIDC over plain http", IdentityConfig{OIDC: func() *OIDCConfig { c := okOIDC(); c.Issuer = "http://accounts.example.com"; return c }()}, "must be https"},
		{"OIDC on loopback http", IdentityConfig{OIDC: func() *OIDCConfig { c := okOIDC(); c.Issuer = "http://127.0.0.1:5556/dex"; return c }()}, ""},
		{"OIDC without a client id", IdentityConfig{OIDC: func() *OIDCConfig { c := okOIDC(); c.ClientID = ""; return c }()}, "client id is required"},
		{"OIDC issuer not a URL", IdentityConfig{OIDC: func() *OIDCConfig { c := okOIDC(); c.Issuer = "accounts"; return c }()}, "not a URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{Issuer: "https://mcp.example.com", Identity: tc.id,
				Resources: func(string) (Resource, bool) { return Resource{}, false }})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestIdentityHashPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("bcrypt at the real cost takes a while")
	}
	h, err := HashPassword(flowPassword)
	if err != nil {
		t.Fatal(err)
	}
	if cost, err := bcrypt.Cost([]byte(h)); err != nil || cost != hashCost {
		t.Fatalf("cost %d (%v), want %d", cost, err, hashCost)
	}
	pc, err := newPasswordCheck(h, "")
	if err != nil {
		t.Fatal(err)
	}
	if !pc.matches(flowPassword) || pc.matches(flowPassword+" ") || pc.matches("") {
		t.Fatal("the hash does not tell the password from others")
	}
	for _, bad := range []struct{ pw, want string }{
		{"short", "too short to face the internet"},
		{strings.Repeat("long ", 15), "bcrypt uses only the first 72"},
	} {
		if _, err := HashPassword(bad.pw); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("HashPassword(%d chars): %v, want %q", len(bad.pw), err, bad.want)
		}
	}
}

func TestIdentityPasswordCheck(t *testing.T) {
	long := strings.Repeat("x", bcryptMaxBytes)
	h, err := bcrypt.GenerateFromPassword([]byte(long), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	byHash, _ := newPasswordCheck(string(h), "")
	plain, _ := newPasswordCheck("", flowPassword)
	for _, tc := range []struct {
		name  string
		check *passwordCheck
		pw    string
		want  bool
	}{
		{"bcrypt, right", byHash, long, true},
		// bcrypt ignores bytes past 72: without the length check these would match.
		{"bcrypt, the right 72 bytes and more", byHash, long + "y", false},
		{"bcrypt, wrong", byHash, "x", false},
		{"plain, right", plain, flowPassword, true},
		{"plain, a prefix", plain, flowPassword[:12], false},
		{"plain, empty", plain, "", false},
	} {
		if got := tc.check.matches(tc.pw); got != tc.want {
			t.Errorf("%s: matches = %v", tc.name, got)
		}
	}
}

// TestIdentityPairingCode: the proxy's way (issue 17). The code field
// only, the checker's own sentence on a refusal, no lasting session.
func TestIdentityPairingCode(t *testing.T) {
	var addrs []string // the client address each check was given
	pair := func(code, clientIP string) (Subject, error) {
		addrs = append(addrs, clientIP)
		switch code {
		case "BRIDGE-4711":
			return Subject{ID: "pair:user-42", Display: "user 42"}, nil
		case "BRIDGE-0000":
			return Subject{}, errors.New("this code expired; run browserbridge pair again")
		case "BRIDGE-9999":
			return Subject{}, SignInLimited(errors.New("too many codes tried from your network: wait a minute"))
		case "BRIDGE-5030":
			return Subject{}, SignInUnavailable(errors.New("pairing codes cannot be checked right now: try again in a minute"))
		}
		return Subject{}, errors.New("no bridge is waiting for this code")
	}
	w := newFlowWorld(t, flowOptions{identity: &IdentityConfig{PairingCode: pair}})
	b := w.newBrowser()
	p := b.authorize(w.authorizeParams())
	wantPage(t, p, http.StatusOK, `name="code"`, "browserbridge pair")
	if strings.Contains(p.body, `name="password"`) || strings.Contains(p.body, `value="oidc"`) {
		t.Fatalf("the page offers more than the code:\n%s", p.body)
	}
	wantPage(t, b.post("/oauth/signin", formOf(p)), http.StatusBadRequest, "Enter the pairing code.")
	wantPage(t, b.post("/oauth/signin", formOf(p, "code", "nope")), http.StatusUnauthorized, "No bridge is waiting for this code.")
	wantPage(t, b.post("/oauth/signin", formOf(p, "code", "BRIDGE-0000")), http.StatusUnauthorized, "This code expired; run browserbridge pair again.")
	// The checker's own rate limit is a 429 to wait out, not a wrong code.
	limited := b.post("/oauth/signin", formOf(p, "code", "BRIDGE-9999"))
	wantPage(t, limited, http.StatusTooManyRequests, "Too many codes tried from your network: wait a minute.")
	if got := limited.header.Get("Retry-After"); got != "60" {
		t.Fatalf("Retry-After %q after the checker's limit", got)
	}
	// A checker that could not check (its store is away) is a 503 to
	// retry, not a wrong code either.
	unavailable := b.post("/oauth/signin", formOf(p, "code", "BRIDGE-5030"))
	wantPage(t, unavailable, http.StatusServiceUnavailable, "Pairing codes cannot be checked right now: try again in a minute.")
	if got := unavailable.header.Get("Retry-After"); got == "" {
		t.Fatal("no Retry-After when the checker could not check")
	}
	c := b.post("/oauth/signin", formOf(p, "code", " BRIDGE-4711 "))
	wantPage(t, c, http.StatusOK, "Allow this app?", "user 42")
	if strings.Contains(c.body, `value="switch"`) {
		t.Fatal("a pairing sign-in offers to switch accounts")
	}
	done := b.post("/oauth/consent", formOf(c, "decision", "approve"))
	var code Code
	if _, err := w.srv.getJSON(t.Context(), bucketCodes, hashSecret(done.location(t).Query().Get("code")), &code); err != nil {
		t.Fatal(err)
	}
	if code.Subject != (Subject{ID: "pair:user-42", Display: "user 42", Method: "pairing"}) {
		t.Fatalf("subject %+v", code.Subject)
	}
	// Each authorization needs its own code.
	wantPage(t, b.authorize(w.authorizeParams()), http.StatusOK, `name="code"`)
	if strings.Contains(w.logs.String(), "BRIDGE-4711") {
		t.Fatal("a pairing code reached the log")
	}
	// The checker is told where each attempt came from, so its own
	// per-address limit holds one guesser back, not everyone.
	for _, a := range addrs {
		if a == "" {
			t.Fatalf("a pairing check was given no client address: %q", addrs)
		}
	}
}

func TestIdentityPasswordAndCode(t *testing.T) {
	pair := func(code, _ string) (Subject, error) {
		if code == "PAIR-1" {
			return Subject{ID: "pair:u1", Method: "pairing"}, nil
		}
		return Subject{}, errors.New("unknown code")
	}
	w := newFlowWorld(t, flowOptions{identity: &IdentityConfig{Password: flowPassword, PairingCode: pair}})
	for _, tc := range []struct {
		name   string
		fields []string
		status int
		text   string
	}{
		{"the password", []string{"password", flowPassword}, http.StatusOK, "owner"},
		{"the code", []string{"code", "PAIR-1"}, http.StatusOK, "pair:u1"},
		{"a wrong code beside the right password", []string{"code", "x", "password", flowPassword}, http.StatusUnauthorized, "Unknown code."},
		{"neither", nil, http.StatusBadRequest, "Enter the password."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := w.newBrowser()
			p := b.authorize(w.authorizeParams())
			wantPage(t, p, http.StatusOK, `name="password"`, `name="code"`)
			wantPage(t, b.post("/oauth/signin", formOf(p, tc.fields...)), tc.status, tc.text)
		})
	}
}

func TestIdentityAddress(t *testing.T) {
	id := &identity{}
	for _, tc := range []struct{ remote, want string }{
		{"203.0.113.7:4242", "203.0.113.7"},
		{"[2001:db8:1:2:3:4:5:6]:4242", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:1", "2001:db8:1:2::/64"},
		{"[::ffff:203.0.113.7]:1", "203.0.113.7"},
	} {
		r := httptest.NewRequest(http.MethodPost, "/oauth/signin", nil)
		r.RemoteAddr = tc.remote
		if got := id.address(r); got != tc.want {
			t.Errorf("address(%s) = %s, want %s", tc.remote, got, tc.want)
		}
	}
	proxied := &identity{clientIP: func(r *http.Request) string { return r.Header.Get("X-Real-IP") }}
	r := httptest.NewRequest(http.MethodPost, "/oauth/signin", nil)
	r.Header.Set("X-Real-IP", "198.51.100.9")
	if got := proxied.address(r); got != "198.51.100.9" {
		t.Errorf("with ClientIP: %s", got)
	}
}
