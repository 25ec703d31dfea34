package runner

import (
	"context"
	"fmt"

	kservice "github.com/kardianos/service"

	"github.com/browserbridge/browserbridge/bridge/internal/service"
)

// scmProgram lets kardianos drive p under the Windows Service Control
// Manager: the SCM's stop request arrives as a call to Stop.
type scmProgram struct{ p *program }

var _ kservice.Interface = scmProgram{}

func (a scmProgram) Start(kservice.Service) error { return a.p.Start() }
func (a scmProgram) Stop(kservice.Service) error  { return a.p.Stop() }

// runConfig is the kardianos configuration used to run, not install, the
// service: only the name matters.
func runConfig() *kservice.Config {
	return &kservice.Config{
		Name:        service.Name,
		DisplayName: service.DisplayName,
		Description: service.Description,
		Option:      kservice.KeyValue{},
	}
}

// runProgram runs p on Windows.
//
// From a console (kservice.Interactive), kardianos would wait for Ctrl+C only,
// with no way to end the wait when run fails or ctx is cancelled, so p runs
// directly with its own signal handling instead.
//
// Under the Service Control Manager, kardianos's Run must perform the SCM
// handshake and then blocks in the service control dispatcher until the SCM
// sends a stop; it has no RunWait option here. It therefore runs in a
// goroutine. When the SCM stops the service, Run returns Stop's result. When
// run fails by itself or ctx is cancelled, runProgram returns without waiting
// for the dispatcher: the process exits next without reporting "stopped",
// which the SCM treats as a failure and answers with the recovery action that
// Config sets (restart).
func runProgram(ctx context.Context, p *program) error {
	if kservice.Interactive() {
		return runDirect(ctx, p)
	}
	s, err := kservice.New(scmProgram{p}, runConfig())
	if err != nil {
		return fmt.Errorf("setting up the service runner (%s): %w", kservice.Platform(), err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Run() }()
	select {
	case err := <-errc:
		// The SCM stopped the service, or the handshake failed (then err
		// says why and run may never have started).
		if err != nil {
			p.cancel()
			return fmt.Errorf("running as a Windows service: %w", err)
		}
		return p.result()
	case <-p.done:
		return p.Stop()
	case <-ctx.Done():
		return p.Stop()
	}
}
