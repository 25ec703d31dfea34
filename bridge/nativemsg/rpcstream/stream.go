// Package rpcstream carries JSON-RPC 2.0 over native-messaging frames:
// Stream is an ObjectStream for sourcegraph/jsonrpc2's Conn (the bridge's
// local clients use it), and Conn is the host link's own connection on a
// Stream, which decodes each frame once (see Conn). It is apart from
// nativemsg so the host, which only pumps frames, does not link a JSON-RPC
// implementation.
package rpcstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
)

// Stream is a jsonrpc2.ObjectStream over native-messaging frames. Unlike a
// plain codec it survives bad input: a frame that is not JSON, not a JSON-RPC
// message, or over the limit is answered with a JSON-RPC error (id null) and
// skipped, so one bad message never tears down a browser's link.
//
// ReadObject must be called from one goroutine (jsonrpc2's reader);
// WriteObject may be called concurrently and is serialized internally, also
// with the error replies ReadObject sends.
type Stream struct {
	rwc   io.ReadWriteCloser
	br    *bufio.Reader
	limit int
	// OnBadMessage, if set, is told about each frame that was skipped.
	OnBadMessage func(error)

	wmu sync.Mutex
	bw  *bufio.Writer
	// waiting counts the writers between the start of writeFrame and
	// holding wmu.
	waiting atomic.Int32
}

var _ jsonrpc2.ObjectStream = (*Stream)(nil)

// New returns a Stream on rwc accepting frames of up to limit bytes
// in each direction.
func New(rwc io.ReadWriteCloser, limit int) *Stream {
	return &Stream{
		rwc:   rwc,
		br:    bufio.NewReaderSize(rwc, 64<<10),
		bw:    bufio.NewWriterSize(rwc, 64<<10),
		limit: limit,
	}
}

// ReadObject reads the next well-formed message into v.
func (s *Stream) ReadObject(v any) error {
	for {
		frame, err := s.readFrame()
		if err != nil {
			return err
		}
		if err := unmarshal(frame, v); err != nil {
			if !json.Valid(frame) {
				s.reject(rpccode.ParseError, "message is not valid JSON: "+err.Error())
			} else {
				s.reject(rpccode.InvalidRequest, "message is not a JSON-RPC 2.0 request or response: "+err.Error())
			}
			continue
		}
		return nil
	}
}

// readFrame returns the next frame within the limit, in a slice of its own.
// An empty or oversized frame is answered (see reject) and skipped.
func (s *Stream) readFrame() ([]byte, error) {
	for {
		frame, err := nativemsg.ReadFrame(s.br, s.limit)
		if err == nil {
			return frame, nil // before tooLarge, whose address escapes
		}
		var tooLarge *nativemsg.FrameTooLargeError
		switch {
		case errors.As(err, &tooLarge):
			// The header was valid, so the stream can be kept in step by
			// discarding the body.
			if _, derr := io.CopyN(io.Discard, s.br, int64(tooLarge.Size)); derr != nil {
				return nil, fmt.Errorf("discarding oversized frame: %w", derr)
			}
			s.reject(rpccode.InvalidRequest, fmt.Sprintf("message of %d bytes exceeds the %d-byte limit of this link", tooLarge.Size, s.limit))
		case errors.Is(err, nativemsg.ErrEmptyFrame):
			s.reject(rpccode.InvalidRequest, "empty message: a frame must hold one JSON-RPC message")
		default:
			return frame, err
		}
	}
}

// reject answers a skipped frame with a JSON-RPC error whose id is null, as
// the specification asks when the id could not be read.
func (s *Stream) reject(code int64, msg string) {
	if len(msg) > maxRejectMessage {
		// Whatever quoted the frame, the answer stays small enough to send.
		msg = strings.ToValidUTF8(msg[:maxRejectMessage], "") + "…"
	}
	if s.OnBadMessage != nil {
		s.OnBadMessage(errors.New(msg))
	}
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg},
	})
	s.writeFrame(b) // a failed write surfaces on the next read or write
}

// maxRejectMessage bounds the message of an answer to a bad frame.
const maxRejectMessage = 512

// WriteObject marshals obj and writes it as one frame. A reply too large for
// the link is replaced by an error reply with the same id, so the caller on
// the other side is answered instead of left waiting.
func (s *Stream) WriteObject(obj any) error {
	b, err := marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding message: %w", err)
	}
	if len(b) > s.limit {
		var head struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
		}
		if json.Unmarshal(b, &head) == nil && head.Method == nil && head.ID != nil {
			msg := fmt.Sprintf("the reply of %d bytes exceeds the %d-byte limit of the link", len(b), s.limit)
			b, _ = json.Marshal(map[string]any{
				"jsonrpc": "2.0", "id": head.ID,
				"error": map[string]any{"code": rpccode.InternalError, "message": msg},
			})
		} else {
			return &nativemsg.FrameTooLargeError{Size: uint64(len(b)), Limit: s.limit}
		}
	}
	return s.writeFrame(b)
}

// unmarshal is json.Unmarshal(frame, v), but a v that decodes itself (as
// every message jsonrpc2 reads does) is handed the frame directly: its own
// decoding checks the frame's syntax, and json.Unmarshal would first scan
// the whole frame once more to check it. The frame is trimmed of the JSON
// whitespace around it, as json.Unmarshal would give it.
func unmarshal(frame []byte, v any) error {
	if u, ok := v.(json.Unmarshaler); ok {
		frame = bytes.TrimFunc(frame, isJSONSpace)
		if len(frame) == 0 {
			return json.Unmarshal(frame, v) // the error json.Unmarshal gives
		}
		return u.UnmarshalJSON(frame)
	}
	return json.Unmarshal(frame, v)
}

func isJSONSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// marshal is json.Marshal(obj), but a jsonrpc2 message (what jsonrpc2
// writes) is encoded by its own MarshalJSON alone: that returns
// json.Marshal's output, already compact and escaped, which json.Marshal
// would scan and copy once more to compact it.
func marshal(obj any) ([]byte, error) {
	if m, ok := obj.(json.Marshaler); ok && reflect.TypeOf(obj).PkgPath() == jsonrpc2Pkg {
		return m.MarshalJSON()
	}
	return json.Marshal(obj)
}

// jsonrpc2Pkg is the import path of the types whose encoding marshal trusts.
var jsonrpc2Pkg = reflect.TypeFor[jsonrpc2.Request]().PkgPath()

// writeFrame writes b as one frame. Frames written while another writer
// waits for the lock stay in the buffer for that writer to flush with its
// own, so that writers arriving together cost one system call, not one
// each; the last of them always flushes.
func (s *Stream) writeFrame(b []byte) error {
	s.waiting.Add(1)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.waiting.Add(-1)
	err := nativemsg.WriteFrame(s.bw, b, s.limit)
	if s.waiting.Load() > 0 {
		// That writer holds no lock yet, so it takes this one after us
		// and flushes.
		return err
	}
	if ferr := s.bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// Close closes the underlying connection; it unblocks a pending ReadObject.
func (s *Stream) Close() error { return s.rwc.Close() }
