package authserver

import (
	"context"
	"errors"
	"sync"
	"time"
)

// maxCheckQueue bounds the password checks waiting for their turn. A full
// queue takes a newcomer only in place of a waiter it outranks.
const maxCheckQueue = 64

// errChecksBusy: a password check did not get its turn (the queue was
// full of better-placed checks, or the wait ran out).
var errChecksBusy = errors.New("too many password checks are waiting")

// checkGate bounds the password checks running at once: each bcrypt check
// is a quarter second of one CPU, so a spray of guesses from many
// addresses would otherwise take every CPU. The rest wait in a short
// queue ordered by rank, then arrival. The rank is the number of attempts
// its address made in the last minute: the person who owns the password
// makes one or two, a spray's addresses each make many, so the owner's
// check goes before theirs however many are queued.
type checkGate struct {
	mu      sync.Mutex
	max     int
	limit   int // queue length
	running int
	peak    int // most checks ever running at once (tests read it)
	seq     uint64
	queue   []*checkWaiter // best first
}

type checkWaiter struct {
	rank int
	seq  uint64
	// ready is closed when the waiter is granted a turn (granted) or
	// pushed out of the queue by a better-placed one.
	ready   chan struct{}
	granted bool
}

func newCheckGate(max, queue int) *checkGate {
	return &checkGate{max: max, limit: queue}
}

// before reports whether a goes before b.
func (a *checkWaiter) before(b *checkWaiter) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.seq < b.seq)
}

// acquire waits up to wait for a turn to run a check of rank and returns
// the function that ends it, or errChecksBusy (or ctx's error).
func (g *checkGate) acquire(ctx context.Context, rank int, wait time.Duration) (func(), error) {
	g.mu.Lock()
	if g.running < g.max && len(g.queue) == 0 {
		g.start()
		g.mu.Unlock()
		return g.release, nil
	}
	g.seq++
	w := &checkWaiter{rank: rank, seq: g.seq, ready: make(chan struct{})}
	if len(g.queue) >= g.limit {
		last := g.queue[len(g.queue)-1]
		if !w.before(last) {
			g.mu.Unlock()
			return nil, errChecksBusy
		}
		g.queue = g.queue[:len(g.queue)-1]
		close(last.ready) // not granted: it answers busy
	}
	i := len(g.queue)
	for i > 0 && w.before(g.queue[i-1]) {
		i--
	}
	g.queue = append(g.queue, nil)
	copy(g.queue[i+1:], g.queue[i:])
	g.queue[i] = w
	g.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.granted {
		return g.release, nil
	}
	g.drop(w)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errChecksBusy
}

// start counts a check as running; g.mu is held.
func (g *checkGate) start() {
	g.running++
	g.peak = max(g.peak, g.running)
}

// release ends a check and hands its turn to the best waiter.
func (g *checkGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	for g.running < g.max && len(g.queue) > 0 {
		w := g.queue[0]
		g.queue = g.queue[1:]
		w.granted = true
		g.start()
		close(w.ready)
	}
}

// drop takes w out of the queue if it is still there; g.mu is held.
func (g *checkGate) drop(w *checkWaiter) {
	for i, q := range g.queue {
		if q == w {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return
		}
	}
}

// peakRunning is the most checks that ever ran at once.
func (g *checkGate) peakRunning() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}
