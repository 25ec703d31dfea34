package stdio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults applied when the matching Options field is zero.
const (
	DefaultMinBackoff  = 250 * time.Millisecond
	DefaultMaxBackoff  = 30 * time.Second
	DefaultStableAfter = 10 * time.Second
	DefaultStopGrace   = 5 * time.Second
	DefaultStderrLines = 20
	// DefaultMaxPrivate is how many per-session children one server may
	// run at once, unless its entry sets max_children.
	DefaultMaxPrivate = 8
)

// Errors of the Supervisor.
var (
	ErrUnknownServer = errors.New("no such stdio server")
	ErrShutdown      = errors.New("stdio supervisor shut down")
	// ErrUnavailable wraps the reason a server has no running child now
	// (it crashed and waits to restart, or it cannot be started).
	ErrUnavailable = errors.New("stdio server unavailable")
	// ErrTooManyChildren is wrapped by StartPrivate's error when the
	// server already runs its limit of per-session children.
	ErrTooManyChildren = errors.New("too many per-session processes")
)

// Options configures a Supervisor. The zero value is usable: every zero
// field means the default documented on it.
type Options struct {
	// Logger receives lifecycle events and every stderr line of every
	// child, with the attribute server=name. nil discards.
	Logger *slog.Logger
	// MinBackoff is the delay before the first restart after a crash
	// (0: DefaultMinBackoff); it doubles after each further crash up to
	// MaxBackoff (0: DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// StableAfter is how long a child must run for its next crash to be
	// treated as the first again (backoff back to MinBackoff).
	// 0 means DefaultStableAfter.
	StableAfter time.Duration
	// StopGrace is how long a stopped child's group has between SIGTERM
	// and SIGKILL. 0 means DefaultStopGrace.
	StopGrace time.Duration
	// MaxMessageSize bounds one message read from a child.
	// 0 means DefaultMaxMessageSize (64 MiB).
	MaxMessageSize int
	// StderrLines is how many last stderr lines State keeps per server.
	// 0 means DefaultStderrLines.
	StderrLines int
	// Environ is the environment children inherit, before their config's
	// env is added. nil means os.Environ().
	Environ []string
	// MaxPrivate bounds the per-session children (StartPrivate) of a
	// server whose entry sets no max_children. 0 means DefaultMaxPrivate.
	MaxPrivate int
}

// Status is the state of a server's shared child.
type Status string

// Statuses reported by State.
const (
	// StatusStopped: not started yet (lazy) or stopped by Shutdown.
	StatusStopped Status = "stopped"
	// StatusStarting: the process is being started.
	StatusStarting Status = "starting"
	// StatusRunning: the child runs; State.PID is its pid.
	StatusRunning Status = "running"
	// StatusBackoff: the child exited; a restart is due at State.NextStart.
	StatusBackoff Status = "backoff"
	// StatusFailed: the command could not be started (State.LastError
	// says why); it is retried with the same backoff, at State.NextStart.
	StatusFailed Status = "failed"
)

// ExitInfo is how a child last ended, as reported in State.
type ExitInfo struct {
	PID    int           `json:"pid"`
	Code   int           `json:"code"`             // -1 when killed by a signal
	Signal string        `json:"signal,omitempty"` // "SIGKILL"
	Reason string        `json:"reason"`           // "killed by signal SIGKILL"
	Time   time.Time     `json:"time"`
	Ran    time.Duration `json:"ran_ns"`
}

// State is a truthful snapshot of one server, for /health and /metrics.
type State struct {
	Name   string `json:"name"`
	Status Status `json:"state"`
	// PID of the shared child while running, else 0.
	PID int `json:"pid,omitempty"`
	// Restarts counts the starts after the first (after a crash or a
	// failure to start).
	Restarts int `json:"restarts"`
	// Since is when Status last changed.
	Since time.Time `json:"since"`
	// NextStart is when the next start is due (backoff and failed only).
	NextStart time.Time `json:"next_start,omitzero"`
	// LastExit is how the shared child last ended, nil if it never did.
	LastExit *ExitInfo `json:"last_exit,omitempty"`
	// LastError is why the last start failed ("" after a good start).
	LastError string `json:"last_error,omitempty"`
	// LastStderr holds the last stderr lines of the server's children,
	// oldest first, with env values redacted.
	LastStderr []string `json:"last_stderr,omitempty"`
	// Private counts running per-session children (StartPrivate).
	Private int `json:"private"`
}

