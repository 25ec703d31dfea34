package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/browserbridge/browserbridge/bridge/paths"
)

// Environment variables of the public gateway's sign-in. Each overrides
// the config key it names.
const (
	// EnvOAuthPassword is the sign-in password itself: the quick start.
	// It sits in the process environment (and often in a file beside the
	// compose file), so oauth.password_hash is the better choice.
	EnvOAuthPassword = "BROWSERBRIDGE_OAUTH_PASSWORD"
	// EnvOAuthOIDCSecret is oauth.oidc.client_secret.
	EnvOAuthOIDCSecret = "BROWSERBRIDGE_OAUTH_OIDC_SECRET"
	// EnvOAuthStateFile is oauth.state_file (a container points it at
	// its volume).
	EnvOAuthStateFile = "BROWSERBRIDGE_OAUTH_STATE_FILE"
)

// MemoryState is the oauth.state_file value (as is "") that keeps the
// OAuth state in memory: every sign-in is lost on restart.
const MemoryState = ":memory:"

// oauthStateName is the state file's name in the per-user state directory.
const oauthStateName = "oauth.db"

// OAuth says how people sign in to a public gateway (gateway.public_url).
// At least one way must be set: PasswordHash, the environment's password,
// or OIDC.
type OAuth struct {
	// PasswordHash is a bcrypt hash of the one user's password, as
	// `browserbridge gateway hash-password` prints it.
	PasswordHash string `json:"password_hash,omitempty"`
	// Password is BROWSERBRIDGE_OAUTH_PASSWORD (never read from the file):
	// set by Defaults.
	Password string `json:"-"`
	// OIDC signs people in with an OpenID Connect provider instead.
	OIDC *OIDC `json:"oidc,omitempty"`
	// StateFile is where registrations, sign-ins and tokens are kept
	// across restarts. Unset means oauth.db in the per-user state
	// directory; "" or ":memory:" keeps them in memory. A relative path is
	// the config file's directory's. BROWSERBRIDGE_OAUTH_STATE_FILE
	// overrides it.
	StateFile *string `json:"state_file,omitempty"`
	// OAuthLimits bound what anyone can make the sign-in hold or spend
	// before signing in; its keys sit in "oauth" itself.
	OAuthLimits
	// OAuthLifetimes say how long tokens, codes and registrations live;
	// its keys sit in "oauth" itself.
	OAuthLifetimes
}

// OAuthLimits are the sign-in's bounds (docs/limits.md, "OAuth sign-in"):
// the public gateway's oauth section and the proxy's --oauth-config file
// both hold them. Every zero value means the default the comment names.
type OAuthLimits struct {
	// MaxClients bounds the live client registrations; 0: 1,000.
	// Registrations that never obtained a token make room, so only apps
	// that signed in can fill it.
	MaxClients int `json:"max_clients,omitempty"`
	// UnusedClientTTL is how long a registration that obtains no token
	// lives, as a Go duration; "": 1h.
	UnusedClientTTL string `json:"unused_client_ttl,omitempty"`
	// RegistrationsPerMinute bounds one address's registrations; 0: 10.
	RegistrationsPerMinute int `json:"registrations_per_minute,omitempty"`
	// MaxPendingSignIns bounds the sign-ins started and not finished, of
	// everyone and of one address; 0: 1,000 and 16.
	MaxPendingSignIns           int `json:"max_pending_signins,omitempty"`
	MaxPendingSignInsPerAddress int `json:"max_pending_signins_per_address,omitempty"`
	// MaxPasswordChecks bounds the password checks running at once; 0:
	// half the CPUs, at least one. PasswordCheckWait is how long one waits
	// for its turn, as a Go duration; "": 10s.
	MaxPasswordChecks int    `json:"max_password_checks,omitempty"`
	PasswordCheckWait string `json:"password_check_wait,omitempty"`
}

// Durations returns UnusedClientTTL and PasswordCheckWait parsed; 0 when
// unset (Validate refuses an invalid one).
func (l *OAuthLimits) Durations() (unusedClientTTL, passwordCheckWait time.Duration) {
	unusedClientTTL, _ = parseDuration(l.UnusedClientTTL)
	passwordCheckWait, _ = parseDuration(l.PasswordCheckWait)
	return
}

