// Package hostlink is the bridge's side of the Unix socket: it accepts the
// native hosts (one per browser profile) and local clients such as
// `browserbridge status`, checks that each peer is the same user, speaks
// JSON-RPC 2.0 with each, and keeps the registry of connected browsers that
// the MCP endpoints call into. Only a connection that attached (host.attach
// with an allowed origin, as its first message) can become a browser; the
// others may ask bridge.status and ping, for a few seconds, a few at a time.
package hostlink

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
	"github.com/browserbridge/browserbridge/bridge/nativemsg/rpcstream"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// Bounds on connections that have not attached. Only a host that attached
// (host.attach with an allowed origin, as its first message) may carry a
// browser; everything else on the socket is a local client asking
// bridge.status or ping, which needs a moment, not a slot for ever.
const (
	// DefaultUnattachedTimeout is how long a connection may stay open
	// without a successful host.attach before the bridge closes it.
	DefaultUnattachedTimeout = 10 * time.Second
	// DefaultMaxUnattached is how many connections may be open at once
	// without a successful host.attach; the next is closed at once.
	DefaultMaxUnattached = 32
	// refusalLogEvery spaces the log lines about connections refused for
	// the cap: the first refusal is logged at once, the rest as a count
	// per period, so a flood is a few lines, not one per connection.
	refusalLogEvery = 10 * time.Second
)

// Options configure a Server. The zero value of each field is documented.
type Options struct {
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// AllowedUID is the only uid admitted on the socket; nil means the
	// bridge's own uid. Tests set it to check refusals.
	AllowedUID *int
	// AllowedOrigins are the extension origins a host may announce in
	// host.attach ("chrome-extension://<id>/"); empty admits any origin
	// (the host itself checked it against Chrome's argv).
	AllowedOrigins []string
	// Version is reported to hosts and extensions; "" means "dev".
	Version string
	// Status fills in the parts of bridge.status the link does not know
	// (listen address, URLs, log file); nil leaves them empty.
	Status func(*protocol.StatusResult)
	// Control answers requests any local client of the user may make on
	// the socket, as it may bridge.status (`browserbridge pair`'s
	// bridge.pair), by method; each runs on its own goroutine. nil: none.
	Control map[string]func(ctx context.Context, req *jsonrpc2.Request) (any, error)
	// MCPURL is sent to the extension in the hello result.
	MCPURL string
	// Handle answers requests and notifications from a browser that the
	// link does not handle itself (everything but hello, ping and
	// bridge.status). It is only ever given a browser that said hello on a
	// link that attached. nil answers "method not found".
	Handle func(ctx context.Context, b *Browser, req *jsonrpc2.Request) (any, error)
	// OnChange is called, without locks held, after a browser connects,
	// says hello again, or leaves.
	OnChange func()
	// LiveSessions lists the MCP sessions the bridge has, for the hello
	// result: the extension releases the tab groups of sessions not listed.
	// It is called without locks held, on the link's read loop, so it must
	// be quick. nil means no sessions (an empty list is still sent).
	LiveSessions func() []protocol.SessionRef
	// UnattachedTimeout is how long a connection may stay open without a
	// successful host.attach; 0 means DefaultUnattachedTimeout.
	UnattachedTimeout time.Duration
	// MaxUnattached caps the connections open at once without a successful
	// host.attach; 0 means DefaultMaxUnattached.
	MaxUnattached int
}

// Server accepts link connections. Create it with NewServer, run it with
// Serve; Close ends every connection.
type Server struct {
	opts    Options
	log     *slog.Logger
	started time.Time
	// instance tells one bridge process from the next in the hello result;
	// the bridge makes one Server per process.
	instance string

	mu       sync.Mutex
	conns    map[*link]struct{}
	browsers map[string]*Browser // by browser id
	closed   bool
	// unattached counts the links holding a slot under MaxUnattached.
	unattached int
	// refused counts connections refused for the cap and not yet logged;
	// refusalLog, while set, will log them (see noteRefusal).
	refused         int
	refusalLog      *time.Timer
	refusalLogEvery time.Duration
}

