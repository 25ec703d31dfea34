// Package httpguard is the gate every HTTP request to the bridge passes
// through before it reaches an MCP endpoint. In order, it checks:
//
//  1. the Host header (DNS-rebinding protection): 403;
//  2. Sec-Fetch-Site, which browsers send: a cross-site request is refused
//     unless its Origin is allowed, on every route but the health probe: 403;
//  3. the Origin header, which browsers send and other clients do not: 403;
//  4. CORS: a preflight from an allowed origin is answered here with 204;
//     (Options.Browsers may hand steps 2 to 4 to the handler, or accept any
//     origin on routes whose only credential is a bearer token: see
//     BrowserPolicy);
//  5. the bearer token, when one is configured: 401;
//  6. the request rate of the peer address (and of the session, for the
//     sessions Options.KnownSession recognises), when limits are
//     configured: a request over its limit waits up to Options.MaxWait for
//     its turn, and only one that would wait longer is refused: 429;
//  7. the request body's size: 413.
//
// Behind a reverse proxy listed in Options.TrustedProxies, the rate limits
// and the handlers behind count a request under the client's address, read
// from X-Forwarded-For; from any other peer that header is ignored.
//
// Every refusal is a JSON-RPC error object with a null id and code -32000
// (see mcphttp.WriteError), so MCP clients can show the message to a person.
package httpguard

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// DefaultMaxBodyBytes is the largest request body accepted when
// Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes int64 = 4 << 20

// CodeRefused is the JSON-RPC error code of every refusal written by the
// guard: the implementation-defined server error range's first code.
const CodeRefused = -32000

// Config key and environment variable named in messages, so that a person
// reading one knows what to change.
const (
	configKeyToken         = "token"
	envToken               = "BROWSERBRIDGE_TOKEN"
	configKeyOrigins       = "allowed_origins"
	configKeyRate          = "rate_limit"
	configKeyLoopbackRate  = "loopback_rate_limit"
	headerSecFetchSite     = "Sec-Fetch-Site" // canonical form, as net/http stores it
	secFetchSiteCrossSite  = "cross-site"
	secFetchSiteNone       = "none"
	secFetchSiteSameSite   = "same-site"
	secFetchSiteSameOrigin = "same-origin"
)

// CORS answers.
const (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = "Content-Type, Authorization, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name"
	corsExposeHeaders = "Mcp-Session-Id"
	// anyOriginExposeHeaders adds the 401's challenge, which a
	// browser-based OAuth client reads to find the resource's metadata.
	anyOriginExposeHeaders = "Mcp-Session-Id, WWW-Authenticate"
	// corsMaxAge is how long, in seconds, a browser may cache a preflight
	// answer (Chromium caps it at two hours).
	corsMaxAge = "600"
)

// wwwAuthenticate is the challenge sent with every 401.
const wwwAuthenticate = `Bearer realm="browserbridge"`

// healthPath is exempt from the token (but from nothing else) for GET and
// HEAD, so supervisors and installers can probe the bridge without it.
const healthPath = "/health"

// maxEchoLen bounds how much of a client-supplied header value is repeated
// in a refusal message or log line.
const maxEchoLen = 200

// ErrTokenRequired is returned (wrapped) by New when the bridge would listen
// beyond loopback without a bearer token.
var ErrTokenRequired = errors.New("the bridge refuses to listen beyond loopback without a token")

// A BrowserPolicy says how the guard treats what browsers add to a request:
// steps 2 to 4 of the package comment (Sec-Fetch-Site, Origin, CORS).
type BrowserPolicy int

const (
	// CheckBrowsers runs steps 2 to 4: a web page may call only if its
	// origin is in Options.AllowedOrigins. This is what protects a bridge
	// whose only credential is being reachable (loopback without a token)
	// from the pages a person visits.
	CheckBrowsers BrowserPolicy = iota

	// HandlerChecksBrowsers skips steps 2 to 4 and adds no CORS headers:
	// for routes that other sites reach by design and whose handler checks
	// its own forms, such as an OAuth authorization server's sign-in pages
	// (opened by a navigation from the client's site; a provider sends the
	// browser back; forms post with Origin: null under Referrer-Policy:
	// no-referrer; the server binds each form to a cookie and a CSRF token
	// and checks Sec-Fetch-Site itself) and its public metadata documents.
	HandlerChecksBrowsers

	// AnyOrigin skips steps 2 and 3 and answers CORS for whatever origin a
	// request names, without credentials: for routes whose only credential
	// is a bearer token the caller sends in its Authorization header. A
	// hostile page cannot use a token it does not hold, so refusing pages
	// protects nothing there (the MCP specification's Origin check exists
	// against DNS rebinding of unauthenticated local servers; step 1 still
	// runs) and would refuse browser-based clients and extensions.
	AnyOrigin
)

