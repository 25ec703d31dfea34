// Package proxy is the cloud relay of spec 001 (see bridge/relaywire and
// docs/relay.md): a WebSocket server that authenticates browser extensions
// (path /extension) and MCP clients (path /mcp) with tokens, lets an MCP
// client connect to one of its own user's extensions, and forwards its
// requests there with the ids mapped, and the replies back. With
// Options.HTTP it is also an MCP server over Streamable HTTP, behind its own
// OAuth authorization server (httpmcp.go), whose sessions are MCP clients
// of the same machinery.
//
// Each WebSocket connection has one reader goroutine and one writer
// goroutine; the HTTP handler that upgraded it returns at once, so that
// net/http's per-request state (buffers, request, stack) is not held for
// the connection's life. Shared state (users, their extensions, the
// connections between MCP clients and extensions) is guarded by mutexes
// taken in the order Server.mu → extension.mu → mcpClient.mu →
// connection.mu, never the other way round, and never held while blocking
// on a connection's queue.
package proxy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/wsconn"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// Options configure a Server. The zero value of every field but Keys means
// the default given.
type Options struct {
	// Keys verify access tokens. Required.
	Keys *token.Keys
	// MaxMessageSize is the largest message accepted, in bytes; larger ones
	// are refused with -32600 and skipped. Default relaywire.MaxMessageSize.
	// A message over four times this ends the connection (close 1009).
	MaxMessageSize int64
	// ConnRate is the rate, in messages per second, allowed on each
	// connection, with bursts of twice as many. Default
	// relaywire.DefaultConnRate; negative: unlimited. An extension's
	// connection carries the replies to all of its clients, so it is
	// allowed UserRate instead when that is larger.
	ConnRate float64
	// UserRate is the rate allowed over all MCP clients of one user. Default
	// relaywire.DefaultUserRate; negative: unlimited.
	UserRate float64
	// Strikes refused messages within one second close the connection
	// (1008). Default relaywire.DefaultStrikes; negative: never.
	Strikes int
	// AuthTimeout is how long a connection may stay unauthenticated.
	// Default 10 s.
	AuthTimeout time.Duration
	// PongWait is how long a connection may stay silent (no message, no
	// pong) before it is dropped; pings go out every 9/10 of it. Default 60 s.
	PongWait time.Duration
	// WriteWait bounds each write, and how long a full send queue may stay
	// full before the connection is dropped. Default 10 s.
	WriteWait time.Duration
	// ShutdownGrace is how long a shutdown waits for calls in flight to be
	// answered before failing them. Default 5 s.
	ShutdownGrace time.Duration
	// SendQueue is the number of messages queued per connection. Default 64.
	SendQueue int
	// MaxConnsPerIP caps the TCP connections open at once from one client
	// address (an IPv4 address, or an IPv6 /64), counted by Run at the
	// listener whatever they carry: WebSockets, keep-alive HTTP, or nothing
	// yet. One more is answered 429 with a sentence and closed. Default
	// DefaultMaxConnsPerIP; negative: unlimited (behind a load balancer, where
	// every connection comes from its address).
	MaxConnsPerIP int
	// MaxMCPPerUser caps the authenticated MCP client connections of one
	// user; one more is refused at mcp_handshake (-32000, then close 1008).
	// Default DefaultMaxMCPPerUser; negative: unlimited.
	MaxMCPPerUser int
	// MaxExtensionsPerUser caps the authenticated extension connections of
	// one user; one more is closed 1008 after authenticate. Default
	// DefaultMaxExtensionsPerUser; negative: unlimited.
	MaxExtensionsPerUser int
	// MaxBodyBytesPerUser bounds the bytes of one user's Streamable HTTP
	// request bodies in flight (bodybudget.go): each body takes its length
	// before it is read and gives it back once its message is handed on.
	// A body that finds no room waits up to BodyWait, then is refused 429.
	// Default DefaultMaxBodyBytesPerUser; never less than MaxMessageSize.
	MaxBodyBytesPerUser int64
	// BodyWait is how long a body waits for room in those budgets.
	// Default DefaultBodyWait.
	BodyWait time.Duration
	// MaxBodyBytes bounds the bytes of all users' request bodies in flight
	// at once; past it (after the same wait), 503. Default
	// DefaultMaxBodyBytes; never less than MaxBodyBytesPerUser.
	MaxBodyBytes int64
	// IdleTimeout is how long Run lets an HTTP keep-alive connection wait
	// for its next request. WebSockets are not HTTP keep-alive connections:
	// PongWait governs them. Default 60 s.
	IdleTimeout time.Duration
	// ReadTimeout is how long Run lets a client take to send one request,
	// headers and body: a body trickled slower is cut. It ends when the body
	// has been read, so it never cuts a WebSocket. Default 30 s (headers
	// alone: 10 s).
	ReadTimeout time.Duration
	// TrustedProxies are the reverse proxies (Caddy, Traefik) in front of
	// Run, by address or network: for a request from one of them, the
	// client is the right-most X-Forwarded-For address that is not itself a
	// trusted proxy (httpguard's rule, the gateway's trusted_proxies), and
	// every limit by address (MaxConnsPerIP, pairing and sign-in attempts,
	// the MCP endpoints' rates) counts that client. Their connections are
	// not counted at the listener; each request and WebSocket on them is,
	// under its client. A header from any other peer is ignored. Nil:
	// trust no one. A prefix of every address is refused.
	TrustedProxies []netip.Prefix
	// TLS, if set, makes Run serve wss:// and https:// with it. The
	// per-address count sits beneath TLS, so a refusal costs no handshake
	// beyond the one that carries the 429.
	TLS *tls.Config
	// Logger receives connection-level events. Default: discard.
	Logger *slog.Logger
	// Metrics is where the proxy registers its metrics (served on /metrics).
	// Default: a new registry.
	Metrics *metrics.Registry
	// CheckOrigin vets the Origin header of WebSocket upgrades. Default:
	// accept any (clients are extensions and programs, authenticated by
	// token, not web pages holding ambient credentials).
	CheckOrigin func(*http.Request) bool
	// Now is the clock for tokens and timestamps. Default time.Now.
	Now func() time.Time
	// HTTP, if set, makes the proxy an MCP server over Streamable HTTP
	// for clients that sign in with OAuth (docs/proxy-http.md): /mcp
	// (without a WebSocket upgrade), /browsers/{id}/mcp and
	// /servers/{name}/mcp, with the authorization server's endpoints, and
	// turns pairing codes on. Nil: WebSockets only.
	HTTP *HTTPOptions
	// Enrol configures enrolment: the codes `browserbridge-proxy invite`
	// asks for and bridges exchange for their credential (enrol.go). Its
	// zero value means its defaults.
	Enrol EnrolOptions
	// Cluster, if set, joins the proxy to a cluster of proxies over NATS
	// (cluster.go). Nil: one process, no NATS in the path.
	Cluster *ClusterOptions
}

