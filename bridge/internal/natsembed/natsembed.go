// Package natsembed runs a NATS server with JetStream inside the process,
// for one-box deployments of the proxy cluster (`browserbridge-proxy serve
// --nats embedded`) and for tests that need a real NATS, alone or as a
// cluster of several servers (docs/proxy-cluster.md).
//
// A Server can be stopped and started again on the same ports and store
// (Stop, Restart), which is how a test takes NATS down mid-load: clients
// connected with Connect reconnect by themselves once it is back.
package natsembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// DefaultReadyTimeout is Options.ReadyTimeout's default.
const DefaultReadyTimeout = 30 * time.Second

// ErrStopped: the server is stopped (Stop or Shutdown) and takes no
// connection until Restart.
var ErrStopped = errors.New("the embedded NATS server is stopped")

// Options configure an embedded server. The zero value is one server
// reachable only from inside the process, with JetStream in a temporary
// directory.
type Options struct {
	// Name is the server's name, unique within a cluster. Default
	// "browserbridge".
	Name string
	// Listen is the client listener, host:port (port 0: a free port, kept
	// across Restart). "": only in-process connections (Connect); a
	// clustered server then listens on a loopback port all the same, which
	// nats-server needs before it starts its routes.
	Listen string
	// StoreDir keeps JetStream's files. "": a temporary directory, removed
	// by Shutdown (kept across Stop and Restart).
	StoreDir string
	// Cluster names the cluster of embedded servers; required with
	// ClusterListen.
	Cluster string
	// ClusterListen is the route listener, host:port (port 0: a free port,
	// kept across Restart). "": not clustered.
	ClusterListen string
	// Routes are the route URLs (nats-route://host:port) of the cluster's
	// servers; this server's own may be among them. JetStream in a cluster
	// needs at least one.
	Routes []string
	// Logger receives the server's log: notices at Debug, warnings at Warn,
	// errors at Error. Nil: discarded.
	Logger *slog.Logger
	// ReadyTimeout bounds how long Start waits for the listeners and
	// JetStream. Default DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Auth, if set, is required of every client (in-process ones too) and
	// every route. Without it, a Listen or ClusterListen beyond loopback is
	// refused: nobody on the network may reach an open server.
	Auth *Auth
}

// Auth is the user and password check of an embedded server.
type Auth struct {
	// Check reports whether a user and password may connect, as a client
	// or as a route. Required.
	Check func(user, password string) bool
	// Current returns the user and password of this server's own routes
	// and of Connect's clients, asked at each (re)connection so that a
	// rotation (another password) reaches them. Required.
	Current func() (user, password string)
}

// customAuth is Auth as nats-server's custom authentication.
type customAuth struct {
	check func(user, password string) bool
}

func (a customAuth) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	return o != nil && a.check(o.Username, o.Password)
}

// isLoopback reports whether a listen host only takes this machine's
// connections.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server is an embedded NATS server. Its methods are safe for concurrent
// use.
type Server struct {
	mu        sync.Mutex
	opts      Options // with the ports Start resolved, for Restart
	ns        *server.Server
	tempStore string // removed by Shutdown
	closed    bool
}