// NewServer returns a Server with the given options.
func NewServer(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.UnattachedTimeout <= 0 {
		opts.UnattachedTimeout = DefaultUnattachedTimeout
	}
	if opts.MaxUnattached <= 0 {
		opts.MaxUnattached = DefaultMaxUnattached
	}
	return &Server{
		opts:            opts,
		log:             opts.Logger,
		started:         time.Now(),
		instance:        newInstanceID(),
		conns:           make(map[*link]struct{}),
		browsers:        make(map[string]*Browser),
		refusalLogEvery: refusalLogEvery,
	}
}

// newInstanceID returns 128 random bits in hex. crypto/rand, because an
// instance id that a later bridge could repeat would make the extension
// keep the tab groups of sessions that bridge never had.
func newInstanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read panics instead)
	return hex.EncodeToString(b[:])
}

// Instance is the random id of this bridge process sent in every hello
// result as bridgeInstance.
func (s *Server) Instance() string { return s.instance }

// Serve accepts connections on ln until ctx is cancelled or ln fails, then
// closes ln and every connection and returns. A cancelled ctx is a clean
// stop and returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer s.Close()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("accepting on the bridge socket: %w", err)
		}
		if ctx.Err() != nil {
			// The bridge is stopping: ctx has closed the links, and a host
			// that redialled at once may be accepted before the listener
			// closes. Answering it would tell the browser "connected" to a
			// bridge about to vanish, and the frames it then sends would be
			// lost with the link.
			c.Close()
			return nil
		}
		if err := s.checkPeer(c); err != nil {
			s.log.Warn("refused a connection on the bridge socket", "reason", err)
			c.Close()
			continue
		}
		ipc.Tune(c)
		s.open(ctx, c)
	}
}

// checkPeer admits only the allowed uid. Where the platform cannot tell
// (Windows), the socket directory's ACL is the guard.
func (s *Server) checkPeer(c net.Conn) error {
	uid, err := ipc.PeerUID(c)
	if errors.Is(err, ipc.ErrNoPeerCredentials) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot tell who connected: %w", err)
	}
	want := os.Getuid()
	if s.opts.AllowedUID != nil {
		want = *s.opts.AllowedUID
	}
	if uid != want {
		return fmt.Errorf("peer uid %d is not the bridge's user (uid %d)", uid, want)
	}
	return nil
}

// Close ends every connection; calls in flight fail with ErrBrowserGone.
// It is safe to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	unlogged := s.refused
	s.refused = 0
	if s.refusalLog != nil {
		s.refusalLog.Stop()
	}
	conns := make([]*link, 0, len(s.conns))
	for l := range s.conns {
		conns = append(conns, l)
	}
	s.mu.Unlock()
	if unlogged > 0 {
		s.logRefusals("refused more connections on the bridge socket", unlogged)
	}
	for _, l := range conns {
		l.conn.Close()
	}
	for _, l := range conns {
		<-l.done
	}
}

// Browsers lists the connected browsers, most recently active first.
func (s *Server) Browsers() []*Browser {
	s.mu.Lock()
	bs := make([]*Browser, 0, len(s.browsers))
	for _, b := range s.browsers {
		bs = append(bs, b)
	}
	s.mu.Unlock()
	slices.SortFunc(bs, byRecency)
	return bs
}

