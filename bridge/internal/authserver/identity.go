package authserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
)

// ErrSignInLimited marks a refusal by a checker's own attempt limit (see
// SignInLimited): the sign-in page then answers 429 with Retry-After
// rather than 401 "wrong code".
var ErrSignInLimited = errors.New("too many sign-in attempts")

// SignInLimited wraps err, a checker's sentence for its rate limit, so
// that it also matches ErrSignInLimited; its text stays err's.
func SignInLimited(err error) error { return limitedError{err} }

type limitedError struct{ err error }

func (e limitedError) Error() string   { return e.err.Error() }
func (e limitedError) Unwrap() []error { return []error{e.err, ErrSignInLimited} }

// ErrSignInUnavailable marks a checker that could not check (its store
// did not answer; see SignInUnavailable): the sign-in page then answers
// 503 with Retry-After rather than 401 "wrong code".
var ErrSignInUnavailable = errors.New("the sign-in check is unavailable")

// SignInUnavailable wraps err, a checker's sentence for why it could not
// check, so that it also matches ErrSignInUnavailable; its text stays err's.
func SignInUnavailable(err error) error { return unavailableError{err} }

type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, ErrSignInUnavailable} }

// IdentityConfig says how a person proves who they are. At least one way
// must be set.
type IdentityConfig struct {
	// PasswordHash is a bcrypt hash of the single user's password (from
	// config; `browserbridge gateway hash-password` makes one).
	PasswordHash string
	// Password is the password itself (BROWSERBRIDGE_OAUTH_PASSWORD):
	// quicker to set up, weaker (it sits in the environment). At least
	// MinPasswordLength characters; not together with PasswordHash.
	Password string
	// OIDC signs people in with an upstream OpenID Connect provider.
	OIDC *OIDCConfig
	// PairingCode, on the proxy, checks a one-time code from
	// `browserbridge pair` (issue 17): the subject it is bound to, or an
	// error a person can read.
	PairingCode func(code, clientIP string) (Subject, error)

	// Admit, when set, decides whether a person who proved who they are
	// may have a token here at all (the proxy admits only subjects it maps
	// to one of its users). Its error's text is shown on the sign-in page
	// (403) and nothing is issued. Nil: everyone who signs in.
	Admit func(Subject) error

	// SessionTTL is how long a browser stays signed in after a password or
	// OIDC sign-in, so that connecting the next app asks only for consent.
	// Zero means 8 hours; negative means never (sign in every time). The
	// session lives in the KV (bucket "sessions"); the cookie holds only a
	// random key to it. Pairing never starts one: each code is one proof.
	SessionTTL time.Duration
	// ClientIP is the address a request comes from, for the sign-in rate
	// limits. Nil means the connection's peer address; behind a reverse
	// proxy, return the address the proxy vouches for.
	ClientIP func(r *http.Request) string
}

// OIDCConfig is an upstream OpenID Connect provider.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL: https, or http on a loopback
	// host (tests). Its discovery document is read on first use.
	Issuer       string
	ClientID     string
	ClientSecret string
	// Name is the provider as the button says it ("Sign in with Google");
	// empty means the issuer's host name.
	Name string
	// AllowedSubjects and AllowedEmails: who may sign in (at least one
	// entry in one of them). Emails count only when email_verified.
	AllowedSubjects []string
	AllowedEmails   []string
	// HTTPClient talks to the provider; nil: a client with a 15 s timeout.
	HTTPClient *http.Client
}

const (
	defaultSessionTTL = 8 * time.Hour
	bucketSessions    = "sessions" // sha256(session cookie) -> signInSession
	sessionCookie     = "bb_session"

	// maxLimiterKeys bounds the keys (addresses, requests) each attempt
	// limit holds; past it newcomers share one bucket.
	maxLimiterKeys = 50_000

	// Sign-in attempts (password or pairing code) allowed per minute: per
	// request, so one page cannot be used to guess, and per client
	// address across all its requests, since requests are free to open.
	attemptsPerRequest = 5
	attemptsPerAddress = 20
	attemptWindow      = time.Minute
	// requestsPerAddress bounds the sign-in requests one address opens a
	// minute: each is a stored entry, and opening them needs no password.
	requestsPerAddress = 60
)

