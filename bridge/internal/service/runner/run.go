// Package runner runs the bridge's long-lived commands (browserbridge serve,
// browserbridge-gateway) until they finish or are asked to stop. It is apart
// from package service, which installs the bridge as a per-user service,
// because that package links kardianos/service, whose init probes the init
// system: about 0.6 MB of idle memory that a Unix process run by systemd or
// launchd does not need, since kardianos's Run there only starts, waits for
// SIGINT or SIGTERM, and stops. Only Windows, whose Service Control Manager
// needs a handshake, runs through kardianos (run_windows.go).
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// stopTimeout is how long a stop waits for run to return after cancelling its
// context. It is a variable so tests can shorten it.
var stopTimeout = 5 * time.Second

// stopSignals stop the bridge. On Windows, Go delivers console close, logoff
// and shutdown events as syscall.SIGTERM.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// Run runs the bridge: it calls run in a goroutine and returns when run
// returns, when ctx is cancelled, when the process gets SIGINT or SIGTERM, or
// when the service manager (the Windows Service Control Manager in
// particular) asks the service to stop. In the last three cases it cancels
// run's context and waits up to 5 seconds for run to return.
//
// Run returns run's error. It returns nil when run returns nil, or when run
// returns an error wrapping context.Canceled once its context is cancelled. If
// run fails by itself (its socket is already in use, say), Run returns that
// error at once, without waiting for a signal. If run does not return in
// time after a stop, Run returns an error saying so and run keeps running;
// the caller should exit promptly after Run returns in every case.
//
// A nil logger means slog.Default().
func Run(ctx context.Context, run func(ctx context.Context) error, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	p := newProgram(ctx, run, logger)
	return runProgram(ctx, p)
}

// program runs run once, with a context that Stop cancels. Start never
// blocks and Stop returns within stopTimeout. Start and Stop may be called
// from any goroutine; Stop may be called more than once and before Start.
type program struct {
	run    func(context.Context) error
	logger *slog.Logger

	ctx      context.Context // run's context
	cancel   context.CancelFunc
	started  atomic.Bool
	stopping atomic.Bool   // Stop has cancelled a running run
	done     chan struct{} // closed when run has returned
	err      error         // run's result; read only after done is closed
	canceled bool          // run's context was done when run returned; as err
}

func newProgram(ctx context.Context, run func(context.Context) error, logger *slog.Logger) *program {
	ctx, cancel := context.WithCancel(ctx)
	return &program{run: run, logger: logger, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Start launches run in a goroutine and returns at once. Calls after the first
// do nothing.
func (p *program) Start() error {
	if !p.started.CompareAndSwap(false, true) {
		return nil
	}
	go func() {
		defer close(p.done)
		p.err = p.run(p.ctx)
		p.canceled = p.ctx.Err() != nil
	}()
	return nil
}

// Stop cancels run's context, waits up to stopTimeout for run to return and
// returns the result (see result).
func (p *program) Stop() error {
	if !p.started.Load() {
		p.cancel()
		return nil
	}
	select {
	case <-p.done:
		p.cancel()
		return p.result()
	default:
	}
	if p.stopping.CompareAndSwap(false, true) {
		p.logger.Info("stopping the bridge")
	}
	p.cancel()
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.result()
	case <-timer.C:
		p.logger.Error("the bridge did not stop in time", "timeout", stopTimeout)
		return fmt.Errorf("the bridge did not stop within %v of being asked to", stopTimeout)
	}
}

// result returns run's error, or nil if that error only reports that run's
// context had been cancelled when run returned. Call it only after done is
// closed.
func (p *program) result() error {
	if p.canceled && errors.Is(p.err, context.Canceled) {
		return nil
	}
	return p.err
}

// runDirect runs p without a service manager's handshake: Start, then wait
// for run to return, ctx to end or a stop signal, then Stop. Outside Windows
// this is all a service manager needs (systemd, launchd and the others stop
// a service with SIGTERM), and the signal handler goes when runDirect returns.
func runDirect(ctx context.Context, p *program) error {
	sigCtx, stopSignal := signal.NotifyContext(ctx, stopSignals...)
	defer stopSignal()
	if err := p.Start(); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-sigCtx.Done():
	}
	return p.Stop()
}
