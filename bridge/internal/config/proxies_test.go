package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries string // the JSON list
		want    []string
		wantErr string // "" = valid
	}{
		{name: "unset", entries: ``, want: nil},
		{name: "compose example", entries: `["127.0.0.1/32", "172.16.0.0/12"]`, want: []string{"127.0.0.1/32", "172.16.0.0/12"}},
		{name: "single addresses", entries: `["127.0.0.1", "::1"]`, want: []string{"127.0.0.1/32", "::1/128"}},
		{name: "IPv6 network", entries: `["fd00::/8"]`, want: []string{"fd00::/8"}},
		{name: "host bits set", entries: `["10.1.2.3/8"]`, want: []string{"10.0.0.0/8"}},
		{name: "IPv4-mapped", entries: `["::ffff:172.16.0.0/108"]`, want: []string{"172.16.0.0/12"}},
		{name: "a name", entries: `["caddy"]`, wantErr: `key "trusted_proxies[0]": "caddy" is not an IP address`},
		{name: "a bad prefix", entries: `["127.0.0.1", "10.0.0.0/33"]`, wantErr: `key "trusted_proxies[1]"`},
		{name: "a zone", entries: `["fe80::1%eth0"]`, wantErr: `key "trusted_proxies[0]"`},
		{name: "every IPv4 address", entries: `["0.0.0.0/0"]`, wantErr: "trusts every address"},
		{name: "every IPv6 address", entries: `["::/0"]`, wantErr: "trusts every address"},
		{name: "not a list", entries: `"127.0.0.1"`, wantErr: `key "trusted_proxies" must be a list`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvTrustedProxies, "")
			doc := `{}`
			if tc.entries != "" {
				doc = fmt.Sprintf(`{"trusted_proxies": %s}`, tc.entries)
			}
			c, err := Decode(strings.NewReader(doc))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode(%s) error = %v, want one containing %q", doc, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range c.TrustedProxyPrefixes() {
				got = append(got, p.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("TrustedProxyPrefixes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTrustedProxiesEnvironment(t *testing.T) {
	t.Run("overrides the config", func(t *testing.T) {
		t.Setenv(EnvTrustedProxies, "172.16.0.0/12, ::1")
		c, err := Decode(strings.NewReader(`{"trusted_proxies": ["10.0.0.1"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(c.TrustedProxyPrefixes()); got != "[172.16.0.0/12 ::1/128]" {
			t.Fatalf("TrustedProxyPrefixes = %s", got)
		}
	})
	t.Run("a bad entry names the variable", func(t *testing.T) {
		t.Setenv(EnvTrustedProxies, "172.16.0.0/12,proxy")
		_, err := Decode(strings.NewReader(`{}`))
		if err == nil || !strings.Contains(err.Error(), EnvTrustedProxies) || !strings.Contains(err.Error(), `"proxy"`) {
			t.Fatalf("error = %v, want one naming %s and the entry", err, EnvTrustedProxies)
		}
	})
}
