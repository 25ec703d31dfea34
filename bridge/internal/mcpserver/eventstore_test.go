package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func replay(t *testing.T, s *eventStore, session, stream string, after int) ([]string, error) {
	t.Helper()
	var got []string
	for data, err := range s.After(context.Background(), session, stream, after) {
		if err != nil {
			return got, err
		}
		got = append(got, string(data))
	}
	return got, nil
}

// TestEventStoreBounded: a session with one stream per call (as every
// Streamable HTTP call opens one) holds at most its bound, in bytes and in
// streams, however many calls it makes; the newest events stay replayable.
func TestEventStoreBounded(t *testing.T) {
	ctx := context.Background()
	s := newEventStore(1000)
	event := strings.Repeat("x", 100)
	for i := range 100_000 {
		stream := fmt.Sprintf("S%d", i)
		s.Open(ctx, "a", stream)
		s.Append(ctx, "a", stream, nil) // a priming event
		s.Append(ctx, "a", stream, []byte(event))
	}
	se := s.sessions["a"]
	if s.Bytes() > 1000 || len(se.streams) > 11 || len(se.order)-se.head > 21 || cap(se.order) > 1000 {
		t.Fatalf("after 100,000 calls: %d bytes, %d streams, %d events queued (cap %d)", s.Bytes(), len(se.streams), len(se.order)-se.head, cap(se.order))
	}
	if got, err := replay(t, s, "a", "S99999", 0); err != nil || len(got) != 1 || got[0] != event {
		t.Fatalf("replay of the last call = %v, %v", got, err)
	}
	if _, err := replay(t, s, "a", "S5", 0); err == nil {
		t.Fatal("replay of a long-dropped stream succeeded")
	}
	s.SessionClosed(ctx, "a")
	if s.Bytes() != 0 || len(s.sessions) != 0 {
		t.Fatal("a closed session's events were kept")
	}
}

// TestEventStoreIndices: replay returns the events after the given index,
// a stream whose early events were dropped refuses a replay from before
// them, and a stream forgotten and then written to again refuses any.
func TestEventStoreIndices(t *testing.T) {
	ctx := context.Background()
	s := newEventStore(10)
	s.Open(ctx, "a", "")
	s.Open(ctx, "a", "L")
	s.Append(ctx, "a", "", []byte("g0"))
	s.Append(ctx, "a", "L", []byte("l0"))
	s.Append(ctx, "a", "L", []byte("l1"))
	if got, err := replay(t, s, "a", "L", 0); err != nil || strings.Join(got, ",") != "l1" {
		t.Fatalf("after 0: %v %v", got, err)
	}
	s.Append(ctx, "a", "", []byte("g1234567")) // 14 bytes: g0 and l0 go
	if _, err := replay(t, s, "a", "", -1); !errors.Is(err, errEventsDropped) {
		t.Fatalf("replay from before a dropped event: %v", err)
	}
	if got, err := replay(t, s, "a", "", 0); err != nil || strings.Join(got, ",") != "g1234567" {
		t.Fatalf("standalone after 0: %v %v", got, err)
	}
	if got, err := replay(t, s, "a", "L", 0); err != nil || strings.Join(got, ",") != "l1" {
		t.Fatalf("L after 0: %v %v", got, err)
	}
	s.Append(ctx, "a", "", []byte("h1234567")) // l1 and g1234567 go; L is forgotten
	if _, ok := s.sessions["a"].streams["L"]; ok {
		t.Fatal("an emptied request stream is kept")
	}
	if _, ok := s.sessions["a"].streams[""]; !ok {
		t.Fatal("the standalone stream was forgotten")
	}
	s.Append(ctx, "a", "L", []byte("l2"))
	if _, err := replay(t, s, "a", "L", 1); !errors.Is(err, errEventsDropped) {
		t.Fatalf("replay of a forgotten stream: %v", err)
	}
	if got, err := replay(t, s, "a", "", 1); err != nil || strings.Join(got, ",") != "h1234567" {
		t.Fatalf("standalone after 1: %v %v", got, err)
	}
}

func BenchmarkEventStoreAppend(b *testing.B) {
	ctx := context.Background()
	s := newEventStore(256 << 10)
	event := []byte(strings.Repeat("x", 150))
	i := 0
	for b.Loop() {
		stream := fmt.Sprintf("S%d", i)
		s.Open(ctx, "a", stream)
		s.Append(ctx, "a", stream, event)
		i++
	}
}
