package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// enrolPost posts body to path on tp (over loopback, as httptest serves)
// with an optional bearer, and decodes the answer into out (or the
// refusal's sentence).
func enrolPost(t *testing.T, base, path, bearer string, body any, out any) (int, string) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e relaywire.EnrolError
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, ""
}

func operatorToken(t *testing.T, k *token.Keys, now time.Time) string {
	t.Helper()
	tok, err := k.Mint(token.Claims{Subject: "operator", Kind: token.KindOperator, IssuedAt: now.Unix(), Expires: now.Add(time.Minute).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func invite(t *testing.T, tp *testProxy, base, user string) relaywire.EnrolInviteResult {
	t.Helper()
	var inv relaywire.EnrolInviteResult
	if code, msg := enrolPost(t, base, relaywire.PathEnrolInvite, operatorToken(t, tp.keys, time.Now()), relaywire.EnrolInviteRequest{User: user}, &inv); code != 200 {
		t.Fatalf("invite %s: %d %s", user, code, msg)
	}
	return inv
}

// An invitation's code is exchanged once for a credential of its user,
// which authenticates a bridge's link until `relay leave` revokes it; the
// revocation outlives a restart of the proxy (RevokedFile). Refusals say
// why: no or a wrong operator token, a code used, unknown or malformed.
func TestEnrolment(t *testing.T) {
	revokedFile := filepath.Join(t.TempDir(), "revoked.json")
	tp := newTestProxy(t, Options{Enrol: EnrolOptions{RevokedFile: revokedFile}})
	base := "http" + strings.TrimPrefix(tp.url, "ws")

	inv := invite(t, tp, base, "alice")
	if inv.User != "alice" || inv.TTLSeconds != int(DefaultEnrolCodeTTL/time.Second) || len(inv.Code) != 19 {
		t.Fatalf("invitation %+v", inv)
	}
	var got relaywire.EnrolResult
	if code, msg := enrolPost(t, base, relaywire.PathEnrol, "", relaywire.EnrolRequest{Code: strings.ToLower(inv.Code)}, &got); code != 200 {
		t.Fatalf("enrol: %d %s", code, msg)
	}
	claims, err := tp.keys.Verify(got.Token, token.KindExtension, time.Now())
	if err != nil || claims.Subject != "alice" || claims.ID == "" || got.User != "alice" {
		t.Fatalf("the credential: %+v %v", claims, err)
	}
	if exp := time.Unix(claims.Expires, 0); exp.Before(time.Now().Add(DefaultCredentialTTL - time.Hour)) {
		t.Fatalf("the credential expires at %v", exp)
	}
	tp.extensionWithToken(t, "Chrome", got.Token, "alice").ready(t)

	for _, tc := range []struct {
		name, path, bearer string
		body               any
		status             int
		want               string
	}{
		{"the code again", relaywire.PathEnrol, "", relaywire.EnrolRequest{Code: inv.Code}, 403, "already used, and each works once"},
		{"an unknown code", relaywire.PathEnrol, "", relaywire.EnrolRequest{Code: "ABCD-EFGH-JKMN-PQRS"}, 403, "enrolment code is not known here"},
		{"not a code", relaywire.PathEnrol, "", relaywire.EnrolRequest{Code: "hello"}, 400, "not an enrolment code"},
		{"an unknown field", relaywire.PathEnrol, "", map[string]string{"cod": "x"}, 400, `unknown field "cod"`},
		{"invite without a token", relaywire.PathEnrolInvite, "", relaywire.EnrolInviteRequest{User: "bob"}, 401, "needs the operator's token"},
		{"invite with a bridge's token", relaywire.PathEnrolInvite, got.Token, relaywire.EnrolInviteRequest{User: "bob"}, 403, "wrong kind of client"},
		{"invite for nobody", relaywire.PathEnrolInvite, operatorToken(t, tp.keys, time.Now()), relaywire.EnrolInviteRequest{User: " "}, 400, "empty, too long or has white space"},
		{"leave with a hand-made token", relaywire.PathEnrolLeave, tp.token(t, "alice", token.KindExtension), struct{}{}, 400, "minted by hand"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out map[string]any
			if code, msg := enrolPost(t, base, tc.path, tc.bearer, tc.body, &out); code != tc.status || !strings.Contains(msg, tc.want) {
				t.Fatalf("%d %q, want %d with %q", code, msg, tc.status, tc.want)
			}
		})
	}

	var left relaywire.EnrolLeaveResult
	if code, msg := enrolPost(t, base, relaywire.PathEnrolLeave, got.Token, struct{}{}, &left); code != 200 || !left.Revoked || left.User != "alice" {
		t.Fatalf("leave: %d %s %+v", code, msg, left)
	}
	refused := func(tp *testProxy) {
		t.Helper()
		e := tp.extensionWithToken(t, "Chrome", got.Token, "alice")
		if code, reason := e.closed(); code != 1008 || !strings.Contains(reason, "revoked") {
			t.Fatalf("a revoked credential's link closed with %d %q", code, reason)
		}
	}
	refused(tp)
	// A second proxy on the same file, as after a restart.
	refused(newTestProxy(t, Options{Enrol: EnrolOptions{RevokedFile: revokedFile}}))
}

// Each request carries a secret, so plain HTTP is refused unless it comes
// from loopback.
func TestEnrolmentNeedsTLSBeyondLoopback(t *testing.T) {
	tp := newTestProxy(t, Options{})
	for _, path := range []string{relaywire.PathEnrol, relaywire.PathEnrolInvite, relaywire.PathEnrolLeave} {
		req := httptest.NewRequest(http.MethodPost, "http://proxy.example.com"+path, strings.NewReader(`{"code":"ABCD-EFGH-JKMN-PQRS"}`))
		req.RemoteAddr = "203.0.113.7:4242"
		rec := httptest.NewRecorder()
		tp.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "needs HTTPS") {
			t.Errorf("POST %s over plain HTTP from 203.0.113.7: %d %s", path, rec.Code, rec.Body)
		}
	}
}

// On a cluster, a code one node issued is exchanged on another, once, and
// a credential revoked on one is refused by the other.
func TestEnrolmentAcrossNodes(t *testing.T) {
	url := startNATS(t)
	nodes := make([]*testProxy, 2)
	for i := range nodes {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = newTestProxy(t, Options{Cluster: &ClusterOptions{Keyring: testRing(), Conn: nc, Node: string(rune('a' + i))}})
		t.Cleanup(nc.Close)
	}
	a, b := nodes[0], nodes[1]
	baseA, baseB := "http"+strings.TrimPrefix(a.url, "ws"), "http"+strings.TrimPrefix(b.url, "ws")
	inv := invite(t, a, baseA, "alice")
	var got relaywire.EnrolResult
	if code, msg := enrolPost(t, baseB, relaywire.PathEnrol, "", relaywire.EnrolRequest{Code: inv.Code}, &got); code != 200 || got.User != "alice" {
		t.Fatalf("enrol on b with a's code: %d %s", code, msg)
	}
	var out relaywire.EnrolResult
	if code, msg := enrolPost(t, baseA, relaywire.PathEnrol, "", relaywire.EnrolRequest{Code: inv.Code}, &out); code != 403 || !strings.Contains(msg, "already used") {
		t.Fatalf("the code again on a: %d %s", code, msg)
	}
	b.extensionWithToken(t, "Chrome", got.Token, "alice").ready(t)
	var left relaywire.EnrolLeaveResult
	if code, msg := enrolPost(t, baseA, relaywire.PathEnrolLeave, got.Token, struct{}{}, &left); code != 200 {
		t.Fatalf("leave on a: %d %s", code, msg)
	}
	e := b.extensionWithToken(t, "Chrome", got.Token, "alice")
	if code, reason := e.closed(); code != 1008 || !strings.Contains(reason, "revoked") {
		t.Fatalf("on b, a credential revoked on a closed with %d %q", code, reason)
	}
}