// Supervisor runs the shared child of each configured server, restarting
// it with capped exponential backoff after it exits, and per-session
// children on request. The set of servers changes only through Reload.
// All methods are safe for concurrent use.
type Supervisor struct {
	opts   Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// servers is an immutable map, replaced whole by Reload under mu, so
	// that the lookup on every Conn takes no lock.
	servers atomic.Pointer[map[string]*server]

	reloadMu sync.Mutex // one Reload at a time

	mu       sync.Mutex
	started  bool
	shutdown bool
	private  map[*Conn]*server
}

// server is the supervised state of one entry. Lock order: Supervisor.mu
// before server.mu.
type server struct {
	sup    *Supervisor
	name   string
	kick   chan struct{} // first use of a lazy server
	reload chan struct{} // the config changed; see gen
	ctx    context.Context
	cancel context.CancelFunc // the server was removed
	exited chan struct{}      // closed when run returns

	launched bool // run was started; guarded by Supervisor.mu

	mu  sync.Mutex
	cfg ServerConfig
	// gen counts the config changes that need a new child (see
	// needsRestart); a child of an older gen is stopped and replaced.
	gen       int
	changed   chan struct{} // closed and replaced on every change
	status    Status
	pid       int
	conn      *Conn
	restarts  int
	since     time.Time
	nextStart time.Time
	lastExit  *ExitInfo
	lastError string
	stderr    []string // ring of the last lines
	private   int
}

