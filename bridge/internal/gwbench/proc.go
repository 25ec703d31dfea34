package gwbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Process shutdown: SIGTERM to the process group, stopGrace to exit, then
// SIGKILL to the group and to every descendant seen before the SIGTERM
// (gateways put their servers in process groups of their own).
const (
	stopGrace = 3 * time.Second
	killWait  = 2 * time.Second
)

// A process is a target's process, started in a process group of its own.
type process struct {
	cmd    *exec.Cmd
	tail   *tailBuffer   // the end of its output, for error messages
	exited chan struct{} // closed when it has exited and been waited for
	once   sync.Once
}

// startProcess starts cmd; its stdout and stderr, unless set, go to the
// process's tail buffer.
func startProcess(cmd *exec.Cmd) (*process, error) {
	p := &process{cmd: cmd, tail: &tailBuffer{max: 4 << 10}, exited: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = p.tail
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.tail
	}
	setProcAttrs(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop ends the process, its group and its descendants, and waits for the
// process; safe to call twice.
func (p *process) stop() {
	p.once.Do(func() {
		kids, _ := descendants(p.pid())
		select {
		case <-p.exited:
		default:
			signalGroup(p.cmd, false)
			select {
			case <-p.exited:
			case <-time.After(stopGrace):
			}
			signalGroup(p.cmd, true)
			select {
			case <-p.exited:
			case <-time.After(killWait):
			}
		}
		for _, k := range kids {
			k.kill()
		}
	})
}

// exitError describes how a process that should still run ended.
func (p *process) exitError() error {
	msg := "exited"
	if st := p.cmd.ProcessState; st != nil {
		msg = st.String()
	}
	if out := p.tail.lastLines(3); out != "" {
		msg += ": " + out
	}
	return errors.New(msg)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until addr accepts connections, p exits, or ctx ends.
func waitListening(ctx context.Context, addr string, p *process) error {
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to listen: %w", addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// firstLine returns the first non-empty line kept.
func (t *tailBuffer) firstLine() string {
	for l := range strings.Lines(t.String()) {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// lastLines returns the last n non-empty lines, joined by " | ".
func (t *tailBuffer) lastLines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	for _, l := range strings.Split(string(t.buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
