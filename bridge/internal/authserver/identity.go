package authserver

import "net/http"

// IdentityConfig says how a person proves who they are. At least one way
// must be set.
type IdentityConfig struct {
	// PasswordHash is a bcrypt hash of the single user's password (from
	// config; `browserbridge gateway hash-password` makes one).
	PasswordHash string
	// Password is the password itself (BROWSERBRIDGE_OAUTH_PASSWORD):
	// quicker to set up, weaker (it sits in the environment).
	Password string
	// OIDC signs people in with an upstream OpenID Connect provider.
	OIDC *OIDCConfig
	// PairingCode, on the proxy, checks a one-time code from
	// `browserbridge pair` (issue 17): the subject it is bound to, or an
	// error a person can read.
	PairingCode func(code string) (Subject, error)
}

// OIDCConfig is an upstream OpenID Connect provider.
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// AllowedSubjects and AllowedEmails: who may sign in (at least one
	// entry in one of them). Emails count only when email_verified.
	AllowedSubjects []string
	AllowedEmails   []string
	// HTTPClient talks to the provider; nil: http.DefaultClient.
	HTTPClient *http.Client
}

// identity signs people in (stub until pages land).
type identity struct{}

func newIdentity(s *Server, cfg IdentityConfig) (*identity, error) { return &identity{}, nil }

func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request)    { notBuilt(w) }
func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request)       { notBuilt(w) }
func (s *Server) handleOIDCCallback(w http.ResponseWriter, r *http.Request) { notBuilt(w) }
func (s *Server) handleConsent(w http.ResponseWriter, r *http.Request)      { notBuilt(w) }
