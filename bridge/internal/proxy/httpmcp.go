package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// The proxy as an MCP server over Streamable HTTP (docs/proxy-http.md):
// remote clients (claude.ai, phones, the SDK clients) sign in with OAuth
// at the proxy's own authorization server and reach their user's browsers
// at {public}/mcp (one of them at {public}/browsers/{id}/mcp) and their
// user's local stdio servers, which a bridge's relay registers, at
// {public}/servers/{name}/mcp. Each HTTP session is an
// mcpClient like a spec 001 WebSocket client (mcpConn): its requests go
// through the same connections, id mapping, progress, cancellation and
// detaching; only the transport differs.

// HTTPOptions make the proxy serve MCP over Streamable HTTP to clients that
// sign in with OAuth. Zero values are documented per field.
type HTTPOptions struct {
	// PublicURL is where clients reach the proxy, as scheme://host[:port]
	// with no path (https://proxy.example.com): the OAuth issuer, the base
	// of every endpoint, and the only Host the HTTP endpoints answer.
	// https, or http on a loopback host. Required.
	PublicURL string
	// KV holds the authorization server's state (registrations, sign-ins,
	// tokens). Nil: in memory, lost on restart.
	KV authserver.KV
	// Identity says how people sign in besides pairing codes: a password
	// (the subject "password:owner") or an OIDC provider. Its PairingCode
	// may stay nil: the proxy then accepts the pairing codes it issues
	// itself (`browserbridge pair`), once it issues them.
	Identity authserver.IdentityConfig
	// Users maps the Subject.ID of a password or OIDC sign-in
	// ("password:owner", "oidc:<issuer>#<sub>") to the proxy user (a
	// token's sub) whose browsers and servers it reaches. A pairing-code
	// sign-in ("pair:<user>") is bound to its user and needs no entry; any
	// other subject without an entry is refused at the endpoints (403).
	Users map[string]string
	// AllowedOrigins are web origins, besides the public URL's own, whose
	// pages may call the MCP endpoints (CORS). A request without Origin
	// (any client that is not a web page) is not affected. Nil: none.
	AllowedOrigins []string
	// SessionTimeout ends a Streamable HTTP session that has had no
	// request, no open stream and no call in flight for this long. Default
	// 30 minutes.
	SessionTimeout time.Duration
	// PingInterval is how often a session's GET stream carries an SSE
	// comment, so that intermediaries keep it open. Default 30 s;
	// negative: never.
	PingInterval time.Duration
	// ReplayBytes bounds the events of a session's GET stream kept after
	// they were sent, for a client resuming with Last-Event-ID. Default
	// 256 KiB.
	ReplayBytes int
	// Pairing configures the pairing codes that `browserbridge pair` asks
	// for and the sign-in page takes; its MCPURL is set to {PublicURL}/mcp.
	Pairing PairingOptions
	// Limits bound what anyone can make the authorization server hold or
	// spend before signing in; zero values are its defaults.
	Limits authserver.Limits
	// Lifetimes of tokens, codes and registrations; zero values are the
	// authorization server's defaults.
	Lifetimes config.Lifetimes
	// Sessions, if set, keeps a record of each Streamable HTTP session, so
	// that a session outlives a restart of the proxy (mcphttp.Server's
	// Persist): its first request after the restart re-opens it for the
	// same user, a server's endpoint re-initialized with the client's
	// original initialize. Nil: sessions end with the process. The caller
	// closes it after the proxy has stopped.
	Sessions mcphttp.SessionStore
}

func (o *HTTPOptions) setDefaults() {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.PingInterval == 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.ReplayBytes <= 0 {
		o.ReplayBytes = 256 << 10
	}
}

// Paths of the HTTP endpoints.
const (
	// prmPath is RFC 9728's well-known prefix of resource metadata.
	prmPath = "/.well-known/oauth-protected-resource"
	// httpMCPPath is the browser endpoint (the WebSocket side of spec 001
	// shares it: an upgrade goes there).
	httpMCPPath = "/mcp"
	// serversPrefix begins /servers/{name}/mcp.
	serversPrefix = "/servers/"
	// browsersPrefix begins /browsers/{id}/mcp.
	browsersPrefix = "/browsers/"
)

