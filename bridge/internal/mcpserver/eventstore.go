package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// eventStore keeps the recent events of each Streamable HTTP session so a
// client can resume a stream with Last-Event-ID. Unlike the SDK's memory
// store, whose bound is for the whole process, each session has its own
// bound: one chatty session cannot push out another's history, and
// abandoned sessions cost at most their bound until they are reaped.
//
// Within a session the oldest events go first, whatever their stream, and a
// stream whose events are all gone is forgotten, so a long session (one
// stream per call) costs no more than its bound and an append costs the
// same on the millionth call as on the first.
type eventStore struct {
	maxBytes int // per session

	mu       sync.Mutex
	sessions map[string]*sessionEvents
}

type sessionEvents struct {
	bytes   int
	streams map[string]*eventList
	// order holds the list of every stored event, oldest first (from
	// order[head]): the order they are dropped in.
	order []*eventList
	head  int
}

type eventList struct {
	id    string
	first int // index of data[0]
	data  [][]byte
	bytes int
	// lost marks a list begun by an Append after the stream's earlier
	// events were dropped and the stream forgotten: the indices of its
	// events are unknown, so it cannot be replayed.
	lost bool
}

var _ mcp.EventStore = (*eventStore)(nil)

// errEventsDropped is returned when a client asks to resume from an event
// the bound already dropped.
var errEventsDropped = errors.New("the events after that id were dropped (the session's replay buffer is bounded); start a new stream")

func newEventStore(maxBytes int) *eventStore {
	return &eventStore{maxBytes: maxBytes, sessions: make(map[string]*sessionEvents)}
}

// list returns the list of a stream, creating it (and the session's state)
// if needed; opened says whether the stream is just starting.
func (s *eventStore) list(sessionID, streamID string, opened bool) (*sessionEvents, *eventList) {
	se := s.sessions[sessionID]
	if se == nil {
		se = &sessionEvents{streams: make(map[string]*eventList)}
		s.sessions[sessionID] = se
	}
	l := se.streams[streamID]
	if l == nil {
		// The SDK opens every stream before appending to it, so a stream
		// with no list when it appends is one that was forgotten.
		l = &eventList{id: streamID, lost: !opened}
		se.streams[streamID] = l
	}
	return se, l
}

func (s *eventStore) Open(_ context.Context, sessionID, streamID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list(sessionID, streamID, true)
	return nil
}

func (s *eventStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, l := s.list(sessionID, streamID, false)
	l.data = append(l.data, data)
	l.bytes += len(data)
	se.bytes += len(data)
	se.order = append(se.order, l)
	for se.bytes > s.maxBytes && se.head < len(se.order) {
		se.dropOldest()
	}
	return nil
}

// dropOldest drops the session's oldest event.
func (se *sessionEvents) dropOldest() {
	l := se.order[se.head]
	se.order[se.head] = nil
	se.head++
	if se.head > 64 && se.head*2 > len(se.order) {
		n := copy(se.order, se.order[se.head:])
		clear(se.order[n:])
		se.order, se.head = se.order[:n], 0
	}
	n := len(l.data[0])
	l.data[0] = nil
	l.data = l.data[1:]
	l.first++
	l.bytes -= n
	se.bytes -= n
	// Forget a request stream with nothing left to replay (the standalone
	// stream, "", lives as long as the session and is kept).
	if len(l.data) == 0 && l.id != "" && se.streams[l.id] == l {
		delete(se.streams, l.id)
	}
}

func (s *eventStore) After(_ context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	var events [][]byte
	var err error
	if se := s.sessions[sessionID]; se == nil || se.streams[streamID] == nil {
		err = fmt.Errorf("unknown stream %q of session %q (or its events were dropped)", streamID, sessionID)
	} else {
		l := se.streams[streamID]
		start := index + 1 - l.first
		switch {
		case start < 0 || l.lost:
			err = errEventsDropped
		case start < len(l.data):
			events = slices.Clone(l.data[start:])
		}
	}
	s.mu.Unlock()
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, e := range events {
			if !yield(e, nil) {
				return
			}
		}
	}
}

func (s *eventStore) SessionClosed(_ context.Context, sessionID string) error {
	s.mu.Lock()
	delete(s.sessions, sessionID)
	s.mu.Unlock()
	return nil
}

// Bytes reports the bytes held, for /metrics.
func (s *eventStore) Bytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, se := range s.sessions {
		n += se.bytes
	}
	return n
}

// known reports whether the store has events of a stream of a session (a
// stream it never saw, or forgot, cannot be replayed).
func (s *eventStore) known(sessionID, streamID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[sessionID]
	return se != nil && se.streams[streamID] != nil
}