// NewSupervisor returns a Supervisor for servers (as from ParseServers). No
// process starts before Start.
func NewSupervisor(servers map[string]ServerConfig, opts Options) (*Supervisor, error) {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.StableAfter <= 0 {
		opts.StableAfter = DefaultStableAfter
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if opts.StderrLines <= 0 {
		opts.StderrLines = DefaultStderrLines
	}
	if opts.MaxPrivate <= 0 {
		opts.MaxPrivate = DefaultMaxPrivate
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	checked, err := checkServers(servers)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{
		opts:    opts,
		log:     log,
		ctx:     ctx,
		cancel:  cancel,
		private: make(map[*Conn]*server),
	}
	m := make(map[string]*server, len(checked))
	for name, cfg := range checked {
		m[name] = s.newServer(cfg)
	}
	s.servers.Store(&m)
	return s, nil
}

// newServer returns the stopped state of a checked entry.
func (s *Supervisor) newServer(cfg ServerConfig) *server {
	ctx, cancel := context.WithCancel(s.ctx)
	return &server{
		sup:     s,
		name:    cfg.Name,
		kick:    make(chan struct{}, 1),
		reload:  make(chan struct{}, 1),
		ctx:     ctx,
		cancel:  cancel,
		exited:  make(chan struct{}),
		cfg:     cfg,
		changed: make(chan struct{}),
		status:  StatusStopped,
		since:   time.Now(),
	}
}

// snapshot returns the current servers; the map must not be modified.
func (s *Supervisor) snapshot() map[string]*server { return *s.servers.Load() }

// lookup returns server name, or an error wrapping ErrUnknownServer.
func (s *Supervisor) lookup(name string) (*server, error) {
	if sv, ok := s.snapshot()[name]; ok {
		return sv, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownServer, name)
}

// launchLocked starts sv's supervision; s.mu must be held and the
// Supervisor started and not shut down.
func (s *Supervisor) launchLocked(sv *server) {
	sv.launched = true
	s.wg.Add(1)
	go sv.run(sv.ctx)
}

// Start starts the supervision of every server: boot servers start now,
// lazy ones on first Conn. It does not wait for any child and is a no-op
// after the first call.
func (s *Supervisor) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.shutdown {
		return
	}
	s.started = true
	for _, sv := range s.snapshot() {
		s.launchLocked(sv)
	}
}

// Names returns the configured server names, sorted.
func (s *Supervisor) Names() []string {
	return sortedKeys(s.snapshot())
}

func sortedKeys[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Config returns a server's entry. The caller may modify the copy.
func (s *Supervisor) Config(name string) (ServerConfig, bool) {
	sv, ok := s.snapshot()[name]
	if !ok {
		return ServerConfig{}, false
	}
	cfg, _ := sv.config()
	return cloneConfig(cfg), true
}

// config returns the current entry (not to be modified) and its gen.
func (sv *server) config() (ServerConfig, int) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.cfg, sv.gen
}

// Conn returns the running shared child of server name, starting it first
// if it is lazy and not started yet, and waiting while it starts. If the
// server has no child now (crashed and waiting to restart, or failing to
// start), Conn returns at once an error wrapping ErrUnavailable that says
// why and when the next start is due, rather than making callers wait out
// the backoff. The returned Conn is shared: callers must not Close it
// except to force a restart. A Reload that changes or removes the server
// ends the Conn (Done) like a crash would.
func (s *Supervisor) Conn(ctx context.Context, name string) (*Conn, error) {
	sv, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	down, started := s.shutdown, s.started
	s.mu.Unlock()
	if down {
		return nil, ErrShutdown
	}
	if !started {
		return nil, fmt.Errorf("stdio server %q: supervisor not started", name)
	}
	if sv.ctx.Err() != nil { // removed by a Reload since the lookup
		return nil, fmt.Errorf("%w: %q", ErrUnknownServer, name)
	}
	select {
	case sv.kick <- struct{}{}:
	default:
	}
	for {
		sv.mu.Lock()
		status, conn, changed := sv.status, sv.conn, sv.changed
		err := sv.unavailableLocked()
		sv.mu.Unlock()
		switch status {
		case StatusRunning:
			return conn, nil
		case StatusBackoff, StatusFailed:
			return nil, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("stdio server %q (%s): %w", name, status, ctx.Err())
		case <-sv.ctx.Done():
			if s.ctx.Err() != nil {
				return nil, ErrShutdown
			}
			return nil, fmt.Errorf("%w: %q", ErrUnknownServer, name)
		}
	}
}

func (sv *server) unavailableLocked() error {
	why := sv.lastError
	if why == "" && sv.lastExit != nil {
		why = sv.lastExit.Reason
	}
	return fmt.Errorf("%w: %q %s (%s); next start in %s", ErrUnavailable, sv.name, sv.status, why,
		time.Until(sv.nextStart).Round(time.Millisecond))
}

// StartPrivate starts an extra child of server name for one session (the
// per_session option), whatever its start mode. It is not restarted when
// it exits; the caller ends it with Close, and Shutdown ends it too. Its
// stderr goes to the log and the server's LastStderr like the shared one's.
// A Reload that changes or removes the server ends it.
//
// A server runs at most max_children (else Options.MaxPrivate) such
// children at once, counted until each has exited: beyond that
// StartPrivate fails at once with an error wrapping ErrTooManyChildren.
func (s *Supervisor) StartPrivate(ctx context.Context, name string) (*Conn, error) {
	sv, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Under s.mu, so that a concurrent Reload either sees this child in
	// s.private (and stops it) or has already set the new config.
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return nil, ErrShutdown
	}
	if sv.ctx.Err() != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrUnknownServer, name)
	}
	cfg, _ := sv.config()
	limit := cfg.MaxChildren
	if limit == 0 {
		limit = s.opts.MaxPrivate
	}
	sv.mu.Lock()
	running := sv.private
	sv.mu.Unlock()
	if running >= limit {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: stdio server %q already runs %d processes, one per session, which is its limit (max_children): end one of those sessions (DELETE) or try again later",
			ErrTooManyChildren, name, running)
	}
	c, err := sv.spawn(cfg)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.private[c] = sv
	// Counted under s.mu, with the check: concurrent starts cannot both
	// take the last place.
	sv.update(func() { sv.private++ })
	s.mu.Unlock()
	s.log.Info("stdio server started for a session", "server", name, "pid", c.PID())
	go func() {
		<-c.Done()
		s.mu.Lock()
		delete(s.private, c)
		s.mu.Unlock()
		sv.update(func() { sv.private-- })
		s.log.Info("stdio server for a session ended", "server", name, "pid", c.PID(), "reason", c.err.Reason())
	}()
	return c, nil
}

