package httpguard

import (
	"sync"
	"time"
)

// Bounds of the rate limiter's memory.
const (
	// idleTTL is how long a client may stay silent before its bucket is
	// forgotten (and it starts again with a full one).
	idleTTL = 10 * time.Minute
	// sweepEvery is how often, at most, the buckets are scanned for idle
	// ones. The scan happens while serving a request: no goroutine runs in
	// the background, so there is nothing to stop.
	sweepEvery = time.Minute
	// maxClients bounds the number of buckets even when clients invent new
	// session ids faster than idleTTL forgets them; past it, the bucket
	// seen longest ago is dropped to make room.
	maxClients = 10000
)

// limiter holds one token bucket per client. It is safe for concurrent use.
type limiter struct {
	rate  float64 // tokens added per second
	burst float64 // bucket capacity
	now   func() time.Time

	mu        sync.Mutex
	clients   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time // when tokens was last brought up to date: the client's last request
}

func newLimiter(rate float64, burst int, now func() time.Time) *limiter {
	return &limiter{
		rate:      rate,
		burst:     float64(burst),
		now:       now,
		clients:   make(map[string]*bucket),
		lastSweep: now(),
	}
}

// allow takes a token from key's bucket. If there is none, it reports how
// long until there will be one.
func (l *limiter) allow(key string) (ok bool, wait time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()

	if now.Sub(l.lastSweep) >= sweepEvery {
		l.sweep(now)
	}
	b := l.clients[key]
	if b == nil {
		if len(l.clients) >= maxClients {
			l.sweep(now)
			if len(l.clients) >= maxClients {
				l.dropOldest()
			}
		}
		b = &bucket{tokens: l.burst, last: now}
		l.clients[key] = b
	} else if elapsed := now.Sub(b.last); elapsed > 0 {
		// A clock that steps back refills nothing and moves nothing back.
		b.tokens = min(l.burst, b.tokens+elapsed.Seconds()*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// sweep forgets the clients idle for idleTTL or longer. l.mu must be held.
func (l *limiter) sweep(now time.Time) {
	l.lastSweep = now
	for k, b := range l.clients {
		if now.Sub(b.last) >= idleTTL {
			delete(l.clients, k)
		}
	}
}

// dropOldest forgets the client seen longest ago. l.mu must be held.
func (l *limiter) dropOldest() {
	var oldest string
	var oldestAt time.Time
	first := true
	for k, b := range l.clients {
		if first || b.last.Before(oldestAt) {
			oldest, oldestAt, first = k, b.last, false
		}
	}
	delete(l.clients, oldest)
}

// size returns the number of buckets held, for tests.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
