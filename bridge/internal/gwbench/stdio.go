package gwbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// A session is one MCP client session on a target.
//
// call sends one echo call for worker and waits for its reply: nil when the
// reply is the right one, errMisrouted when the first reply with its id was
// not, another error otherwise. It is safe for concurrent use (the direct
// target's workers share one session). replies gives the session's
// misrouting counter. close ends the session and any call in flight, and is
// safe to call twice.
type session interface {
	call(ctx context.Context, worker int) error
	replies() *mux
	close()
}

// closeWait bounds how long closing a session waits for the other side.
const closeWait = 2 * time.Second

// stdioSession speaks newline-delimited JSON-RPC to a server's stdin and
// stdout: one writer (under mu) and one reader goroutine, any number of
// calls in flight.
type stdioSession struct {
	mu   sync.Mutex // guards w
	w    *bufio.Writer
	in   io.WriteCloser
	out  io.ReadCloser
	mux  *mux
	done chan struct{} // closed when the reader returns
	once sync.Once
}

var _ session = (*stdioSession)(nil)

// openStdio initializes a session over a server's stdin (in) and stdout
// (out); it owns both from then on.
func openStdio(ctx context.Context, in io.WriteCloser, out io.ReadCloser) (*stdioSession, error) {
	s := &stdioSession{w: bufio.NewWriter(in), in: in, out: out, mux: newMux(), done: make(chan struct{})}
	go s.read()
	id, _, p := s.mux.begin(0, false)
	if err := s.roundTrip(ctx, id, initializeRequest(id), p); err != nil {
		s.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := s.write(initializedNotification); err != nil {
		s.close()
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return s, nil
}

func (s *stdioSession) read() {
	defer close(s.done)
	sc := bufio.NewScanner(s.out)
	sc.Buffer(make([]byte, 64<<10), maxEventSize)
	for sc.Scan() {
		msgs, err := decodeMessages(sc.Bytes())
		if err != nil {
			continue // the server's noise, not a reply
		}
		for _, m := range msgs {
			s.mux.deliver(m)
		}
	}
	err := sc.Err()
	if err == nil {
		err = io.EOF
	}
	s.mux.failAll(fmt.Errorf("server stdout: %w", err))
}

func (s *stdioSession) write(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write(msg)
	s.w.WriteByte('\n')
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("writing to the server: %w", err)
	}
	return nil
}

func (s *stdioSession) call(ctx context.Context, worker int) error {
	id, msg, p := s.mux.begin(worker, true)
	return s.roundTrip(ctx, id, echoRequest(id, msg), p)
}

func (s *stdioSession) roundTrip(ctx context.Context, id int64, body []byte, p *pendingCall) error {
	if err := s.write(body); err != nil {
		s.mux.abandon(id)
		return err
	}
	select {
	case r := <-p.done:
		return settled(r)
	case <-ctx.Done():
		s.mux.abandon(id)
		return fmt.Errorf("waiting for reply %d: %w", id, ctx.Err())
	}
}

func (s *stdioSession) replies() *mux { return s.mux }

// close closes the server's stdin (a stdio server's cue to exit) and its
// stdout, which ends the reader.
func (s *stdioSession) close() {
	s.once.Do(func() {
		s.in.Close()
		s.out.Close()
		select {
		case <-s.done:
		case <-time.After(closeWait):
		}
	})
}