// Options configures New. Only ListenAddr is required; every other zero value
// is documented on its field.
type Options struct {
	// ListenAddr is the host:port the bridge is bound to, such as
	// "127.0.0.1:3456": the listener's actual address, so not port 0. Its
	// host decides whether a Token is required (anything but a loopback
	// address) and, with its port, which Host headers are accepted: the
	// address itself, and localhost, 127.0.0.1 and [::1] with its port. When
	// its host is 0.0.0.0, :: or empty (all interfaces), any Host header is
	// accepted, since a token is then required anyway.
	ListenAddr string

	// ListenAddrAssumed says ListenAddr stands for a listener the caller
	// opens after New (the cloud proxy builds its guard before it
	// listens): the guard then does not log a start-up line naming it,
	// which could name an address nobody listens on; the caller logs the
	// real one. False: ListenAddr is the listener's actual address.
	ListenAddrAssumed bool

	// AllowedHosts are extra Host header values accepted, compared without
	// regard to case, for instance a name the machine is reached by through
	// a reverse proxy. An entry "host:port" matches exactly that; an entry
	// "host" matches that host with no port or with ListenAddr's port.
	// Nil means only the names derived from ListenAddr.
	AllowedHosts []string

	// HostSuffixes accepts every host one label under a suffix, with no
	// port or ListenAddr's port: "mcp.example.com" accepts
	// "memory.mcp.example.com" (the gateway's host-based routing). Nil
	// means none.
	HostSuffixes []string

	// AllowedOrigins are the origins ("scheme://host[:port]", such as
	// "chrome-extension://abcdefghijklmnopabcdefghijklmnop" or
	// "http://localhost:6274") whose pages may call the bridge; they are
	// answered with CORS headers. A request without an Origin header (any
	// client that is not a web page) is not affected. Nil means no web page
	// may call the bridge.
	AllowedOrigins []string

	// Token is the bearer token every request must carry in its
	// Authorization header, except GET and HEAD /health. "" means none is
	// required, which New allows only when ListenAddr is a loopback address
	// or AuthenticatedBy is set.
	Token string

	// AuthenticatedBy names the layer behind the guard that authenticates
	// every request it does not deliberately leave open, such as "OAuth"
	// for an authorization server that protects each route: the guard then
	// serves beyond loopback without a Token (and refuses one: a second way
	// in beside that layer), and says so in its log and errors. "" means
	// the guard's Token is the authentication.
	AuthenticatedBy string

	// Browsers, if set, gives each request's BrowserPolicy. It is called
	// once for every request that passed the Host check, from many
	// goroutines at once, so it must be safe for concurrent use and quick.
	// Nil means CheckBrowsers for every request. Since the other policies
	// let web pages through, New refuses a Browsers without a Token or
	// AuthenticatedBy.
	Browsers func(r *http.Request) BrowserPolicy

	// TrustedProxies are the addresses of reverse proxies (Caddy, Traefik)
	// whose X-Forwarded-For header is believed. A request whose peer is in
	// one of them is counted under the right-most X-Forwarded-For address
	// that is not itself a trusted proxy (a proxy vouches only for the
	// address it appends; what lies to its left the client may have
	// written), by the rate limits and by the handlers behind: they see
	// that address, with port 0, as the request's RemoteAddr (see
	// ClientIP). Any other peer's X-Forwarded-For is ignored. A prefix of
	// length 0 (every address) is refused. Nil means none: every request
	// counts under its peer's address.
	TrustedProxies []netip.Prefix

	// MaxBodyBytes is the largest request body accepted. 0 means
	// DefaultMaxBodyBytes (4 MiB).
	MaxBodyBytes int64

	// RatePerSecond is how many requests per second each peer beyond
	// loopback may make on average, and Burst how many it may make at once
	// after a pause. A peer is the connection's remote IP address, or the
	// client's behind a trusted proxy (TrustedProxies), for IPv6 its /64
	// network, which one host usually holds whole, and, when a Token is
	// configured, the token it authenticated with (by the first bytes of
	// its SHA-256, never the token itself). Nothing the client writes in its
	// request (Mcp-Session-Id, ?sessionId=, an X-Forwarded-For that no
	// trusted proxy vouches for) names a bucket, so a client cannot escape
	// its limit by inventing values. A
	// RemoteAddr that is not ip:port counts as one peer beyond loopback.
	// RatePerSecond 0 means no limit; Burst 0 means RatePerSecond rounded
	// up, at least 1.
	RatePerSecond float64
	Burst         int

	// LoopbackRatePerSecond and LoopbackBurst are the same for peers on a
	// loopback address, which share one bucket: every local client arrives
	// from one, and a local process may pick any address of 127.0.0.0/8.
	// Zero values mean as for RatePerSecond and Burst.
	LoopbackRatePerSecond float64
	LoopbackBurst         int

	// MaxWait is how long a request over its limit may be held until it is
	// due, rather than refused: a client that bursts is slowed, and one
	// that sends requests back to back is never refused (a legacy SSE client
	// cannot retry a refused POST /message, and an SDK client may close its
	// session at the first 429). Only a request that would wait longer gets
	// 429, so at most rate x MaxWait requests of one peer wait at a time. A
	// request whose client goes away while it waits is dropped. 0 means
	// none waits.
	MaxWait time.Duration

	// KnownSession, if set, names the session r belongs to when that
	// session exists (ok false otherwise, such as for an id the client
	// invented): each such session then also has a limit of its own,
	// SessionRatePerSecond with SessionBurst, checked after its peer's, so
	// one busy session cannot take every request its peer may make. It is
	// called for every request that passed the checks before it, from many
	// goroutines at once, so it must be safe for concurrent use and quick.
	// Nil means no per-session limit.
	KnownSession func(r *http.Request) (id string, ok bool)

	// SessionRatePerSecond and SessionBurst are the per-session limit of
	// KnownSession. Zero values mean as for RatePerSecond and Burst; a
	// SessionRatePerSecond without KnownSession is an error.
	SessionRatePerSecond float64
	SessionBurst         int

	// Logger receives a line for every refusal. Nil means no logging.
	Logger *slog.Logger

	// Now is the clock of the rate limiter. Nil means time.Now.
	Now func() time.Time
}