// httpEndpoint serves the HTTP side: the authorization server, each
// resource's metadata, and the MCP endpoints behind the Host check, the
// guard (Origin, CORS, body size) and the bearer check.
type httpEndpoint struct {
	s     *Server
	opts  HTTPOptions
	pub   authserver.PublicOrigin // the public URL
	as    *authserver.Server
	asH   http.Handler
	guard http.Handler // the guard in front of routeMCP

	engine *mcphttp.Server // the sessions (httpmcp_target.go)

	mu        sync.Mutex
	listeners map[*httpSession]struct{} // stateless subscriptions/listen requests open
	stopping  bool
}

// newHTTPEndpoint builds the HTTP side of s.
func newHTTPEndpoint(s *Server, opts HTTPOptions) (*httpEndpoint, error) {
	opts.setDefaults()
	pub, err := authserver.NewPublicOrigin(opts.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	h := &httpEndpoint{s: s, opts: opts, pub: pub, listeners: make(map[*httpSession]struct{})}
	h.engine = h.newEngine()
	if opts.Sessions != nil {
		h.engine.Persist(opts.Sessions, nil) // owned by their user (newEngine's Owner)
	}
	pairing := opts.Pairing
	pairing.MCPURL = h.pub.Base + httpMCPPath
	s.ConfigurePairing(pairing)
	id := opts.Identity
	if id.PairingCode == nil {
		id.PairingCode = s.pairingCode()
	}
	if id.Admit == nil {
		id.Admit = func(subj authserver.Subject) error { _, err := h.subjectUser(subj); return err }
	}
	asCfg := authserver.Config{Issuer: h.pub.Base, KV: opts.KV, Resources: h.lookupResource,
		Identity: id, Limits: opts.Limits, Logger: s.log, Now: s.opts.Now}
	asCfg.SetLifetimes(opts.Lifetimes)
	as, err := authserver.New(asCfg)
	if err != nil {
		return nil, err
	}
	h.as, h.asH = as, as.Handler()
	port := h.pub.Port
	if port == "" {
		port = authserver.DefaultPort(h.pub.Scheme)
	}
	h.guard, err = httpguard.New(httpguard.Options{
		// Every route behind the guard is behind the bearer check: OAuth
		// stands where the guard's static token would. The Host check is
		// a second one (ServeHTTP accepted only the public host before).
		// The listener is opened after New, so its address is not known
		// here: the guard is told the public port on every interface,
		// and Run logs where the proxy really listens.
		ListenAddr:        net.JoinHostPort("0.0.0.0", port),
		ListenAddrAssumed: true,
		AuthenticatedBy:   "OAuth",
		AllowedHosts:      []string{h.pub.Host},
		AllowedOrigins:    append([]string{h.pub.Base}, opts.AllowedOrigins...),
		// A bearer token is no ambient credential a hostile page could
		// borrow, so any web origin may call (CORS without credentials):
		// the extension's remote-MCP client and the Inspector need no
		// allowed_origins entry.
		Browsers:     func(*http.Request) httpguard.BrowserPolicy { return httpguard.AnyOrigin },
		MaxBodyBytes: s.opts.MaxMessageSize,
		Logger:       s.log,
	}, http.HandlerFunc(h.routeMCP))
	if err != nil {
		return nil, err
	}
	return h, nil
}

// ServeHTTP serves everything of the HTTP side but the WebSocket upgrades.
func (h *httpEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.pub.IsHost(r.Host) {
		// DNS rebinding, or a request meant for another site: the
		// endpoints, their metadata and the sign-in pages exist only
		// under the public name, which tokens and cookies are bound to.
		mcphttp.WriteError(w, http.StatusForbidden, nil, rpccode.Unavailable,
			fmt.Sprintf("Host %q is not this proxy's public host (%s); refusing.", echoHost(r.Host), h.pub.Host))
		return
	}
	path := r.URL.Path
	switch {
	case authserver.Paths(path):
		h.asH.ServeHTTP(w, r)
	case path == prmPath:
		// The root, which some clients probe before reading the 401,
		// describes /mcp: the proxy's one endpoint at a fixed path.
		h.as.ResourceMetadataHandler(h.resource(endpoint{})).ServeHTTP(w, r)
	case strings.HasPrefix(path, prmPath+"/"):
		ep, ok := parseEndpoint(strings.TrimPrefix(path, prmPath))
		if !ok {
			authserver.NotFound(w, "No protected resource here: an endpoint's metadata is at "+prmPath+" followed by its path (/mcp, /browsers/ID/mcp, /servers/NAME/mcp).")
			return
		}
		h.as.ResourceMetadataHandler(h.resource(ep)).ServeHTTP(w, r)
	case path == httpMCPPath || strings.HasPrefix(path, serversPrefix) || strings.HasPrefix(path, browsersPrefix):
		h.guard.ServeHTTP(w, r)
	default:
		authserver.NotFound(w, fmt.Sprintf("No route %s %s: your browsers are at %s/mcp (one of them at /browsers/ID/mcp) and your local MCP servers at %s/servers/NAME/mcp, each with an OAuth sign-in.",
			r.Method, path, h.pub.Base, h.pub.Base))
	}
}

// routeMCP serves an MCP endpoint request that passed the guard: the
// bearer check for its resource, then the endpoint.
func (h *httpEndpoint) routeMCP(w http.ResponseWriter, r *http.Request) {
	if c := h.s.cluster; c != nil && c.forwardSession(w, r) {
		return // the session lives on another node, which answered
	}
	ep, ok := parseEndpoint(r.URL.Path)
	if !ok {
		authserver.NotFound(w, fmt.Sprintf("No route %s %s: your browsers are at /mcp, one of them at /browsers/ID/mcp (ID from list_browsers), a local MCP server of yours at /servers/NAME/mcp (NAME as in your bridge's mcpServers).",
			r.Method, r.URL.Path))
		return
	}
	h.as.Protect(h.resource(ep), h.pub.Base+authserver.ResourceMetadataPath(ep.path()),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, ep) })).ServeHTTP(w, r)
}

