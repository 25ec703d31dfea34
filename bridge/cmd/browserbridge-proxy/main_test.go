package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
)

func TestTokenCommand(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)+"\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"mcp", []string{"token", "--secret-file", secret, "--user", "alice", "--kind", "mcp"}, true},
		{"extension with ttl", []string{"token", "--secret-file", secret, "--user", "alice", "--kind", "extension", "--ttl", "1h"}, true},
		{"bad kind", []string{"token", "--secret-file", secret, "--user", "alice", "--kind", "admin"}, false},
		{"no user", []string{"token", "--secret-file", secret, "--kind", "mcp"}, false},
		{"serve without secret", []string{"serve"}, false},
		{"unknown command", []string{"nope"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errb)
			if (err == nil) != tc.ok {
				t.Fatalf("run: %v (%s)", err, errb.String())
			}
			if !tc.ok {
				return
			}
			keys, _ := token.Load(secret)
			kind := token.Kind(tc.args[len(tc.args)-1])
			if tc.name == "extension with ttl" {
				kind = token.KindExtension
			}
			c, err := keys.Verify(strings.TrimSpace(out.String()), kind, time.Now())
			if err != nil || c.Subject != "alice" {
				t.Fatalf("minted token: %v %+v", err, c)
			}
		})
	}
}

func TestServeStopsOnCancel(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	var errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret}, &bytes.Buffer{}, &errb)
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}
