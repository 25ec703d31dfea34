// Package httpguard is the gate every HTTP request to the bridge passes
// through before it reaches an MCP endpoint. In order, it checks:
//
//  1. the Host header (DNS-rebinding protection): 403;
//  2. the Origin header, which browsers send and other clients do not: 403;
//  3. CORS: a preflight from an allowed origin is answered here with 204;
//  4. the bearer token, when one is configured: 401;
//  5. the per-client request rate, when a limit is configured: 429;
//  6. the request body's size: 413.
//
// Every refusal is a JSON-RPC error object with a null id and code -32000
// (see WriteError), so MCP clients can show the message to a person.
package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
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
	configKeyToken   = "token"
	envToken         = "BROWSERBRIDGE_TOKEN"
	configKeyOrigins = "allowed_origins"
)

// CORS answers.
const (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = "Content-Type, Authorization, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name"
	corsExposeHeaders = "Mcp-Session-Id"
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
	// required, which New allows only when ListenAddr is a loopback address.
	Token string

	// MaxBodyBytes is the largest request body accepted. 0 means
	// DefaultMaxBodyBytes (4 MiB).
	MaxBodyBytes int64

	// RatePerSecond is how many requests per second each client may make on
	// average, and Burst how many it may make at once after a pause. A
	// client is a session (the Mcp-Session-Id header, else the sessionId
	// query parameter) or else a remote IP address. RatePerSecond 0 means no
	// limit; Burst 0 means RatePerSecond rounded up, at least 1.
	RatePerSecond float64
	Burst         int

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
	limiter   *limiter // nil when there is no rate limit
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
	if opts.Token == "" && !isLoopbackHost(lh) {
		return nil, fmt.Errorf("httpguard: listen address %q is not a loopback address, and %w: set %q in the config file or %s in the environment",
			opts.ListenAddr, ErrTokenRequired, configKeyToken, envToken)
	}
	if strings.TrimSpace(opts.Token) != opts.Token {
		return nil, fmt.Errorf("httpguard: the %q option begins or ends with white space, which an Authorization header cannot carry", configKeyToken)
	}
	if opts.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("httpguard: MaxBodyBytes is %d; it must not be negative", opts.MaxBodyBytes)
	}
	if opts.RatePerSecond < 0 || math.IsNaN(opts.RatePerSecond) || math.IsInf(opts.RatePerSecond, 0) {
		return nil, fmt.Errorf("httpguard: RatePerSecond is %v; it must be 0 (no limit) or a finite positive number", opts.RatePerSecond)
	}
	if opts.Burst < 0 {
		return nil, fmt.Errorf("httpguard: Burst is %d; it must not be negative", opts.Burst)
	}

	g := &guard{
		next:    next,
		log:     opts.Logger,
		hosts:   make(map[hostPort]bool),
		origins: make(map[string]bool),
		maxBody: opts.MaxBodyBytes,
	}
	if g.maxBody == 0 {
		g.maxBody = DefaultMaxBodyBytes
	}
	if opts.Token != "" {
		sum := sha256.Sum256([]byte(opts.Token))
		g.tokenHash = &sum
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

	if opts.RatePerSecond > 0 {
		burst := opts.Burst
		if burst == 0 {
			burst = int(max(1, min(math.Ceil(opts.RatePerSecond), 1<<30)))
		}
		now := opts.Now
		if now == nil {
			now = time.Now
		}
		g.limiter = newLimiter(opts.RatePerSecond, burst, now)
	}
	return g, nil
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// 1. Host.
	if !g.hostAllowed(r.Host) {
		g.refuse(w, r, http.StatusForbidden, slog.LevelWarn, "host not allowed",
			fmt.Sprintf("Host header %q is not this bridge; refusing (DNS rebinding protection).", echo(r.Host)))
		return
	}

	// 2. Origin.
	origin, hasOrigin := originHeader(r)
	if hasOrigin {
		if origin == "null" {
			g.refuse(w, r, http.StatusForbidden, slog.LevelWarn, "origin null",
				"Requests from an opaque origin (Origin: null) are refused; only origins listed in "+configKeyOrigins+" may call this bridge.")
			return
		}
		norm, err := normalizeOrigin(origin)
		// The bridge's own origin (http://<the Host that passed step 1>)
		// needs neither the allowlist nor CORS: no rebinding page can send it.
		if err != nil || !sameOrigin(norm, r.Host) {
			if err != nil || !g.origins[norm] {
				g.refuse(w, r, http.StatusForbidden, slog.LevelWarn, "origin not allowed",
					fmt.Sprintf("Origin %q may not call this bridge; add it to %q in the bridge's config to allow it.", echo(origin), configKeyOrigins))
				return
			}

			// 3. CORS, for an allowed origin.
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", corsAllowMethods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
				h.Set("Access-Control-Max-Age", corsMaxAge)
				w.WriteHeader(http.StatusNoContent)
				return
			}
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
	}

	// 4. Token.
	if g.tokenHash != nil && !isHealthProbe(r) {
		if msg := g.checkToken(r); msg != "" {
			w.Header().Set("WWW-Authenticate", wwwAuthenticate)
			g.refuse(w, r, http.StatusUnauthorized, slog.LevelWarn, "unauthorized", msg)
			return
		}
	}

	// 5. Rate.
	if g.limiter != nil {
		if ok, wait := g.limiter.allow(clientKey(r)); !ok {
			secs := int64(math.Ceil(wait.Seconds()))
			if secs < 1 {
				secs = 1
			}
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			g.refuse(w, r, http.StatusTooManyRequests, slog.LevelInfo, "rate limited",
				fmt.Sprintf("Too many requests from this client; retry after %d second%s.", secs, plural(secs)))
			return
		}
	}

	// 6. Body size.
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
		if o := r.Header.Get("Origin"); o != "" {
			attrs = append(attrs, slog.String("origin", echo(o)))
		}
		g.log.LogAttrs(r.Context(), level, "httpguard: request refused", attrs...)
	}
	WriteError(w, status, CodeRefused, msg)
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

// clientKey names the rate limiter's bucket for r.
func clientKey(r *http.Request) string {
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		return "session:" + id
	}
	if id := r.URL.Query().Get("sessionId"); id != "" {
		return "session:" + id
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	return "ip:" + ip
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
