package stdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// DefaultMaxMessageSize is the largest message a Conn reads from a child
// when Options.MaxMessageSize is 0. No fixed scanner buffer is involved:
// messages grow as needed up to this bound.
const DefaultMaxMessageSize = 64 << 20

// readBufferSize is the bufio buffer under the line reader; longer lines
// are assembled from several ReadSlice calls.
const readBufferSize = 64 << 10

// ErrMessageTooLarge is the cause in Conn.Err when a child wrote a line
// longer than the maximum message size. The child is then stopped: the
// stream cannot be resynchronised without dropping a reply.
var ErrMessageTooLarge = errors.New("message larger than the maximum message size")

// ErrClosed is returned by Send after the child's connection has ended.
var ErrClosed = errors.New("stdio server connection closed")

// Conn is the connection to one child process: newline-delimited JSON-RPC
// messages on its stdin (Send) and stdout (Incoming).
//
// Concurrency: Send may be called from any number of goroutines; writes are
// serialized, each message written whole. Incoming has one reader goroutine
// behind it; messages arrive in the order the child wrote them. Done is
// closed once the child has exited and Incoming is closed; after that Err
// tells how it ended. Close may be called any number of times, concurrently
// with everything else.
type Conn struct {
	server string
	pid    int
	start  time.Time

	wmu   sync.Mutex // one writer
	stdin io.WriteCloser

	in   chan []byte
	done chan struct{}
	err  *ExitError // set before done is closed

	closeOnce sync.Once
	stop      func() // stops the process group; set by spawn
}

// Server returns the name of the server the child runs.
func (c *Conn) Server() string { return c.server }

// PID returns the child's process id (also its process group id on unix).
func (c *Conn) PID() int { return c.pid }

// Incoming delivers each message the child writes to stdout, without its
// trailing newline; blank lines are skipped. The slices are owned by the
// receiver. The channel is closed when stdout ends. The child blocks when
// nobody receives, so the owner of a Conn must keep reading until Done.
func (c *Conn) Incoming() <-chan []byte { return c.in }

// Done is closed when the child has exited and its stdout is drained.
// Every call still pending on this Conn then has no answer coming.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns nil while the child runs; after Done, an *ExitError that says
// how it ended (exit code, signal, stopped by the bridge, or a read error).
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Send writes msg and a newline to the child's stdin. A msg spanning several
// lines (indented JSON) is compacted first, since a newline ends a message.
// It returns ErrClosed (wrapped) once the connection is done.
func (c *Conn) Send(msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, msg); err != nil {
			return fmt.Errorf("stdio server %q: message is not JSON: %w", c.server, err)
		}
		msg = b.Bytes()
	}
	select {
	case <-c.done:
		return fmt.Errorf("stdio server %q: %w: %v", c.server, ErrClosed, c.err)
	default:
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// One write of message and newline: no other message can interleave,
	// and a large message is not copied when it is the common case.
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	if _, err := c.stdin.Write(buf); err != nil {
		select {
		case <-c.done:
			return fmt.Errorf("stdio server %q: %w: %v", c.server, ErrClosed, c.err)
		default:
		}
		return fmt.Errorf("stdio server %q: writing to stdin: %w", c.server, err)
	}
	return nil
}

// Close stops the child: it closes stdin, sends SIGTERM to the process
// group, and SIGKILL after the grace period; it returns when Done is
// closed. A supervised shared child that is closed is restarted by its
// Supervisor as after a crash; per-session children are not restarted.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { go c.stop() })
	<-c.done
	return nil
}

// ExitError tells how a child's connection ended.
type ExitError struct {
	Server string
	PID    int
	// Code is the exit code, or -1 when the child was killed by a signal
	// or did not exit on its own.
	Code int
	// Signal names the signal that killed the child ("SIGKILL"), if any.
	Signal string
	// Stopped is true when the bridge stopped the child (Close, Shutdown).
	Stopped bool
	// Cause is a read error from stdout (such as ErrMessageTooLarge), if
	// that is what ended the connection.
	Cause error
	// Time is when the exit was observed; Ran is how long the child ran.
	Time time.Time
	Ran  time.Duration
}

// Reason describes the exit in a few words, e.g. "killed by signal SIGKILL".
func (e *ExitError) Reason() string {
	var r string
	switch {
	case e.Signal != "":
		r = "killed by signal " + e.Signal
	default:
		r = fmt.Sprintf("exited with code %d", e.Code)
	}
	if e.Stopped {
		r = "stopped by the bridge (" + r + ")"
	}
	if e.Cause != nil {
		r = e.Cause.Error() + "; " + r
	}
	return r
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("stdio server %q (pid %d) %s after %s", e.Server, e.PID, e.Reason(), e.Ran.Round(time.Millisecond))
}

func (e *ExitError) Unwrap() error { return e.Cause }

// readMessages reads newline-delimited messages from r into out until EOF
// or a message longer than max, which it returns as ErrMessageTooLarge. It
// gives up when abandon is closed (nobody will receive any more).
func readMessages(r io.Reader, max int, out chan<- []byte, abandon <-chan struct{}) error {
	br := bufio.NewReaderSize(r, readBufferSize)
	var long []byte // a message longer than the buffer, being assembled
	for {
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(long)+len(chunk) > max {
				return fmt.Errorf("%w (%d bytes)", ErrMessageTooLarge, max)
			}
			long = append(long, chunk...)
			continue
		}
		if len(long)+len(chunk) > max+1 { // +1: the newline
			return fmt.Errorf("%w (%d bytes)", ErrMessageTooLarge, max)
		}
		var msg []byte
		if long != nil {
			msg = append(long, chunk...)
			long = nil
		} else {
			msg = append([]byte(nil), chunk...)
		}
		msg = bytes.TrimRight(msg, "\r\n")
		if len(bytes.TrimSpace(msg)) > 0 && (err == nil || err == io.EOF) {
			select {
			case out <- msg:
			case <-abandon:
				return nil
			}
		}
		if err != nil {
			if err == io.EOF || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
	}
}