type guard struct {
	next      http.Handler
	log       *slog.Logger
	anyHost   bool
	hosts     map[hostPort]bool
	suffixes  []string // ".mcp.example.com"
	port      string   // ListenAddr's port
	origins   map[string]bool
	tokenHash *[sha256.Size]byte // nil when no token is required
	maxBody   int64
	tokenID   [8]byte                           // part of every rate limiter key: see Options.RatePerSecond
	browsers  func(*http.Request) BrowserPolicy // nil: CheckBrowsers
	proxies   trustedProxies

	// The rate limiters: nil when there is no such limit.
	remote, loopback *Limiter[peerKey]
	sessions         *Limiter[string]
	knownSession     func(*http.Request) (string, bool)
	sleep            func(ctx context.Context, d time.Duration) bool // replaced in tests
}

// peerKey names a peer's bucket.
type peerKey struct {
	addr    netip.Addr // the zero Addr when RemoteAddr is not ip:port
	tokenID [8]byte
}

// New returns next behind the checks described in the package comment.
//
// It refuses (with an error wrapping ErrTokenRequired) a ListenAddr whose
// host is not a loopback address while Token is empty, and any malformed
// option.
func New(opts Options, next http.Handler) (http.Handler, error) {
	if next == nil {
		return nil, errors.New("httpguard: next handler is nil")
	}
	lh, lp, err := splitListenAddr(opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("httpguard: %w", err)
	}
	if opts.AuthenticatedBy != "" && opts.Token != "" {
		return nil, fmt.Errorf("httpguard: requests are authenticated by %s, and a %q would be a second way in beside it; drop the token (and %s)",
			opts.AuthenticatedBy, configKeyToken, envToken)
	}
	if opts.Token == "" && opts.AuthenticatedBy == "" && !isLoopbackHost(lh) {
		return nil, fmt.Errorf("httpguard: listen address %q is not a loopback address, and %w: set %q in the config file or %s in the environment",
			opts.ListenAddr, ErrTokenRequired, configKeyToken, envToken)
	}
	if opts.Browsers != nil && opts.Token == "" && opts.AuthenticatedBy == "" {
		return nil, errors.New("httpguard: Browsers may let web pages through, which only a bridge that authenticates its requests may do: set Token or AuthenticatedBy")
	}
	proxies, err := newTrustedProxies(opts.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("httpguard: %w", err)
	}
	if strings.TrimSpace(opts.Token) != opts.Token {
		return nil, fmt.Errorf("httpguard: the %q option begins or ends with white space, which an Authorization header cannot carry", configKeyToken)
	}
	if opts.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("httpguard: MaxBodyBytes is %d; it must not be negative", opts.MaxBodyBytes)
	}
	for _, l := range []struct {
		name  string
		rate  float64
		burst int
	}{
		{"", opts.RatePerSecond, opts.Burst},
		{"Loopback", opts.LoopbackRatePerSecond, opts.LoopbackBurst},
		{"Session", opts.SessionRatePerSecond, opts.SessionBurst},
	} {
		if l.rate < 0 || math.IsNaN(l.rate) || math.IsInf(l.rate, 0) {
			return nil, fmt.Errorf("httpguard: %sRatePerSecond is %v; it must be 0 (no limit) or a finite positive number", l.name, l.rate)
		}
		if l.burst < 0 {
			return nil, fmt.Errorf("httpguard: %sBurst is %d; it must not be negative", l.name, l.burst)
		}
	}
	if opts.MaxWait < 0 {
		return nil, fmt.Errorf("httpguard: MaxWait is %v; it must not be negative", opts.MaxWait)
	}
	if opts.SessionRatePerSecond > 0 && opts.KnownSession == nil {
		return nil, errors.New("httpguard: SessionRatePerSecond is set without KnownSession, so it would never apply")
	}

	g := &guard{
		next:     next,
		log:      opts.Logger,
		hosts:    make(map[hostPort]bool),
		origins:  make(map[string]bool),
		maxBody:  opts.MaxBodyBytes,
		browsers: opts.Browsers,
		proxies:  proxies,
	}
	if g.maxBody == 0 {
		g.maxBody = DefaultMaxBodyBytes
	}
	if opts.Token != "" {
		sum := sha256.Sum256([]byte(opts.Token))
		g.tokenHash = &sum
		// Only requests with this token get past step 5, so it is the
		// identity of every request the limiters see.
		copy(g.tokenID[:], sum[:])
	}

	if isUnspecifiedHost(lh) {
		g.anyHost = opts.Token != ""
	}
	g.port = lp
	for _, sfx := range opts.HostSuffixes {
		if sfx = strings.Trim(strings.ToLower(sfx), "."); sfx != "" {
			g.suffixes = append(g.suffixes, "."+sfx)
		}
	}
	g.hosts[hostPort{canonicalHost(lh), lp}] = true
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		g.hosts[hostPort{h, lp}] = true
	}
	if lp == "80" {
		for hp := range g.hosts {
			g.hosts[hostPort{hp.host, ""}] = true
		}
	}
	for _, entry := range opts.AllowedHosts {
		hp, err := parseHost(entry)
		if err != nil {
			return nil, fmt.Errorf("httpguard: allowed host %q: %w", entry, err)
		}
		g.hosts[hp] = true
		if hp.port == "" {
			g.hosts[hostPort{hp.host, lp}] = true
		}
	}

	for _, o := range opts.AllowedOrigins {
		norm, err := normalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("httpguard: %s entry %q: %w", configKeyOrigins, o, err)
		}
		g.origins[norm] = true
	}

	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if opts.RatePerSecond > 0 {
		g.remote = NewLimiter[peerKey](opts.RatePerSecond, defaultBurst(opts.RatePerSecond, opts.Burst), opts.MaxWait, maxClients, now)
	}
	if opts.LoopbackRatePerSecond > 0 {
		g.loopback = NewLimiter[peerKey](opts.LoopbackRatePerSecond, defaultBurst(opts.LoopbackRatePerSecond, opts.LoopbackBurst), opts.MaxWait, maxClients, now)
	}
	if opts.SessionRatePerSecond > 0 {
		g.sessions = NewLimiter[string](opts.SessionRatePerSecond, defaultBurst(opts.SessionRatePerSecond, opts.SessionBurst), opts.MaxWait, maxClients, now)
		g.knownSession = opts.KnownSession
	}
	g.sleep = sleep
	if opts.AuthenticatedBy != "" && !isLoopbackHost(lh) && g.log != nil && !opts.ListenAddrAssumed {
		g.log.Info("httpguard: serving beyond loopback without the guard's token: "+opts.AuthenticatedBy+" authenticates the requests",
			"listen", opts.ListenAddr)
	}
	return g, nil
}

