package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// Request bodies of the Streamable HTTP endpoints are read whole (a message
// is forwarded as one WebSocket message), so what they hold is bounded by a
// budget of body bytes in flight: per user (Options.MaxBodyBytesPerUser) and
// over the proxy (Options.MaxBodyBytes). A body takes its Content-Length
// (or, without one, the largest message) before a byte is read, and gives it
// back once the message has been handed on to its extension's connection or
// answered, not when the call ends: a long call holds no budget. A body that
// finds no room waits for some, up to Options.BodyWait, then is refused.

// DefaultBodyWait is Options.BodyWait's default: how long a request body
// waits for room in the budget.
const DefaultBodyWait = 10 * time.Second

// Defaults of the budget: a user may send two of the largest messages at
// once, the proxy eight.
const (
	DefaultMaxBodyBytesPerUser = 2 * relaywire.MaxMessageSize
	DefaultMaxBodyBytes        = 8 * relaywire.MaxMessageSize
)

var (
	errBodyUser   = errors.New("over the user's body budget")
	errBodyGlobal = errors.New("over the proxy's body budget")
)

// bodyBudget counts the body bytes in flight, in all and per user.
type bodyBudget struct {
	perUser, total int64
	wait           time.Duration

	mu     sync.Mutex
	used   int64
	users  map[string]int64
	change chan struct{} // closed and replaced at every release
}

func newBodyBudget(perUser, total int64, wait time.Duration) *bodyBudget {
	return &bodyBudget{perUser: perUser, total: total, wait: wait, users: make(map[string]int64), change: make(chan struct{})}
}

// acquire takes n bytes for user, waiting for room until ctx ends or
// b.wait passes; it returns the release (safe to call twice) or why not.
func (b *bodyBudget) acquire(ctx context.Context, user string, n int64) (func(), error) {
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		u := b.users[user]
		var err error
		switch {
		case u+n > b.perUser:
			err = errBodyUser
		case b.used+n > b.total:
			err = errBodyGlobal
		}
		if err == nil {
			b.users[user] = u + n
			b.used += n
			b.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { b.release(user, n) }) }, nil
		}
		change := b.change
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(b.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-change:
		case <-timeout:
			return nil, err
		case <-ctx.Done():
			return nil, err
		}
	}
}

func (b *bodyBudget) release(user string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.users[user] -= n; b.users[user] <= 0 {
		delete(b.users, user)
	}
	close(b.change)
	b.change = make(chan struct{})
}

// readBody is the session engine's ReadBody: r's body read within the
// budget of its user, into a buffer of its Content-Length exactly when it
// has one, so that a large body costs its size and no more. The release
// gives the budget back; the engine calls it once the message has been
// handed on (or refused).
func (h *httpEndpoint) readBody(w http.ResponseWriter, r *http.Request) ([]byte, func(), bool) {
	limit := h.s.opts.MaxMessageSize
	n := r.ContentLength
	if n > limit {
		mcphttp.WriteError(w, http.StatusRequestEntityTooLarge, nil, relaywire.CodeInvalidRequest,
			fmt.Sprintf("request body exceeds the %d-byte limit", limit))
		return nil, nil, false
	}
	if n < 0 {
		n = limit // unknown length: the most it may be
	}
	rel, err := h.s.bodies.acquire(r.Context(), userFrom(r.Context()), n)
	if err != nil {
		h.s.m.refused.With("body_budget").Inc()
		w.Header().Set("Retry-After", "1")
		if errors.Is(err, errBodyUser) {
			mcphttp.WriteError(w, http.StatusTooManyRequests, nil, relaywire.CodeServerError, fmt.Sprintf(
				"too many request bytes of yours in flight: at most %d at once for one user, and this body of %d waited %v for room; send large messages one after another",
				h.s.bodies.perUser, n, h.s.bodies.wait))
		} else {
			mcphttp.WriteError(w, http.StatusServiceUnavailable, nil, relaywire.CodeServerError, fmt.Sprintf(
				"the proxy is reading %d bytes of request bodies, its limit, and this body of %d waited %v for room; try again in a moment",
				h.s.bodies.total, n, h.s.bodies.wait))
		}
		return nil, nil, false
	}
	if r.ContentLength < 0 {
		body, ok := mcphttp.ReadBody(w, r, limit)
		if !ok {
			rel()
			return nil, nil, false
		}
		return body, rel, true
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		rel()
		mcphttp.WriteError(w, http.StatusBadRequest, nil, relaywire.CodeParseError, "could not read the request body: "+err.Error()+
			" (it ended before its Content-Length of "+strconv.FormatInt(n, 10)+" bytes)")
		return nil, nil, false
	}
	return body, rel, true
}
