package gatewayserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// The public gateway (`browserbridge gateway --public-url URL`) serves the
// stdio gateway's routes on the internet, behind a TLS proxy, with its own
// OAuth authorization server (bridge/internal/authserver) in front of
// every MCP route. docs/gateway.md ("Public, with OAuth") is the contract;
// in short:
//
//   - every endpoint URL is its own protected resource, exactly the URL a
//     client is given: {public}/servers/{name}/mcp, …/sse (its /message
//     rides on the /sse resource), {public}/servers/all/mcp, and with
//     gateway.host_domain https://{name}.{prefix}.{domain}/mcp and /sse;
//   - each resource's RFC 9728 metadata is at
//     /.well-known/oauth-protected-resource/<its path> on its own host,
//     and a 401 names it;
//   - the authorization server's endpoints are on the public URL's host
//     (the issuer); subdomain hosts serve only their server's routes;
//   - /health answers everyone, but names the servers only to a local
//     request; /metrics and the GET /servers/ listing answer only local
//     requests (isLocal);
//   - the MCP routes take web pages of any origin, the sign-in pages
//     check their own forms (browserPolicy), and behind a trusted proxy
//     (trusted_proxies) every limit counts the client, not the proxy.

// prmPath is RFC 9728's well-known prefix.
const prmPath = "/.well-known/oauth-protected-resource"

// publicGateway routes the requests of a public gateway.
type publicGateway struct {
	pub authserver.PublicOrigin // the public URL
	as  *authserver.Server
	asH http.Handler
	gw  *gateway.Gateway
	log *slog.Logger
	// sessions keeps the MCP sessions across restarts, beside the OAuth
	// state file; nil when that state is in memory.
	sessions *mcphttp.FileStore

	health, metrics http.Handler
}

// newPublicGateway opens the OAuth state and builds the authorization
// server for the gateway gw at cfg's public URL.
func newPublicGateway(cfg *config.Config, gw *gateway.Gateway, log *slog.Logger, health, metrics http.Handler) (*publicGateway, error) {
	base := cfg.Gateway.PublicBase()
	if base == "" {
		return nil, fmt.Errorf("gateway.public_url %q is not a public URL", cfg.Gateway.PublicURL)
	}
	if err := cfg.OAuth.CheckSignIn(); err != nil {
		return nil, err
	}
	pub, err := authserver.NewPublicOrigin(base)
	if err != nil {
		return nil, err
	}
	p := &publicGateway{pub: pub, gw: gw, log: log, health: health, metrics: metrics}

	stateFile, err := cfg.OAuthStateFile()
	if err != nil {
		return nil, err
	}
	var kv authserver.KV
	if stateFile != "" {
		if err := os.MkdirAll(filepath.Dir(stateFile), 0o700); err != nil {
			return nil, fmt.Errorf("the OAuth state file's directory: %w", err)
		}
		bolt, err := authserver.OpenBoltKV(stateFile, nil)
		if err != nil {
			return nil, fmt.Errorf("opening the OAuth state file %s: %w", stateFile, err)
		}
		kv = bolt
	} else {
		log.Warn("the OAuth state is kept in memory: every sign-in is lost when the gateway restarts", "state_file", config.MemoryState)
	}
	id := authserver.IdentityConfig{PasswordHash: cfg.OAuth.PasswordHash, Password: cfg.OAuth.Password}
	if o := cfg.OAuth.OIDC; o != nil {
		id.OIDC = &authserver.OIDCConfig{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
			AllowedSubjects: o.AllowedSubjects, AllowedEmails: o.AllowedEmails}
	}
	// The sign-in's per-address limits count the client the guard found,
	// behind a trusted proxy the one X-Forwarded-For names.
	id.ClientIP = httpguard.ClientIP
	asCfg := authserver.Config{Issuer: base, KV: kv, Resources: p.lookupResource, Identity: id,
		Limits: authserver.LimitsFrom(cfg.OAuth.OAuthLimits), Logger: log}
	asCfg.SetLifetimes(cfg.OAuth.OAuthLifetimes.Parsed())
	as, err := authserver.New(asCfg)
	if err != nil {
		if kv != nil {
			kv.Close()
		}
		return nil, err
	}
	p.as, p.asH = as, as.Handler()
	if stateFile != "" {
		if err := p.persistSessions(cfg, stateFile); err != nil {
			as.Close()
			return nil, err
		}
	}
	log.Info("public gateway: OAuth protects every MCP route", "public_url", base, "state_file", stateFile,
		"password", cfg.OAuth.PasswordHash != "" || cfg.OAuth.Password != "", "oidc", cfg.OAuth.OIDC != nil)
	return p, nil
}