// Start starts a server and returns once it takes connections and, alone,
// once JetStream is enabled. A clustered server's JetStream needs a quorum
// of its cluster, which may not be up yet: WaitJetStream waits for it.
func Start(opts Options) (*Server, error) {
	if opts.Name == "" {
		opts.Name = "browserbridge"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.ClusterListen != "" && opts.Cluster == "" {
		return nil, errors.New("natsembed: a clustered server needs a cluster name (Cluster)")
	}
	if opts.ClusterListen == "" && (opts.Cluster != "" || len(opts.Routes) > 0) {
		return nil, errors.New("natsembed: a cluster name and routes need a route listener (ClusterListen)")
	}
	if opts.Auth != nil && (opts.Auth.Check == nil || opts.Auth.Current == nil) {
		return nil, errors.New("natsembed: Auth needs both Check and Current")
	}
	if opts.Auth == nil {
		for _, l := range []struct{ name, addr string }{{"client listener", opts.Listen}, {"route listener", opts.ClusterListen}} {
			if l.addr == "" {
				continue
			}
			if host, _, err := net.SplitHostPort(l.addr); err == nil && !isLoopback(host) {
				return nil, fmt.Errorf("natsembed: the %s %s is reachable beyond this machine and has no authentication: anyone who reaches it could read and write the cluster's bus; set Auth, or listen on loopback", l.name, l.addr)
			}
		}
	}
	s := &Server{opts: opts}
	if opts.StoreDir == "" {
		dir, err := os.MkdirTemp("", "browserbridge-nats-")
		if err != nil {
			return nil, fmt.Errorf("natsembed: JetStream's directory: %w", err)
		}
		s.tempStore, s.opts.StoreDir = dir, dir
	}
	if err := s.start(); err != nil {
		s.removeTemp()
		return nil, err
	}
	return s, nil
}

// start starts s.opts's server. The caller holds s.mu or owns s alone.
func (s *Server) start() error {
	o := s.opts
	sopts := &server.Options{
		ServerName: o.Name,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoSigs:     true, // the process's signals are its owner's
		NoLog:      true, // SetLoggerV2 below instead
	}
	switch {
	case o.Listen == "" && o.ClusterListen != "":
		// nats-server starts routing only once its client listener is up,
		// so a clustered server needs one: on loopback, at a port of its
		// own choosing, and unnamed (Connect stays in-process).
		sopts.Host, sopts.Port = "127.0.0.1", server.RANDOM_PORT
	case o.Listen == "":
		sopts.DontListen = true
	default:
		host, port, err := splitHostPort("Listen", o.Listen)
		if err != nil {
			return err
		}
		sopts.Host, sopts.Port = host, port
	}
	if o.ClusterListen != "" {
		host, port, err := splitHostPort("ClusterListen", o.ClusterListen)
		if err != nil {
			return err
		}
		sopts.Cluster = server.ClusterOpts{Name: o.Cluster, Host: host, Port: port}
		for _, r := range o.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Host == "" {
				return fmt.Errorf("natsembed: route %q is not a URL like nats-route://host:6222", r)
			}
			if o.Auth != nil && u.User == nil {
				u.User = url.UserPassword(o.Auth.Current())
			}
			sopts.Routes = append(sopts.Routes, u)
		}
	}
	if o.Auth != nil {
		sopts.CustomClientAuthentication = customAuth{o.Auth.Check}
		sopts.CustomRouterAuthentication = customAuth{o.Auth.Check}
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		return fmt.Errorf("natsembed: %w", err)
	}
	logs := &logAdapter{log: o.Logger}
	debug := o.Logger != nil && o.Logger.Enabled(context.Background(), slog.LevelDebug)
	ns.SetLoggerV2(logs, debug, false, false)
	ns.Start()
	// In short steps: a listener that cannot bind is logged as fatal at
	// once, and waiting out the whole timeout after it helps nobody.
	for deadline := time.Now().Add(o.ReadyTimeout); !ns.ReadyForConnections(50 * time.Millisecond); {
		if fatal := logs.fatal(); fatal != "" || time.Now().After(deadline) {
			ns.Shutdown()
			ns.WaitForShutdown()
			return fmt.Errorf("natsembed: server %s was not ready for connections within %v: %s", o.Name, o.ReadyTimeout, logs.lastError())
		}
	}
	if o.ClusterListen == "" && !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return fmt.Errorf("natsembed: server %s started without JetStream: %s", o.Name, logs.lastError())
	}
	// Keep the ports a random choice resolved to, so Restart comes back
	// where clients and routes look for it.
	if a, ok := ns.Addr().(*net.TCPAddr); ok && o.Listen != "" {
		s.opts.Listen = net.JoinHostPort(sopts.Host, strconv.Itoa(a.Port))
	}
	if a := ns.ClusterAddr(); a != nil {
		s.opts.ClusterListen = net.JoinHostPort(sopts.Cluster.Host, strconv.Itoa(a.Port))
	}
	s.ns = ns
	return nil
}

