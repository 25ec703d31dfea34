package gwbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// Options configure Run. Every zero value means the default it names.
type Options struct {
	// Sessions are the session counts measured; nil means 1, 10, 50.
	Sessions []int
	// Rounds is how many times every row runs (each round all session
	// counts and targets again); the report gives the medians. 0 means 1.
	Rounds int
	// Duration is the measured part of each row; 0 means 5s.
	Duration time.Duration
	// Warmup is the unmeasured load before it; 0 means 1s, negative none.
	Warmup time.Duration
	// Targets names the targets to run, in any order (the report keeps
	// TargetNames' order); nil means all.
	Targets []string
	// Root is the repository (for tools/npm and bin/); "" means the working
	// directory.
	Root string
	// Node is the Node.js binary; "" means the machine's node if it is
	// at least 22.19, else tools/npm's (as scripts/install-test-tools.sh).
	Node string
	// Browserbridge is the browserbridge binary; "" means Root/bin/browserbridge.
	Browserbridge string
	// GatewayURL, when set, is the Streamable HTTP URL of an already running
	// browserbridge gateway to measure instead of starting one; GatewayPID,
	// when not 0, is its process, for RSS.
	GatewayURL string
	GatewayPID int
	// TBXark is TBXark's mcp-proxy binary; "" means build it with go
	// install into a temporary directory when a tbxark target runs.
	TBXark string
	// CallTimeout bounds one call; 0 means 10s.
	CallTimeout time.Duration
	// SetupTimeout bounds starting a target and opening its sessions; 0
	// means 60s (a gateway with a server per session starts 50 node
	// processes on a row).
	SetupTimeout time.Duration
	// Progress receives a line per step; nil means none.
	Progress io.Writer
}

// Defaults.
const (
	defaultDuration     = 5 * time.Second
	defaultWarmup       = time.Second
	defaultCallTimeout  = 10 * time.Second
	defaultSetupTimeout = 60 * time.Second
	// idleSettle is the pause between opening the sessions and the idle
	// RSS sample.
	idleSettle = 300 * time.Millisecond
	// errorBackoff is the pause after a failed call, so that a dead target
	// is not hammered by a busy loop.
	errorBackoff = 50 * time.Millisecond
)

var defaultSessions = []int{1, 10, 50}