func (o *Options) setDefaults() {
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = relaywire.MaxMessageSize
	}
	if o.ConnRate == 0 {
		o.ConnRate = relaywire.DefaultConnRate
	}
	if o.UserRate == 0 {
		o.UserRate = relaywire.DefaultUserRate
	}
	if o.Strikes == 0 {
		o.Strikes = relaywire.DefaultStrikes
	}
	if o.AuthTimeout <= 0 {
		o.AuthTimeout = 10 * time.Second
	}
	if o.PongWait <= 0 {
		o.PongWait = 60 * time.Second
	}
	if o.WriteWait <= 0 {
		o.WriteWait = 10 * time.Second
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 5 * time.Second
	}
	if o.SendQueue <= 0 {
		o.SendQueue = 64
	}
	if o.MaxConnsPerIP == 0 {
		o.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if o.MaxMCPPerUser == 0 {
		o.MaxMCPPerUser = DefaultMaxMCPPerUser
	}
	if o.MaxExtensionsPerUser == 0 {
		o.MaxExtensionsPerUser = DefaultMaxExtensionsPerUser
	}
	if o.MaxBodyBytesPerUser <= 0 {
		o.MaxBodyBytesPerUser = DefaultMaxBodyBytesPerUser
	}
	o.MaxBodyBytesPerUser = max(o.MaxBodyBytesPerUser, o.MaxMessageSize)
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	o.MaxBodyBytes = max(o.MaxBodyBytes, o.MaxBodyBytesPerUser)
	if o.BodyWait <= 0 {
		o.BodyWait = DefaultBodyWait
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Metrics == nil {
		o.Metrics = metrics.NewRegistry()
	}
	if o.CheckOrigin == nil {
		o.CheckOrigin = func(*http.Request) bool { return true }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

func (o *Options) hardLimit() int64 { return 4 * o.MaxMessageSize }

// extRate is the rate of an extension's connection.
func (o *Options) extRate() float64 {
	if o.ConnRate < 0 || o.UserRate < 0 {
		return -1
	}
	return max(o.ConnRate, o.UserRate)
}

// Defaults of the connection limits (Options). A relay serves many users,
// each with a few browsers and a few MCP clients; the per-user caps are far
// above that and far below what would let one user crowd out the others.
// The per-address cap leaves room for an office behind one NAT address.
const (
	DefaultMaxConnsPerIP        = 256
	DefaultMaxMCPPerUser        = 64
	DefaultMaxExtensionsPerUser = 16
	DefaultIdleTimeout          = 60 * time.Second
	DefaultReadTimeout          = 30 * time.Second
	// readHeaderTimeout bounds the request line and headers.
	readHeaderTimeout = 10 * time.Second
)

// Buffer sizes of each WebSocket. Messages are small JSON-RPC objects;
// larger ones take several reads or frames.
const (
	readBufferSize  = 1024
	writeBufferSize = 4096
)

// Server is the proxy. Create it with New, serve with Run (or mount
// Handler and call Shutdown). Its methods are safe for concurrent use.
type Server struct {
	opts     Options
	log      *slog.Logger
	http     *httpEndpoint // nil without Options.HTTP
	cluster  *clusterNode  // nil without Options.Cluster
	upgrader websocket.Upgrader
	connOpts *wsconn.Options           // of every connection
	proxies  *httpguard.TrustedProxies // Options.TrustedProxies; nil: none
	bodies   *bodyBudget               // request bodies in flight (HTTP)
	started  time.Time
	m        serverMetrics
	keys     atomic.Pointer[token.Keys] // Options.Keys until SetKeys
	pairing  *pairing                   // pairing codes; off until ConfigurePairing
	enrol    *pairing                   // enrolment codes (enrol.go)

	enrolOpts EnrolOptions
	revoked   revocations // credentials `relay leave` revoked

	ended endedAway // session_ended notices for browsers away (sessionend.go); its own lock

	mu          sync.Mutex
	users       map[string]*user
	conns       map[*wsConn]struct{} // every open WebSocket, to close at shutdown
	closing     bool
	closingFlag atomic.Bool // closing, readable without mu

	stopCluster sync.Once

	handlers sync.WaitGroup // one per open WebSocket
	inflight atomic.Int64   // forwarded requests not yet answered
	nMCP     atomic.Int64
	nExt     atomic.Int64
}

// user is the state shared by one user's connections.
type user struct {
	id    string
	exts  map[string]*extension // by extension id; guarded by Server.mu
	lim   *httpguard.Bucket
	count int // extensions + authenticated MCP clients; guarded by Server.mu
	mcp   int // authenticated MCP clients; guarded by Server.mu
}

type serverMetrics struct {
	conns     *metrics.Gauge
	accepted  *metrics.Counter
	authFail  *metrics.Counter
	refused   *metrics.Counter
	forwarded *metrics.CounterSeries
	notified  *metrics.CounterSeries
	dropped   *metrics.Counter
	failed    *metrics.Counter
	callTime  *metrics.HistogramSeries
	bytesIn   *metrics.CounterSeries
	bytesOut  *metrics.CounterSeries

	connRefused *metrics.Counter
	evicted     *metrics.CounterSeries
}

// New returns a Server with the options, which it keeps.
func New(opts Options) (*Server, error) {
	if opts.Keys == nil {
		return nil, errors.New("proxy: Options.Keys is required")
	}
	opts.setDefaults()
	proxies, err := httpguard.NewTrustedProxies(opts.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	s := &Server{
		proxies: proxies,
		bodies:  newBodyBudget(opts.MaxBodyBytesPerUser, opts.MaxBodyBytes, opts.BodyWait),
		opts:    opts,
		log:     opts.Logger,
		started: time.Now(),
		users:   make(map[string]*user),
		conns:   make(map[*wsConn]struct{}),
		pairing: newPairing(),
		enrol:   newCodes("enrolment code", "enrol", errEnrolOff),
	}
	s.keys.Store(opts.Keys)
	// The read buffer lives as long as the connection; write buffers are
	// taken from the pool for each message, so an idle connection holds
	// none.
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   readBufferSize,
		WriteBufferSize:  writeBufferSize,
		WriteBufferPool:  &sync.Pool{},
		CheckOrigin:      opts.CheckOrigin,
	}
	r := opts.Metrics
	s.m.conns = r.NewGauge("browserbridge_proxy_connections", "Open WebSocket connections by side.", "side")
	s.m.accepted = r.NewCounter("browserbridge_proxy_authenticated_total", "Connections authenticated, by side.", "side")
	s.m.authFail = r.NewCounter("browserbridge_proxy_auth_failures_total", "Connections refused for a bad or missing token, by side.", "side")
	s.m.refused = r.NewCounter("browserbridge_proxy_refused_total", "Messages answered with an error by the proxy itself, by reason.", "reason")
	s.m.forwarded = r.NewCounter("browserbridge_proxy_forwarded_total", "Requests forwarded from MCP clients to extensions.").With()
	s.m.notified = r.NewCounter("browserbridge_proxy_notifications_total", "Notifications from extensions delivered to MCP clients (progress, list_changed).").With()
	s.m.dropped = r.NewCounter("browserbridge_proxy_dropped_total", "Messages dropped without an answer, by reason.", "reason")
	s.m.failed = r.NewCounter("browserbridge_proxy_calls_failed_total", "Forwarded requests answered by the proxy because the extension could not, by reason.", "reason")
	s.m.callTime = r.NewHistogram("browserbridge_proxy_call_seconds", "Time from forwarding a request to forwarding its reply.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}).With()
	s.m.bytesIn = r.NewCounter("browserbridge_proxy_received_bytes_total", "Message bytes received.").With()
	s.m.bytesOut = r.NewCounter("browserbridge_proxy_sent_bytes_total", "Message bytes sent.").With()
	s.m.connRefused = r.NewCounter("browserbridge_proxy_connections_refused_total", "Connections refused for a connection limit, by limit (per_ip, per_user_mcp, per_user_extension), or because another bridge of the user holds a server extension's server name (server_name).", "reason")
	s.m.evicted = r.NewCounter("browserbridge_proxy_http_sessions_evicted_total", "Idle Streamable HTTP sessions ended to make room for a new session of their user at its cap.").With()
	s.connOpts = s.connOptions()
	if opts.Cluster != nil {
		// Checked and defaulted once, here: pairing's shared store reads
		// the same options as the cluster.
		c := *opts.Cluster
		if err := c.setDefaults(); err != nil {
			return nil, err
		}
		s.opts.Cluster = &c
	}
	if err := s.configureEnrol(opts.Enrol); err != nil {
		return nil, err
	}
	if opts.HTTP != nil {
		h, err := newHTTPEndpoint(s, *opts.HTTP)
		if err != nil {
			return nil, err
		}
		s.http = h
	}
	if s.opts.Cluster != nil {
		c, err := s.startCluster(*s.opts.Cluster)
		if err != nil {
			return nil, err
		}
		s.cluster = c
	}
	r.NewGaugeFunc("browserbridge_proxy_calls_in_flight", "Forwarded requests awaiting a reply.", func() float64 { return float64(s.inflight.Load()) })
	r.NewGaugeFunc("browserbridge_proxy_users", "Users with at least one authenticated connection.", func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.users))
	})
	return s, nil
}

// SetKeys replaces the keys tokens are verified with (a rotation of
// --secret-file: the new key first, the old still verifying).
func (s *Server) SetKeys(k *token.Keys) { s.keys.Store(k) }

// Handler returns the proxy's public HTTP handler: WebSocket /extension
// and /mcp, and GET /health with the status alone (what a load balancer
// needs, and nothing of the deployment's inside); with Options.HTTP,
// Streamable HTTP on /mcp (requests that are not WebSocket upgrades),
// /browsers/{id}/mcp and /servers/{name}/mcp, and the OAuth endpoints and
// metadata. Metrics and the whole health report are on InternalHandler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(relaywire.PathExtension, s.serveExtension)
	mux.HandleFunc(relaywire.PathMCP, s.serveMCP)
	mux.HandleFunc("GET "+relaywire.PathHealth, s.servePublicHealth)
	mux.HandleFunc(relaywire.PathEnrol, s.serveEnrol)
	mux.HandleFunc(relaywire.PathEnrolInvite, s.serveEnrolInvite)
	mux.HandleFunc(relaywire.PathEnrolLeave, s.serveEnrolLeave)
	if s.http != nil {
		mux.Handle("/", s.http)
	}
	return mux
}

