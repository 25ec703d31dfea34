// Package wsconn is the WebSocket connection of the cloud relay, the one
// type both ends use: the proxy (bridge/internal/proxy) for each extension
// and MCP client it serves, and the bridge's relay client
// (bridge/internal/relay) for its link to the proxy and for `browserbridge
// connect`.
//
// It has the shape of gorilla/websocket's chat example: exactly one reader
// (the goroutine that calls ReadLoop) and exactly one writer (a goroutine of
// the Conn's own, fed by a bounded queue); a ping every PingPeriod; a read
// deadline PongWait ahead, pushed forward by every message and pong; a read
// limit; and a close handshake that waits up to CloseGrace for the peer's
// close frame before dropping the TCP connection.
package wsconn

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// Defaults of Options.
const (
	// writeWait bounds each write, and how long Send waits on a full queue.
	writeWait = 10 * time.Second
	// pongWait is how long the peer may stay silent.
	pongWait = 60 * time.Second
	// pingPeriod is how often a ping goes out: often enough that the pong
	// of one arrives before pongWait runs out.
	pingPeriod = pongWait * 9 / 10
	// maxMessageSize is the largest message handed to ReadLoop's handler.
	maxMessageSize = relaywire.MaxMessageSize
	// closeGrace is how long the writer waits for the peer's close frame
	// after sending its own.
	closeGrace = time.Second
	// sendQueue is the number of messages queued for the writer.
	sendQueue = 64
)

// maxBatch bounds the bytes gathered into one batch before they are sent.
const maxBatch = 64 << 10

// Options configure a Conn. The zero value of every field means the default
// given; a nil *Options means all defaults.
type Options struct {
	// PongWait is how long the peer may stay silent (no message, no pong)
	// before the connection is dropped. Default 60 s.
	PongWait time.Duration
	// PingPeriod is how often the Conn pings the peer; it should be shorter
	// than PongWait. Default 9/10 of PongWait.
	PingPeriod time.Duration
	// WriteWait bounds each write, and how long Send waits for room in a
	// full queue before it gives up on the peer and closes the connection
	// (1013). Default 10 s.
	WriteWait time.Duration
	// CloseGrace is how long the writer waits, after sending its close
	// frame, for the peer's close frame before it drops the TCP connection.
	// Default 1 s.
	CloseGrace time.Duration
	// MaxMessageSize is the largest message, in bytes, handed to ReadLoop's
	// handler; a larger one up to ReadLimit is read, discarded and reported
	// to ReadLoop's tooBig. Default relaywire.MaxMessageSize.
	MaxMessageSize int64
	// ReadLimit is the largest message, in bytes, read at all: a larger one
	// ends the connection (gorilla sends close 1009). Default 4 times
	// MaxMessageSize; never less than MaxMessageSize.
	ReadLimit int64
	// SendQueue is the number of messages queued for the writer. Default 64.
	SendQueue int
	// Received, if set, is given the size of each message read, and Sent
	// the bytes of each batch of messages written (for metrics). Both are
	// called from the reader or the writer, and must not block.
	Received, Sent func(n int)
}

func (o *Options) withDefaults() Options {
	var d Options
	if o != nil {
		d = *o
	}
	if d.PongWait <= 0 {
		d.PongWait = pongWait
	}
	if d.PingPeriod <= 0 {
		d.PingPeriod = d.PongWait * 9 / 10
	}
	if d.WriteWait <= 0 {
		d.WriteWait = writeWait
	}
	if d.CloseGrace <= 0 {
		d.CloseGrace = closeGrace
	}
	if d.MaxMessageSize <= 0 {
		d.MaxMessageSize = maxMessageSize
	}
	if d.ReadLimit <= 0 {
		d.ReadLimit = 4 * d.MaxMessageSize
	}
	d.ReadLimit = max(d.ReadLimit, d.MaxMessageSize)
	if d.SendQueue <= 0 {
		d.SendQueue = sendQueue
	}
	return d
}

