package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// ids lists the ids of events.
func ids(evs []OutboxEvent) []uint64 {
	var out []uint64
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// push pushes n messages of 2 bytes each.
func push(o *Outbox, n int) {
	for range n {
		o.Push([]byte("aa"))
	}
}

func TestOutboxKeeps(t *testing.T) {
	tests := []struct {
		name     string
		budget   int
		ops      func(o *Outbox)
		kept     []uint64 // ids After(0) returns
		lastSent uint64
	}{
		{"nothing delivered is dropped, whatever the budget", 0, func(o *Outbox) { push(o, 3) }, []uint64{1, 2, 3}, 0},
		{"delivered events within the budget stay for replay", 100, func(o *Outbox) { push(o, 2); o.MarkSent(2) }, []uint64{1, 2}, 2},
		{"delivered events beyond the budget go, oldest first", 4, func(o *Outbox) { push(o, 3); o.MarkSent(3) }, []uint64{2, 3}, 3},
		{"only delivered events are trimmed", 2, func(o *Outbox) { push(o, 3); o.MarkSent(1) }, []uint64{2, 3}, 1},
		{"a push trims what was delivered before it", 4, func(o *Outbox) { push(o, 2); o.MarkSent(2); push(o, 1) }, []uint64{2, 3}, 2},
		{"ids keep counting after a trim", 0, func(o *Outbox) { push(o, 1); o.MarkSent(1); push(o, 1) }, []uint64{2}, 1},
		{"the delivered mark never goes back", 100, func(o *Outbox) { push(o, 2); o.MarkSent(2); o.MarkSent(1) }, []uint64{1, 2}, 2},
		{"a push after close is dropped", 100, func(o *Outbox) { push(o, 1); o.Close(); push(o, 1) }, []uint64{1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox(tt.budget)
			tt.ops(o)
			if got := ids(o.After(0)); !slices.Equal(got, tt.kept) {
				t.Errorf("kept %v, want %v", got, tt.kept)
			}
			if got := o.LastSent(); got != tt.lastSent {
				t.Errorf("LastSent() = %d, want %d", got, tt.lastSent)
			}
		})
	}
}

func TestOutboxAfter(t *testing.T) {
	o := NewOutbox(1 << 20)
	for _, m := range []string{"one", "two", "three", "four"} {
		o.Push([]byte(m))
	}
	o.MarkSent(4)
	tests := []struct {
		name string
		from uint64
		want []string
	}{
		{"from the start", 0, []string{"one", "two", "three", "four"}},
		{"resume from an id: the events after it", 2, []string{"three", "four"}},
		{"resume from the last id: nothing", 4, nil},
		{"an id not given yet: nothing", 99, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range o.After(tt.from) {
				got = append(got, string(e.Data))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("After(%d) = %q, want %q", tt.from, got, tt.want)
			}
		})
	}
}

func TestOutboxAttach(t *testing.T) {
	tests := []struct {
		name      string
		ops       func(o *Outbox)
		want      bool // what the next Attach says
		streaming bool // Streaming() before it
	}{
		{"a first stream attaches", func(o *Outbox) {}, true, false},
		{"a second attach is refused", func(o *Outbox) { o.Attach() }, false, true},
		{"after detach a stream attaches again", func(o *Outbox) { o.Attach(); o.Detach() }, true, false},
		{"a closed outbox takes no stream", func(o *Outbox) { o.Close() }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox(0)
			tt.ops(o)
			if got := o.Streaming(); got != tt.streaming {
				t.Errorf("Streaming() = %v, want %v", got, tt.streaming)
			}
			if got := o.Attach(); got != tt.want {
				t.Errorf("Attach() = %v, want %v", got, tt.want)
			}
		})
	}
}