// identity signs people in: the configured ways, the attempt limits and
// the paths and cookie settings derived from the issuer.
type identity struct {
	password *passwordCheck
	pairing  func(code, clientIP string) (Subject, error)
	oidc     *upstream
	admit    func(Subject) error

	sessionTTL time.Duration
	// epoch changes with the sign-in configuration; a session from
	// another one (a new password, a shorter allow list) is not honoured.
	epoch    string
	clientIP func(*http.Request) string

	// The attempt limits, httpguard's limiter for guesses: a full table
	// makes newcomers share a bucket rather than forget anyone's.
	perRequest *httpguard.Limiter[string]
	perAddress *httpguard.Limiter[string]
	opened     *httpguard.Limiter[string] // requests opened per address

	basePath     string // the issuer's path, "" at the root
	cookiePath   string // basePath + "/oauth/"
	secure       bool   // https issuer: Secure cookies
	issuerOrigin string // scheme://host of the issuer, for the Origin check
}

func newIdentity(s *Server, cfg IdentityConfig) (*identity, error) {
	iss, err := url.Parse(s.cfg.Issuer)
	if err != nil || iss.Host == "" || (iss.Scheme != "https" && iss.Scheme != "http") {
		return nil, fmt.Errorf("authserver: the issuer %q is not an http(s) URL", s.cfg.Issuer)
	}
	id := &identity{
		pairing:      cfg.PairingCode,
		admit:        cfg.Admit,
		sessionTTL:   cfg.SessionTTL,
		clientIP:     cfg.ClientIP,
		perRequest:   httpguard.NewPerPeriod[string](attemptsPerRequest, attemptWindow, maxLimiterKeys, s.now),
		perAddress:   httpguard.NewPerPeriod[string](attemptsPerAddress, attemptWindow, maxLimiterKeys, s.now),
		opened:       httpguard.NewPerPeriod[string](requestsPerAddress, attemptWindow, maxLimiterKeys, s.now),
		basePath:     strings.TrimSuffix(iss.Path, "/"),
		secure:       iss.Scheme == "https",
		issuerOrigin: iss.Scheme + "://" + iss.Host,
	}
	id.cookiePath = id.basePath + "/oauth/"
	if id.sessionTTL == 0 {
		id.sessionTTL = defaultSessionTTL
	}
	if id.password, err = newPasswordCheck(cfg.PasswordHash, cfg.Password); err != nil {
		return nil, err
	}
	if cfg.OIDC != nil {
		if id.oidc, err = newUpstream(*cfg.OIDC, s.cfg.Issuer+"/oauth/oidc/callback"); err != nil {
			return nil, err
		}
	}
	if id.password == nil && id.pairing == nil && id.oidc == nil {
		return nil, errors.New("authserver: no way to sign in is configured: set a password " +
			"(BROWSERBRIDGE_OAUTH_PASSWORD or a password hash), an OIDC provider, or pairing codes")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%s\x00", cfg.PasswordHash, hashSecret(cfg.Password))
	if o := cfg.OIDC; o != nil {
		fmt.Fprintf(&b, "%s\x00%s\x00%q\x00%q", o.Issuer, o.ClientID, o.AllowedSubjects, o.AllowedEmails)
	}
	id.epoch = hashSecret(b.String())
	return id, nil
}

// address is the key the per-address limit counts under, the one every
// per-address limit uses ([httpguard.ClientKey]): the client's IP, and for
// IPv6 its /64. It is handed on to the pairing codes' check as it is.
func (id *identity) address(r *http.Request) string {
	raw := r.RemoteAddr
	if id.clientIP != nil {
		raw = id.clientIP(r)
	}
	return httpguard.ClientKey(raw)
}

// handleSignIn serves POST /oauth/signin: a password or pairing code
// (no action), or the start of the upstream OIDC round trip (action=oidc).
func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	f, ok := s.formRequest(w, r)
	if !ok {
		return
	}
	if f.req.Subject != nil {
		// Signed in already (a second tab, the back button): on to consent.
		s.showConsent(w, r, f)
		return
	}
	switch r.PostForm.Get("action") {
	case "":
		s.signInWithSecret(w, r, f)
	case "oidc":
		if s.id.oidc == nil {
			s.showSignIn(w, r, f, http.StatusBadRequest, "Signing in with a provider is not set up here.", false)
			return
		}
		s.startOIDC(w, r, f)
	default:
		s.showSignIn(w, r, f, http.StatusBadRequest, "The form asked for a way of signing in this server does not know.", false)
	}
}