// InternalHandler serves GET /metrics and the whole GET /health (counts,
// the cluster's peers and their internal URLs): for an operator's private
// listener (browserbridge-proxy serve --metrics-listen), never the public
// one.
func (s *Server) InternalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+relaywire.PathHealth, s.serveHealth)
	mux.Handle("GET "+relaywire.PathMetrics, s.opts.Metrics.Handler())
	return mux
}

// servePublicHealth is the public /health: the status alone, 503 while
// stopping.
func (s *Server) servePublicHealth(w http.ResponseWriter, r *http.Request) {
	status := "ok"
	if s.isClosing() {
		status = "stopping"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(map[string]string{"status": status})
}

// Run serves on ln until ctx is done, then shuts down gracefully (see
// Shutdown) and returns nil; or returns the error that stopped serving.
// It closes ln. ln is the plain TCP listener: Run counts connections per
// client address on it (MaxConnsPerIP) and adds TLS (Options.TLS) above.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	lim := newLimitListener(ln, s.opts.MaxConnsPerIP, s.opts.TLS, s)
	hs := s.httpServer()
	hs.Handler = lim.forwardedConns(hs.Handler)
	ln = lim
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Shutdown(context.Background())
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownGrace+5*time.Second)
	defer cancel()
	// Both at once: the HTTP server's shutdown waits for the Streamable
	// HTTP requests, whose calls in flight the proxy's shutdown answers.
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(sctx) }()
	hsErr := hs.Shutdown(sctx) // stops accepting; hijacked WebSockets are ours
	err := <-done
	<-errc
	if err == nil && hsErr != nil {
		err = fmt.Errorf("stopping the HTTP server: %w", hsErr)
	}
	return err
}

