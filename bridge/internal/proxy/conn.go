package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// closeGrace is how long the writer waits for the peer's close frame after
// sending its own before it drops the TCP connection.
const closeGrace = time.Second

// errTooBig reports a message over the size limit; it was skipped.
type errTooBig struct{ size int64 }

func (e errTooBig) Error() string { return fmt.Sprintf("message of %d bytes", e.size) }

// wsConn is one WebSocket connection with exactly one reader (the
// goroutine that calls readLoop, started by the HTTP handler) and one writer (the
// writePump goroutine).
//
// Concurrency contract: enqueue, tryEnqueue and closeWith may be called from any
// goroutine, any number of times; everything else belongs to the reader.
// Messages enqueued before closeWith are written before the close frame;
// messages enqueued after it are dropped.
type wsConn struct {
	s    *Server
	ws   *websocket.Conn
	bc   *batchConn // ws's socket
	send chan []byte

	quit      chan struct{} // closed by closeWith
	quitOnce  sync.Once
	closeCode int    // set before quit is closed
	closeMsg  string // ditto
	readDone  chan struct{}
	writeDone chan struct{}

	lim *bucket // this connection's rate

	// reader-only state
	strikes     int
	strikeStart time.Time

	wpushed time.Time // writer-only: when the write deadline was last pushed
}

func newWSConn(s *Server, ws *websocket.Conn, bc *batchConn) *wsConn {
	return &wsConn{
		s:         s,
		ws:        ws,
		bc:        bc,
		send:      make(chan []byte, s.opts.SendQueue),
		quit:      make(chan struct{}),
		readDone:  make(chan struct{}),
		writeDone: make(chan struct{}),
		lim:       newBucket(s.opts.ConnRate),
	}
}

// enqueue queues msg for the writer. It reports false if the connection is
// closing. A queue that stays full for WriteWait means the peer is not
// reading: the connection is closed.
func (c *wsConn) enqueue(msg []byte) bool {
	select {
	case <-c.quit:
		return false
	default:
	}
	select {
	case c.send <- msg:
		return true
	default:
	}
	t := time.NewTimer(c.s.opts.WriteWait)
	defer t.Stop()
	select {
	case c.send <- msg:
		return true
	case <-c.quit:
		return false
	case <-t.C:
		c.closeWith(websocket.CloseTryAgainLater, "the peer does not read its messages")
		return false
	}
}

// tryEnqueue queues msg if there is room and reports whether it did: for
// notifications, which may be lost rather than hold up the goroutine that
// routes them (an extension's reader serves all of its clients).
func (c *wsConn) tryEnqueue(msg []byte) bool {
	select {
	case <-c.quit:
		return false
	default:
	}
	select {
	case c.send <- msg:
		return true
	default:
		return false
	}
}

// closeWith starts closing the connection with a close frame of the code
// and reason (code 0: no close frame, the peer is gone). Only the first call
// counts.
func (c *wsConn) closeWith(code int, reason string) {
	c.quitOnce.Do(func() {
		c.closeCode, c.closeMsg = code, truncateReason(reason)
		close(c.quit)
	})
}

// truncateReason shortens a close reason to the 123 bytes a close frame
// holds, on a rune boundary.
func truncateReason(s string) string {
	if len(s) <= relaywire.MaxCloseReason {
		return s
	}
	s = s[:relaywire.MaxCloseReason]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// writePump is the connection's only writer: queued messages, pings every
// PingPeriod, and at the end the close frame. It closes the socket when it
// returns. The messages queued when it wakes are written as one batch: their
// frames go out in one system call (see batchConn).
func (c *wsConn) writePump() {
	defer close(c.writeDone)
	ticker := time.NewTicker(c.s.opts.pingPeriod())
	defer ticker.Stop()
	defer c.ws.Close()
	for {
		select {
		case msg := <-c.send:
			if err := c.writeBatch(msg); err != nil {
				c.closeWith(0, "")
				return
			}
		case <-ticker.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.s.opts.WriteWait)); err != nil {
				c.closeWith(0, "")
				return
			}
		case <-c.quit:
			if c.closeCode == 0 {
				return
			}
			for flushed := false; !flushed; {
				select {
				case msg := <-c.send:
					if c.writeBatch(msg) != nil {
						return
					}
				default:
					flushed = true
				}
			}
			msg := websocket.FormatCloseMessage(c.closeCode, c.closeMsg)
			if c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(c.s.opts.WriteWait)) != nil {
				return
			}
			t := time.NewTimer(closeGrace)
			select {
			case <-c.readDone:
			case <-t.C:
			}
			t.Stop()
			return
		}
	}
}

// maxBatch bounds the bytes gathered into one batch before they are sent.
const maxBatch = 64 << 10

// writeBatch writes msg and every message queued behind it (up to maxBatch
// bytes at a time), one system call per batch.
//
// The write deadline is WriteWait ahead, pushed at most once per
// WriteWait/16 (see readLoop).
func (c *wsConn) writeBatch(msg []byte) error {
	if now := time.Now(); now.Sub(c.wpushed) >= c.s.opts.WriteWait/16 {
		c.wpushed = now
		c.ws.SetWriteDeadline(now.Add(c.s.opts.WriteWait))
	}
	c.bc.begin()
	n := 0
	for {
		if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			c.bc.end()
			return fmt.Errorf("writing a message: %w", err)
		}
		n += len(msg)
		if c.bc.buffered() >= maxBatch {
			break
		}
		select {
		case msg = <-c.send:
			continue
		default:
		}
		break
	}
	c.s.m.bytesOut.Add(float64(n))
	if err := c.bc.end(); err != nil {
		return fmt.Errorf("writing messages: %w", err)
	}
	return nil
}