// byRecency orders browsers most recently active first, then by id.
func byRecency(a, b *Browser) int {
	if c := cmp.Compare(b.lastActive.Load(), a.lastActive.Load()); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// Browser returns the connected browser with the given id.
func (s *Server) Browser(id string) (*Browser, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.browsers[id]
	return b, ok
}

// Default returns the most recently active browser, if any is connected:
// the first of Browsers, found without listing them (it is asked on every
// call).
func (s *Server) Default() (*Browser, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *Browser
	for _, b := range s.browsers {
		if best == nil || byRecency(b, best) < 0 {
			best = b
		}
	}
	return best, best != nil
}

// Status reports the link's view of the bridge.
func (s *Server) Status() protocol.StatusResult {
	st := protocol.StatusResult{
		Version:  s.opts.Version,
		PID:      os.Getpid(),
		Started:  s.started.UTC().Format(time.RFC3339),
		Browsers: []protocol.BrowserInfo{},
	}
	s.mu.Lock()
	for l := range s.conns {
		if l.attach != nil {
			st.Hosts++
		}
	}
	s.mu.Unlock()
	for _, b := range s.Browsers() {
		st.Browsers = append(st.Browsers, b.Info())
	}
	if s.opts.Status != nil {
		s.opts.Status(&st)
	}
	return st
}

func (s *Server) changed() {
	if s.opts.OnChange != nil {
		s.opts.OnChange()
	}
}

// link is one accepted connection: a host, or a local client.
type link struct {
	s     *Server
	conn  *rpcstream.Conn
	ready chan struct{} // closed once conn is set: the conn dispatches before NewConn returns
	done  chan struct{}
	logp  atomic.Pointer[slog.Logger] // gains the host's pid at host.attach
	// expire closes the link if it has not attached by then.
	expire *time.Timer
	// counted says the link holds one of the MaxUnattached slots; guarded
	// by s.mu.
	counted bool

	mu      sync.Mutex
	seen    bool // a message was handled: host.attach can no longer be the first
	attach  *protocol.HostAttachParams
	refused bool // this link's host.attach was refused
	browser *Browser
}

func (s *Server) open(ctx context.Context, c net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	if s.unattached >= s.opts.MaxUnattached {
		logNow := s.noteRefusal()
		s.mu.Unlock()
		c.Close()
		if logNow {
			s.logRefusals("refused a connection on the bridge socket", 1)
		}
		return
	}
	s.unattached++
	s.mu.Unlock()

	l := &link{s: s, ready: make(chan struct{}), done: make(chan struct{}), counted: true}
	l.logp.Store(s.log)
	l.expire = time.AfterFunc(s.opts.UnattachedTimeout, func() { <-l.ready; l.expireUnattached() })
	stream := rpcstream.New(c, nativemsg.MaxLink)
	stream.OnBadMessage = func(err error) { l.log().Warn("skipped a bad message from the link", "error", err) }
	l.conn = rpcstream.NewConn(ctx, stream, l.dispatch, s.log)
	close(l.ready)

	s.mu.Lock()
	if s.closed {
		s.releaseSlot(l)
		s.mu.Unlock()
		l.expire.Stop()
		l.conn.Close()
		return
	}
	s.conns[l] = struct{}{}
	s.mu.Unlock()

	go func() {
		<-l.conn.Done()
		l.expire.Stop()
		s.mu.Lock()
		delete(s.conns, l)
		s.releaseSlot(l)
		b := l.browser
		gone := b != nil && s.browsers[b.id] == b
		if gone {
			delete(s.browsers, b.id)
		}
		s.mu.Unlock()
		if b != nil {
			b.markGone()
		}
		if gone {
			l.log().Info("browser disconnected", "browser", b.id, "name", b.Info().Name)
			s.changed()
		}
		close(l.done)
	}()
}

// noteRefusal records a connection refused for the cap. It returns true
// when the caller should log this one now; otherwise it is counted, and
// reportRefusals logs the count at the end of the period. s.mu must be
// held.
func (s *Server) noteRefusal() (logNow bool) {
	if s.refusalLog != nil {
		s.refused++
		return false
	}
	s.refusalLog = time.AfterFunc(s.refusalLogEvery, s.reportRefusals)
	return true
}

// reportRefusals logs the refusals of the period just ended, and keeps
// counting while they go on.
func (s *Server) reportRefusals() {
	s.mu.Lock()
	n := s.refused
	s.refused = 0
	if n > 0 {
		s.refusalLog.Reset(s.refusalLogEvery)
	} else {
		s.refusalLog = nil
	}
	s.mu.Unlock()
	if n > 0 {
		s.logRefusals("refused more connections on the bridge socket", n)
	}
}

func (s *Server) logRefusals(msg string, n int) {
	s.log.Warn(msg, "refused", n, "reason", fmt.Sprintf(
		"%d connections are already open without host.attach, the most the bridge keeps at once", s.opts.MaxUnattached))
}

// releaseSlot gives back l's place under MaxUnattached, once. s.mu must be
// held.
func (s *Server) releaseSlot(l *link) {
	if l.counted {
		l.counted = false
		s.unattached--
	}
}

// expireUnattached closes the link if it has not attached: a local client
// has long had its answer by then, and anything else is holding a slot
// that a host may need.
func (l *link) expireUnattached() {
	l.mu.Lock()
	attached := l.attach != nil
	l.mu.Unlock()
	if attached {
		return
	}
	l.log().Warn("closed a connection on the bridge socket that did not attach in time", "timeout", l.s.opts.UnattachedTimeout)
	l.conn.Close()
}

// log is the link's logger, safe from any goroutine.
func (l *link) log() *slog.Logger { return l.logp.Load() }

// handle answers requests from the other end. It runs on the connection's
// read loop, so slow work moves to a goroutine (see Options.Handle) while
// notifications keep their order.
func (l *link) handle(ctx context.Context, conn *rpcstream.Conn, req *jsonrpc2.Request) (any, error) {
	l.mu.Lock()
	first := !l.seen
	l.seen = true
	attached, refused := l.attach != nil, l.refused
	l.mu.Unlock()
	// What any local process of the user may do: ask, and attach.
	switch req.Method {
	case protocol.HostAttach:
		return l.handleAttach(req, first)
	case protocol.BridgeStatus:
		return l.s.Status(), nil
	case protocol.Ping:
		return struct{}{}, nil
	}
	if h := l.s.opts.Control[req.Method]; h != nil && !req.Notif {
		go func() {
			res, err := h(ctx, req)
			reply(conn, req, res, err)
		}()
		return nil, errAnswered
	}
	if !attached {
		return l.refuseUnattached(req, refused)
	}
	switch req.Method {
	case protocol.Hello:
		return l.handleHello(req)
	case protocol.HostLog:
		l.handleHostLog(req)
		return nil, nil
	}
	l.mu.Lock()
	b := l.browser
	l.mu.Unlock()
	if l.s.opts.Handle == nil || b == nil {
		if req.Notif {
			return nil, nil
		}
		hint := ""
		if b == nil {
			hint = " (a browser must send hello first)"
		}
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: fmt.Sprintf("the bridge has no method %q%s", req.Method, hint)}
	}
	b.touch()
	if req.Notif {
		return l.s.opts.Handle(ctx, b, req)
	}
	go func() {
		res, err := l.s.opts.Handle(ctx, b, req)
		reply(conn, req, res, err)
	}()
	return nil, errAnswered
}