// endpoint is what an MCP URL of the proxy serves, each its own OAuth
// resource: the user's browsers (/mcp, the zero value), one of them
// (/browsers/{id}/mcp), or one of the user's servers (/servers/{name}/mcp).
type endpoint struct {
	browser string // an extension id, for /browsers/{id}/mcp
	server  string // a server's name, for /servers/{name}/mcp
}

// path is the endpoint's URL path, escaped as a URL carries it.
func (ep endpoint) path() string {
	switch {
	case ep.server != "":
		return serversPrefix + url.PathEscape(ep.server) + "/mcp"
	case ep.browser != "":
		return browsersPrefix + url.PathEscape(ep.browser) + "/mcp"
	}
	return httpMCPPath
}

func (ep endpoint) String() string {
	switch {
	case ep.server != "":
		return "server " + ep.server
	case ep.browser != "":
		return "browser " + ep.browser
	}
	return "browsers"
}

// parseEndpoint reads an endpoint's (decoded) path; false for any other
// path, or a name no bridge can register (relaywire.CheckServerName, the
// rule for extension ids too).
func parseEndpoint(path string) (endpoint, bool) {
	if path == httpMCPPath {
		return endpoint{}, true
	}
	for _, prefix := range []string{serversPrefix, browsersPrefix} {
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok {
			continue
		}
		name, ok := strings.CutSuffix(rest, "/mcp")
		if !ok || relaywire.CheckServerName(name) != nil {
			return endpoint{}, false
		}
		if prefix == serversPrefix {
			return endpoint{server: name}, true
		}
		return endpoint{browser: name}, true
	}
	return endpoint{}, false
}

