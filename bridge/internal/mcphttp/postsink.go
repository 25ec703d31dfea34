package mcphttp

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// A PostSink carries one POST's answer (a [Sink]): the response alone as
// application/json, or, when notifications or server requests come first,
// an event stream of them ending with the response. Its zero value is
// ready for use; Send may be called from any goroutine, WriteTo from the
// POST's.
type PostSink struct {
	q ResponseQueue
	// Finalize, if set, rewrites the response before it is written (on
	// the POST's goroutine, not on the one that sent it).
	Finalize func([]byte) []byte
	// Ended, if set, says why the session ended under a waiting request
	// ("" for the usual sentence): a server restart, say.
	Ended func() string
}

// Send queues msg, the response when final ([ResponseQueue.Send]).
func (p *PostSink) Send(msg []byte, final bool) { p.q.Send(msg, final) }

// WriteTo writes the answer to the request id as it comes, until it has
// been written, the client leaves, or sessionDone is closed (the session
// ended while the request waited: the client is told so rather than left
// hanging). It returns the response written, or nil if none was.
func (p *PostSink) WriteTo(w http.ResponseWriter, r *http.Request, id json.RawMessage, sessionDone <-chan struct{}) []byte {
	streaming := false
	fl, _ := w.(http.Flusher)
	for {
		q, final, ok := p.next(r.Context(), id, &sessionDone)
		if !ok {
			return nil
		}
		if !streaming && final && len(q) == 1 {
			w.Header().Set("Content-Type", ContentTypeJSON)
			w.Header().Set("Content-Length", strconv.Itoa(len(q[0])))
			_, _ = w.Write(q[0])
			return q[0]
		}
		if !streaming {
			streaming = true
			SetStreamHeaders(w.Header())
			w.WriteHeader(http.StatusOK)
		}
		for _, m := range q {
			if WriteEvent(w, Event{Name: "message", Data: m}) != nil {
				return nil
			}
		}
		if fl != nil {
			fl.Flush()
		}
		if final {
			return q[len(q)-1]
		}
	}
}

// Drain is WriteTo for an in-process client: each message that comes
// before the response goes to each, and the response is returned (nil if
// ctx ended first).
func (p *PostSink) Drain(ctx context.Context, id json.RawMessage, sessionDone <-chan struct{}, each func(msg []byte)) []byte {
	for {
		q, final, ok := p.next(ctx, id, &sessionDone)
		if !ok {
			return nil
		}
		if final {
			q, last := q[:len(q)-1], q[len(q)-1]
			for _, m := range q {
				each(m)
			}
			return last
		}
		for _, m := range q {
			each(m)
		}
	}
}

// next waits for the messages sent since its last call (at least one) and
// reports whether the last of them is the response; ok is false when ctx
// ended first. When *sessionDone is closed meanwhile, it sends the error
// saying so as the response, and stops watching it.
func (p *PostSink) next(ctx context.Context, id json.RawMessage, sessionDone *<-chan struct{}) (q [][]byte, final, ok bool) {
	for {
		q, final = p.q.Take()
		if len(q) > 0 {
			if final && p.Finalize != nil {
				q[len(q)-1] = p.Finalize(q[len(q)-1])
			}
			return q, final, true
		}
		select {
		case <-p.q.Wake():
		case <-ctx.Done():
			return nil, false, false
		case <-*sessionDone:
			msg := "the session ended before the server answered"
			if p.Ended != nil {
				if why := p.Ended(); why != "" {
					msg = why
				}
			}
			p.Send(ErrorBody(id, rpccode.InternalError, msg), true)
			*sessionDone = nil
		}
	}
}