// httpServer is the HTTP server Run serves with. Its timeouts bound what a
// connection may hold before it is a WebSocket: ReadTimeout ends once a
// request's body has been read (net/http clears the read deadline then, and
// again when a handler takes the connection over), so it cuts a trickled
// body and never a WebSocket; IdleTimeout closes a keep-alive connection
// that sends no next request. There is no WriteTimeout: WebSockets bound
// their own writes (WriteWait).
func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: min(readHeaderTimeout, s.opts.ReadTimeout),
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// Shutdown stops the proxy gracefully: new connections and new forwarded
// requests are refused (-32007), calls in flight get up to ShutdownGrace to
// be answered, then the rest are answered with -32007; every connected MCP
// client gets `disconnected` with reason "Proxy shutting down", every
// extension a `status` with connected false, and every connection a close
// frame 1001 with that reason. It returns when every connection is closed,
// or ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.closingFlag.Store(true)
	s.mu.Unlock()
	if s.cluster != nil {
		s.cluster.withdraw()
	}
	if s.http != nil {
		s.http.stopStreams()
	}
	grace := time.NewTimer(s.opts.ShutdownGrace)
	defer grace.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
wait:
	for s.inflight.Load() > 0 {
		select {
		case <-tick.C:
		case <-grace.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	s.mu.Lock()
	var exts []*extension
	for _, u := range s.users {
		for _, e := range u.exts {
			exts = append(exts, e)
		}
	}
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	status := relaywire.AppendNotification(nil, relaywire.MethodStatus, relaywire.MarshalParams(relaywire.StatusParams{
		Connected: false, Timestamp: relaywire.Timestamp(s.opts.Now()),
	}))
	if s.cluster != nil {
		s.cluster.shutdownClients()
	}
	if s.http != nil && s.http.opts.Sessions != nil {
		// The sessions carry on after the restart: their calls still in
		// flight are answered so (the engine's sentence names the restart
		// and says the session lives on) rather than with -32007.
		s.http.engine.Close()
	}
	for _, e := range exts {
		e.detachAll(relaywire.CodeShuttingDown, "the proxy is shutting down", relaywire.ReasonShuttingDown)
		e.c.Send(status)
	}
	if s.http != nil {
		s.http.engine.Close() // their calls were answered above
	}
	for _, c := range conns {
		c.Close(websocket.CloseGoingAway, relaywire.ReasonShuttingDown)
	}
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("waiting for connections to close: %w", ctx.Err())
	}
	if s.cluster != nil {
		s.stopCluster.Do(s.cluster.stop)
	}
	return err
}