// Validate checks the limits; prefix is where they sit ("oauth." in the
// config, "" in the proxy's --oauth-config), for the key in a message.
func (l *OAuthLimits) Validate(prefix string) error {
	for _, k := range []struct {
		key string
		n   int
	}{
		{"max_clients", l.MaxClients},
		{"registrations_per_minute", l.RegistrationsPerMinute},
		{"max_pending_signins", l.MaxPendingSignIns},
		{"max_pending_signins_per_address", l.MaxPendingSignInsPerAddress},
		{"max_password_checks", l.MaxPasswordChecks},
	} {
		if k.n < 0 || k.n > 1_000_000 {
			return fmt.Errorf("key %q: %d is outside 0-1000000 (0 means the default)", prefix+k.key, k.n)
		}
	}
	for _, k := range []struct{ key, val, example string }{
		{"unused_client_ttl", l.UnusedClientTTL, "1h"},
		{"password_check_wait", l.PasswordCheckWait, "10s"},
	} {
		if d, err := parseDuration(k.val); err != nil || d < 0 {
			return fmt.Errorf("key %q: %q is not a duration such as %q", prefix+k.key, k.val, k.example)
		}
	}
	return nil
}

// OIDC is an OpenID Connect provider people sign in with.
type OIDC struct {
	// Issuer is the provider's issuer URL (https://accounts.google.com).
	Issuer string `json:"issuer"`
	// ClientID and ClientSecret are the gateway's registration at the
	// provider (redirect URI: {public_url}/oauth/oidc/callback).
	// BROWSERBRIDGE_OAUTH_OIDC_SECRET overrides ClientSecret.
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	// AllowedSubjects ("sub" claims) and AllowedEmails (verified emails)
	// say who may sign in: at least one entry in one of them.
	AllowedSubjects []string `json:"allowed_subjects,omitempty"`
	AllowedEmails   []string `json:"allowed_emails,omitempty"`
}

// fromEnv applies the environment's overrides (Defaults calls it).
func (o *OAuth) fromEnv() {
	if p := os.Getenv(EnvOAuthPassword); p != "" {
		o.Password = p
	}
	if s := os.Getenv(EnvOAuthOIDCSecret); s != "" && o.OIDC != nil {
		o.OIDC.ClientSecret = s
	}
}

// NormalizePublicURL checks a public URL (gateway.public_url or
// --public-url) and returns it as scheme://host[:port], without a default
// port or a trailing slash. It must be https (http only for a loopback
// host, for a local try-out) with no path: the gateway's routes and its
// authorization server live at the root of their host.
func NormalizePublicURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("%q is not a URL such as https://mcp.example.com", s)
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	switch {
	case scheme == "https":
	case scheme == "http" && isLoopbackHost(host):
	case scheme == "http":
		return "", fmt.Errorf("%q is http: sign-ins and tokens would cross the network unencrypted; use https (a TLS proxy such as Caddy in front; http is allowed only for localhost)", s)
	default:
		return "", fmt.Errorf("%q is not an https URL such as https://mcp.example.com", s)
	}
	if u.User != nil {
		return "", fmt.Errorf("%q holds a user name or password; the public URL is only scheme://host[:port]", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#") {
		return "", fmt.Errorf("%q has a path, query or fragment; the gateway is served at the root of its own host name (such as https://mcp.example.com), since its authorization server's metadata and each server's /.well-known metadata must be there", s)
	}
	if ip := net.ParseIP(host); ip == nil && !isDNSName(strings.TrimSuffix(host, ".")) {
		return "", fmt.Errorf("%q: %q is not a host name", s, u.Hostname())
	}
	host = strings.TrimSuffix(host, ".")
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, p)
		}
		if !(scheme == "https" && n == 443) && !(scheme == "http" && n == 80) {
			host += ":" + strconv.Itoa(n)
		}
	}
	return scheme + "://" + host, nil
}

// PublicBase is gateway.public_url normalized (NormalizePublicURL), or ""
// when the gateway is not public or the URL is invalid (Validate refuses
// an invalid one).
func (g *Gateway) PublicBase() string {
	if g.PublicURL == "" {
		return ""
	}
	u, _ := NormalizePublicURL(g.PublicURL)
	return u
}