// SessionsFileSuffix names the file that keeps the public gateway's MCP
// sessions across restarts: the OAuth state file's name with it appended.
const SessionsFileSuffix = ".sessions.json"

// persistSessions keeps the gateway's sessions in the file beside the
// OAuth state, each bound to the subject its token was issued to: the
// sign-ins survive a restart, and so do the sessions opened with them.
func (p *publicGateway) persistSessions(cfg *config.Config, stateFile string) error {
	file := stateFile + SessionsFileSuffix
	st, err := mcphttp.OpenFileStore(file, mcphttp.FileStoreOptions{TTL: cfg.Durations().SessionTimeout, Logger: p.log})
	if err != nil {
		return err
	}
	p.sessions = st
	p.gw.PersistSessions(st, func(r *http.Request) string {
		if g := authserver.GrantFrom(r.Context()); g != nil {
			return g.Subject.ID
		}
		return ""
	})
	return nil
}

// Close releases the OAuth state and writes the session records.
func (p *publicGateway) Close() error {
	var err error
	if p.sessions != nil {
		err = p.sessions.Close()
	}
	return errors.Join(err, p.as.Close())
}

// handler is the whole public gateway: the guard, then the routes.
func (p *publicGateway) handler(cfg *config.Config, addr string) (http.Handler, error) {
	rate, burst := cfg.Rate()
	loopRate, loopBurst := cfg.LoopbackRate()
	return httpguard.New(httpguard.Options{
		ListenAddr: addr,
		// Every route but /health, the operator's local views and the
		// sign-in itself is behind Protect: OAuth stands where the guard's
		// static token would, so the guard serves beyond loopback without
		// it. Its Host check accepts the listen address, the loopback
		// names, the public host and the subdomains, and nothing else.
		AuthenticatedBy: "OAuth",
		AllowedHosts:    append(slices.Clone(cfg.AllowedHosts), p.pub.Host),
		HostSuffixes:    hostSuffixes(p.gw),
		AllowedOrigins:  cfg.AllowedOrigins,
		Browsers:        p.browserPolicy,
		TrustedProxies:  cfg.TrustedProxyPrefixes(),
		MaxBodyBytes:    cfg.MaxBodyBytes,
		RatePerSecond:   rate,
		Burst:           burst,
		// A proxy on the same machine that is not trusted puts every
		// client in the loopback bucket.
		LoopbackRatePerSecond: loopRate,
		LoopbackBurst:         loopBurst,
		MaxWait:               cfg.RateWaitDuration(),
		Logger:                p.log,
	}, http.HandlerFunc(p.route))
}

// browserPolicy is the guard's Browsers: how each route treats web pages.
//
//   - The MCP routes (every one behind Protect) take any origin, with CORS:
//     their credential is the bearer token a client sends itself, which a
//     hostile page does not hold, so the Origin allowlist would protect
//     nothing and would refuse the bundled extension and browser-based
//     clients such as the MCP Inspector. The token endpoint, registration
//     and revocation are the same: a client's code, verifier or refresh
//     token in the body, no cookie.
//   - The sign-in pages (authorize, sign-in, consent, the OIDC callback)
//     and the metadata documents are reached from other sites by design:
//     claude.ai opens the authorization page, a provider sends the browser
//     back, the pages' forms post with Origin: null under their
//     Referrer-Policy, and the metadata are public facts the authorization
//     server serves with its own CORS. The authorization server checks its
//     forms itself (a cookie binding the browser, a CSRF token,
//     Sec-Fetch-Site and Origin), so the guard leaves them to it.
//   - Everything else (/health, the operator's local views, 404s) is
//     checked as on the local bridge.
func (p *publicGateway) browserPolicy(r *http.Request) httpguard.BrowserPolicy {
	path := r.URL.Path
	if name := p.gw.HostRoute(r.Host); name != "" && !p.pub.IsHost(r.Host) {
		switch path {
		case "/mcp", "/sse", "/message":
			return httpguard.AnyOrigin
		}
	} else if _, _, ok := serversRoute(path); ok {
		return httpguard.AnyOrigin
	}
	switch {
	case path == "/oauth/token", path == "/oauth/register", path == "/oauth/revoke":
		return httpguard.AnyOrigin
	case strings.HasPrefix(path, "/oauth/"), strings.HasPrefix(path, "/.well-known/"):
		return httpguard.HandlerChecksBrowsers
	}
	return httpguard.CheckBrowsers
}