// Conn is one WebSocket connection with exactly one reader and one writer.
//
// Concurrency contract: Send, TrySend, Close and Done may be called from any
// goroutine, any number of times, concurrently. ReadLoop is called once, by
// the one goroutine that reads; the writer is the Conn's own goroutine,
// started by New or Upgrade, and nothing else writes messages to the
// WebSocket (gorilla's answers to the peer's pings and close frame, control
// frames written from the reader, may interleave: gorilla allows that).
//
// Messages sent before Close are written before the close frame; Send and
// TrySend after Close report false and drop the message. Close is safe to
// call twice (only the first call counts) and never blocks. It unblocks the
// Send calls waiting for room in the queue at once; ReadLoop and Done once
// the writer has closed the socket, which it does when the close handshake
// is over (the peer's close frame arrived, or CloseGrace passed), or for
// code 0 when the write in progress ends. A write to a peer that does not
// read lasts at most WriteWait. When ReadLoop returns it calls Close(0, "").
type Conn struct {
	ws   *websocket.Conn
	bc   *batchConn // ws's socket, nil if it does not batch
	opts Options
	send chan []byte

	quit      chan struct{} // closed by Close
	quitOnce  sync.Once
	closeCode int    // set before quit is closed
	closeMsg  string // ditto
	readDone  chan struct{}
	done      chan struct{} // closed when the writer has closed the socket
	werr      error         // why the writer closed it; set before quit is closed

	wpushed time.Time // writer-only: when the write deadline was last pushed
}

// New wraps ws, which it owns from then on, and starts its writer. ws must
// not be used directly any more; only ReadLoop reads from it.
func New(ws *websocket.Conn, opts *Options) *Conn {
	return newConn(ws, nil, opts)
}

func newConn(ws *websocket.Conn, bc *batchConn, opts *Options) *Conn {
	o := opts.withDefaults()
	c := &Conn{
		ws:       ws,
		bc:       bc,
		opts:     o,
		send:     make(chan []byte, o.SendQueue),
		quit:     make(chan struct{}),
		readDone: make(chan struct{}),
		done:     make(chan struct{}),
	}
	go c.writePump()
	return c
}

// Upgrade upgrades an HTTP request to a Conn with u, as u.Upgrade does. A
// Conn made this way writes the messages queued when its writer wakes in
// one system call, where one from New makes a system call per message.
func Upgrade(u *websocket.Upgrader, w http.ResponseWriter, r *http.Request, opts *Options) (*Conn, error) {
	bc := &batchConn{}
	ws, err := u.Upgrade(batchWriter{w, bc}, r, nil)
	if err != nil {
		return nil, err
	}
	return newConn(ws, bc, opts), nil
}

// Send queues msg for the writer, which owns it from then on. It reports
// false if the connection is closing. A queue that stays full for WriteWait
// means the peer is not reading: the connection is closed (1013) and Send
// reports false.
func (c *Conn) Send(msg []byte) bool {
	if queued, closing := c.offer(msg); queued || closing {
		return queued
	}
	t := time.NewTimer(c.opts.WriteWait)
	defer t.Stop()
	select {
	case c.send <- msg:
		return true
	case <-c.quit:
		return false
	case <-t.C:
		c.Close(websocket.CloseTryAgainLater, "the peer does not read its messages")
		return false
	}
}

// TrySend queues msg if there is room and reports whether it did: for
// messages that may be lost rather than hold up the goroutine that sends
// them (notifications).
func (c *Conn) TrySend(msg []byte) bool {
	queued, _ := c.offer(msg)
	return queued
}

// offer queues msg if the connection is open and its queue has room.
func (c *Conn) offer(msg []byte) (queued, closing bool) {
	select {
	case <-c.quit:
		return false, true
	default:
	}
	select {
	case c.send <- msg:
		return true, false
	default:
		return false, false
	}
}

// Close starts closing the connection with a close frame of the code and
// reason, the reason cut to the 123 bytes a close frame holds. Code 0 means
// the peer is gone: no close frame, nothing more queued is written, and the
// writer closes the socket as soon as the write it is in (if any) ends:
// that write may still carry the echo of the peer's close frame. Only the
// first call counts. See Conn for what it unblocks.
func (c *Conn) Close(code int, reason string) {
	c.quitOnce.Do(func() {
		c.closeCode, c.closeMsg = code, truncateReason(reason)
		close(c.quit)
	})
}

// Done returns a channel closed once the writer has stopped and closed the
// socket.
func (c *Conn) Done() <-chan struct{} { return c.done }

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