// validatePublic checks gateway.public_url and the oauth section, naming
// the key at fault.
func (c *Config) validatePublic() error {
	if c.Gateway.PublicURL != "" {
		if _, err := NormalizePublicURL(c.Gateway.PublicURL); err != nil {
			return fmt.Errorf("config: key \"gateway.public_url\" (--public-url): %w", err)
		}
		if c.Token != "" {
			return errors.New(`config: keys "token" and "gateway.public_url": a public gateway is protected by OAuth sign-in (what claude.ai and phone apps use), and a static token would be a second way in that never expires; drop "token" (and BROWSERBRIDGE_TOKEN)`)
		}
	}
	return c.OAuth.validate()
}

func (o *OAuth) validate() error {
	if h := o.PasswordHash; h != "" {
		// bcrypt's modular crypt form: $2a$, $2b$ or $2y$, cost, 53 characters.
		if len(h) != 60 || !(strings.HasPrefix(h, "$2a$") || strings.HasPrefix(h, "$2b$") || strings.HasPrefix(h, "$2y$")) {
			return errors.New(`config: key "oauth.password_hash": not a bcrypt hash (60 characters starting with $2a$, $2b$ or $2y$); make one with: browserbridge gateway hash-password`)
		}
	}
	if o.StateFile != nil && strings.ContainsRune(*o.StateFile, 0) {
		return errors.New(`config: key "oauth.state_file": the path contains a NUL byte`)
	}
	if err := o.OAuthLimits.Validate("oauth."); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := o.OAuthLifetimes.Validate("oauth."); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if o.OIDC == nil {
		return nil
	}
	p := o.OIDC
	u, err := url.Parse(p.Issuer)
	if p.Issuer == "" || err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname()))) {
		return fmt.Errorf("config: key \"oauth.oidc.issuer\": %q is not the provider's https issuer URL (such as https://accounts.google.com)", p.Issuer)
	}
	if strings.TrimSpace(p.ClientID) == "" {
		return errors.New(`config: key "oauth.oidc.client_id": required: the client id the provider gave the gateway`)
	}
	if len(p.AllowedSubjects) == 0 && len(p.AllowedEmails) == 0 {
		return errors.New(`config: keys "oauth.oidc.allowed_subjects" and "oauth.oidc.allowed_emails": list who may sign in (a verified email or a subject id); with neither, anyone with an account at the provider could`)
	}
	for i, s := range p.AllowedSubjects {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("config: key \"oauth.oidc.allowed_subjects[%d]\": empty", i)
		}
	}
	for i, e := range p.AllowedEmails {
		if at := strings.LastIndexByte(e, '@'); at < 1 || at == len(e)-1 || strings.ContainsAny(e, " \t\r\n") {
			return fmt.Errorf("config: key \"oauth.oidc.allowed_emails[%d]\": %q is not an email address", i, e)
		}
	}
	return nil
}

// CheckSignIn reports why a public gateway would have no usable way to
// sign in. Call it after Defaults, which reads the environment's password.
func (o *OAuth) CheckSignIn() error {
	if o.PasswordHash != "" && o.Password != "" {
		return errors.New(`config: key "oauth.password_hash" and ` + EnvOAuthPassword + `: both set a password; keep one (the hash is the safer: the password itself then lives nowhere)`)
	}
	if o.PasswordHash == "" && o.Password == "" && o.OIDC == nil {
		return errors.New(`config: key "oauth": a public gateway needs a way to sign in: set "oauth.password_hash" (browserbridge gateway hash-password prints one), "oauth.oidc", or ` + EnvOAuthPassword + ` (the quick start)`)
	}
	return nil
}

// OAuthStateFile returns the file the public gateway keeps its OAuth
// state in, or "" to keep it in memory: BROWSERBRIDGE_OAUTH_STATE_FILE,
// else oauth.state_file (relative to the config file's directory), else
// oauth.db in the per-user state directory.
func (c *Config) OAuthStateFile() (string, error) {
	f, set := os.LookupEnv(EnvOAuthStateFile)
	if !set && c.OAuth.StateFile != nil {
		f, set = *c.OAuth.StateFile, true
	}
	if !set {
		dir, err := paths.StateDir()
		if err != nil {
			return "", fmt.Errorf("finding the OAuth state file: %w", err)
		}
		return filepath.Join(dir, oauthStateName), nil
	}
	if f == "" || f == MemoryState {
		return "", nil
	}
	if strings.ContainsRune(f, 0) {
		return "", errors.New(EnvOAuthStateFile + ": the path contains a NUL byte")
	}
	if !filepath.IsAbs(f) && c.Path != "" {
		f = filepath.Join(filepath.Dir(c.Path), f)
	}
	return filepath.Abs(f)
}
