package authserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
)

// Config configures an authorization server.
type Config struct {
	// Issuer is the public base URL (https://mcp.example.com): the RFC 8414
	// issuer, and the base of every endpoint above. https, or http on a
	// loopback host (tests, a local try-out).
	Issuer string
	// KV holds the state; nil means an in-memory store (lost on restart).
	KV KV
	// Resources resolves a requested `resource` (RFC 8707) to a protected
	// resource this server issues tokens for; false: unknown (invalid_target).
	Resources func(uri string) (Resource, bool)
	// Identity says how a person signs in (identity.go).
	Identity IdentityConfig
	// HTTPClient fetches Client ID Metadata Documents; nil: one with the
	// SSRF guard (cimd.go). Tests on loopback set AllowPrivateCIMD instead.
	HTTPClient *http.Client
	// AllowPrivateCIMD lets a CIMD document live on a loopback or private
	// address: for tests only.
	AllowPrivateCIMD bool

	AccessTokenTTL  time.Duration // default 1 hour
	RefreshTokenTTL time.Duration // default 30 days, from its last use
	CodeTTL         time.Duration // default 2 minutes
	RequestTTL      time.Duration // default 15 minutes: sign-in and consent
	ClientIdleTTL   time.Duration // default 30 days: a registration that got tokens, unused this long, expires
	// RefreshReuseGrace is how long after a refresh the same client may
	// present the refresh token it replaced and get the same new pair
	// (grace.go); default 10 seconds, negative: none (any reuse revokes).
	RefreshReuseGrace time.Duration

	// Limits bound what clients that have not signed in can make the
	// server hold or spend.
	Limits Limits

	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Limits bound what anyone can make the server hold or spend before
// signing in: registrations, sign-in requests, password checks
// (docs/limits.md, "OAuth sign-in"). Every zero value means its default;
// LimitsFrom reads them from the config.
type Limits struct {
	// MaxClients bounds the live registrations; 0: 1,000. Registrations
	// that have not obtained a token make room for a new one (see
	// UnusedClientTTL), so only clients that signed in can fill it; once
	// they do, registration answers 503 until one goes unused for
	// ClientIdleTTL.
	MaxClients int
	// UnusedClientTTL is how long a registration that never obtains a
	// token lives; 0: 1 hour.
	UnusedClientTTL time.Duration
	// RegistrationsPerMinute bounds the registrations one address (an IPv4
	// address, an IPv6 /64) makes a minute; 0: 10.
	RegistrationsPerMinute int
	// MaxSignIns bounds the sign-in requests (GET /oauth/authorize) kept
	// at once, MaxSignInsPerAddress one address's; 0: 1,000 and 16. Past
	// either, the oldest request of that address, or of the address
	// holding the most, is dropped (pending.go).
	MaxSignIns           int
	MaxSignInsPerAddress int
	// MaxPasswordChecks bounds the password checks running at once (each
	// bcrypt check takes about a quarter second of one CPU); 0: half the
	// CPUs, at least one. The others wait, those from the addresses with
	// the fewest recent attempts first, up to PasswordCheckWait (0: 10 s);
	// past it the person is asked to try again (503).
	MaxPasswordChecks int
	PasswordCheckWait time.Duration
}

// LimitsFrom reads the limits of the config's oauth section (the public
// gateway's) or of the proxy's --oauth-config; Validate has checked them.
func LimitsFrom(c config.OAuthLimits) Limits {
	unused, wait := c.Durations()
	return Limits{
		MaxClients:             c.MaxClients,
		UnusedClientTTL:        unused,
		RegistrationsPerMinute: c.RegistrationsPerMinute,
		MaxSignIns:             c.MaxPendingSignIns,
		MaxSignInsPerAddress:   c.MaxPendingSignInsPerAddress,
		MaxPasswordChecks:      c.MaxPasswordChecks,
		PasswordCheckWait:      wait,
	}
}

// SetLifetimes sets the lifetimes of the config's oauth section (the
// public gateway's) or of the proxy's --oauth-config; Validate has
// checked them, and zero values keep New's defaults.
func (cfg *Config) SetLifetimes(l config.Lifetimes) {
	cfg.AccessTokenTTL = l.AccessToken
	cfg.RefreshTokenTTL = l.RefreshToken
	cfg.CodeTTL = l.Code
	cfg.ClientIdleTTL = l.ClientIdle
	cfg.RefreshReuseGrace = l.RefreshReuseGrace
}

// Defaults of Limits' zero values.
const (
	defaultMaxClients             = 1000
	defaultUnusedClientTTL        = time.Hour
	defaultRegistrationsPerMinute = 10
	defaultMaxSignIns             = 1000
	defaultMaxSignInsPerAddress   = 16
	defaultPasswordCheckWait      = 10 * time.Second
)

func (l *Limits) setDefaults() {
	setDefaultInt(&l.MaxClients, defaultMaxClients)
	setDefault(&l.UnusedClientTTL, defaultUnusedClientTTL)
	setDefaultInt(&l.RegistrationsPerMinute, defaultRegistrationsPerMinute)
	setDefaultInt(&l.MaxSignIns, defaultMaxSignIns)
	setDefaultInt(&l.MaxSignInsPerAddress, defaultMaxSignInsPerAddress)
	setDefaultInt(&l.MaxPasswordChecks, max(1, runtime.GOMAXPROCS(0)/2))
	setDefault(&l.PasswordCheckWait, defaultPasswordCheckWait)
}

// Server is an authorization server. Its Handler serves the endpoints in
// the package doc; Protect and ResourceMetadataHandler serve resources.
type Server struct {
	cfg Config
	kv  KV
	id  *identity
	log *slog.Logger
	// metadata is the RFC 8414 document, encoded once.
	metadata []byte
	// regMu makes the MaxClients count and the registration after it one
	// step (on this node).
	regMu sync.Mutex
	// registrations counts each address's registrations a minute.
	registrations *httpguard.Limiter[string]
	// pendingClients and requests index what anyone may make the server
	// store (pending.go), filled from the store by loadPending.
	pendingClients *pendingSet
	requests       *pendingSet
	loadMu         sync.Mutex
	loaded         bool
	// checks bounds the password checks running at once.
	checks *checkGate
}

// Defaults of Config's zero values.
const (
	defaultAccessTokenTTL  = time.Hour
	defaultRefreshTokenTTL = 30 * 24 * time.Hour
	defaultCodeTTL         = 2 * time.Minute
	defaultClientIdleTTL   = 30 * 24 * time.Hour
	defaultRefreshGrace    = 10 * time.Second
)

// New checks cfg, applies the defaults of its zero values and builds
// the server. The issuer is kept without a trailing slash (the form
// RFC 8414 metadata and RFC 9207's iss carry); s.cfg.Issuer is that form.
func New(cfg Config) (*Server, error) {
	iss, err := checkIssuer(cfg.Issuer)
	if err != nil {
		return nil, err
	}
	cfg.Issuer = iss
	if cfg.Resources == nil {
		return nil, errors.New("authserver: Resources is required")
	}
	setDefault(&cfg.AccessTokenTTL, defaultAccessTokenTTL)
	setDefault(&cfg.RefreshTokenTTL, defaultRefreshTokenTTL)
	setDefault(&cfg.CodeTTL, defaultCodeTTL)
	// A registration outlives its refresh tokens, or the app would have
	// to register again while signed in.
	setDefault(&cfg.ClientIdleTTL, max(defaultClientIdleTTL, cfg.RefreshTokenTTL))
	if cfg.RefreshReuseGrace == 0 {
		cfg.RefreshReuseGrace = defaultRefreshGrace
	}
	cfg.Limits.setDefaults()
	l := cfg.Limits
	s := &Server{cfg: cfg, kv: cfg.KV, log: cfg.Logger,
		pendingClients: newPendingSet(0, 0),
		requests:       newPendingSet(l.MaxSignInsPerAddress, l.MaxSignIns),
		checks:         newCheckGate(l.MaxPasswordChecks, maxCheckQueue),
	}
	s.registrations = httpguard.NewPerPeriod[string](l.RegistrationsPerMinute, time.Minute, maxLimiterKeys, s.now)
	s.metadata = s.buildMetadata()
	if s.kv == nil {
		s.kv = NewMemoryKV(cfg.Now)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	id, err := newIdentity(s, cfg.Identity)
	if err != nil {
		return nil, err
	}
	s.id = id
	return s, nil
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

func setDefaultInt(n *int, def int) {
	if *n <= 0 {
		*n = def
	}
}

// checkIssuer returns the issuer in its canonical form, or why it cannot
// be one: an https URL (http only on a loopback host) with no path,
// query or fragment, since Handler is mounted at the issuer's root.
func checkIssuer(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("authserver: the issuer (public URL) is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("authserver: the issuer %q is not a URL: %w", raw, err)
	}
	switch {
	case u.Host == "":
		return "", fmt.Errorf("authserver: the issuer %q has no host", raw)
	case u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname())):
		return "", fmt.Errorf("authserver: the issuer %q must be https (http only on a loopback host)", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?") || strings.Contains(raw, "#"):
		return "", fmt.Errorf("authserver: the issuer %q may not carry user info, a query or a fragment (RFC 8414 §2)", raw)
	case u.Path != "" && u.Path != "/":
		return "", fmt.Errorf("authserver: the issuer %q has a path; the authorization server is served at the root of its host", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Handler serves the authorization server's endpoints (the package doc's
// table). Mount it at the issuer's root; it answers 404 for other paths.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.handleMetadata)
	mux.HandleFunc("POST /oauth/register", s.handleRegister)
	mux.HandleFunc("GET /oauth/authorize", s.handleAuthorize)
	mux.HandleFunc("POST /oauth/signin", s.handleSignIn)
	mux.HandleFunc("GET /oauth/oidc/callback", s.handleOIDCCallback)
	mux.HandleFunc("POST /oauth/consent", s.handleConsent)
	mux.HandleFunc("POST /oauth/token", s.handleToken)
	mux.HandleFunc("POST /oauth/revoke", s.handleRevoke)
	return mux
}

// Paths reports whether path is one of Handler's, so an embedding router
// can send it there.
func Paths(path string) bool {
	switch path {
	case "/.well-known/oauth-authorization-server", "/oauth/register", "/oauth/authorize", "/oauth/signin", "/oauth/oidc/callback",
		"/oauth/consent", "/oauth/token", "/oauth/revoke":
		return true
	}
	return false
}

// Close releases the store.
func (s *Server) Close() error {
	if s.kv == nil {
		return nil
	}
	return s.kv.Close()
}

// ResourceMetadataPath is where RFC 9728 puts the metadata of a resource
// whose URL path is resourcePath: /.well-known/oauth-protected-resource
// with the path inserted ("/mcp" -> "/.well-known/oauth-protected-resource/mcp").
func ResourceMetadataPath(resourcePath string) string {
	if resourcePath == "/" {
		resourcePath = ""
	}
	return "/.well-known/oauth-protected-resource" + resourcePath
}
