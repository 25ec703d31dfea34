package main

import (
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// The sign-in's limits in --oauth-config reach the proxy's authorization
// server options; unset ones stay zero, the server's defaults.
func TestOAuthConfigLimits(t *testing.T) {
	f := oauthConfig(t, `{"users":{"password:owner":"alice"},"max_clients":50,"unused_client_ttl":"20m","max_pending_signins_per_address":4,"password_check_wait":"3s"}`)
	ho, closeKV, err := httpOptions("https://proxy.example.com", "", f, nil, testutil.Logger(t, "proxy"))
	if err != nil {
		t.Fatal(err)
	}
	defer closeKV()
	want := authserver.Limits{MaxClients: 50, UnusedClientTTL: 20 * time.Minute, MaxSignInsPerAddress: 4, PasswordCheckWait: 3 * time.Second}
	if ho.Limits != want {
		t.Fatalf("limits %+v, want %+v", ho.Limits, want)
	}
}

// The lifetimes in --oauth-config reach the proxy's authorization server
// options; one out of its bounds stops the proxy with the key's sentence.
func TestOAuthConfigLifetimes(t *testing.T) {
	f := oauthConfig(t, `{"users":{"password:owner":"alice"},"access_token_ttl":"10m","refresh_reuse_grace":"0s"}`)
	ho, closeKV, err := httpOptions("https://proxy.example.com", "", f, nil, testutil.Logger(t, "proxy"))
	if err != nil {
		t.Fatal(err)
	}
	defer closeKV()
	if want := (config.Lifetimes{AccessToken: 10 * time.Minute, RefreshReuseGrace: -1}); ho.Lifetimes != want {
		t.Fatalf("lifetimes %+v, want %+v", ho.Lifetimes, want)
	}
}
