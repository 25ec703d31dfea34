//go:build !windows

package runner

import "context"

// runProgram runs p directly. kardianos/service's Run on every Unix init
// system it supports (systemd, SysV, upstart, OpenRC, rc.d, procd, launchd,
// and the BSDs', Solaris's and AIX's) calls Start, waits for SIGINT or
// SIGTERM and calls Stop, which is what runDirect does, with a wait that also
// ends when run fails by itself or ctx is cancelled.
func runProgram(ctx context.Context, p *program) error {
	return runDirect(ctx, p)
}