func invalidParams(format string, args ...any) error {
	return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

func invalidRequest(format string, args ...any) error {
	return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// refuseUnattached answers what only an attached host's link may carry:
// hello and everything a browser sends. A notification cannot be answered;
// it is dropped.
func (l *link) refuseUnattached(req *jsonrpc2.Request, attachRefused bool) (any, error) {
	if req.Notif {
		l.log().Debug("dropped a notification from a connection that has not attached", "method", req.Method)
		return nil, nil
	}
	if attachRefused {
		return nil, invalidRequest("this connection's host.attach was refused, so it cannot carry a browser: %s is not accepted on it; reconnect and attach with an allowed origin", req.Method)
	}
	return nil, invalidRequest("%s is accepted only from a browser behind an attached host: send host.attach as the first message on the connection (without it, only bridge.status and ping are answered)", req.Method)
}

func (l *link) handleAttach(req *jsonrpc2.Request, first bool) (any, error) {
	l.mu.Lock()
	again := l.attach != nil
	l.mu.Unlock()
	if again {
		return nil, invalidRequest("this connection is already attached: host.attach is sent once, as the first message")
	}
	p, err := l.checkAttach(req, first)
	if err != nil {
		l.mu.Lock()
		l.refused = true
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Lock()
	l.attach = &p
	l.logp.Store(l.s.log.With("host_pid", p.PID))
	l.mu.Unlock()
	l.expire.Stop()
	l.s.mu.Lock()
	l.s.releaseSlot(l)
	l.s.mu.Unlock()
	l.log().Info("host attached", "origin", p.Origin, "host_version", p.HostVersion)
	return protocol.HostAttachResult{Protocol: protocol.Version, BridgeVersion: l.s.opts.Version, PID: os.Getpid()}, nil
}

// checkAttach validates a host.attach: first on its connection, the
// bridge's protocol, an allowed origin.
func (l *link) checkAttach(req *jsonrpc2.Request, first bool) (protocol.HostAttachParams, error) {
	var p protocol.HostAttachParams
	if !first {
		return p, invalidRequest("host.attach must be the first message on a connection: reconnect and send it first")
	}
	if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil {
		return p, invalidParams("host.attach needs params {protocol, hostVersion, pid, origin}")
	}
	if p.Protocol != protocol.Version {
		return p, invalidRequest("host speaks link protocol %d but this bridge speaks %d: install matching versions of browserbridge and browserbridge-host", p.Protocol, protocol.Version)
	}
	if len(l.s.opts.AllowedOrigins) > 0 && !slices.Contains(l.s.opts.AllowedOrigins, p.Origin) {
		l.log().Warn("refused a host for an unknown extension", "origin", p.Origin)
		return p, invalidRequest("extension origin %q is not allowed by this bridge (add it to allowed_extensions in the config)", p.Origin)
	}
	return p, nil
}

func (l *link) handleHello(req *jsonrpc2.Request) (any, error) {
	var p protocol.HelloParams
	if req.Params == nil || string(*req.Params) == "null" {
		return nil, invalidParams("hello needs params {instanceId, browser, extension}")
	}
	if err := json.Unmarshal(*req.Params, &p); err != nil {
		return nil, invalidParams("hello params: %v", err)
	}
	if err := p.Validate(); err != nil {
		return nil, invalidParams("hello: %v", err)
	}
	l.mu.Lock()
	if l.attach == nil {
		// handle refuses hello before attach; this is where a browser is
		// made, so the rule is kept here too.
		l.mu.Unlock()
		return nil, invalidRequest("hello is accepted only from a browser behind an attached host")
	}
	hostPID := l.attach.PID
	b := l.browser
	if b == nil {
		b = &Browser{link: l, id: p.InstanceID, connectedAt: time.Now()}
		l.browser = b
	}
	b.setHello(p, hostPID)
	l.mu.Unlock()

	s := l.s
	s.mu.Lock()
	old := s.browsers[b.id]
	s.browsers[b.id] = b
	s.mu.Unlock()
	if old != nil && old != b {
		// The same profile came back on a new connection before the old one
		// was seen to close: the new one wins, the old one is ended.
		l.log().Info("browser reconnected on a new link; closing the old one", "browser", b.id)
		old.link.mu.Lock()
		old.link.browser = nil
		old.link.mu.Unlock()
		old.markGone()
		old.link.conn.Close()
	}
	l.log().Info("browser connected", "browser", b.id, "name", p.Browser.Name, "version", p.Browser.Version, "profile", p.Profile)
	s.changed()
	return protocol.HelloResult{BrowserID: b.id, BridgeVersion: s.opts.Version, MCPURL: s.opts.MCPURL,
		BridgeInstance: s.instance, Sessions: s.liveSessions()}, nil
}

// liveSessions is the hello result's session list: never null, so the
// extension can tell "no sessions" from a bridge too old to say.
func (s *Server) liveSessions() []protocol.SessionRef {
	var live []protocol.SessionRef
	if s.opts.LiveSessions != nil {
		live = s.opts.LiveSessions()
	}
	if live == nil {
		live = []protocol.SessionRef{}
	}
	return live
}

func (l *link) handleHostLog(req *jsonrpc2.Request) {
	var p protocol.HostLogParams
	if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil {
		return
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(p.Level))
	args := []any{"source", "host", "host_time", p.Time}
	for k, v := range p.Attrs {
		args = append(args, k, v)
	}
	l.log().Log(context.Background(), lvl, p.Message, args...)
}

// errAnswered means the request was handed to a goroutine that replies.
var errAnswered = errors.New("answered asynchronously")

// dispatch is the link's rpcstream.Handler: it turns link.handle's
// (result, error) into a reply.
func (l *link) dispatch(ctx context.Context, conn *rpcstream.Conn, req *jsonrpc2.Request) {
	<-l.ready
	res, err := l.handle(ctx, conn, req)
	switch {
	case errors.Is(err, errAnswered):
	case req.Notif:
		if err != nil {
			l.log().Warn("handling a notification from the link", "method", req.Method, "error", err)
		}
	default:
		reply(conn, req, res, err)
	}
}

// reply answers a request with its result, or with err as a JSON-RPC error
// (its own code if it is one, -32603 otherwise). A failed write shows on
// the connection's reader, which then closes the link.
func reply(conn *rpcstream.Conn, req *jsonrpc2.Request, res any, err error) {
	if err == nil {
		_ = conn.Reply(req.ID, res)
		return
	}
	var rpcErr *jsonrpc2.Error
	if !errors.As(err, &rpcErr) {
		rpcErr = &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: err.Error()}
	}
	_ = conn.ReplyWithError(req.ID, rpcErr)
}
