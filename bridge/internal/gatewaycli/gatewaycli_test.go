package gatewaycli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// Each main names itself in the usage text and in its errors, and
// hash-password reads the stdin it is given.
func TestMainNamesItsCommand(t *testing.T) {
	for _, prog := range []string{"browserbridge gateway", "browserbridge-gateway"} {
		t.Run(prog, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := Main(context.Background(), prog, []string{"-h"}, strings.NewReader(""), &out, &errOut); code != 0 {
				t.Fatalf("-h: exit %d", code)
			}
			for _, want := range []string{"Usage: " + prog + " [flags]", prog + " hash-password", "-servers", "-listen", "-public-url", "-config", "-max-conns-per-ip", "-idle-timeout"} {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("usage lacks %q:\n%s", want, errOut.String())
				}
			}

			errOut.Reset()
			if code := Main(context.Background(), prog, []string{"--listen"}, strings.NewReader(""), &out, &errOut); code != 2 {
				t.Errorf("a flag without its value: exit %d, want 2", code)
			}
			errOut.Reset()
			if code := Main(context.Background(), prog, []string{"hash-password"}, strings.NewReader(""), &out, &errOut); code != 2 ||
				!strings.HasPrefix(errOut.String(), prog+": no password on stdin") || !strings.Contains(errOut.String(), "| "+prog+" hash-password") {
				t.Errorf("hash-password without input: exit %d, stderr %q", code, errOut.String())
			}

			const pw = "correct horse battery staple"
			out.Reset()
			if code := Main(context.Background(), prog, []string{"hash-password"}, strings.NewReader(pw+"\n"), &out, &errOut); code != 0 {
				t.Fatalf("hash-password: exit %d, stderr %q", code, errOut.String())
			}
			if err := bcrypt.CompareHashAndPassword([]byte(strings.TrimSpace(out.String())), []byte(pw)); err != nil {
				t.Errorf("the printed hash %q does not match the password: %v", out.String(), err)
			}
		})
	}
}

// The connection flags reach the config and its checks: a bad value is bad
// input that names the key.
func TestConnectionFlags(t *testing.T) {
	t.Setenv("BROWSERBRIDGE_HOME", t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--idle-timeout", "soon"}, `gateway.idle_timeout`},
		{[]string{"--max-conns-per-ip", "-5"}, `gateway.max_conns_per_ip`},
	} {
		var out, errOut bytes.Buffer
		if code := Main(context.Background(), "browserbridge gateway", tc.args, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}