// route serves a request that passed the guard.
func (p *publicGateway) route(w http.ResponseWriter, r *http.Request) {
	if name := p.gw.HostRoute(r.Host); name != "" && !p.pub.IsHost(r.Host) {
		p.routeSubdomain(w, r, name)
		return
	}
	path := r.URL.Path
	switch {
	case authserver.Paths(path):
		p.asH.ServeHTTP(w, r)
	case path == "/health":
		p.health.ServeHTTP(w, r)
	case path == "/metrics":
		if !isLocal(r) {
			authserver.NotFound(w, "/metrics answers only on the gateway's own machine (http://127.0.0.1:PORT/metrics), not through the public URL.")
			return
		}
		p.metrics.ServeHTTP(w, r)
	case path == "/servers/":
		// The listing names every server and quotes their stderr.
		if !isLocal(r) {
			authserver.NotFound(w, "The list of servers is not public; on the gateway's own machine it is at http://127.0.0.1:PORT/servers/.")
			return
		}
		p.gw.ServeHTTP(w, r)
	case path == prmPath:
		// No resource lives at the root of the public host: each endpoint
		// has its own metadata, which its 401 names.
		authserver.NotFound(w, "Each MCP endpoint of this gateway is its own protected resource: its metadata is at "+
			p.pub.Base+prmPath+"/servers/NAME/mcp (a request without a token to the endpoint names it).")
	case strings.HasPrefix(path, prmPath+"/servers/"):
		name, op, ok := serversRoute(strings.TrimPrefix(path, prmPath))
		if !ok || op == "message" {
			authserver.NotFound(w, "No protected resource here: an endpoint's metadata is at "+prmPath+"/servers/NAME/mcp or "+prmPath+"/servers/NAME/sse.")
			return
		}
		p.as.ResourceMetadataHandler(p.pathResource(name, op)).ServeHTTP(w, r)
	case strings.HasPrefix(path, "/servers/"):
		name, op, ok := serversRoute(path)
		if !ok {
			authserver.NotFound(w, fmt.Sprintf("No route %s %s: a server is reached at /servers/NAME/mcp (Streamable HTTP) or /servers/NAME/sse (HTTP+SSE), and all of them at /servers/all/mcp.", r.Method, path))
			return
		}
		if op == "message" {
			op = "sse" // the legacy transport's POSTs belong to its stream
		}
		res := p.pathResource(name, op)
		p.as.Protect(res, p.pub.Base+authserver.ResourceMetadataPath("/servers/"+name+"/"+op), p.gw).ServeHTTP(w, r)
	default:
		authserver.NotFound(w, fmt.Sprintf("No route %s %s: servers are reached at /servers/NAME/mcp (Streamable HTTP), /servers/NAME/sse (HTTP+SSE) and /servers/all/mcp, each with an OAuth sign-in.", r.Method, path))
	}
}

// routeSubdomain serves a request to {name}.{prefix}.{domain}.
func (p *publicGateway) routeSubdomain(w http.ResponseWriter, r *http.Request, name string) {
	path := r.URL.Path
	switch path {
	case "/mcp", "/sse", "/message":
		op := strings.TrimPrefix(path, "/")
		if op == "message" {
			op = "sse"
		}
		res := p.hostResource(name, op)
		p.as.Protect(res, p.hostOrigin(name)+authserver.ResourceMetadataPath("/"+op), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.gw.ServeHost(w, r, name)
		})).ServeHTTP(w, r)
	case prmPath, prmPath + "/mcp":
		// The root, which claude.ai probes, describes the server's /mcp.
		p.as.ResourceMetadataHandler(p.hostResource(name, "mcp")).ServeHTTP(w, r)
	case prmPath + "/sse":
		p.as.ResourceMetadataHandler(p.hostResource(name, "sse")).ServeHTTP(w, r)
	case "/health":
		p.health.ServeHTTP(w, r)
	default:
		authserver.NotFound(w, fmt.Sprintf("No route %s %s: this host serves one MCP server at /mcp (Streamable HTTP) and /sse (HTTP+SSE); sign-in is at %s.", r.Method, path, p.pub.Base))
	}
}