// defaultBurst is burst, or rate rounded up when burst is 0.
func defaultBurst(rate float64, burst int) int {
	if burst > 0 {
		return burst
	}
	return int(max(1, min(math.Ceil(rate), 1<<30)))
}

// sleep waits d, or until ctx ends: it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.proxies != nil {
		r = g.fromProxy(r)
	}

	// 1. Host.
	if !g.hostAllowed(r.Host) {
		g.refuse(w, r, http.StatusForbidden, slog.LevelWarn, "host not allowed",
			fmt.Sprintf("Host header %q is not this bridge; refusing (DNS rebinding protection).", echo(r.Host)))
		return
	}

	// 2 to 4: Sec-Fetch-Site, Origin, CORS.
	policy := CheckBrowsers
	if g.browsers != nil {
		policy = g.browsers(r)
	}
	switch policy {
	case HandlerChecksBrowsers:
	case AnyOrigin:
		if anyOriginCORS(w, r) {
			return
		}
	default:
		if !g.checkBrowsers(w, r) {
			return
		}
	}

	// 5. Token.
	if g.tokenHash != nil && !isHealthProbe(r) {
		if msg := g.checkToken(r); msg != "" {
			w.Header().Set("WWW-Authenticate", wwwAuthenticate)
			g.refuse(w, r, http.StatusUnauthorized, slog.LevelWarn, "unauthorized", msg)
			return
		}
	}

	// 6. Rate.
	if (g.remote != nil || g.loopback != nil || g.sessions != nil) && !g.admit(w, r) {
		return
	}

	// 7. Body size.
	if r.ContentLength > g.maxBody {
		g.refuse(w, r, http.StatusRequestEntityTooLarge, slog.LevelInfo, "body too large",
			fmt.Sprintf("The request body is %d bytes; this bridge accepts at most %s.", r.ContentLength, formatBytes(g.maxBody)))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		r2 := new(http.Request)
		*r2 = *r
		r2.Body = http.MaxBytesReader(w, r.Body, g.maxBody)
		r = r2
	}
	g.next.ServeHTTP(w, r)
}