func splitHostPort(field, hostport string) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, fmt.Errorf("natsembed: %s %q: %w", field, hostport, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("natsembed: %s %q: the port is not a number from 0 to 65535", field, hostport)
	}
	if port == 0 {
		port = server.RANDOM_PORT // nats-server reads 0 as its default port
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// Options returns the server's options with the ports Start chose.
func (s *Server) Options() Options {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.opts
	o.Routes = append([]string(nil), o.Routes...)
	return o
}

// Name returns the server's name.
func (s *Server) Name() string { return s.Options().Name }

// ClientURL returns nats://host:port of the client listener, or "" for a
// server without one. It stays the same across Restart.
func (s *Server) ClientURL() string { return listenURL("nats", s.Options().Listen) }

// RouteURL returns nats-route://host:port of the route listener, or ""
// for a server outside a cluster.
func (s *Server) RouteURL() string { return listenURL("nats-route", s.Options().ClusterListen) }

// listenURL is scheme://host:port for a listen address, with a wildcard
// host made loopback (a URL to dial, not to bind); "" for no address.
func listenURL(scheme, listen string) string {
	if listen == "" {
		return ""
	}
	host, port, _ := net.SplitHostPort(listen)
	if host == "0.0.0.0" || host == "::" || host == "" {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// InProcessConn connects to the running server through a pipe; it is what
// nats.InProcessServer calls on every (re)connect, so in-process clients
// follow a Restart too.
func (s *Server) InProcessConn() (net.Conn, error) {
	s.mu.Lock()
	ns := s.ns
	s.mu.Unlock()
	if ns == nil {
		return nil, ErrStopped
	}
	return ns.InProcessConn()
}

var _ nats.InProcessConnProvider = (*Server)(nil)

// Connect connects a client: through ClientURL when the server listens,
// in-process otherwise. It reconnects forever, every 100ms, unless opts
// say otherwise (they come after these defaults).
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}
	if a := s.Options().Auth; a != nil {
		all = append(all, nats.UserInfoHandler(a.Current))
	}
	u := s.ClientURL()
	if u == "" {
		// The URL only names the connection; InProcessServer replaces dialing.
		u = "nats://in-process"
		all = append(all, nats.InProcessServer(s))
	}
	return nats.Connect(u, append(all, opts...)...)
}

// WaitJetStream waits until the server's JetStream is usable: at once
// alone; in a cluster, once the cluster has elected its meta leader and
// this server follows it.
func (s *Server) WaitJetStream(ctx context.Context) error {
	return waitFor(ctx, func() (bool, error) {
		_, current, err := s.jetStreamCurrent()
		return current, err
	}, "server "+s.Name()+"'s JetStream to join its cluster's meta leader")
}

// jetStreamCurrent returns the running nats-server and whether its
// JetStream is usable (alone, or following its cluster's meta leader);
// ErrStopped when the server is not running.
func (s *Server) jetStreamCurrent() (*server.Server, bool, error) {
	s.mu.Lock()
	ns := s.ns
	s.mu.Unlock()
	if ns == nil {
		return nil, false, ErrStopped
	}
	return ns, ns.JetStreamEnabled() && ns.JetStreamIsCurrent(), nil
}

// WaitJetStreamPeers waits, as WaitJetStream, and until this server's view
// of the JetStream cluster holds n servers online, the leader included: a
// stream or bucket with n replicas can be placed only then (nats-server
// answers "no suitable peers for placement" before).
func (s *Server) WaitJetStreamPeers(ctx context.Context, n int) error {
	return waitFor(ctx, func() (bool, error) {
		ns, current, err := s.jetStreamCurrent()
		if !current {
			return false, err
		}
		if !ns.JetStreamIsClustered() {
			return n <= 1, nil
		}
		info, err := ns.Jsz(&server.JSzOptions{})
		if err != nil || info.Meta == nil || info.Meta.Leader == "" {
			return false, nil
		}
		// A follower's list leaves itself out.
		online := map[string]bool{info.Meta.Leader: true, ns.Name(): true}
		for _, p := range info.Meta.Replicas {
			if p != nil && !p.Offline {
				online[p.Name] = true
			}
		}
		return len(online) >= n, nil
	}, fmt.Sprintf("%d JetStream servers online in server %s's cluster", n, s.Name()))
}

// waitFor polls cond until it holds, fails, or ctx ends. Polling, because
// nats-server offers no notification of these states.
func waitFor(ctx context.Context, cond func() (bool, error), what string) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("natsembed: waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natsembed: waiting for %s: %w", what, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// Stop shuts the server down and waits for it, keeping its ports and
// store for Restart. Its clients see a disconnect. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	ns := s.ns
	s.ns = nil
	s.mu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// Restart starts the server again on the same ports and store (after Stop,
// or stopping it first), and returns once it takes connections.
func (s *Server) Restart() error {
	s.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("natsembed: Restart after Shutdown")
	}
	if s.ns != nil { // a concurrent Restart won
		return nil
	}
	return s.start()
}

// Shutdown stops the server for good and removes its temporary store. Safe
// to call twice.
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.Stop()
	s.removeTemp()
}

func (s *Server) removeTemp() {
	if s.tempStore != "" {
		os.RemoveAll(s.tempStore)
	}
}

// logAdapter passes nats-server's log to slog, and keeps its last error
// for Start's message. nats-server calls Fatalf for a listener that
// cannot bind; it must not end the process here.
type logAdapter struct {
	log            *slog.Logger
	mu             sync.Mutex
	last, fatalMsg string
}

func (l *logAdapter) record(level slog.Level, format string, v []any, fatal bool) {
	msg := fmt.Sprintf(format, v...)
	if level >= slog.LevelError {
		l.mu.Lock()
		l.last = msg
		if fatal {
			l.fatalMsg = msg
		}
		l.mu.Unlock()
	}
	if l.log != nil {
		l.log.Log(context.Background(), level, msg)
	}
}

// fatal returns the message of a fatal error logged, if any.
func (l *logAdapter) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatalMsg
}

func (l *logAdapter) lastError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == "" {
		return "no error logged"
	}
	return l.last
}

func (l *logAdapter) Noticef(format string, v ...any) { l.record(slog.LevelDebug, format, v, false) }
func (l *logAdapter) Warnf(format string, v ...any)   { l.record(slog.LevelWarn, format, v, false) }
func (l *logAdapter) Fatalf(format string, v ...any)  { l.record(slog.LevelError, format, v, true) }
func (l *logAdapter) Errorf(format string, v ...any)  { l.record(slog.LevelError, format, v, false) }
func (l *logAdapter) Debugf(format string, v ...any)  { l.record(slog.LevelDebug, format, v, false) }
func (l *logAdapter) Tracef(format string, v ...any)  { l.record(slog.LevelDebug-4, format, v, false) }

var _ server.Logger = (*logAdapter)(nil)
