package mcphttp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Event is one server-sent event.
type Event struct {
	// Name is the event's type. Writing, "" writes no event line (a client
	// takes the event as "message"); read, an event that named none is
	// "message".
	Name string
	// ID is the event's id line ("" for none): what a client sends back in
	// Last-Event-ID to resume after it.
	ID   string
	Data []byte
}

// PingComment is an SSE comment line used as a keep-alive: no client
// takes it for a message.
const PingComment = ": ping\n\n"

// AppendEvent appends e to buf as the go-sdk writes an event, field for
// field: "event: " (if named), "id: " (if any), "data: " with the data as
// it is, then a blank line. Data must hold no line break (no encoded
// JSON-RPC message does); an empty one still writes its data line, so the
// event is dispatched (the SDK's priming event).
func AppendEvent(buf []byte, e Event) []byte {
	buf = slices.Grow(buf, len(e.Name)+len(e.ID)+len(e.Data)+24)
	if e.Name != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, e.Name...)
		buf = append(buf, '\n')
	}
	if e.ID != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, e.ID...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, e.Data...)
	return append(buf, "\n\n"...)
}

// WriteEvent writes e ([AppendEvent]) in one Write.
func WriteEvent(w io.Writer, e Event) error {
	_, err := w.Write(AppendEvent(nil, e))
	return err
}

// EventID is the id of the idx-th event (from 0) of stream, in the go-sdk's
// format "<stream>_<idx>", which its server parses back from Last-Event-ID
// to find the stream to resume. stream must not contain "_".
func EventID(stream string, idx int) string {
	return stream + "_" + strconv.Itoa(idx)
}

// ParseEventID splits an id made by [EventID] as the go-sdk does: exactly
// one "_", and a non-negative decimal index after it.
func ParseEventID(id string) (stream string, idx int, ok bool) {
	stream, n, found := strings.Cut(id, "_")
	if !found || strings.Contains(n, "_") {
		return "", 0, false
	}
	idx, err := strconv.Atoi(n)
	if err != nil || idx < 0 {
		return "", 0, false
	}
	return stream, idx, true
}

// ErrEventTooLarge is returned by [SSEReader.Next] for an event, or a line,
// larger than the reader's limit.
var ErrEventTooLarge = errors.New("server-sent event too large")

// SSEReader parses a text/event-stream body as the WHATWG "event stream
// interpretation" does: lines end in "\n" or "\r\n"; a blank line
// dispatches the event if it has a data field; lines that start with ":" are
// comments; a field's value loses one leading space; the data fields are
// joined with "\n"; "retry" and unknown fields are ignored; an id holding
// NUL is ignored. A lone "\r" does not end a line (no MCP server writes
// one). One reader per stream, not for concurrent use.
type SSEReader struct {
	r    *bufio.Reader
	max  int
	line []byte
	last string
}

// NewSSEReader reads events from r; an event (its data), or a line, over
// max bytes is an error.
func NewSSEReader(r io.Reader, max int) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, 16<<10), max: max}
}

// LastEventID is the id of the last event read that carried one, as
// Next's events passed: the Last-Event-ID to resume the stream from. It
// counts events without data too (not dispatched), and an id line with
// no value resets it to "", as the WHATWG says.
func (s *SSEReader) LastEventID() string { return s.last }

// Next returns the next event that has data (Data is a new slice each
// time). At the end of the stream it returns io.EOF, or
// io.ErrUnexpectedEOF if the stream ended inside an event (which is then
// not dispatched); an event or a line over the limit is ErrEventTooLarge
// (wrapped), and the stream cannot be read on.
func (s *SSEReader) Next() (Event, error) {
	var (
		ev      Event
		id      string
		hasID   bool
		data    bytes.Buffer
		hasData bool
		partial bool
	)
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && (partial || len(line) > 0) {
				return Event{}, io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if hasID {
				s.last = id
			}
			if !hasData { // an event without data is not dispatched
				ev, id, hasID, partial = Event{}, "", false, false
				continue
			}
			ev.ID = id
			ev.Data = bytes.Clone(bytes.TrimSuffix(data.Bytes(), []byte("\n")))
			if ev.Name == "" {
				ev.Name = "message"
			}
			return ev, nil
		}
		partial = true
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			if data.Len()+len(value) > s.max {
				return Event{}, s.tooLarge()
			}
			data.Write(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				id, hasID = string(value), true
			}
		}
	}
}

func (s *SSEReader) tooLarge() error {
	return fmt.Errorf("%w: over %d bytes", ErrEventTooLarge, s.max)
}

// readLine returns the next line without its line ending. At the end of the
// stream it returns io.EOF with whatever unterminated line was left.
func (s *SSEReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(s.line)+len(chunk) > s.max {
			return nil, s.tooLarge()
		}
		s.line = append(s.line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return s.line, err
		}
		line := s.line[:len(s.line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		return line, nil
	}
}