// batchConn is the socket as the websocket.Conn sees it. Between begin and
// end (called by the write pump) the frames written are gathered in a
// pooled buffer and sent by end in one write; at other times, and for
// nothing but the gorilla Conn's serialized writes, it writes through.
// An idle connection holds no buffer.
//
// gorilla sets the socket's write deadline before every frame; batchConn
// keeps it and applies it only before a real write, and only if it changed.
type batchConn struct {
	net.Conn

	mu       sync.Mutex
	on       bool
	buf      *[]byte
	deadline time.Time // the write deadline asked for
	applied  time.Time // the one set on the socket
}

var batchPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on {
		b.applyDeadline()
		return b.Conn.Write(p)
	}
	*b.buf = append(*b.buf, p...)
	return len(p), nil
}

// SetWriteDeadline records t for the next real write.
func (b *batchConn) SetWriteDeadline(t time.Time) error {
	b.mu.Lock()
	b.deadline = t
	b.mu.Unlock()
	return nil
}

// SetDeadline sets both deadlines.
func (b *batchConn) SetDeadline(t time.Time) error {
	if err := b.SetWriteDeadline(t); err != nil {
		return err
	}
	return b.Conn.SetReadDeadline(t)
}

// applyDeadline sets the recorded write deadline on the socket if it
// changed; b.mu is held.
func (b *batchConn) applyDeadline() {
	if !b.deadline.Equal(b.applied) {
		b.applied = b.deadline
		b.Conn.SetWriteDeadline(b.deadline)
	}
}

func (b *batchConn) begin() {
	b.mu.Lock()
	b.on = true
	b.buf = batchPool.Get().(*[]byte)
	b.mu.Unlock()
}

func (b *batchConn) buffered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(*b.buf)
}

// end sends what was gathered since begin and returns to writing through.
func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	buf := b.buf
	b.on, b.buf = false, nil
	var err error
	if len(*buf) > 0 {
		b.applyDeadline()
		_, err = b.Conn.Write(*buf)
	}
	if cap(*buf) <= maxBatch+16<<10 {
		*buf = (*buf)[:0]
		batchPool.Put(buf)
	}
	return err
}

// batchWriter hands gorilla's Upgrade a batchConn in place of the hijacked
// socket.
type batchWriter struct {
	http.ResponseWriter
	bc *batchConn
}

func (w batchWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the response writer cannot be hijacked")
	}
	nc, brw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.bc.Conn = nc
	return w.bc, brw, nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readLoop reads messages until the connection fails or closes, calling
// handle for each with a buffer valid only during the call. A message over
// MaxMessageSize is skipped without being buffered and reported to tooBig.
// It returns the error that ended the connection.
//
// Each message and pong pushes the read deadline PongWait ahead, but only
// once per PongWait/16: setting a deadline costs more than reading a small
// message, and a connection silent for PongWait minus that is still dropped.
func (c *wsConn) readLoop(handle func([]byte), tooBig func(size int64)) error {
	defer close(c.readDone)
	o := &c.s.opts
	slack := o.PongWait / 16
	var pushed time.Time // when the deadline was last pushed
	push := func() error {
		now := time.Now()
		if now.Sub(pushed) < slack {
			return nil
		}
		pushed = now
		return c.ws.SetReadDeadline(now.Add(o.PongWait))
	}
	c.ws.SetReadLimit(o.hardLimit())
	push()
	c.ws.SetPongHandler(func(string) error { return push() })
	var lr io.LimitedReader
	for {
		_, r, err := c.ws.NextReader()
		if err != nil {
			return err
		}
		push()
		buf := bufPool.Get().(*bytes.Buffer)
		buf.Reset()
		lr.R, lr.N = r, o.MaxMessageSize+1
		_, err = buf.ReadFrom(&lr)
		if err == nil && int64(buf.Len()) > o.MaxMessageSize {
			var n int64
			n, err = io.Copy(io.Discard, r)
			if err == nil {
				c.s.m.bytesIn.Add(float64(int64(buf.Len()) + n))
				tooBig(int64(buf.Len()) + n)
				continue
			}
		}
		if err != nil {
			putBuf(buf)
			return fmt.Errorf("reading a message: %w", err)
		}
		c.s.m.bytesIn.Add(float64(buf.Len()))
		handle(buf.Bytes())
		putBuf(buf)
	}
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		bufPool.Put(b)
	}
}

// strike counts a refused message and reports whether the connection has
// now been refused too often (Strikes within one second) and must close.
func (c *wsConn) strike(now time.Time) bool {
	if c.s.opts.Strikes < 0 {
		return false
	}
	if now.Sub(c.strikeStart) > time.Second {
		c.strikeStart, c.strikes = now, 0
	}
	c.strikes++
	return c.strikes > c.s.opts.Strikes
}

// refuse answers a bad message with a JSON-RPC error and counts a strike;
// an abusive connection is closed with a policy-violation close frame.
func (c *wsConn) refuse(id []byte, e *relaywire.Error, reason string) {
	c.answer(id, e, reason)
	if c.strike(time.Now()) {
		c.closeWith(websocket.ClosePolicyViolation, "too many refused messages: "+e.Message)
	}
}

// answer refuses a message that was not the client's fault (its extension
// went away under it): the same error, counted the same, but no strike.
func (c *wsConn) answer(id []byte, e *relaywire.Error, reason string) {
	c.s.m.refused.With(reason).Inc()
	c.enqueue(relaywire.AppendError(nil, id, e))
}

// bucket is a token-bucket rate limiter: rate per second, bursts of twice
// that. A nil bucket allows everything. Safe for concurrent use.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64) *bucket {
	if rate <= 0 {
		return nil
	}
	return &bucket{rate: rate, tokens: 2 * rate}
}

func (b *bucket) allow(now time.Time) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(2*b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
