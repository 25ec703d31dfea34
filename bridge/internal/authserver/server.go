package authserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
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
	ClientIdleTTL   time.Duration // default 30 days: unused registrations expire
	MaxClients      int           // default 1,000 live registrations

	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Server is an authorization server. Its Handler serves the endpoints in
// the package doc; Protect and ResourceMetadataHandler serve resources.
type Server struct {
	cfg Config
	kv  KV
	id  *identity
	log *slog.Logger
}

// New checks cfg and builds the server.
func New(cfg Config) (*Server, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("authserver: the issuer (public URL) is required")
	}
	if cfg.Resources == nil {
		return nil, errors.New("authserver: Resources is required")
	}
	s := &Server{cfg: cfg, kv: cfg.KV, log: cfg.Logger}
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

// Handler serves the authorization server's endpoints (the package doc's
// table). Mount it at the issuer's root; it answers 404 for other paths.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.handleMetadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", s.handleMetadata)
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
	case "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
		"/oauth/register", "/oauth/authorize", "/oauth/signin", "/oauth/oidc/callback",
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

// Verify checks a bearer access token for resource: the Grant, or an
// error whose text a person can read (expired, revoked, for another
// resource, unknown).
func (s *Server) Verify(ctx context.Context, token, resource string) (*Grant, error) {
	return nil, errors.New("authserver: Verify is not built yet")
}

// Protect puts the bearer check for resource in front of next: a request
// without a valid token for resource gets 401 with
// `WWW-Authenticate: Bearer resource_metadata="<metadataURL>"` (and
// error="invalid_token" when one was sent). The Grant is in the request's
// context (GrantFrom).
func (s *Server) Protect(resource Resource, metadataURL string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "authserver: Protect is not built yet", http.StatusNotImplemented)
	})
}

// GrantFrom returns the Grant Protect put in ctx, or nil.
func GrantFrom(ctx context.Context) *Grant { return nil }

// ResourceMetadataHandler serves RFC 9728 protected-resource metadata
// for resource, naming this server as its authorization server.
func (s *Server) ResourceMetadataHandler(resource Resource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "authserver: resource metadata is not built yet", http.StatusNotImplemented)
	})
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