// serversRoute splits /servers/{name}/{op} with op mcp, sse or message.
func serversRoute(path string) (name, op string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/servers/")
	if !ok {
		return "", "", false
	}
	name, op, ok = strings.Cut(rest, "/")
	if !ok || name == "" || (op != "mcp" && op != "sse" && op != "message") {
		return "", "", false
	}
	return name, op, true
}

// hostOrigin is the origin of server name's own host, in the public URL's
// scheme and port.
func (p *publicGateway) hostOrigin(name string) string {
	o := p.pub.Scheme + "://" + name + "." + p.gw.HostSuffix()
	if p.pub.Port != "" {
		o += ":" + p.pub.Port
	}
	return o
}

// pathResource is {public}/servers/{name}/{op}.
func (p *publicGateway) pathResource(name, op string) authserver.Resource {
	return authserver.Resource{URI: p.pub.Base + "/servers/" + name + "/" + op, Name: resourceName(name, op)}
}

// hostResource is https://{name}.{prefix}.{domain}/{op}.
func (p *publicGateway) hostResource(name, op string) authserver.Resource {
	return authserver.Resource{URI: p.hostOrigin(name) + "/" + op, Name: resourceName(name, op)}
}

// resourceName completes the consent page's "… will be able to use NAME".
func resourceName(name, op string) string {
	if name == gateway.AggregateRoute {
		return "every MCP server of this gateway (the aggregate endpoint)"
	}
	if op == "sse" {
		return fmt.Sprintf("the MCP server %q (HTTP+SSE)", name)
	}
	return fmt.Sprintf("the MCP server %q", name)
}

// lookupResource is the authorization server's Resources: the `resource`
// a client asks a token for, when it is one of this gateway's endpoints
// and the server is configured now. The host and scheme are compared
// without regard to case and a default port; the token is bound to the
// canonical URL, the one the metadata gives.
func (p *publicGateway) lookupResource(uri string) (authserver.Resource, bool) {
	u, ok := p.pub.ResourceURL(uri)
	if !ok {
		return authserver.Resource{}, false
	}
	host := strings.ToLower(u.Host)
	if p.pub.IsHost(host) {
		name, op, ok := serversRoute(u.EscapedPath())
		if !ok || op == "message" || !p.exists(name, op) {
			return authserver.Resource{}, false
		}
		return p.pathResource(name, op), true
	}
	name := p.gw.HostRoute(host)
	if name == "" || !p.pub.HasPort(u.Port()) {
		return authserver.Resource{}, false
	}
	op := strings.TrimPrefix(u.EscapedPath(), "/")
	if (op != "mcp" && op != "sse") || name == gateway.AggregateRoute || !p.exists(name, op) {
		return authserver.Resource{}, false
	}
	return p.hostResource(name, op), true
}

// exists reports whether route name serves op now.
func (p *publicGateway) exists(name, op string) bool {
	if name == gateway.AggregateRoute {
		return op == "mcp"
	}
	return slices.Contains(p.gw.Names(), name)
}

// isLocal reports a request made on the gateway's own machine, not
// through a proxy: from a loopback address, to a loopback name (a proxy
// passes the public host on), with none of the headers proxies add.
func isLocal(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return false
	}
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip"} {
		if _, ok := r.Header[h]; ok {
			return false
		}
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// publicHealth is /health for a request that is not local: the status
// without the servers' names.
type publicHealth struct {
	Status   string  `json:"status"`
	Version  string  `json:"version"`
	Uptime   float64 `json:"uptimeSeconds"`
	Sessions int     `json:"sessions"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