// checkBrowsers runs steps 2 to 4 under CheckBrowsers: it reports whether r
// may go on, or else has answered it (a refusal, or a preflight's 204).
func (g *guard) checkBrowsers(w http.ResponseWriter, r *http.Request) bool {
	// 2. Sec-Fetch-Site.
	origin, hasOrigin := originHeader(r)
	if site, ok := r.Header[headerSecFetchSite]; ok && len(site) > 0 && !isHealthProbe(r) {
		if msg := g.checkFetchSite(site[0], origin, hasOrigin); msg != "" {
			g.refuse(w, r, http.StatusForbidden, slog.LevelWarn, "cross-site request", msg)
			return false
		}
	}

	// 3. Origin.
	if hasOrigin {
		if origin == "null" {
			g.refuse(w, r, http.StatusForbidden, slog.LevelWarn, "origin null",
				"Requests from an opaque origin (Origin: null) are refused; only origins listed in "+configKeyOrigins+" may call this bridge.")
			return false
		}
		norm, err := normalizeOrigin(origin)
		// The bridge's own origin (http://<the Host that passed step 1>)
		// needs neither the allowlist nor CORS: no rebinding page can send it.
		if err != nil || !sameOrigin(norm, r.Host) {
			if err != nil || !g.origins[norm] {
				g.refuse(w, r, http.StatusForbidden, slog.LevelWarn, "origin not allowed",
					fmt.Sprintf("Origin %q may not call this bridge; add it to %q in the bridge's config to allow it.", echo(origin), configKeyOrigins))
				return false
			}

			// 4. CORS, for an allowed origin.
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", corsAllowMethods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
				h.Set("Access-Control-Max-Age", corsMaxAge)
				w.WriteHeader(http.StatusNoContent)
				return false
			}
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
	}
	return true
}

