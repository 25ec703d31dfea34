//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// enrolmentProxy is a proxy on loopback (plain http is allowed there) and
// a function that asks it for an enrolment code, as `browserbridge-proxy
// invite` does.
func enrolmentProxy(t *testing.T) (string, func(user string) string) {
	keys, err := token.NewHS256([]byte(strings.Repeat("e", 40)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL, func(user string) string {
		now := time.Now()
		op, _ := keys.Mint(token.Claims{Subject: "operator", Kind: token.KindOperator, IssuedAt: now.Unix(), Expires: now.Add(time.Minute).Unix()})
		body, _ := json.Marshal(relaywire.EnrolInviteRequest{User: user})
		req, _ := http.NewRequest(http.MethodPost, hs.URL+relaywire.PathEnrolInvite, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+op)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var inv relaywire.EnrolInviteResult
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&inv) != nil {
			t.Fatalf("invite: %s", resp.Status)
		}
		return inv.Code
	}
}

// relay join writes "relay" into the config (0600, every other byte as it
// was), restarts the bridge and says where it stands; status names the
// proxy and the user; a second join is refused; leave revokes the
// credential at the proxy, takes it out of the config and restarts again.
// A used code and plain http beyond loopback are refused with sentences.
func TestRelayJoinStatusLeave(t *testing.T) {
	base, invite := enrolmentProxy(t)
	w := newWorld(t)
	w.killBridgeAtEnd()
	cfgFile := filepath.Join(w.home, "bb", "config", "config.json")
	mine := "{\n  \"listen\": \"127.0.0.1:0\",\n  \"log\": {\"level\": \"debug\"}\n}\n"
	if err := os.WriteFile(cfgFile, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := w.cli("start"); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	before := w.bridgePID()

	code := invite("alice")
	out, exit := w.cli("relay", "join", base, "--code", code)
	if exit != 0 || !strings.Contains(out, "enrolled at "+base+" as alice") || !strings.Contains(out, "no browser is connected to the bridge yet") ||
		!strings.Contains(out, " pair` and type its code") {
		t.Fatalf("relay join: exit %d\n%s", exit, out)
	}
	if after := w.bridgePID(); after == 0 || after == before {
		t.Fatalf("relay join did not restart the bridge (pid %d, then %d)\n%s", before, after, out)
	}
	data, _ := os.ReadFile(cfgFile)
	st, _ := os.Stat(cfgFile)
	if st.Mode().Perm() != 0o600 || !strings.HasPrefix(string(data), "{\n  \"listen\": \"127.0.0.1:0\",\n  \"log\": {\"level\": \"debug\"},\n  \"relay\": {") ||
		!strings.Contains(string(data), `"url": "ws://`+strings.TrimPrefix(base, "http://")+`/"`) {
		t.Fatalf("the config after join (mode %v):\n%s", st.Mode().Perm(), data)
	}
	out, exit = w.cli("relay", "status")
	if exit != 0 || !strings.Contains(out, "as alice (credential from enrolment") {
		t.Fatalf("relay status: exit %d\n%s", exit, out)
	}
	out, exit = w.cli("relay", "join", base, "--code", invite("alice"))
	if exit != 2 || !strings.Contains(out, "already relays to ws://") {
		t.Fatalf("a second join: exit %d\n%s", exit, out)
	}

	out, exit = w.cli("relay", "leave")
	if exit != 0 || !strings.Contains(out, "revoked this bridge's credential at "+base+" (user alice)") || !strings.Contains(out, "relay: off") {
		t.Fatalf("relay leave: exit %d\n%s", exit, out)
	}
	if data, _ := os.ReadFile(cfgFile); string(data) != "{\n  \"listen\": \"127.0.0.1:0\",\n  \"log\": {\"level\": \"debug\"},\n  \"relay\": {}\n}\n" {
		t.Fatalf("the config after leave:\n%s", data)
	}
	if out, _ := w.cli("relay", "status"); !strings.Contains(out, "relay: off") {
		t.Fatalf("relay status after leave:\n%s", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		exit int
		want string
	}{
		{"a used code", []string{base, "--code", code}, 1, "the proxy refused: that enrolment code was already used"},
		{"plain http beyond loopback", []string{"http://proxy.example.com", "--code", code}, 2, "plain http works only on loopback"},
		{"no code", []string{base}, 2, "give the proxy's URL and the code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, exit := w.cli(append([]string{"relay", "join"}, tc.args...)...)
			if exit != tc.exit || !strings.Contains(out, tc.want) {
				t.Fatalf("relay join %v: exit %d, want %d with %q\n%s", tc.args, exit, tc.exit, tc.want, out)
			}
		})
	}
}
