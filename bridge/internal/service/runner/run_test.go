package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var errSocketInUse = errors.New("listen unix /tmp/bridge.sock: address already in use")

// runners are the two ways Run can drive a program: the platform's way
// (through kardianos for a Windows service, directly elsewhere) and directly
// (a Windows console).
var runners = []struct {
	name string
	run  func(context.Context, *program) error
}{
	{"platform", runProgram},
	{"direct", runDirect},
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// runAsync calls run through runner in a goroutine and returns its result
// channel.
func runAsync(ctx context.Context, runner func(context.Context, *program) error, run func(context.Context) error) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- runner(ctx, newProgram(ctx, run, quietLogger())) }()
	return errc
}

func wait(t *testing.T, errc <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(within):
		t.Fatalf("Run still running after %v", within)
		return nil
	}
}

func TestRunReturnsRunErrorPromptly(t *testing.T) {
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			errc := runAsync(t.Context(), r.run, func(context.Context) error {
				return fmt.Errorf("listening: %w", errSocketInUse)
			})
			if err := wait(t, errc, 2*time.Second); !errors.Is(err, errSocketInUse) {
				t.Errorf("Run = %v, want the run error", err)
			}
		})
	}
}

func TestRunReturnsNilWhenRunEnds(t *testing.T) {
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			errc := runAsync(t.Context(), r.run, func(context.Context) error { return nil })
			if err := wait(t, errc, 2*time.Second); err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		})
	}
}

func TestRunStopsWhenContextCancelled(t *testing.T) {
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			started := make(chan struct{})
			sawCancel := make(chan struct{})
			errc := runAsync(ctx, r.run, func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				close(sawCancel)
				return fmt.Errorf("serving: %w", ctx.Err())
			})
			<-started
			cancel()
			if err := wait(t, errc, 2*time.Second); err != nil {
				t.Errorf("Run = %v, want nil for a cancelled run", err)
			}
			select {
			case <-sawCancel:
			default:
				t.Error("Run returned before run saw its context cancelled")
			}
		})
	}
}

func TestRunPublicAPI(t *testing.T) {
	old := slog.Default()
	slog.SetDefault(quietLogger())
	defer slog.SetDefault(old)

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	running := make(chan struct{})
	go func() {
		errc <- Run(ctx, func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			return nil
		}, nil) // nil logger means slog.Default()
	}()
	<-running
	cancel()
	if err := wait(t, errc, 2*time.Second); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}

	err := Run(t.Context(), func(context.Context) error { return errSocketInUse }, quietLogger())
	if !errors.Is(err, errSocketInUse) {
		t.Errorf("Run = %v, want the run error", err)
	}
}

func TestRunStopTimeout(t *testing.T) {
	old := stopTimeout
	stopTimeout = 100 * time.Millisecond
	defer func() { stopTimeout = old }()

	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{})
	errc := runAsync(ctx, runProgram, func(context.Context) error {
		close(started)
		<-release // ignores its context
		return nil
	})
	<-started
	cancel()
	err := wait(t, errc, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "did not stop") {
		t.Errorf("Run = %v, want a did-not-stop error", err)
	}
}

func TestProgramStopBeforeStart(t *testing.T) {
	p := newProgram(t.Context(), func(context.Context) error { return nil }, quietLogger())
	if err := p.Stop(); err != nil {
		t.Errorf("Stop before Start = %v, want nil", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop = %v, want nil", err)
	}
}

func TestProgramCanceledWithoutStopIsAnError(t *testing.T) {
	// A run that returns context.Canceled of its own accord, with its
	// context still live, has failed.
	p := newProgram(t.Context(), func(context.Context) error { return context.Canceled }, quietLogger())
	p.Start()
	<-p.done
	if err := p.Stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop = %v, want context.Canceled", err)
	}
}
