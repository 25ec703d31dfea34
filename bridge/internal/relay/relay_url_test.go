package relay_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/daemon"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// startBridgeAt is startBridge with the relay URL as the user wrote it.
func startBridgeAt(t *testing.T, relayURL, tok, user string) *userBridge {
	t.Helper()
	dir, err := os.MkdirTemp("", "bbr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "b.sock")
	cfg := &config.Config{Listen: "127.0.0.1:0", Socket: sock, Log: config.Log{File: "-"},
		Relay: config.Relay{URL: relayURL, Token: tok}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("relay.url %q: %v", relayURL, err)
	}
	b, err := daemon.Start(cfg, testLog(t, "bridge-"+user))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("bridge %s: %v", user, err)
			}
		})
	}
	t.Cleanup(stop)
	return &userBridge{t: t, user: user, b: b, sock: sock, stop: stop}
}

// TestRelayURLForms: the bridge's relay and `connect` (RemoteServer) reach
// a real proxy with each URL form they accept: the base URL with or without
// a trailing slash, and their endpoint's URL as the proxy prints it.
func TestRelayURLForms(t *testing.T) {
	p := startProxy(t)
	for i, form := range []string{"", "/", "/extension", "/extension/"} {
		user := "url-user-" + string(rune('a'+i))
		ub := startBridgeAt(t, p.url()+form, p.token(user, token.KindExtension), user)
		fb := ub.attach("Browser-" + user)
		ext := ""
		for _, r := range ub.waitRelay(1) {
			ext = r.ExtensionID
		}
		for _, mcpForm := range []string{"", "/", "/mcp", "/mcp/"} {
			t.Run("relay.url=…"+form+" connect=…"+mcpForm, func(t *testing.T) {
				rs := relay.NewRemoteServer(relay.RemoteOptions{URL: p.url() + mcpForm, Token: p.token(user, token.KindMCP), ExtensionID: ext,
					MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, ReadyWait: 10 * time.Second, Logger: testLog(t, "connect-"+user)}, "test")
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); rs.Remote().Run(ctx) }()
				defer func() { cancel(); wg.Wait() }()
				select {
				case <-rs.Synced():
				case <-ctx.Done():
					t.Fatalf("connect to %s never listed the tools: %s", p.url()+mcpForm, rs.Remote().LastError())
				}
				res, err := rs.Remote().Call(ctx, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}})
				if err != nil {
					t.Fatalf("whoami through %s: %v", p.url()+mcpForm, err)
				}
				if !strings.Contains(string(res), fb.label) {
					t.Errorf("whoami = %s, want %s", res, fb.label)
				}
			})
		}
	}
}

// TestRelayDialErrorsNameTheDialledURL: when the dial fails, the error (in
// the bridge's relay status, and in connect's LastError) names the URL
// dialled, endpoint included, not the base URL configured: a 404 from
// something that is not the proxy, and a refused connection.
func TestRelayDialErrorsNameTheDialledURL(t *testing.T) {
	notProxy := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notProxy.Close)
	notFound := "ws://" + strings.TrimPrefix(notProxy.URL, "http://")
	refused := "ws://" + testutil.ClosedAddr(t)
	for _, tc := range []struct {
		name, base string
		want       []string
	}{
		{"404", notFound, []string{"HTTP 404"}},
		{"refused", refused, []string{"connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bridge's relay, given the base URL with a slash.
			ub := startBridgeAt(t, tc.base+"/", "t", "dial-"+tc.name)
			ub.attach("B")
			var relayErr string
			testutil.WaitFor(t, "the relay's error", func() bool {
				for _, r := range ub.b.Links().Status().Relay {
					relayErr = r.Error
					break
				}
				return relayErr != ""
			})
			for _, w := range append([]string{"connecting to the proxy at " + tc.base + "/extension:"}, tc.want...) {
				if !strings.Contains(relayErr, w) {
					t.Errorf("relay error %q does not say %q", relayErr, w)
				}
			}

			// connect, given the base URL.
			r := relay.NewRemote(relay.RemoteOptions{URL: tc.base, Token: "t", MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); r.Run(ctx) }()
			defer func() { cancel(); <-done }()
			var remoteErr string
			testutil.WaitFor(t, "the remote server's error", func() bool { remoteErr = r.LastError(); return remoteErr != "" })
			for _, w := range append([]string{"connecting to the proxy at " + tc.base + "/mcp:"}, tc.want...) {
				if !strings.Contains(remoteErr, w) {
					t.Errorf("connect error %q does not say %q", remoteErr, w)
				}
			}
		})
	}
}
