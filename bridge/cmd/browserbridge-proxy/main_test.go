package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
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
	var errb testutil.Watch
	listening := errb.Seen("extensions=ws://")
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret}, &bytes.Buffer{}, &errb)
	}()
	select { // cancel a server that is up, not one still starting
	case <-listening:
	case err := <-done:
		t.Fatalf("serve ended before it listened: %v\n%s", err, errb.String())
	}
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

func TestServeFlags(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"negative per-IP cap", []string{"--max-conns-per-ip", "-1"}, "--max-conns-per-ip -1 must be 0 (no limit) or more"},
		{"negative per-user MCP cap", []string{"--max-mcp-per-user", "-5"}, "--max-mcp-per-user -5 must be 0"},
		{"negative per-user extension cap", []string{"--max-extensions-per-user", "-1"}, "--max-extensions-per-user -1 must be 0"},
		{"zero idle timeout", []string{"--idle-timeout", "0s"}, "--idle-timeout 0s must be positive"},
		{"negative read timeout", []string{"--read-timeout", "-1s"}, "--read-timeout -1s must be positive"},
		{"stray argument", []string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret}, tc.args...)
			err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run %v: %v, want an error with %q", tc.args, err, tc.want)
			}
		})
	}
}

// --max-conns-per-ip reaches the server: with 1, a second connection from
// this address is answered 429.
func TestServePerIPFlag(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	var logs testbrowser.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--secret-file", secret, "--max-conns-per-ip", "1"}, &bytes.Buffer{}, &logs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	addr := ""
	for deadline := time.Now().Add(30 * time.Second); addr == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve never said where it listens:\n%s", logs.String())
		}
		if _, rest, ok := strings.Cut(logs.String(), "extensions=ws://"); ok {
			addr, _, _ = strings.Cut(rest, "/")
		}
	}
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "at most 1 may be open at once") {
		t.Fatalf("a second connection with --max-conns-per-ip 1: %s %q", resp.Status, body)
	}
}