// track registers a new connection; false if the proxy is shutting down.
func (s *Server) track(c *wsConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.handlers.Add(1)
	return true
}

func (s *Server) untrack(c *wsConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.handlers.Done()
}

func (s *Server) isClosing() bool { return s.closingFlag.Load() }

// upgrade turns an HTTP request into a tracked wsConn, or answers it with an
// error and returns nil.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) *wsConn {
	if s.isClosing() {
		http.Error(w, "the proxy is shutting down", http.StatusServiceUnavailable)
		return nil
	}
	wc, err := wsconn.Upgrade(&s.upgrader, w, r, s.connOpts)
	if err != nil {
		s.log.Debug("websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
		return nil
	}
	holdForwarded(r, wc.Done())
	c := &wsConn{Conn: wc, s: s, lim: newBucket(s.opts.ConnRate)}
	if !s.track(c) {
		wc.Close(websocket.CloseGoingAway, relaywire.ReasonShuttingDown)
		wc.ReadLoop(func([]byte) {}, nil) // until the peer answers the close, or the grace passes
		return nil
	}
	return c
}

// finish waits for the writer after the reader ended and forgets c.
func (s *Server) finish(c *wsConn) {
	<-c.Done()
	s.untrack(c)
}

// Sides of a connection, for acquireUser.
const (
	sideMCP = iota
	sideExtension
)

