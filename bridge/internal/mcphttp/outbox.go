package mcphttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// An Outbox is the replayable event log of a session's own stream (the
// Streamable HTTP GET stream, or a legacy SSE stream): the messages that
// ride on no request, numbered 1, 2, … for resumption with Last-Event-ID.
// Delivered events are kept up to a byte budget, so that a client whose
// stream broke can ask for them again; undelivered ones are never dropped,
// whatever the budget. At most one stream reads it at a time (Attach).
// Its methods are safe for concurrent use.
type Outbox struct {
	mu      sync.Mutex
	events  []OutboxEvent
	nextID  uint64
	sent    uint64 // the last id written to a stream
	bytes   int
	budget  int
	wake    chan struct{}
	closed  bool
	streams int // open streams (at most one)
}

// An OutboxEvent is one message of an Outbox with its id.
type OutboxEvent struct {
	ID   uint64
	Data []byte
}

// NewOutbox returns an empty outbox that keeps up to budget bytes of
// delivered events for replay.
func NewOutbox(budget int) *Outbox {
	return &Outbox{budget: budget, wake: make(chan struct{}, 1)}
}

// Push appends msg with the next id and wakes the stream; after Close it
// does nothing.
func (o *Outbox) Push(msg []byte) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.nextID++
	o.events = append(o.events, OutboxEvent{o.nextID, msg})
	o.bytes += len(msg)
	o.trimLocked()
	o.mu.Unlock()
	o.poke()
}

func (o *Outbox) poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// trimLocked drops the oldest delivered events beyond the budget.
func (o *Outbox) trimLocked() {
	n := 0
	for n < len(o.events) && o.bytes > o.budget && o.events[n].ID <= o.sent {
		o.bytes -= len(o.events[n].Data)
		n++
	}
	if n > 0 {
		o.events = append(o.events[:0], o.events[n:]...)
	}
}

// After returns the kept events whose id is greater than id, oldest
// first.
func (o *Outbox) After(id uint64) []OutboxEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []OutboxEvent
	for _, e := range o.events {
		if e.ID > id {
			out = append(out, e)
		}
	}
	return out
}

// MarkSent records that the events up to id reached a stream, which makes
// them subject to the budget.
func (o *Outbox) MarkSent(id uint64) {
	o.mu.Lock()
	o.sent = max(o.sent, id)
	o.trimLocked()
	o.mu.Unlock()
}

// LastSent is the id of the last event written to a stream, 0 if none:
// where a stream opened without Last-Event-ID resumes.
func (o *Outbox) LastSent() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sent
}

// Attach claims the outbox for a stream; false if one is open already, or
// the outbox is closed. A successful Attach is undone by Detach.
func (o *Outbox) Attach() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.streams > 0 || o.closed {
		return false
	}
	o.streams++
	return true
}

// Detach gives back the claim of Attach.
func (o *Outbox) Detach() {
	o.mu.Lock()
	o.streams--
	o.mu.Unlock()
}

// Streaming reports whether a stream is attached: a session with one is
// not idle.
func (o *Outbox) Streaming() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams > 0
}

// Close ends the outbox: the attached stream, woken, finds it Closed, and
// Push drops what comes later.
func (o *Outbox) Close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.poke()
}

// Closed reports whether Close was called.
func (o *Outbox) Closed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closed
}

// Wake receives after a Push or Close; one signal may stand for several,
// so the reader looks at After and Closed each time.
func (o *Outbox) Wake() <-chan struct{} { return o.wake }

// AttachGET claims o for the stream a GET opens and returns the id the
// stream resumes after: the Last-Event-ID header's, else the last one
// delivered. When it cannot, it has answered the request itself: 409 with
// the message conflict if the session's stream is open already (or the
// session ended), 400 if Last-Event-ID is no event id (idsOf names whose
// ids they are, for that message: "this gateway"). When ok, the caller
// must Detach o once the stream ends.
func AttachGET(w http.ResponseWriter, r *http.Request, o *Outbox, conflict, idsOf string) (from uint64, ok bool) {
	if !o.Attach() {
		WriteError(w, http.StatusConflict, nil, rpccode.InvalidRequest, conflict)
		return 0, false
	}
	from = o.LastSent()
	if last := r.Header.Get(HeaderLastEventID); last != "" {
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			o.Detach()
			WriteError(w, http.StatusBadRequest, nil, rpccode.InvalidRequest, fmt.Sprintf("Last-Event-ID %q is not an event id of %s", last, idsOf))
			return 0, false
		}
		from = n
	}
	return from, true
}

// Pump writes the events after cursor to w as they come, as "message"
// events with their ids, flushing after each batch, which it then marks
// delivered; delivered, when set, runs after each batch too. Every
// pingEvery (0: never) it writes a PingComment, so that idle connections
// are not cut. It returns when the client leaves (ctx), a write fails, o
// is closed (once what was queued is written), or stop is closed. The
// stream's headers are the caller's, written before.
func (o *Outbox) Pump(ctx context.Context, w io.Writer, fl http.Flusher, cursor uint64, pingEvery time.Duration, stop <-chan struct{}, delivered func()) {
	var ping <-chan time.Time
	if pingEvery > 0 {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		ping = t.C
	}
	for {
		evs := o.After(cursor)
		for _, e := range evs {
			if WriteEvent(w, Event{Name: "message", ID: strconv.FormatUint(e.ID, 10), Data: e.Data}) != nil {
				return
			}
			cursor = e.ID
		}
		if len(evs) > 0 {
			fl.Flush()
			o.MarkSent(cursor)
			if delivered != nil {
				delivered()
			}
		}
		if o.Closed() {
			return
		}
		select {
		case <-o.wake:
		case <-ping:
			// A comment line: no client mistakes it for a message.
			if _, err := io.WriteString(w, PingComment); err != nil {
				return
			}
			fl.Flush()
		case <-ctx.Done():
			return
		case <-stop:
			return
		}
	}
}