// signInWithSecret checks a password or a pairing code, within the
// attempt limits, which count every attempt before it is checked so that
// parallel guesses cannot slip past them.
func (s *Server) signInWithSecret(w http.ResponseWriter, r *http.Request, f *authFlow) {
	password, code := r.PostForm.Get("password"), strings.TrimSpace(r.PostForm.Get("code"))
	if password == "" && code == "" {
		msg := "Enter the password."
		if s.id.password == nil {
			msg = "Enter the pairing code."
		}
		s.showSignIn(w, r, f, http.StatusBadRequest, msg, false)
		return
	}
	addr := s.id.address(r)
	if !s.id.perRequest.Allow(f.req.ID) {
		s.log.Warn("authserver: sign-in attempts limited", "limit", "request", "address", addr, "client", f.req.ClientID)
		w.Header().Set("Retry-After", "60")
		s.showSignIn(w, r, f, http.StatusTooManyRequests,
			"Too many attempts on this sign-in. Wait a minute, then try again.", true)
		return
	}
	if !s.id.perAddress.Allow(addr) {
		s.log.Warn("authserver: sign-in attempts limited", "limit", "address", "address", addr)
		w.Header().Set("Retry-After", "60")
		s.showSignIn(w, r, f, http.StatusTooManyRequests,
			"Too many sign-in attempts from your network. Wait a minute, then try again.", true)
		return
	}

	var subj Subject
	switch {
	case code != "" && s.id.pairing != nil:
		var got Subject
		err := errors.New("that is not a pairing code")
		if len(code) <= 256 {
			got, err = s.id.pairing(code, addr)
		}
		if err == nil && got.ID == "" {
			err = errors.New("the pairing code is bound to no one")
		}
		if errors.Is(err, ErrSignInLimited) {
			// The checker's own limit, not a wrong code: the person
			// should wait, and a client may read Retry-After.
			s.log.Warn("authserver: sign-in attempts limited", "limit", "pairing", "address", addr, "client", f.req.ClientID)
			w.Header().Set("Retry-After", "60")
			s.showSignIn(w, r, f, http.StatusTooManyRequests, sentence(err.Error()), true)
			return
		}
		if errors.Is(err, ErrSignInUnavailable) {
			// Not the person's mistake: the code could not be checked.
			s.log.Warn("authserver: pairing code could not be checked", "address", addr, "client", f.req.ClientID)
			w.Header().Set("Retry-After", "10")
			s.showSignIn(w, r, f, http.StatusServiceUnavailable, sentence(err.Error()), true)
			return
		}
		if err != nil {
			s.log.Warn("authserver: pairing code refused", "address", addr, "client", f.req.ClientID)
			s.showSignIn(w, r, f, http.StatusUnauthorized, sentence(err.Error()), false)
			return
		}
		if got.Method == "" {
			got.Method = "pairing"
		}
		subj = got
	case password != "" && s.id.password != nil:
		ok, busy := s.checkPassword(r.Context(), password, addr)
		if busy {
			// Not the person's mistake: give the attempt back.
			s.id.perRequest.Refund(f.req.ID)
			s.id.perAddress.Refund(addr)
			s.log.Warn("authserver: password check refused: the checks are busy", "address", addr, "client", f.req.ClientID)
			w.Header().Set("Retry-After", passwordBusyRetry)
			s.showSignIn(w, r, f, http.StatusServiceUnavailable,
				"This server is busy checking other sign-ins. Wait a few seconds, then sign in again.", true)
			return
		}
		if !ok {
			s.log.Warn("authserver: wrong password", "address", addr, "client", f.req.ClientID)
			s.showSignIn(w, r, f, http.StatusUnauthorized, "That password is not right. Try again.", false)
			return
		}
		subj = Subject{ID: "password:owner", Display: "owner", Method: "password"}
	default:
		msg := "Enter the password."
		if s.id.password == nil {
			msg = "Enter the pairing code."
		}
		s.showSignIn(w, r, f, http.StatusBadRequest, msg, false)
		return
	}
	s.signedIn(w, r, f, subj)
}