// Why acquireUser refused a connection.
var (
	errClosing   = errors.New("the proxy is shutting down")
	errUserLimit = errors.New("over the user's limit")
)

// acquireUser returns the user's state, counting one more connection of
// the side; errClosing when the proxy is stopping, errUserLimit when the
// user already has as many connections of that side as allowed, a
// *serverNameTaken when another bridge of the user holds e's server name.
// An extension (e, side sideExtension) is given its id and registered with
// the user in the same step, so that two arriving at once cannot both take
// the last place, or both a free server name.
func (s *Server) acquireUser(id string, side int, e *extension) (*user, error) {
	var remote []serverReg
	if side == sideExtension && e.kind == relaywire.ExtensionKindServer {
		remote = s.remoteServerRegs(id, e.server)
	}
	u, err := s.acquireUserLocking(id, side, e, remote)
	if side == sideExtension && s.cluster != nil {
		if e.claimed != "" && (err != nil || e.id != e.claimed) {
			// Refused, or given another id here: the claim is not used.
			s.cluster.releaseClaim(id, e.claimed)
			e.claimed = ""
		}
		if err == nil {
			s.cluster.extensionUp(e)
		}
	}
	if err == nil && side == sideExtension && e.kind == relaywire.ExtensionKindBrowser && s.http != nil {
		// HTTP sessions of the user that have no browser now learn that
		// their tools may have changed.
		s.http.browserArrived(u.id)
	}
	return u, err
}

// acquireMCPClient is acquireUser for an MCP client (a WebSocket client
// or an HTTP session). At the user's cap, the user's least recently used
// idle HTTP session makes room (issue 33, item 9: a client that never
// DELETEs its sessions would otherwise lock its user out until they
// expire); a session in use and a WebSocket client never do.
func (s *Server) acquireMCPClient(id string) (*user, error) {
	u, err := s.acquireUser(id, sideMCP, nil)
	for errors.Is(err, errUserLimit) && s.http != nil && s.http.evictIdlest(id) {
		u, err = s.acquireUser(id, sideMCP, nil)
	}
	return u, err
}

