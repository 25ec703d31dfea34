package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
)

// init writes a secret serve loads, readable by its owner only, refuses
// to replace it without --force, and prints the commands that follow.
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proxy")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"init", "--dir", dir}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	st, err := os.Stat(secret)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the secret: %v %v", st, err)
	}
	if dst, _ := os.Stat(dir); dst.Mode().Perm() != 0o700 {
		t.Errorf("the folder's mode is %v", dst.Mode().Perm())
	}
	first, _ := os.ReadFile(secret)
	if _, err := token.Load(secret); err != nil {
		t.Fatalf("serve would not load it: %v", err)
	}
	for _, want := range []string{"browserbridge-proxy serve --listen 127.0.0.1:8787 --secret-file " + secret + " --revoked " + filepath.Join(dir, "revoked.json"),
		"browserbridge-proxy invite --secret-file " + secret + " --proxy http://127.0.0.1:8787 --user alice", "browserbridge relay join", "plain http works only on loopback"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("init does not print %q:\n%s", want, out.String())
		}
	}
	err = run(context.Background(), []string{"init", "--dir", dir}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "exists already and is kept") {
		t.Fatalf("init again: %v", err)
	}
	if again, _ := os.ReadFile(secret); !bytes.Equal(again, first) {
		t.Fatal("init without --force changed the secret")
	}
	if err := run(context.Background(), []string{"init", "--dir", dir, "--force"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(secret); bytes.Equal(again, first) {
		t.Fatal("init --force kept the secret")
	}
}

var inviteCode = regexp.MustCompile(`browserbridge relay join (\S+) --code ([0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4})\n`)

// invite asks a running serve for a code and prints the join command; a
// secret that is not the proxy's, and plain http beyond loopback, are
// refused with sentences.
func TestInvite(t *testing.T) {
	dir := t.TempDir()
	if err := run(context.Background(), []string{"init", "--dir", dir}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	n := startNode(t, "--secret-file", secret, "--revoked", filepath.Join(dir, "revoked.json"))
	var out bytes.Buffer
	if err := run(context.Background(), []string{"invite", "--secret-file", secret, "--user", "alice", "--proxy", "http://" + n.addr}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	m := inviteCode.FindStringSubmatch(out.String())
	if m == nil || m[1] != "http://"+n.addr || !strings.Contains(out.String(), "Enrolment code for alice: "+m[2]) {
		t.Fatalf("invite printed:\n%s", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"invite", "--secret-file", secret, "--user", "bob", "--proxy", "http://" + n.addr, "--url", "https://proxy.example.com"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if m := inviteCode.FindStringSubmatch(out.String()); m == nil || m[1] != "https://proxy.example.com" {
		t.Fatalf("invite --url printed:\n%s", out.String())
	}

	other := t.TempDir()
	run(context.Background(), []string{"init", "--dir", other}, &bytes.Buffer{}, &bytes.Buffer{})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"another secret", []string{"--secret-file", filepath.Join(other, "secret"), "--user", "alice", "--proxy", "http://" + n.addr}, "the operator's token was refused: token signature is invalid"},
		{"plain http beyond loopback", []string{"--secret-file", secret, "--user", "alice", "--proxy", "http://proxy.example.com"}, "plain http works only on loopback"},
		{"no user", []string{"--secret-file", secret, "--proxy", "http://" + n.addr}, "--user is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), append([]string{"invite"}, tc.args...), &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("invite: %v, want %q", err, tc.want)
			}
		})
	}
}
