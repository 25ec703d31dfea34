package stdio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"time"
)

// A reaper owns one child process, started by startReaper, from its start
// until every trace of it is gone.
//
// The child runs in a process group of its own (on Windows, a process
// tree; see proc_*.go) and, on Linux, is followed as a family, which also
// finds what it started outside its group (family_linux.go). Its stdout and
// stderr go to the readers the caller gives (reaperIO), each in its own
// goroutine; stdin is the caller's to write (Stdin).
//
// Contract:
//
//   - The reaper alone waits for the child (cmd.Wait, in a goroutine of
//     its own). Nobody else may call Wait or signal the child's process.
//   - The child's end is either its exit, or its stdout ending first (a
//     read error, or a child that closed stdout): then the child has the
//     grace period to exit (none after a read error) before its group is
//     killed.
//   - Once the child has exited, on Linux every member of its family is
//     killed, then every process left in its group. Then stdout
//     and stderr are drained: their readers run until the pipes end, or
//     drainWait more, after which the pipes are closed under them (a
//     process that left the group may still hold their write ends).
//   - Then onExit is called, once, and Done is closed. By then the other
//     goroutines startReaper started (the stdout reader, the stderr
//     reader, the waiter) have returned; the reaper goroutine returns
//     right after. None outlives the child's end.
//   - Stop asks the child to exit: it closes stdin, sends SIGTERM to the
//     group and the family, and kills the group if the child has not
//     exited within the grace period. It returns when the child has exited
//     or been killed; Done follows once the child is reaped and its pipes
//     drained. Stop may be called any number of times, from any goroutine,
//     before or after the child exited by itself.
type reaper struct {
	cmd   *exec.Cmd
	fam   *family // nil outside Linux
	grace time.Duration
	stdin *os.File // our end of the child's stdin

	stopped atomic.Bool   // Stop was called
	exited  chan struct{} // closed once cmd.Wait returned
	done    chan struct{} // closed after onExit
	exit    reaperExit    // set before done is closed

	// The reaper goroutine's own.
	stdout, stderr *os.File      // our ends, closed by the reaper
	abandon        chan struct{} // closed to make the stdout reader give up
	readDone       chan error    // the stdout reader's result
	stderrDone     chan struct{} // closed when the stderr reader returned
	waitDone       chan error    // cmd.Wait's result
}

// reaperIO are the readers of a child's output. Each runs in a goroutine
// of its own and must return when its reader ends.
type reaperIO struct {
	// Stdout reads the child's stdout. It must also return when abandon
	// is closed (nobody will take what it reads any more). What it
	// returns is the exit's Cause, unless it is nil or os.ErrClosed (the
	// reaper closed the pipe).
	Stdout func(r io.Reader, abandon <-chan struct{}) error
	// Stderr reads the child's stderr.
	Stderr func(r io.Reader)
}

// reaperExit tells how a child ended.
type reaperExit struct {
	State   *os.ProcessState // from cmd.Wait
	Cause   error            // what ended stdout early, if anything
	Stopped bool             // Stop was called
}

// startReaper starts cmd, with pipes for its stdin, stdout and stderr, in a
// process group of its own, and hands it to a reaper. cmd must not have
// been started and must leave its standard streams and SysProcAttr unset.
// onExit, if not nil, is called from the reaper goroutine just before Done
// is closed. The errors name the command.
func startReaper(cmd *exec.Cmd, rio reaperIO, grace time.Duration, onExit func(reaperExit)) (*reaper, error) {
	cmd.SysProcAttr = sysProcAttr()
	// The marker finds what the child starts outside its process group
	// (on Linux; see family_linux.go).
	marker, markerEnv := newFamilyMarker()
	if markerEnv != "" {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, markerEnv)
	}

	// Our own pipes, not cmd.StdoutPipe: Wait must not close the read ends
	// while grandchildren may still write, and must not wait for them either.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting %q: creating its stdin: %w", cmd.Args[0], err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("starting %q: creating its stdout: %w", cmd.Args[0], err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("starting %q: creating its stderr: %w", cmd.Args[0], err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	closeAll(inR, outW, errW) // the child's ends
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, fmt.Errorf("starting %q: %w", cmd.Args[0], err)
	}

	r := &reaper{
		cmd:        cmd,
		fam:        newFamily(cmd.Process.Pid, marker),
		grace:      grace,
		stdin:      inW,
		exited:     make(chan struct{}),
		done:       make(chan struct{}),
		stdout:     outR,
		stderr:     errR,
		abandon:    make(chan struct{}),
		readDone:   make(chan error, 1),
		stderrDone: make(chan struct{}),
		waitDone:   make(chan error, 1),
	}
	go func() { r.readDone <- rio.Stdout(outR, r.abandon) }()
	go func() {
		defer close(r.stderrDone)
		rio.Stderr(errR)
	}()
	go func() { r.waitDone <- cmd.Wait() }()
	go r.reap(onExit)
	return r, nil
}

