package stdio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// drainWait is how long, after the child exited and its group was killed,
// the readers wait for stdout and stderr to end before giving up on them (a
// process that left the group may still hold the pipes).
const drainWait = 2 * time.Second

// maxStderrLine bounds one logged stderr line; the rest of a longer line is
// dropped.
const maxStderrLine = 4 << 10

// spawnOptions are what spawn needs from the Supervisor.
type spawnOptions struct {
	environ  []string
	maxMsg   int
	grace    time.Duration
	onStderr func(pid int, line string) // called from one goroutine per child
}

// spawn starts cfg's command with its own process group and returns its
// connection. Done on the Conn is closed after the child exited, every
// process left in its group (and, on Linux, every other process it
// started, see family_linux.go) was killed and stdout was drained.
func spawn(cfg ServerConfig, o spawnOptions) (*Conn, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Cwd
	cmd.Env = childEnv(o.environ, cfg.Env)
	cmd.SysProcAttr = sysProcAttr()
	// The marker finds what the child starts outside its process group
	// (on Linux; see family_linux.go).
	marker, markerEnv := newFamilyMarker()
	if markerEnv != "" {
		cmd.Env = append(cmd.Env, markerEnv)
	}

	// Our own pipes, not cmd.StdoutPipe: Wait must not close the read ends
	// while grandchildren may still write, and must not wait for them either.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	closeAll(inR, outW, errW) // the child's ends
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, fmt.Errorf("starting %q: %w", cfg.Command, err)
	}

	fam := newFamily(cmd.Process.Pid, marker)
	c := &Conn{
		server: cfg.Name,
		pid:    cmd.Process.Pid,
		start:  time.Now(),
		stdin:  inW,
		in:     make(chan []byte, 16),
		done:   make(chan struct{}),
	}
	abandon := make(chan struct{})
	readDone := make(chan error, 1)
	go func() { readDone <- readMessages(outR, o.maxMsg, c.in, abandon) }()
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		readLines(errR, func(line string) { o.onStderr(c.pid, line) })
	}()

	var stopped atomic.Bool
	exited := make(chan struct{})
	c.stop = func() {
		stopped.Store(true)
		// The MCP stdio shutdown sequence: close stdin, SIGTERM, SIGKILL.
		// Not under wmu: closing unblocks a Send stuck on a full pipe.
		_ = inW.Close()
		_ = terminateGroup(cmd.Process)
		fam.terminate()
		t := time.NewTimer(o.grace)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			_ = killGroup(cmd.Process)
		}
	}

	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()
	go func() {
		var cause error
		readFinished := false
		select {
		case <-waitDone:
		case cause = <-readDone:
			readFinished = true
			// stdout ended before the process: a message too large, or a
			// child that closed stdout. Either way the connection is
			// over; give the child the grace period to exit.
			if cause != nil {
				_ = killGroup(cmd.Process)
			}
			select {
			case <-waitDone:
			case <-time.After(o.grace):
				_ = killGroup(cmd.Process)
				<-waitDone
			}
		}
		close(exited)
		// The leader is gone; whatever it spawned in its group goes too,
		// and (on Linux) what it started outside the group.
		_ = killGroup(cmd.Process)
		fam.stop()
		if !readFinished {
			select {
			case cause = <-readDone:
			case <-time.After(drainWait):
				close(abandon)
				_ = outR.Close()
				cause = <-readDone
			}
		}
		select {
		case <-stderrDone:
		case <-time.After(drainWait):
			_ = errR.Close()
			<-stderrDone
		}
		closeAll(outR, errR)
		_ = inW.Close()

		ps := cmd.ProcessState
		e := &ExitError{
			Server:  cfg.Name,
			PID:     c.pid,
			Code:    ps.ExitCode(),
			Signal:  exitSignal(ps),
			Stopped: stopped.Load(),
			Time:    time.Now(),
			Ran:     time.Since(c.start),
		}
		if cause != nil && !errors.Is(cause, os.ErrClosed) {
			e.Cause = cause
		}
		c.err = e
		close(c.in)
		close(c.done)
	}()
	return c, nil
}

// childEnv is base plus extra, extra winning, in a stable order.
func childEnv(base []string, extra map[string]string) []string {
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, override := extra[k]; !override {
			env = append(env, kv)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// readLines calls f with each line of r (without its newline), lines longer
// than maxStderrLine cut short, until r ends.
func readLines(r io.Reader, f func(string)) {
	br := bufio.NewReaderSize(r, maxStderrLine)
	skipping := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			if !skipping {
				f(strings.TrimRight(string(chunk), "\r") + " [line cut]")
			}
			skipping = true
			continue
		case skipping:
			skipping = false
		default:
			if line := strings.TrimRight(string(chunk), "\r\n"); line != "" {
				f(line)
			}
		}
		if err != nil {
			return
		}
	}
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}