// anyOriginCORS answers CORS under AnyOrigin: the request's origin, if it
// is one (a browser's, or "null" for an opaque one), is echoed without
// credentials, so a page may read the answer to a request it made with a
// token of its own. A preflight is answered here (it reports true); a
// value that is no origin gets no CORS headers, and a request without
// Origin is no browser's cross-origin request, so neither needs any.
func anyOriginCORS(w http.ResponseWriter, r *http.Request) bool {
	origin, ok := originHeader(r)
	if !ok {
		return false
	}
	if _, err := normalizeOrigin(origin); err != nil && origin != "null" {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", anyOriginExposeHeaders)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

// checkFetchSite returns "" if a request whose Sec-Fetch-Site header is site
// may go on to the Origin check, or else why not.
func (g *guard) checkFetchSite(site, origin string, hasOrigin bool) string {
	switch site {
	case "", secFetchSiteNone:
		// none: the user typed the URL or opened a bookmark; absent (or
		// empty): not a browser. Neither is a page acting on its own.
		return ""
	case secFetchSiteSameOrigin, secFetchSiteSameSite:
		// same-origin is the bridge's own origin, which serves no pages.
		// same-site, with the bridge on loopback, is a page of localhost or
		// 127.0.0.1 on another port: software on this machine, such as the
		// MCP Inspector at localhost:6274. It goes on to the Origin check,
		// which every request a page can read an answer to, and every POST
		// and DELETE, must pass; what is left (a blind GET) cannot call a
		// tool. Refusing it would refuse those local tools.
		return ""
	case secFetchSiteCrossSite:
		// A page of another site: refused, however the request was made
		// (an <img>, a form or a navigation need not carry an Origin), unless
		// its Origin is one the configuration lists. Listed origins are
		// cross-site by nature (a page of localhost is cross-site to
		// 127.0.0.1), so refusing them would make the list useless.
		if hasOrigin {
			if norm, err := normalizeOrigin(origin); err == nil && g.origins[norm] {
				return ""
			}
		}
		return "Sec-Fetch-Site: cross-site: a page of another site may not call this bridge; only pages whose origin is listed in " + configKeyOrigins + " may."
	}
	// Browsers send only the four values above; anything else is refused
	// rather than guessed at.
	return fmt.Sprintf("Sec-Fetch-Site %q is not a value browsers send (none, same-origin, same-site or cross-site); refusing.", echo(site))
}

// admit applies the rate limits to r: it reports whether r may go on, after
// waiting its turn if need be, or else has answered it.
func (g *guard) admit(w http.ResponseWriter, r *http.Request) bool {
	key, lim, who := g.peer(r)
	var wait time.Duration
	if lim != nil {
		d, ok := lim.Reserve(key)
		if !ok {
			g.tooMany(w, r, d, who, lim.rate)
			return false
		}
		wait = d
	}
	if g.sessions != nil {
		if id, ok := g.knownSession(r); ok {
			d, ok := g.sessions.Reserve(id)
			if !ok {
				if lim != nil {
					lim.Refund(key)
				}
				g.tooMany(w, r, d, "in this session: the limit is %s a second per session", g.sessions.rate)
				return false
			}
			wait = max(wait, d)
		}
	}
	return wait <= 0 || g.sleep(r.Context(), wait)
}

// peer returns r's peer key, the limiter of its class (nil when that class
// has no limit), and the start of a refusal's sentence about it.
func (g *guard) peer(r *http.Request) (peerKey, *Limiter[peerKey], string) {
	k := peerKey{tokenID: g.tokenID}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return k, g.remote, "from this address: the limit is %s a second (\"" + configKeyRate + "\" in the bridge's config)"
	}
	addr := ap.Addr().Unmap()
	if addr.IsLoopback() {
		k.addr = netip.IPv6Loopback() // one bucket for all of 127.0.0.0/8 and ::1
		return k, g.loopback, "from clients on this machine: the limit is %s a second for all of them together (\"" + configKeyLoopbackRate + "\" in the bridge's config)"
	}
	k.addr = ClientPrefix(addr).Addr()
	return k, g.remote, "from this address: the limit is %s a second (\"" + configKeyRate + "\" in the bridge's config)"
}

// tooMany answers 429: who is a sentence's middle with a %s for the rate.
func (g *guard) tooMany(w http.ResponseWriter, r *http.Request, retry time.Duration, who string, rate float64) {
	secs := max(1, int64(math.Ceil(retry.Seconds())))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	g.refuse(w, r, http.StatusTooManyRequests, slog.LevelInfo, "rate limited",
		fmt.Sprintf("Too many requests "+who+"; retry after %d second%s.", strconv.FormatFloat(rate, 'f', -1, 64), secs, plural(secs)))
}

// sameOrigin reports whether a normalized origin is http://<the request's Host>.
func sameOrigin(origin, host string) bool {
	rest, ok := strings.CutPrefix(origin, "http://")
	return ok && strings.EqualFold(strings.TrimSuffix(rest, "/"), host)
}

// hostAllowed reports whether the Host header names this bridge.
func (g *guard) hostAllowed(host string) bool {
	if g.anyHost {
		return true
	}
	hp, err := parseHost(host)
	if err != nil {
		return false
	}
	if g.hosts[hp] {
		return true
	}
	if hp.port != "" && hp.port != g.port {
		return false
	}
	for _, sfx := range g.suffixes {
		if label, ok := strings.CutSuffix(hp.host, sfx); ok && label != "" && !strings.Contains(label, ".") {
			return true
		}
	}
	return false
}

// checkToken returns "" if r carries the right bearer token, or else why not.
func (g *guard) checkToken(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		q := r.URL.Query()
		if q.Has("token") || q.Has("access_token") {
			return "This bridge takes its token only in the Authorization header (Authorization: Bearer <token>), never in the URL."
		}
		return "This bridge requires a bearer token: send Authorization: Bearer <token>, the token set as \"" + configKeyToken + "\" in its config or " + envToken + "."
	}
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "The Authorization header is not a bearer token; send Authorization: Bearer <token>."
	}
	// Hashing first makes the comparison's time independent of the length
	// of the token as well as of its content.
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(sum[:], g.tokenHash[:]) != 1 {
		return "The bearer token is wrong."
	}
	return ""
}