// State returns the state of server name.
func (s *Supervisor) State(name string) (State, bool) {
	sv, ok := s.snapshot()[name]
	if !ok {
		return State{}, false
	}
	return sv.state(), true
}

// States returns the state of every server, sorted by name.
func (s *Supervisor) States() []State {
	servers := s.snapshot()
	out := make([]State, 0, len(servers))
	for _, n := range sortedKeys(servers) {
		out = append(out, servers[n].state())
	}
	return out
}

// Shutdown stops every child, shared and private, and their process
// groups (SIGTERM, then SIGKILL after StopGrace), and returns when all
// have exited, or with ctx's error if ctx ends first. Later calls to Conn
// and StartPrivate fail with ErrShutdown. It is safe to call twice.
func (s *Supervisor) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	private := make([]*Conn, 0, len(s.private))
	for c := range s.private {
		private = append(private, c)
	}
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, c := range private {
			wg.Add(1)
			go func() { defer wg.Done(); _ = c.Close() }()
		}
		wg.Wait()
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stdio supervisor shutdown: %w", ctx.Err())
	}
}

// run supervises the shared child until ctx ends (Shutdown, or the server
// was removed by Reload).
func (sv *server) run(ctx context.Context) {
	defer sv.sup.wg.Done()
	defer close(sv.exited)
	log, o := sv.sup.log.With("server", sv.name), sv.sup.opts
	if !sv.waitFirstUse(ctx) {
		return
	}
	delay := o.MinBackoff
	for {
		cfg, gen := sv.config()
		sv.setStatus(StatusStarting, nil)
		c, err := sv.spawn(cfg)
		if err != nil {
			log.Error("stdio server failed to start", "config", cfg, "err", err, "retry_in", delay)
			sv.setStatus(StatusFailed, func() {
				sv.lastError = err.Error()
				sv.nextStart = time.Now().Add(delay)
			})
		} else {
			log.Info("stdio server started", "pid", c.PID(), "config", cfg)
			sv.setStatus(StatusRunning, func() {
				sv.pid, sv.conn, sv.lastError = c.PID(), c, ""
			})
			reloaded := sv.waitChild(ctx, c, gen)
			e := c.err
			info := &ExitInfo{PID: e.PID, Code: e.Code, Signal: e.Signal, Reason: e.Reason(), Time: e.Time, Ran: e.Ran}
			switch {
			case ctx.Err() != nil:
				log.Info("stdio server stopped", "pid", e.PID, "reason", info.Reason)
				sv.setStatus(StatusStopped, func() { sv.pid, sv.conn, sv.lastExit = 0, nil, info })
				return
			case reloaded:
				// Not a crash: start the new config at once, backoff reset.
				log.Info("stdio server stopped for its new config", "pid", e.PID, "reason", info.Reason)
				sv.setStatus(StatusStarting, func() { sv.pid, sv.conn, sv.lastExit = 0, nil, info })
				delay = o.MinBackoff
				continue
			}
			if e.Ran >= o.StableAfter {
				delay = o.MinBackoff
			}
			log.Warn("stdio server exited; restarting", "pid", e.PID, "reason", info.Reason, "ran", e.Ran.Round(time.Millisecond), "restart_in", delay)
			sv.setStatus(StatusBackoff, func() {
				sv.pid, sv.conn, sv.lastExit = 0, nil, info
				sv.nextStart = time.Now().Add(delay)
			})
		}
		switch sv.waitBackoff(ctx, delay, gen) {
		case backoffStopped:
			sv.setStatus(StatusStopped, nil)
			return
		case backoffReloaded:
			delay = o.MinBackoff
			continue
		}
		delay = min(delay*2, o.MaxBackoff)
		sv.update(func() { sv.restarts++ })
	}
}

