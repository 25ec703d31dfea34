package wsconn

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// batchConn is the socket as the websocket.Conn sees it. Between begin and
// end (called by the writer) the frames written are gathered in a pooled
// buffer and sent by end in one write; at other times, and for nothing but
// the gorilla Conn's serialized writes, it writes through. An idle
// connection holds no buffer.
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
	if len(*b.buf) >= maxBatch {
		// A large message goes out as it is framed: the batch never holds
		// (nor grows to) a copy of it.
		b.applyDeadline()
		_, err := b.Conn.Write(*b.buf)
		*b.buf = (*b.buf)[:0]
		if err != nil {
			return 0, err
		}
	}
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

// errNoHijack is returned by Upgrade when the response writer cannot be
// taken over.
var errNoHijack = errors.New("the response writer cannot be hijacked")

// batchWriter hands gorilla's Upgrade a batchConn in place of the hijacked
// socket.
type batchWriter struct {
	http.ResponseWriter
	bc *batchConn
}

func (w batchWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errNoHijack
	}
	nc, brw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.bc.Conn = nc
	return w.bc, brw, nil
}