// signalled reports whether c holds a signal now, without waiting.
func signalled(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestOutboxWake(t *testing.T) {
	tests := []struct {
		name string
		ops  func(o *Outbox)
		want bool
	}{
		{"nothing happened", func(o *Outbox) {}, false},
		{"a push wakes", func(o *Outbox) { o.Push([]byte("x")) }, true},
		{"a close wakes", func(o *Outbox) { o.Close() }, true},
		{"several pushes, one signal (the second read finds none)", func(o *Outbox) {
			o.Push([]byte("x"))
			o.Push([]byte("y"))
			<-o.Wake()
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox(0)
			tt.ops(o)
			if got := signalled(o.Wake()); got != tt.want {
				t.Errorf("signalled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAttachGET(t *testing.T) {
	const conflict = "this session's stream is already open; one GET stream per session"
	tests := []struct {
		name       string
		lastID     string // the Last-Event-ID header; "" sends none
		ops        func(o *Outbox)
		wantOK     bool
		wantFrom   uint64
		wantStatus int    // when refused
		wantMsg    string // when refused
		streaming  bool   // Streaming() afterwards
	}{
		{"no Last-Event-ID: after the last delivered", "", func(o *Outbox) { push(o, 2); o.MarkSent(1) }, true, 1, 0, "", true},
		{"nothing delivered yet: from the start", "", func(o *Outbox) { push(o, 1) }, true, 0, 0, "", true},
		{"Last-Event-ID resumes from that id", "1", func(o *Outbox) { push(o, 2); o.MarkSent(2) }, true, 1, 0, "", true},
		{"a second stream is refused with 409", "", func(o *Outbox) { o.Attach() }, false, 0, http.StatusConflict, conflict, true},
		{"an ended session's stream is refused with 409", "", func(o *Outbox) { o.Close() }, false, 0, http.StatusConflict, conflict, false},
		{"a Last-Event-ID that is no id: 400, and the claim is given back", "S_1", func(o *Outbox) {}, false, 0, http.StatusBadRequest,
			`Last-Event-ID "S_1" is not an event id of this gateway`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox(1 << 20)
			tt.ops(o)
			r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
			if tt.lastID != "" {
				r.Header.Set(HeaderLastEventID, tt.lastID)
			}
			w := httptest.NewRecorder()
			from, ok := AttachGET(w, r, o, conflict, "this gateway")
			if ok != tt.wantOK || from != tt.wantFrom {
				t.Fatalf("AttachGET = %d, %v; want %d, %v", from, ok, tt.wantFrom, tt.wantOK)
			}
			if got := o.Streaming(); got != tt.streaming {
				t.Errorf("Streaming() = %v afterwards, want %v", got, tt.streaming)
			}
			if ok {
				if w.Body.Len() != 0 {
					t.Errorf("answered %q on success; the stream is the caller's to write", w.Body.String())
				}
				return
			}
			if w.Code != tt.wantStatus {
				t.Errorf("status %d, want %d", w.Code, tt.wantStatus)
			}
			var body struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.NewDecoder(strings.NewReader(w.Body.String())).Decode(&body); err != nil {
				t.Fatalf("body %q: %v", w.Body.String(), err)
			}
			if body.Error.Code != rpccode.InvalidRequest || body.Error.Message != tt.wantMsg {
				t.Errorf("error %d %q, want %d %q", body.Error.Code, body.Error.Message, rpccode.InvalidRequest, tt.wantMsg)
			}
		})
	}
}

func TestOutboxPump(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	closedStop := make(chan struct{})
	close(closedStop)
	tests := []struct {
		name      string
		ops       func(o *Outbox)
		ctx       context.Context
		stop      <-chan struct{}
		cursor    uint64
		want      []Event // what the stream carries
		lastSent  uint64
		delivered int // batches reported
	}{
		{"queued events, then the session ends: all written, with ids", func(o *Outbox) {
			o.Push([]byte(`{"a":1}`))
			o.Push([]byte(`{"b":2}`))
			o.Close()
		}, context.Background(), nil, 0, []Event{ev("message", "1", `{"a":1}`), ev("message", "2", `{"b":2}`)}, 2, 1},
		{"resumed after an id: only what follows it", func(o *Outbox) {
			o.Push([]byte("x"))
			o.Push([]byte("y"))
			o.Close()
		}, context.Background(), nil, 1, []Event{ev("message", "2", "y")}, 2, 1},
		{"the client left: nothing more is written", func(o *Outbox) {}, cancelled, nil, 0, nil, 0, 0},
		{"stopped: returns", func(o *Outbox) {}, context.Background(), closedStop, 0, nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutbox(1 << 20)
			tt.ops(o)
			w := httptest.NewRecorder()
			batches := 0
			o.Pump(tt.ctx, w, w, tt.cursor, 0, tt.stop, func() { batches++ })
			got := readEvents(t, w.Body.String())
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("stream %q, want %q", got, tt.want)
			}
			if o.LastSent() != tt.lastSent || batches != tt.delivered {
				t.Errorf("LastSent() = %d after %d batches, want %d after %d", o.LastSent(), batches, tt.lastSent, tt.delivered)
			}
		})
	}
}

// readEvents parses a written stream.
func readEvents(t *testing.T, stream string) []Event {
	t.Helper()
	r := NewSSEReader(strings.NewReader(stream), testMax)
	var out []Event
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("stream %q: %v", stream, err)
		}
		out = append(out, e)
	}
}

// pingWatcher is a response writer that tells when a ping comment was
// written, so that the test waits for the ticker without guessing how long.
type pingWatcher struct {
	mu    sync.Mutex
	buf   strings.Builder
	pings chan struct{}
}

func (p *pingWatcher) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if string(b) == PingComment {
		select {
		case p.pings <- struct{}{}:
		default:
		}
	}
	return p.buf.Write(b)
}

func (p *pingWatcher) Flush() {}

func TestOutboxPumpPingsAndWakes(t *testing.T) {
	o := NewOutbox(1 << 20)
	w := &pingWatcher{pings: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.Pump(context.Background(), w, w, 0, time.Millisecond, nil, nil)
	}()
	guard := time.After(30 * time.Second) // a deadlock guard, not a timing assertion
	select {
	case <-w.pings:
	case <-guard:
		t.Fatal("no ping comment was written")
	}
	o.Push([]byte("late")) // wakes the waiting pump
	o.Close()
	select {
	case <-done:
	case <-guard:
		t.Fatal("the pump did not end when the outbox closed")
	}
	w.mu.Lock()
	stream := w.buf.String()
	w.mu.Unlock()
	if got := readEvents(t, stream); len(got) != 1 || string(got[0].Data) != "late" || got[0].ID != "1" {
		t.Errorf("stream %q: want the ping comments and one event, id 1, late", stream)
	}
}