// waitFirstUse waits until a lazy server is first used (Conn) or its
// start mode becomes boot (Reload); false means ctx ended first.
func (sv *server) waitFirstUse(ctx context.Context) bool {
	for {
		if cfg, _ := sv.config(); cfg.startMode() == StartBoot {
			return true
		}
		select {
		case <-sv.kick:
			return true
		case <-sv.reload:
		case <-ctx.Done():
			return false
		}
	}
}

// waitChild waits until the child c, started from config gen, ends. It
// stops c when ctx ends or the config moves past gen, and then reports
// whether a config change (rather than a crash or ctx) ended it.
func (sv *server) waitChild(ctx context.Context, c *Conn, gen int) (reloaded bool) {
	for {
		select {
		case <-c.Done():
			return sv.genNow() != gen && ctx.Err() == nil
		case <-ctx.Done():
			_ = c.Close()
			return false
		case <-sv.reload:
			if sv.genNow() != gen {
				_ = c.Close()
				return ctx.Err() == nil
			}
		}
	}
}

type backoffEnd int

const (
	backoffElapsed  backoffEnd = iota // the delay passed
	backoffStopped                    // ctx ended
	backoffReloaded                   // the config moved past gen
)

// waitBackoff waits out delay before the next start.
func (sv *server) waitBackoff(ctx context.Context, delay time.Duration, gen int) backoffEnd {
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return backoffElapsed
		case <-ctx.Done():
			return backoffStopped
		case <-sv.reload:
			if sv.genNow() != gen {
				return backoffReloaded
			}
		}
	}
}

func (sv *server) genNow() int {
	_, gen := sv.config()
	return gen
}

// spawn starts one child of the server with cfg.
func (sv *server) spawn(cfg ServerConfig) (*Conn, error) {
	o := sv.sup.opts
	log := sv.sup.log.With("server", sv.name)
	scrub := secretScrubber(cfg.Env)
	return spawn(cfg, spawnOptions{
		environ: o.Environ,
		maxMsg:  o.MaxMessageSize,
		grace:   o.StopGrace,
		onStderr: func(pid int, line string) {
			line = scrub.Replace(line)
			log.Info("stdio server stderr", "pid", pid, "line", line)
			sv.update(func() {
				sv.stderr = append(sv.stderr, line)
				if n := len(sv.stderr) - o.StderrLines; n > 0 {
					sv.stderr = append(sv.stderr[:0], sv.stderr[n:]...)
				}
			})
		},
	})
}

// minSecretLen is the shortest env value scrubbed from stderr lines:
// shorter ones ("1", "true") would garble every line without hiding much.
const minSecretLen = 4

// secretScrubber replaces env values in what a child writes to stderr, in
// case a server echoes its own configuration.
func secretScrubber(env map[string]string) *strings.Replacer {
	var secrets []string
	for _, v := range env {
		if len(v) >= minSecretLen {
			secrets = append(secrets, v)
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, v := range secrets {
		pairs = append(pairs, v, redactedValue)
	}
	return strings.NewReplacer(pairs...)
}

func (sv *server) update(f func()) {
	sv.mu.Lock()
	f()
	sv.mu.Unlock()
}

// setStatus changes the status, applies f under the lock and wakes waiters.
func (sv *server) setStatus(st Status, f func()) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.setStatusLocked(st, f)
}

// setStatusLocked is setStatus with sv.mu held.
func (sv *server) setStatusLocked(st Status, f func()) {
	sv.status, sv.since = st, time.Now()
	if st != StatusBackoff && st != StatusFailed {
		sv.nextStart = time.Time{}
	}
	if f != nil {
		f()
	}
	close(sv.changed)
	sv.changed = make(chan struct{})
}

func (sv *server) state() State {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	st := State{
		Name:       sv.name,
		Status:     sv.status,
		PID:        sv.pid,
		Restarts:   sv.restarts,
		Since:      sv.since,
		NextStart:  sv.nextStart,
		LastError:  sv.lastError,
		LastStderr: append([]string(nil), sv.stderr...),
		Private:    sv.private,
	}
	if sv.lastExit != nil {
		e := *sv.lastExit
		st.LastExit = &e
	}
	return st
}
