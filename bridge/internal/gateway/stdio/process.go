package stdio

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
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

// spawn starts cfg's command in a process group of its own (see reaper)
// and returns its connection. Done on the Conn is closed after the child
// exited, every process left in its group (and, on Linux, every other
// process it started, see family_linux.go) was killed and stdout was
// drained.
func spawn(cfg ServerConfig, o spawnOptions) (*Conn, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Cwd
	cmd.Env = childEnv(o.environ, cfg.Env)
	c := &Conn{
		server: cfg.Name,
		start:  time.Now(),
		in:     make(chan []byte, 16),
	}
	// The readers and onExit run after cmd.Start, so cmd.Process is set.
	rio := reaperIO{
		Stdout: func(r io.Reader, abandon <-chan struct{}) error {
			return readMessages(r, o.maxMsg, c.in, abandon)
		},
		Stderr: func(r io.Reader) {
			pid := cmd.Process.Pid
			readLines(r, func(line string) { o.onStderr(pid, line) })
		},
	}
	onExit := func(e reaperExit) {
		c.err = &ExitError{
			Server:  cfg.Name,
			PID:     cmd.Process.Pid,
			Code:    e.State.ExitCode(),
			Signal:  exitSignal(e.State),
			Stopped: e.Stopped,
			Cause:   e.Cause,
			Time:    time.Now(),
			Ran:     time.Since(c.start),
		}
		close(c.in)
	}
	r, err := startReaper(cmd, rio, o.grace, onExit)
	if err != nil {
		return nil, err
	}
	c.pid = r.PID()
	c.stdin = r.Stdin()
	c.done = r.done
	c.stop = r.Stop
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
