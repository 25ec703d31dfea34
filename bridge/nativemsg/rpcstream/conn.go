package rpcstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// ErrClosed is returned by a Conn's calls once it has closed, and to calls
// still waiting when it closes.
var ErrClosed = errors.New("rpcstream: connection is closed")

// ErrDuplicateID is returned by Call for an id still in flight.
var ErrDuplicateID = errors.New("rpcstream: request id is already in flight")

// Handler answers a request or notification from the other end. It runs on
// the connection's read loop, one message at a time in the order they
// came, so work that waits (for a call on the same connection, say) must
// move to a goroutine. ctx ends when the connection closes.
type Handler func(ctx context.Context, c *Conn, req *jsonrpc2.Request)

// Conn is a JSON-RPC 2.0 connection over a Stream, for links that carry
// many small calls: each incoming frame is split into its members in one
// pass (after json.Valid) and a reply's result is handed to its caller as
// the frame's own bytes; requests and replies are written with append,
// their params and results marshalled once. It keeps Stream's rules for
// bad frames and oversized replies, and the wire of jsonrpc2.Conn.
//
// The calls it makes have string ids chosen by the caller, and an id stays
// taken until its reply arrives or the connection closes, also when the
// caller stopped waiting: a late reply can never reach the next call that
// uses the id.
type Conn struct {
	s      *Stream
	handle Handler
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	closed  bool
	pending map[string]chan callResult // by id; nil once closed
}

type callResult struct {
	result json.RawMessage
	err    error
}

// NewConn starts a connection on s: it reads until s fails, Close is
// called or ctx ends. Requests from the other end go to h; log (nil:
// discard) receives the connection's debug events.
func NewConn(ctx context.Context, s *Stream, h Handler, log *slog.Logger) *Conn {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Conn{s: s, handle: h, log: log, cancel: cancel, done: make(chan struct{}), pending: make(map[string]chan callResult)}
	context.AfterFunc(ctx, func() { c.close(nil) })
	go c.read(ctx)
	return c
}

// Done is closed when the connection closes.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the connection: calls in flight fail with ErrClosed. It
// returns ErrClosed if the connection was already closed.
func (c *Conn) Close() error { return c.close(nil) }

func (c *Conn) close(cause error) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	pending := c.pending
	c.pending = nil
	close(c.done)
	c.mu.Unlock()
	for _, done := range pending {
		done <- callResult{err: ErrClosed}
	}
	c.cancel()
	err := c.s.Close()
	if cause != nil && !errors.Is(cause, io.EOF) && !errors.Is(cause, io.ErrUnexpectedEOF) {
		c.log.Debug("the link's connection ended", "error", cause)
	}
	return err
}

// read is the connection's one reader: it hands requests to the handler
// and replies to their callers until the stream fails.
func (c *Conn) read(ctx context.Context) {
	for {
		frame, err := c.s.readFrame()
		if err != nil {
			c.close(err)
			return
		}
		if !json.Valid(frame) {
			var v json.RawMessage
			err := json.Unmarshal(frame, &v) // only for its words: the frame is not JSON
			c.s.reject(rpccode.ParseError, "message is not valid JSON: "+err.Error())
			continue
		}
		m, err := parseMessage(frame)
		if err == nil {
			if m.isRequest() {
				err = c.dispatch(ctx, &m)
			} else {
				err = c.deliver(&m)
			}
		}
		if err != nil {
			c.s.reject(rpccode.InvalidRequest, err.Error())
		}
	}
}

func (c *Conn) dispatch(ctx context.Context, m *wireMessage) error {
	req, err := m.request()
	if err != nil {
		return err
	}
	c.handle(ctx, c, req)
	return nil
}

// deliver hands a reply to the call waiting for it, and frees its id.
func (c *Conn) deliver(m *wireMessage) error {
	id, isString, err := m.responseID()
	if err != nil {
		return err
	}
	rpcErr, err := m.responseError()
	if err != nil {
		return err
	}
	var done chan callResult
	if isString {
		c.mu.Lock()
		if done = c.pending[string(id)]; done != nil {
			delete(c.pending, string(id))
		}
		c.mu.Unlock()
	}
	switch {
	case done == nil:
		c.log.Debug("ignoring a reply to no call in flight on the link", "id", string(m.id))
	case rpcErr != nil:
		done <- callResult{err: rpcErr}
	default:
		done <- callResult{result: m.result}
	}
	return nil
}