// passwordBusyRetry is the Retry-After, in seconds, of a password check
// that did not get its turn.
const passwordBusyRetry = "5"

// checkPassword checks a password within the bound on checks running at
// once; busy reports a check that did not get its turn. Its place in the
// queue is the address's attempts in the last minute (checkGate).
func (s *Server) checkPassword(ctx context.Context, password, addr string) (ok, busy bool) {
	if len(password) > 1024 {
		return false, false
	}
	release, err := s.checks.acquire(ctx, s.id.perAddress.Spent(addr), s.cfg.Limits.PasswordCheckWait)
	if err != nil {
		return false, true
	}
	defer release()
	return s.id.password.matches(password), false
}

// signedIn records who signed in on the request, starts a browser
// session (not for pairing) and shows the consent page.
func (s *Server) signedIn(w http.ResponseWriter, r *http.Request, f *authFlow, subj Subject) {
	if err := s.admitted(subj); err != nil {
		// Refused here, before any token: a client given a token that
		// every endpoint then refuses (403) gives up for good (mcp-remote
		// exits), while this page lets the person sign in another way.
		s.log.Warn("authserver: signed in but not admitted", "method", subj.Method, "subject", subj.ID, "client", f.req.ClientID)
		s.showSignIn(w, r, f, http.StatusForbidden, sentence(err.Error()), false)
		return
	}
	f.req.Subject = &subj
	if !s.saveRequest(r.Context(), w, f) {
		return
	}
	s.log.Info("authserver: signed in", "method", subj.Method, "subject", subj.ID, "client", f.req.ClientID)
	if subj.Method != "pairing" {
		s.startSession(r.Context(), w, subj)
	}
	s.showConsent(w, r, f)
}

// admitted is IdentityConfig.Admit's answer for subj (nil when unset).
func (s *Server) admitted(subj Subject) error {
	if s.id.admit == nil {
		return nil
	}
	return s.id.admit(subj)
}

// sentence makes an error text read as a sentence on a page.
func sentence(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return "That did not work. Try again."
	}
	first, size := utf8.DecodeRuneInString(msg)
	msg = string(unicode.ToUpper(first)) + msg[size:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// signInSession is a browser's sign-in, kept server side under the
// SHA-256 of its cookie so that signing out (or a leaked store) ends it.
type signInSession struct {
	Subject   Subject   `json:"subject"`
	Epoch     string    `json:"epoch"`
	CreatedAt time.Time `json:"created_at"`
}

func (s *Server) startSession(ctx context.Context, w http.ResponseWriter, subj Subject) {
	if s.id.sessionTTL < 0 {
		return
	}
	key := randomToken("")
	sess := signInSession{Subject: subj, Epoch: s.id.epoch, CreatedAt: s.now()}
	if _, err := s.createJSON(ctx, bucketSessions, hashSecret(key), sess, s.id.sessionTTL); err != nil {
		// Not fatal: the person signs in again next time.
		s.log.Warn("authserver: storing a sign-in session", "err", err)
		return
	}
	http.SetCookie(w, s.cookie(sessionCookie, key, s.id.sessionTTL))
}

// sessionSubject is who this browser is signed in as, or nil.
func (s *Server) sessionSubject(r *http.Request) *Subject {
	if s.id.sessionTTL < 0 {
		return nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || !validRequestID(c.Value) {
		return nil
	}
	var sess signInSession
	if _, err := s.getJSON(r.Context(), bucketSessions, hashSecret(c.Value), &sess); err != nil {
		return nil
	}
	if subtle.ConstantTimeCompare([]byte(sess.Epoch), []byte(s.id.epoch)) != 1 {
		return nil
	}
	return &sess.Subject
}

func (s *Server) endSession(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil && validRequestID(c.Value) {
		if err := s.kv.Delete(ctx, bucketSessions, hashSecret(c.Value)); err != nil {
			s.log.Warn("authserver: deleting a sign-in session", "err", err)
		}
	}
	http.SetCookie(w, s.cookie(sessionCookie, "", -1))
}