// resource is the OAuth resource of an endpoint: its URL.
func (h *httpEndpoint) resource(ep endpoint) authserver.Resource {
	name := "your browsers connected to this Browser Bridge proxy"
	switch {
	case ep.server != "":
		name = fmt.Sprintf("your MCP server %q through this Browser Bridge proxy", ep.server)
	case ep.browser != "":
		name = fmt.Sprintf("your browser %s connected to this Browser Bridge proxy", ep.browser)
	}
	return authserver.Resource{URI: h.pub.Base + ep.path(), Name: name}
}

// lookupResource is the authorization server's Resources: a `resource` a
// client asks a token for, if it is one of the endpoints. Which user has
// which browser or server is not known before sign-in, so every
// well-formed name is a resource; the endpoint answers a name the user has
// not with 404, the same as for a name nobody has.
func (h *httpEndpoint) lookupResource(uri string) (authserver.Resource, bool) {
	u, ok := h.pub.ResourceURL(uri)
	if !ok || !h.pub.IsHost(u.Host) {
		return authserver.Resource{}, false
	}
	ep, ok := parseEndpoint(u.Path)
	if !ok {
		return authserver.Resource{}, false
	}
	return h.resource(ep), true
}

// echoHost bounds a Host header repeated in a message.
func echoHost(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// userOf maps who signed in to the proxy user whose browsers and servers
// they reach: a pairing code's user, or the Users entry of a password or
// OIDC subject.
func (h *httpEndpoint) userOf(g *authserver.Grant) (string, error) {
	if g == nil {
		return "", errors.New("the request carries no grant") // Protect always sets one
	}
	return h.subjectUser(g.Subject)
}

// subjectUser is userOf for a subject: the authorization server asks it
// at sign-in (IdentityConfig.Admit), so that a subject mapped to no user
// is refused on the sign-in page rather than given a token every endpoint
// refuses; the endpoints ask it again, as the mapping may have changed.
func (h *httpEndpoint) subjectUser(subj authserver.Subject) (string, error) {
	if u, ok := strings.CutPrefix(subj.ID, pairSubjectPrefix); ok && subj.Method == "pairing" && u != "" {
		return u, nil
	}
	if u := h.opts.Users[subj.ID]; u != "" {
		return u, nil
	}
	return "", fmt.Errorf("you are signed in as %s (%s), which this proxy maps to no user; sign in with a pairing code from `browserbridge pair` on your machine, or ask the proxy's operator to map %q to your user",
		displayOf(subj), subj.Method, subj.ID)
}

func displayOf(s authserver.Subject) string {
	if s.Display != "" {
		return s.Display
	}
	return s.ID
}

// pairSubjectPrefix begins the Subject.ID of a pairing-code sign-in:
// "pair:<user id>".
const pairSubjectPrefix = "pair:"

// pairingCode is the sign-in page's check of a pairing code (its field
// `code`): one of the proxy's own one-time codes (pairing.go), bound to the
// user whose bridge asked for it over its authenticated relay link.
//
// The authorization server passes the client's address (its ClientIP),
// so the code's own per-address limit holds one guesser back without
// locking everyone else out.
func (s *Server) pairingCode() func(code, clientIP string) (authserver.Subject, error) {
	return pairingSubject(s.RedeemPairingCode)
}

// pairingSubject turns a redemption of a pairing code (its user, or why
// it is refused, in a sentence) into the sign-in's check: the subject
// "pair:<user>", which userOf maps back to that user.
func pairingSubject(redeem func(code, clientIP string) (user string, err error)) func(code, clientIP string) (authserver.Subject, error) {
	return func(code, clientIP string) (authserver.Subject, error) {
		user, err := redeem(code, clientIP)
		if errors.Is(err, ErrPairingLimited) {
			return authserver.Subject{}, authserver.SignInLimited(err) // 429, not "wrong code"
		}
		if errors.Is(err, ErrPairingUnavailable) {
			return authserver.Subject{}, authserver.SignInUnavailable(err) // 503, not "wrong code"
		}
		if err != nil {
			return authserver.Subject{}, err
		}
		if user == "" {
			return authserver.Subject{}, errors.New("the pairing code is bound to no user")
		}
		return authserver.Subject{ID: pairSubjectPrefix + user, Display: user, Method: "pairing"}, nil
	}
}