// acquireUserLocking is acquireUser's step under Server.mu; remote are
// the other nodes' registrations of e's server name.
func (s *Server) acquireUserLocking(id string, side int, e *extension, remote []serverReg) (*user, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errClosing
	}
	u := s.users[id]
	if u == nil {
		u = &user{id: id, exts: make(map[string]*extension), lim: newBucket(s.opts.UserRate)}
		s.users[id] = u
	}
	switch side {
	case sideMCP:
		if max := s.opts.MaxMCPPerUser; max > 0 && u.mcp >= max {
			return nil, errUserLimit
		}
		u.mcp++
	case sideExtension:
		if max := s.opts.MaxExtensionsPerUser; max > 0 && len(u.exts) >= max {
			return nil, errUserLimit
		}
		e.user = u
		if e.id == "" { // in a cluster, claimed before (clusterNode.claimID)
			e.id = stableID(relaywire.PrefixExtension, u.id, e.name)
		}
		if _, taken := u.exts[e.id]; taken {
			e.id = newID(relaywire.PrefixExtension)
		}
		if e.kind == relaywire.ExtensionKindServer {
			if err := checkServerNameLocked(u, e, remote); err != nil {
				if u.count == 0 { // the holder is on another node
					delete(s.users, u.id)
				}
				return nil, err
			}
		}
		u.exts[e.id] = e
	}
	u.count++
	return u, nil
}

// releaseUserLocked counts one connection less; s.mu must be held.
func (s *Server) releaseUserLocked(u *user, side int) {
	if side == sideMCP {
		u.mcp--
	}
	u.count--
	if u.count == 0 {
		delete(s.users, u.id)
	}
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	status, users := "ok", len(s.users)
	if s.closing {
		status = "stopping"
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	body := map[string]any{
		"status":         status,
		"version":        buildinfo.String(),
		"protocol":       relaywire.Version,
		"uptime_seconds": int64(time.Since(s.started).Seconds()),
		"extensions":     s.nExt.Load(),
		"mcp_clients":    s.nMCP.Load(),
		"users":          users,
		"calls_inflight": s.inflight.Load(),
	}
	if s.cluster != nil {
		body["node"] = s.cluster.opts.Node
		for k, v := range s.cluster.health() {
			body[k] = v
		}
		body["pairs"] = s.pairCounts()
	}
	json.NewEncoder(w).Encode(body)
}

// pairCounts counts the connections between MCP clients and extensions:
// both on this node (local), and across nodes (remote: this node's clients
// to other nodes' extensions, and other nodes' clients to this node's).
func (s *Server) pairCounts() map[string]int {
	local, in := 0, 0
	s.mu.Lock()
	var exts []*extension
	for _, u := range s.users {
		for _, e := range u.exts {
			exts = append(exts, e)
		}
	}
	s.mu.Unlock()
	for _, e := range exts {
		e.mu.Lock()
		for _, cn := range e.conns {
			if cn.mcp.link != nil {
				in++
			} else {
				local++
			}
		}
		e.mu.Unlock()
	}
	out := 0
	if s.cluster != nil {
		s.cluster.mu.Lock()
		out = len(s.cluster.remote)
		s.cluster.mu.Unlock()
	}
	return map[string]int{"local": local, "remote": in + out, "remote_in": in, "remote_out": out}
}

// newID returns prefix followed by a random UUID (version 4).
func newID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return prefix + formatUUID(b)
}

// stableID returns prefix followed by a UUID (version 8) derived from the
// parts, so that an extension keeps its id across reconnections.
func stableID(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	return prefix + formatUUID(b)
}

func formatUUID(b [16]byte) string {
	var dst [36]byte
	hex.Encode(dst[0:8], b[0:4])
	dst[8] = '-'
	hex.Encode(dst[9:13], b[4:6])
	dst[13] = '-'
	hex.Encode(dst[14:18], b[6:8])
	dst[18] = '-'
	hex.Encode(dst[19:23], b[8:10])
	dst[23] = '-'
	hex.Encode(dst[24:], b[10:])
	return string(dst[:])
}
