//go:build !windows

package service

import (
	"context"
	"fmt"
	"os/signal"

	kservice "github.com/kardianos/service"
)

// runProgram runs p through kardianos's Service.Run, whether or not a service
// manager started the process. On Unix systems Run calls Start, then blocks
// until a SIGINT or SIGTERM, then calls Stop. Blocking only on signals would
// leave Run waiting forever when run fails by itself or ctx is cancelled, so
// the RunWait option replaces that wait with one that also ends when run
// returns or ctx is done; because the signals are caught through a context
// that is released on return, no signal handler outlives Run.
func runProgram(ctx context.Context, p *program) error {
	sigCtx, stopSignal := signal.NotifyContext(ctx, stopSignals...)
	defer stopSignal()

	cfg := runConfig()
	cfg.Option["RunWait"] = func() {
		select {
		case <-p.done:
		case <-sigCtx.Done():
		}
	}
	s, err := kservice.New(p, cfg)
	if err != nil {
		return fmt.Errorf("setting up the service runner (%s): %w", kservice.Platform(), err)
	}
	// Run returns Stop's result, which is run's result.
	return s.Run()
}