func (o *Options) setDefaults() {
	if o.Sessions == nil {
		o.Sessions = defaultSessions
	}
	if o.Rounds == 0 {
		o.Rounds = 1
	}
	if o.Duration == 0 {
		o.Duration = defaultDuration
	}
	if o.Warmup == 0 {
		o.Warmup = defaultWarmup
	} else if o.Warmup < 0 {
		o.Warmup = 0
	}
	if o.Targets == nil {
		o.Targets = TargetNames()
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = defaultCallTimeout
	}
	if o.SetupTimeout == 0 {
		o.SetupTimeout = defaultSetupTimeout
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Validate reports the first option that cannot work.
func (o *Options) Validate() error {
	for _, n := range o.Sessions {
		if n < 1 || n > 10000 {
			return fmt.Errorf("session count %d: want 1 to 10000", n)
		}
	}
	if o.Rounds < 0 || o.Rounds > 100 {
		return fmt.Errorf("rounds %d: want 1 to 100", o.Rounds)
	}
	if o.Duration < 0 {
		return fmt.Errorf("duration %v: want more than 0", o.Duration)
	}
	for _, t := range o.Targets {
		if !slices.Contains(TargetNames(), t) {
			return fmt.Errorf("unknown target %q (targets: %s)", t, strings.Join(TargetNames(), ", "))
		}
	}
	if o.GatewayPID != 0 && o.GatewayURL == "" {
		return errors.New("a gateway pid needs a gateway url")
	}
	return nil
}

// Run measures the chosen targets and writes the report to out. It stops
// every process it started before it returns, also when ctx is cancelled
// (then the report holds the rows done so far and Run returns ctx's error).
func Run(ctx context.Context, opts Options, out io.Writer) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	opts.setDefaults()
	e, err := discover(&opts)
	if err != nil {
		return err
	}
	defer os.RemoveAll(e.tmp)

	maxSessions := slices.Max(opts.Sessions)
	tr := &http.Transport{
		Proxy:               nil, // the targets are local, whatever HTTP_PROXY says
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2*maxSessions + 16, // a POST per session, plus SSE streams
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	b := &bench{opts: opts, env: e, client: &http.Client{Transport: tr}, tr: tr}

	// Rounds outer, then session counts, targets inner: the rows compared
	// with each other run minutes apart at most, under the same load from
	// others.
	var rows []row
	skipped := map[string]bool{}
	for round := 1; round <= opts.Rounds; round++ {
		for _, n := range opts.Sessions {
			for _, t := range targets {
				if !slices.Contains(opts.Targets, t.name) || skipped[t.name] || ctx.Err() != nil {
					continue
				}
				fmt.Fprintf(opts.Progress, "gwbench: round %d, %s, %d sessions\n", round, t.name, n)
				r := b.runRow(ctx, t, n)
				r.round = round
				rows = append(rows, r)
				tr.CloseIdleConnections()
				fmt.Fprintf(opts.Progress, "gwbench: round %d, %s, %d sessions: %s\n", round, t.name, n, r.summary())
				if r.skip != "" {
					skipped[t.name] = true // the same reason for every session count
				}
			}
		}
	}
	pairRatios(rows)
	b.report(out, rows)
	return ctx.Err()
}

// bench holds what every row shares.
type bench struct {
	opts   Options
	env    *env
	client *http.Client
	tr     *http.Transport
}

// discover finds node, the npm packages and the browserbridge binary.
func discover(o *Options) (*env, error) {
	root := o.Root
	if root == "" {
		root = "."
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	e := &env{root: root, npm: filepath.Join(root, "tools", "npm", "node_modules"),
		bb: o.Browserbridge, tbxark: o.TBXark, gatewayURL: o.GatewayURL, gatewayPID: o.GatewayPID, pkgs: map[string]npmPackage{}}
	if e.bb == "" {
		e.bb = filepath.Join(root, "bin", "browserbridge")
	}
	for _, p := range []struct{ name, bin string }{
		{"@modelcontextprotocol/server-everything", "mcp-server-everything"},
		{"supergateway", "supergateway"},
		{"mcp-proxy", "mcp-proxy"},
	} {
		v, entry, err := packageInfo(filepath.Join(e.npm, filepath.FromSlash(p.name)), p.bin)
		e.pkgs[p.name] = npmPackage{version: v, entry: entry, err: err}
	}
	se := e.pkgs["@modelcontextprotocol/server-everything"]
	if se.err != nil {
		return nil, fmt.Errorf("server-everything: %w", se.err)
	}
	e.entry = se.entry
	if o.Node != "" {
		out, err := execOutput(o.Node, "--version")
		if err != nil {
			return nil, fmt.Errorf("--node %s: %w", o.Node, err)
		}
		e.node, e.nodeVer = o.Node, out
	} else if e.node, e.nodeVer, err = findNode(e.root); err != nil {
		return nil, err
	}
	if e.tmp, err = os.MkdirTemp("", "gwbench-"); err != nil {
		return nil, err
	}
	return e, nil
}

// A row is one target at one session count.
type row struct {
	target   string
	sessions int
	round    int      // from 1
	rounds   int      // in a row combining rounds: how many were measured
	argv     []string // how the target was started; nil if not by us

	skip string // why the target did not run
	fail string // why the row has no figures

	calls     int // answered rightly within the measured window
	duration  time.Duration
	lat       latencies
	misrouted int64
	errors    int
	firstErr  string

	setup      time.Duration // median time to open one session (initialize, initialized)
	idle, peak memSample
	// cpuPerCall is the CPU time per call, in µs, of the client, the
	// gateway and the servers below it (for direct: -1, and the server);
	// -1 unknown.
	cpuPerCall [3]float64
	direct     bool // the measured process is the server, not a gateway

	// Ratios to direct-sdk and to TBXark's (tbxark-sdk for an SDK row) in
	// the same round and at the same session count; 0 without that row.
	xDirect, xTBX, p99xDirect float64
}

// measured tells a row that ran to the end (it may have had errors).
func (r *row) measured() bool { return r.skip == "" && r.fail == "" }

func (r *row) summary() string {
	switch {
	case r.skip != "":
		return "skipped: " + r.skip
	case r.fail != "":
		return "failed: " + r.fail
	}
	return fmt.Sprintf("%.0f calls/s, p50 %s, p99 %s, %d misrouted, %d errors",
		r.rate(), formatDuration(r.lat.p50), formatDuration(r.lat.p99), r.misrouted, r.errors)
}

func (r *row) rate() float64 { return float64(r.calls) / r.duration.Seconds() }

// A worker runs one closed loop of calls on a session.
type worker struct {
	s   session
	idx int // the s<idx> of its messages
}

func (b *bench) runRow(ctx context.Context, t target, n int) (r row) {
	r = row{target: t.name, sessions: n, duration: b.opts.Duration, direct: t.transport == viaStdio}
	lctx, cancel := context.WithTimeout(ctx, b.opts.SetupTimeout)
	defer cancel()
	inst, err := t.launch(lctx, b.env)
	if errors.Is(err, errSkip) {
		r.skip = strings.TrimPrefix(err.Error(), errSkip.Error()+": ")
		return r
	}
	if err != nil {
		r.fail = "starting: " + err.Error()
		return r
	}
	defer inst.stop()
	r.argv = inst.argv

	// One session opened and ended first, unmeasured, so that every gateway
	// has its server running and initialized (some start it with the first
	// session, some before they listen) and setup times the sessions alone.
	if t.transport == viaStreamable {
		if s, err := openStreamable(lctx, b.client, inst.url, 0); err == nil {
			s.close()
		}
	}
	sessions, workers, setups, err := b.openSessions(lctx, t, inst, n)
	defer func() {
		for _, s := range sessions {
			s.close()
		}
	}()
	if err != nil {
		r.fail = fmt.Sprintf("opening sessions: %v", err)
		if inst.proc != nil && inst.proc.tail.lastLines(1) != "" {
			r.fail += " (its output: " + inst.proc.tail.lastLines(2) + ")"
		}
		return r
	}
	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
		r.fail = "interrupted"
		return r
	}
	r.setup = summarise(setups).p50
	r.idle = sampleMem(inst.pid)
	for _, s := range sessions {
		s.replies().misrouted.Store(0)
	}

	sampler := startSampler(inst.pid)
	res := b.load(ctx, workers, inst.pid)
	r.peak = sampler.finish()
	for _, s := range sessions {
		r.misrouted += s.replies().misrouted.Load()
	}
	r.calls, r.lat, r.errors = len(res.lat), summarise(res.lat), res.errs
	r.cpuPerCall = res.cpu.perCall(r.calls, r.direct)
	if res.firstErr != nil {
		r.firstErr = res.firstErr.Error()
	}
	if ctx.Err() != nil {
		r.fail, r.calls = "interrupted", 0
	}
	return r
}

// openSessions opens n sessions on inst and returns them with their
// workers and the time each session took to open.
func (b *bench) openSessions(ctx context.Context, t target, inst *instance, n int) ([]session, []worker, []time.Duration, error) {
	workers := make([]worker, n)
	if t.transport == viaStdio {
		t0 := time.Now()
		var (
			s   session
			err error
		)
		if t.sdk {
			s, err = openSDKStdio(ctx, inst.in, inst.out)
		} else {
			s, err = openStdio(ctx, inst.in, inst.out)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		inst.out = nil // the session owns it now
		for i := range workers {
			workers[i] = worker{s: s, idx: i + 1}
		}
		return []session{s}, workers, []time.Duration{time.Since(t0)}, nil
	}
	sessions := make([]session, n)
	setups := make([]time.Duration, n)
	g, gctx := errgroup.WithContext(ctx)
	for i := range n {
		g.Go(func() error {
			t0 := time.Now()
			var (
				s   session
				err error
			)
			switch {
			case t.sdk:
				s, err = openSDKStreamable(gctx, b.client, inst.url, t.sdkVersion)
			case t.transport == viaSSE:
				s, err = openSSE(gctx, b.client, inst.url, i+1)
			default:
				s, err = openStreamable(gctx, b.client, inst.url, i+1)
			}
			if err != nil {
				return fmt.Errorf("session %d: %w", i+1, err)
			}
			setups[i] = time.Since(t0)
			sessions[i] = s
			return nil
		})
	}
	err := g.Wait()
	opened := slices.DeleteFunc(sessions, func(s session) bool { return s == nil })
	if err != nil {
		return opened, nil, nil, err
	}
	for i, s := range sessions {
		workers[i] = worker{s: s, idx: i + 1}
	}
	return sessions, workers, setups, nil
}

// loadResult is what load measured.
type loadResult struct {
	lat      []time.Duration // the calls answered rightly within the window
	errs     int             // failed calls, warm-up included
	firstErr error
	cpu      cpuUse // CPU time of this process, the target and those below it, in the window
}

// load runs every worker's closed loop for the warm-up and the measured
// window; pid is the target's process, whose CPU time is measured with the
// client's.
func (b *bench) load(ctx context.Context, workers []worker, pid int) loadResult {
	start := time.Now()
	from := start.Add(b.opts.Warmup)
	to := from.Add(b.opts.Duration)
	cpuDone := make(chan cpuUse, 1)
	go func() {
		// Sampled at the window's edges, so that the CPU time and the calls
		// counted cover the same span.
		time.Sleep(time.Until(from))
		first := sampleCPU(pid)
		time.Sleep(time.Until(to))
		cpuDone <- first.to(sampleCPU(pid))
	}()
	type result struct {
		lat      []time.Duration
		errs     int
		firstErr error
	}
	results := make([]result, len(workers))
	done := make(chan int)
	for i, w := range workers {
		go func() {
			defer func() { done <- i }()
			res := &results[i]
			for {
				t0 := time.Now()
				if !t0.Before(to) || ctx.Err() != nil {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, b.opts.CallTimeout)
				err := w.s.call(cctx, w.idx)
				cancel()
				t1 := time.Now()
				switch {
				case err == nil:
					if !t1.Before(from) && t1.Before(to) {
						res.lat = append(res.lat, t1.Sub(t0))
					}
				case errors.Is(err, errMisrouted):
					// counted by the session's mux
				default:
					if ctx.Err() != nil {
						return
					}
					res.errs++
					if res.firstErr == nil {
						res.firstErr = err
					}
					select {
					case <-time.After(errorBackoff):
					case <-ctx.Done():
					}
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	var (
		lat      []time.Duration
		errs     int
		firstErr error
	)
	for _, r := range results {
		lat = append(lat, r.lat...)
		errs += r.errs
		if firstErr == nil {
			firstErr = r.firstErr
		}
	}
	var cpu cpuUse
	select {
	case cpu = <-cpuDone:
	case <-ctx.Done():
		cpu = cpuUse{client: -1, target: -1, kids: -1}
	}
	return loadResult{lat: lat, errs: errs, firstErr: firstErr, cpu: cpu}
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return strings.TrimSpace(string(out)), err
}

// cpuNote says what the client shares the machine with.
func cpuNote() string {
	return fmt.Sprintf("%d CPUs, GOMAXPROCS %d", runtime.NumCPU(), runtime.GOMAXPROCS(0))
}