// fail closes the connection without a close frame because the writer
// failed; if nothing had closed it before, ReadLoop returns err.
func (c *Conn) fail(err error) {
	c.quitOnce.Do(func() {
		c.werr = err
		close(c.quit)
		c.ws.Close()
	})
}

// writePump is the connection's only writer: queued messages, pings every
// PingPeriod, and at the end the close frame. It closes the socket when it
// returns.
func (c *Conn) writePump() {
	defer close(c.done)
	ticker := time.NewTicker(c.opts.PingPeriod)
	defer ticker.Stop()
	defer c.ws.Close()
	for {
		select {
		case msg := <-c.send:
			if err := c.writeBatch(msg); err != nil {
				c.fail(err)
				return
			}
		case <-ticker.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.opts.WriteWait)); err != nil {
				c.fail(fmt.Errorf("sending a ping: %w", err))
				return
			}
		case <-c.quit:
			c.closeHandshake()
			return
		}
	}
}

// closeHandshake writes what was queued before Close, then the close frame,
// and waits up to CloseGrace for the reader to see the peer's.
func (c *Conn) closeHandshake() {
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
	if c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(c.opts.WriteWait)) != nil {
		return
	}
	t := time.NewTimer(c.opts.CloseGrace)
	defer t.Stop()
	select {
	case <-c.readDone:
	case <-t.C:
	}
}

// writeBatch writes msg and every message queued behind it (up to maxBatch
// bytes at a time); on a socket that batches, in one system call.
//
// The write deadline is WriteWait ahead, pushed at most once per
// WriteWait/16 (see ReadLoop).
func (c *Conn) writeBatch(msg []byte) error {
	if now := time.Now(); now.Sub(c.wpushed) >= c.opts.WriteWait/16 {
		c.wpushed = now
		c.ws.SetWriteDeadline(now.Add(c.opts.WriteWait))
	}
	if c.bc != nil {
		c.bc.begin()
	}
	n := 0
	for {
		if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			if c.bc != nil {
				c.bc.end()
			}
			return fmt.Errorf("writing a message: %w", err)
		}
		n += len(msg)
		if c.bc == nil || c.bc.buffered() >= maxBatch {
			break
		}
		select {
		case msg = <-c.send:
			continue
		default:
		}
		break
	}
	if c.opts.Sent != nil {
		c.opts.Sent(n)
	}
	if c.bc != nil {
		if err := c.bc.end(); err != nil {
			return fmt.Errorf("writing messages: %w", err)
		}
	}
	return nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ReadLoop is the connection's reader: it reads messages until the
// connection fails or closes, calling handle for each with a buffer valid
// only during the call (copy what must outlive it). A message over
// MaxMessageSize (and within ReadLimit) is skipped without being buffered
// and its size reported to tooBig; nil tooBig ignores it. When ReadLoop
// returns, the connection is closing (see Close with code 0).
//
// It returns the error that ended the connection: the writer's, if the
// writer failed first, else the read's (a *websocket.CloseError when the
// peer closed it).
//
// Each message and pong pushes the read deadline PongWait ahead, but only
// once per PongWait/16: setting a deadline costs more than reading a small
// message, and a connection silent for PongWait minus that is still dropped.
func (c *Conn) ReadLoop(handle func([]byte), tooBig func(size int64)) error {
	defer c.Close(0, "")
	defer close(c.readDone)
	err := c.readLoop(handle, tooBig)
	select {
	case <-c.quit:
		if c.werr != nil {
			return c.werr
		}
	default:
	}
	return err
}

func (c *Conn) readLoop(handle func([]byte), tooBig func(size int64)) error {
	o := &c.opts
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
	c.ws.SetReadLimit(o.ReadLimit)
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
				size := int64(buf.Len()) + n
				putBuf(buf)
				if o.Received != nil {
					o.Received(int(size))
				}
				if tooBig != nil {
					tooBig(size)
				}
				continue
			}
		}
		if err != nil {
			putBuf(buf)
			return fmt.Errorf("reading a message: %w", err)
		}
		if o.Received != nil {
			o.Received(buf.Len())
		}
		handle(buf.Bytes())
		putBuf(buf)
	}
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		bufPool.Put(b)
	}
}