// PID returns the child's process id (also its process group id on unix).
func (r *reaper) PID() int { return r.cmd.Process.Pid }

// Stdin returns our end of the child's stdin. The reaper closes it when
// the child is stopped or reaped.
func (r *reaper) Stdin() io.WriteCloser { return r.stdin }

// Done is closed when the child has exited, its group and family were
// killed, its output was drained and onExit has returned.
func (r *reaper) Done() <-chan struct{} { return r.done }

// Exit waits for Done and tells how the child ended.
func (r *reaper) Exit() reaperExit {
	<-r.done
	return r.exit
}

// Stop is the MCP stdio shutdown sequence: close stdin, SIGTERM, SIGKILL
// after the grace period. See the type's contract.
func (r *reaper) Stop() {
	r.stopped.Store(true)
	// Closing stdin unblocks a writer stuck on a full pipe.
	_ = r.stdin.Close()
	// The family first: it records the members it signals, among them the
	// group's, which the group signal could otherwise turn into zombies
	// nobody knows to reap (once the child is gone, they are the bridge's).
	r.fam.terminate()
	_ = terminateGroup(r.cmd.Process)
	t := time.NewTimer(r.grace)
	defer t.Stop()
	select {
	case <-r.exited:
	case <-t.C:
		_ = killGroup(r.cmd.Process)
	}
}

// reap is the reaper goroutine: it follows the child to its end, cleans up
// after it and signals Done.
func (r *reaper) reap(onExit func(reaperExit)) {
	cause, stdoutEnded := r.awaitExit()
	close(r.exited)
	// The leader is gone; what it started goes too: on Linux its family
	// first, which records what it kills for reaping (see Stop), then
	// whatever is left in its group.
	r.fam.stop()
	_ = killGroup(r.cmd.Process)
	if !stdoutEnded {
		cause = r.drainStdout()
	}
	r.drainStderr()
	closeAll(r.stdout, r.stderr)
	_ = r.stdin.Close()

	r.exit = reaperExit{State: r.cmd.ProcessState, Stopped: r.stopped.Load()}
	if cause != nil && !errors.Is(cause, os.ErrClosed) {
		r.exit.Cause = cause
	}
	if onExit != nil {
		onExit(r.exit)
	}
	close(r.done)
}

// awaitExit returns when cmd.Wait has. If stdout ended first, the child
// is given the grace period to exit (and killed at once if the reader
// failed), then its group is killed; the reader's result is returned with
// stdoutEnded true.
func (r *reaper) awaitExit() (cause error, stdoutEnded bool) {
	select {
	case <-r.waitDone:
		return nil, false
	case cause = <-r.readDone:
	}
	if cause != nil {
		_ = killGroup(r.cmd.Process)
	}
	t := time.NewTimer(r.grace)
	defer t.Stop()
	select {
	case <-r.waitDone:
	case <-t.C:
		_ = killGroup(r.cmd.Process)
		<-r.waitDone
	}
	return cause, true
}

// drainStdout waits up to drainWait for the stdout reader to reach the
// end of the pipe, then makes it give up, and returns its result.
func (r *reaper) drainStdout() error {
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case err := <-r.readDone:
		return err
	case <-t.C:
		close(r.abandon)
		_ = r.stdout.Close()
		return <-r.readDone
	}
}

// drainStderr waits up to drainWait for the stderr reader to reach the
// end of the pipe, then closes the pipe under it and waits for it.
func (r *reaper) drainStderr() {
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case <-r.stderrDone:
	case <-t.C:
		_ = r.stderr.Close()
		<-r.stderrDone
	}
}
