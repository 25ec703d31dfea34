package config

import (
	"fmt"
	"time"
)

// OAuthLifetimes are how long what the sign-in issues lives (docs/limits.md,
// "OAuth sign-in"): the public gateway's oauth section and the proxy's
// --oauth-config file both hold them, as Go durations ("1h", "720h").
// Every empty value means its default; a value outside its bounds is
// refused at start with a sentence naming the key.
type OAuthLifetimes struct {
	// AccessTokenTTL: an access token's life; "": 1h, within 1m–24h.
	AccessTokenTTL string `json:"access_token_ttl,omitempty"`
	// RefreshTokenTTL: a refresh token's life from its family's last use;
	// "": 720h (30 days), within 1h–8760h.
	RefreshTokenTTL string `json:"refresh_token_ttl,omitempty"`
	// CodeTTL: an authorization code's life; "": 2m, within 10s–10m
	// (RFC 6749 §4.1.2 recommends at most ten minutes).
	CodeTTL string `json:"code_ttl,omitempty"`
	// ClientIdleTTL: how long a registration that obtained tokens lives
	// unused; "": 720h or refresh_token_ttl if longer, within 1h–8760h and
	// never shorter than refresh_token_ttl.
	ClientIdleTTL string `json:"client_idle_ttl,omitempty"`
	// RefreshReuseGrace: how long after a refresh the same client may
	// present the token it replaced and get the same new pair; "": 10s,
	// within 0s–60s ("0s": none, any reuse ends the sign-in).
	RefreshReuseGrace string `json:"refresh_reuse_grace,omitempty"`
}

// defaultRefreshTokenTTL is the authorization server's default, which
// client_idle_ttl may not undercut.
const defaultRefreshTokenTTL = 720 * time.Hour

// Lifetimes are OAuthLifetimes parsed: 0 means the default, and
// RefreshReuseGrace is negative for "0s" (no grace).
type Lifetimes struct {
	AccessToken, RefreshToken, Code, ClientIdle, RefreshReuseGrace time.Duration
}

// lifetimeBound is one key's bounds.
type lifetimeBound struct {
	key      string
	val      *string
	min, max time.Duration
	example  string
}

func (l *OAuthLifetimes) bounds() []lifetimeBound {
	return []lifetimeBound{
		{"access_token_ttl", &l.AccessTokenTTL, time.Minute, 24 * time.Hour, "1h"},
		{"refresh_token_ttl", &l.RefreshTokenTTL, time.Hour, 8760 * time.Hour, "720h"},
		{"code_ttl", &l.CodeTTL, 10 * time.Second, 10 * time.Minute, "2m"},
		{"client_idle_ttl", &l.ClientIdleTTL, time.Hour, 8760 * time.Hour, "720h"},
		{"refresh_reuse_grace", &l.RefreshReuseGrace, 0, time.Minute, "10s"},
	}
}

// Validate checks each lifetime against its bounds; prefix is where they
// sit ("oauth." in the config, "" in the proxy's --oauth-config).
func (l *OAuthLifetimes) Validate(prefix string) error {
	for _, b := range l.bounds() {
		if *b.val == "" {
			continue
		}
		d, err := time.ParseDuration(*b.val)
		if err != nil {
			return fmt.Errorf("key %q: %q is not a duration such as %q", prefix+b.key, *b.val, b.example)
		}
		if d < b.min || d > b.max {
			return fmt.Errorf("key %q: %s is outside %s–%s, the bounds this server keeps for it", prefix+b.key, *b.val, fmtBound(b.min), fmtBound(b.max))
		}
	}
	p := l.Parsed()
	refresh, refreshSaid := p.RefreshToken, l.RefreshTokenTTL
	if refresh == 0 {
		refresh, refreshSaid = defaultRefreshTokenTTL, "720h, its default"
	}
	if p.ClientIdle > 0 && p.ClientIdle < refresh {
		return fmt.Errorf("key %q: %s is shorter than %q (%s): a registration would expire while its refresh tokens still live, and the app would have to register and sign in again",
			prefix+"client_idle_ttl", l.ClientIdleTTL, prefix+"refresh_token_ttl", refreshSaid)
	}
	return nil
}

// Parsed returns the lifetimes as durations (Validate has checked them).
func (l *OAuthLifetimes) Parsed() Lifetimes {
	parse := func(s string) time.Duration {
		d, _ := parseDuration(s)
		return d
	}
	out := Lifetimes{AccessToken: parse(l.AccessTokenTTL), RefreshToken: parse(l.RefreshTokenTTL), Code: parse(l.CodeTTL),
		ClientIdle: parse(l.ClientIdleTTL), RefreshReuseGrace: parse(l.RefreshReuseGrace)}
	if l.RefreshReuseGrace != "" && out.RefreshReuseGrace == 0 {
		out.RefreshReuseGrace = -1
	}
	return out
}

// fmtBound writes a bound the way a config would ("10s", "24h").
func fmtBound(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
