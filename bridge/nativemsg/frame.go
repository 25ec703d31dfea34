// Package nativemsg is the wire format of Chrome's native messaging, used on
// both links of Browser Bridge: between the browser and the host (stdio) and
// between the host and the bridge (the Unix socket).
//
// A frame is a uint32 length in native byte order followed by that many
// bytes of UTF-8 JSON. Chrome accepts at most 1 MiB per frame towards the
// extension (it closes the port on 1 MiB + 1) and sends at most 64 MiB
// towards the host. Larger messages to the browser travel as chunks (see
// chunk.go); docs/protocol.md describes the whole protocol.
package nativemsg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Limits of the format.
const (
	// HeaderSize is the size of the length prefix.
	HeaderSize = 4
	// MaxToBrowser is the largest frame Chrome accepts from a host.
	MaxToBrowser = 1 << 20
	// MaxFromBrowser is the largest frame Chrome sends to a host, and the
	// largest frame accepted on the bridge socket.
	MaxFromBrowser = 64 << 20
	// MaxLink is the largest frame on the host-bridge socket.
	MaxLink = MaxFromBrowser
)

// ErrEmptyFrame is returned for a frame of length zero: JSON is never empty.
var ErrEmptyFrame = errors.New("nativemsg: empty frame")

// FrameTooLargeError reports a frame whose announced length exceeds the limit.
// It is returned before any body is read or allocated.
type FrameTooLargeError struct {
	Size  uint64
	Limit int
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("nativemsg: frame of %d bytes exceeds the limit of %d bytes", e.Size, e.Limit)
}

// ReadFrame reads one frame of at most limit bytes from r and returns its
// body in a new slice. At a clean end of stream it returns io.EOF; a stream
// that ends inside a header or a body yields io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, limit int) ([]byte, error) {
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err // io.EOF before the first byte, io.ErrUnexpectedEOF inside
	}
	n := binary.NativeEndian.Uint32(hdr[:])
	if uint64(n) > uint64(limit) {
		return nil, &FrameTooLargeError{Size: uint64(n), Limit: limit}
	}
	if n == 0 {
		return nil, ErrEmptyFrame
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("nativemsg: reading %d-byte body: %w", n, err)
	}
	return body, nil
}

// smallFrame is the size below which WriteFrame copies header and body into
// one buffer so that a frame costs a single write system call.
const smallFrame = 64 << 10

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, smallFrame+HeaderSize); return &b }}

// WriteFrame writes msg as one frame of at most limit bytes. It is not safe
// for concurrent use on the same writer: each connection has one writer.
func WriteFrame(w io.Writer, msg []byte, limit int) error {
	if len(msg) == 0 {
		return ErrEmptyFrame
	}
	if len(msg) > limit {
		return &FrameTooLargeError{Size: uint64(len(msg)), Limit: limit}
	}
	if len(msg) <= smallFrame {
		bp := framePool.Get().(*[]byte)
		buf := binary.NativeEndian.AppendUint32((*bp)[:0], uint32(len(msg)))
		buf = append(buf, msg...)
		_, err := w.Write(buf)
		*bp = buf[:0]
		framePool.Put(bp)
		return err
	}
	var hdr [HeaderSize]byte
	binary.NativeEndian.PutUint32(hdr[:], uint32(len(msg)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(msg)
	return err
}

// AppendHeader appends the length prefix of an n-byte frame to b.
func AppendHeader(b []byte, n uint32) []byte { return binary.NativeEndian.AppendUint32(b, n) }