// refuse answers r with a JSON-RPC error and logs why.
func (g *guard) refuse(w http.ResponseWriter, r *http.Request, status int, level slog.Level, reason, msg string) {
	if g.log != nil {
		attrs := []slog.Attr{
			slog.String("reason", reason),
			slog.Int("status", status),
			slog.String("method", r.Method),
			slog.String("path", echo(r.URL.Path)),
			slog.String("remote", r.RemoteAddr),
			slog.String("host", echo(r.Host)),
		}
		if via, ok := r.Context().Value(proxyPeerKey{}).(string); ok {
			attrs = append(attrs, slog.String("via_proxy", via))
		}
		if o := r.Header.Get("Origin"); o != "" {
			attrs = append(attrs, slog.String("origin", echo(o)))
		}
		g.log.LogAttrs(r.Context(), level, "httpguard: request refused", attrs...)
	}
	mcphttp.WriteError(w, status, nil, CodeRefused, msg)
}

// isHealthProbe reports whether r is exempt from the token.
func isHealthProbe(r *http.Request) bool {
	return r.URL.Path == healthPath && (r.Method == http.MethodGet || r.Method == http.MethodHead)
}

// originHeader returns the request's Origin, if it has one.
func originHeader(r *http.Request) (string, bool) {
	v, ok := r.Header["Origin"]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// echo shortens a client-supplied value for repetition in a message or log.
func echo(s string) string {
	if len(s) <= maxEchoLen {
		return s
	}
	return s[:maxEchoLen] + "…"
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// formatBytes writes a size limit for people: "4194304 bytes (4 MiB)".
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d bytes (%d MiB)", n, n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d bytes (%d KiB)", n, n>>10)
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
