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
type eventStore struct {
	maxBytes int // per session

	mu       sync.Mutex
	sessions map[string]*sessionEvents
}

type sessionEvents struct {
	bytes   int
	streams map[string]*eventList
}

type eventList struct {
	first int // index of data[0]
	data  [][]byte
	bytes int
}

var _ mcp.EventStore = (*eventStore)(nil)

// errEventsDropped is returned when a client asks to resume from an event
// the bound already dropped.
var errEventsDropped = errors.New("the events after that id were dropped (the session's replay buffer is bounded); start a new stream")

func newEventStore(maxBytes int) *eventStore {
	return &eventStore{maxBytes: maxBytes, sessions: make(map[string]*sessionEvents)}
}

func (s *eventStore) list(sessionID, streamID string) *eventList {
	se := s.sessions[sessionID]
	if se == nil {
		se = &sessionEvents{streams: make(map[string]*eventList)}
		s.sessions[sessionID] = se
	}
	l := se.streams[streamID]
	if l == nil {
		l = &eventList{}
		se.streams[streamID] = l
	}
	return l
}

func (s *eventStore) Open(_ context.Context, sessionID, streamID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list(sessionID, streamID)
	return nil
}

func (s *eventStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.list(sessionID, streamID)
	se := s.sessions[sessionID]
	l.data = append(l.data, data)
	l.bytes += len(data)
	se.bytes += len(data)
	// Drop the oldest events of this session's largest stream until it fits.
	for se.bytes > s.maxBytes {
		var big *eventList
		for _, c := range se.streams {
			if len(c.data) > 0 && (big == nil || c.bytes > big.bytes) {
				big = c
			}
		}
		if big == nil {
			break
		}
		n := len(big.data[0])
		big.data[0] = nil
		big.data = big.data[1:]
		big.first++
		big.bytes -= n
		se.bytes -= n
	}
	return nil
}

func (s *eventStore) After(_ context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	var events [][]byte
	var err error
	if se := s.sessions[sessionID]; se == nil || se.streams[streamID] == nil {
		err = fmt.Errorf("unknown stream %q of session %q", streamID, sessionID)
	} else {
		l := se.streams[streamID]
		start := index + 1 - l.first
		switch {
		case start < 0:
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