// Call sends method with params (nil: none) under id and waits for the
// reply: its result as the frame holds it, or its error as a
// *jsonrpc2.Error. It fails with ErrDuplicateID for an id in flight, with
// ErrClosed if the connection closes first, and with ctx's error when ctx
// ends first (the id stays taken until the reply comes).
func (c *Conn) Call(ctx context.Context, id, method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, ErrClosed
	case c.pending[id] != nil:
		c.mu.Unlock()
		return nil, ErrDuplicateID
	}
	done := resultChans.Get().(chan callResult)
	c.pending[id] = done
	c.mu.Unlock()

	if err := c.writeRequest(&id, method, params); err != nil {
		// Nothing will answer a request that was not written.
		c.mu.Lock()
		closed := c.closed
		if !closed && c.pending[id] == done {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		return nil, err
	}
	select {
	case r := <-done:
		// Its one send has come: whoever sent it took it out of pending
		// first, so no one else holds it.
		resultChans.Put(done)
		return r.result, r.err
	case <-ctx.Done():
		// The reply may yet come into done, which therefore stays out of
		// the pool.
		return nil, ctx.Err()
	}
}

// resultChans holds the channels calls wait on: a call takes a channel
// and returns it once the reply came, so that a call costs no channel.
var resultChans = sync.Pool{New: func() any { return make(chan callResult, 1) }}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	if err := c.writeRequest(nil, method, params); err != nil {
		if c.isClosed() {
			return ErrClosed
		}
		return err
	}
	return nil
}

// Reply answers the request with id with result, which is marshalled with
// encoding/json; a result that cannot be is answered as an internal error.
// A reply too large for the link becomes an error reply with the same id,
// so that the other end is answered instead of left waiting.
func (c *Conn) Reply(id jsonrpc2.ID, result any) error {
	enc, err := json.Marshal(result)
	if err != nil {
		return c.ReplyWithError(id, &jsonrpc2.Error{Code: rpccode.InternalError, Message: "encoding the result: " + err.Error()})
	}
	bp := getBuffer()
	defer putBuffer(bp)
	*bp = appendResult((*bp)[:0], id, enc)
	if len(*bp) > c.s.limit {
		msg := fmt.Sprintf("the reply of %d bytes exceeds the %d-byte limit of the link", len(*bp), c.s.limit)
		return c.ReplyWithError(id, &jsonrpc2.Error{Code: rpccode.InternalError, Message: msg})
	}
	return c.write(*bp)
}

// ReplyWithError answers the request with id with e. An error reply too
// large for the link (a long message or data) becomes a short internal
// error with the same id, as a result does in Reply.
func (c *Conn) ReplyWithError(id jsonrpc2.ID, e *jsonrpc2.Error) error {
	bp := getBuffer()
	defer putBuffer(bp)
	b, err := appendError((*bp)[:0], id, e)
	*bp = b
	if err != nil {
		return err
	}
	if len(b) > c.s.limit {
		msg := fmt.Sprintf("the error reply of %d bytes exceeds the %d-byte limit of the link (code %d)", len(b), c.s.limit, e.Code)
		if b, err = appendError(b[:0], id, &jsonrpc2.Error{Code: rpccode.InternalError, Message: msg}); err != nil {
			return err
		}
		*bp = b
	}
	return c.write(b)
}

// Encoded is params already encoded as one JSON value, written onto the
// link as they are. Whoever makes one vouches that it is valid JSON: for
// a call's params built from bytes a decoder already checked, it spares
// the pass encoding/json makes to check and compact them again (a few
// percent of the bridge's CPU per call).
type Encoded []byte

// AppendString appends s as a JSON string.
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

func (c *Conn) writeRequest(id *string, method string, params any) error {
	var enc []byte
	switch p := params.(type) {
	case nil:
	case Encoded:
		enc = p
	default:
		var err error
		if enc, err = json.Marshal(params); err != nil {
			return fmt.Errorf("encoding the params of %s: %w", method, err)
		}
	}
	bp := getBuffer()
	defer putBuffer(bp)
	*bp = appendRequest((*bp)[:0], id, method, enc)
	return c.write(*bp)
}

func (c *Conn) write(b []byte) error {
	if c.isClosed() {
		return ErrClosed
	}
	if err := c.s.writeFrame(b); err != nil {
		return fmt.Errorf("writing to the link: %w", err)
	}
	return nil
}

func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// buffers holds the buffers messages are encoded into: a frame is copied
// into the stream's writer before writeFrame returns.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledBuffer keeps a rare large reply's buffer from staying pooled.
const maxPooledBuffer = 64 << 10

func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

func putBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledBuffer {
		buffers.Put(bp)
	}
}
