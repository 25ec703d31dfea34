package httpguard

import (
	"math"
	"sync"
	"time"
)

// maxClients bounds the buckets one limiter holds. Past it, the bucket used
// longest ago is dropped to make room, in constant time: its client starts
// again with a full bucket, as it would after a pause, so forgetting it
// never refuses anyone.
const maxClients = 10000

// The rate limits of the bridge, the gateway, the cloud proxy and its
// pairing codes are one family of token buckets: [Bucket] for one client
// (a connection, a user) and [Limiter] for a table of them by key (a client
// address, a session, a user id).

// A Bucket is one token bucket: rate tokens a second, at most burst of
// them, full at first. A nil *Bucket allows everything. It is safe for
// concurrent use.
type Bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time // zero until first used
}

// NewBucket returns a full bucket, or nil (no limit) when rate is not
// positive.
func NewBucket(rate, burst float64) *Bucket {
	if rate <= 0 {
		return nil
	}
	return &Bucket{rate: rate, burst: burst, tokens: burst}
}

// Allow takes a token at now, and reports false if there was none.
func (b *Bucket) Allow(now time.Time) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = refill(b.tokens, now.Sub(b.last), b.rate, b.burst)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// refill is tokens after elapsed at rate, at most burst; a clock that
// steps back refills nothing.
func refill(tokens float64, elapsed time.Duration, rate, burst float64) float64 {
	if elapsed <= 0 {
		return tokens
	}
	return min(burst, tokens+elapsed.Seconds()*rate)
}

// A Limiter holds one token bucket per key, at most capacity of them, in a
// table whose slots form a list from the most to the least recently used.
// A request may borrow a token up to maxWait ahead: it is then admitted
// after that wait rather than refused, so a client that bursts is slowed.
// It is safe for concurrent use; no goroutine runs in the background.
type Limiter[K comparable] struct {
	rate    float64 // tokens added per second
	burst   float64 // bucket capacity
	maxWait time.Duration
	now     func() time.Time

	mu       sync.Mutex
	index    map[K]int32
	slots    []slot[K] // grows to capacity, then slots are reused
	capacity int
	head     int32 // most recently used slot, or -1
	tail     int32 // least recently used slot, or -1

	// shareWhenFull (NewPerPeriod): a full table forgets a key only once
	// its bucket is full again; until then newcomers share spill.
	shareWhenFull bool
	spill         slot[K]
}

type slot[K comparable] struct {
	key        K
	tokens     float64   // negative while requests wait for tokens they borrowed
	last       time.Time // when tokens was last brought up to date
	prev, next int32     // towards head and tail; -1 at the ends
}

// NewLimiter returns a Limiter of rate tokens a second and bursts of burst
// per key, holding at most capacity keys (past it, the key used longest
// ago is forgotten: its client starts again with a full bucket, as after a
// pause), on the clock now.
func NewLimiter[K comparable](rate float64, burst int, maxWait time.Duration, capacity int, now func() time.Time) *Limiter[K] {
	return &Limiter[K]{
		rate: rate, burst: float64(burst), maxWait: maxWait, now: now,
		index: make(map[K]int32), capacity: capacity, head: -1, tail: -1,
	}
}

// NewPerPeriod returns a Limiter of n events per period for each key, in
// bursts of n, that waits for nothing: for limits on guesses (sign-in
// attempts, registrations). When its table of capacity keys is full it
// forgets the key used longest ago only once that key's bucket is full
// again, which changes nothing for it; until then a new key shares one
// bucket with every other that found no room, so spreading attempts over
// more keys than the table holds buys no more of them.
func NewPerPeriod[K comparable](n int, period time.Duration, capacity int, now func() time.Time) *Limiter[K] {
	l := NewLimiter[K](float64(n)/period.Seconds(), n, 0, capacity, now)
	l.shareWhenFull = true
	l.spill = slot[K]{tokens: l.burst, prev: -1, next: -1}
	return l
}

// Spent is how many tokens key's bucket lacks now: about the events of key
// in the last burst/rate seconds. A key that shares the overflow bucket
// (NewPerPeriod) reads that bucket's; an unknown key, 0.
func (l *Limiter[K]) Spent(key K) int {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.spill
	if i, ok := l.index[key]; ok {
		s = &l.slots[i]
	} else if !l.shareWhenFull || len(l.slots) < l.capacity {
		return 0
	}
	tokens := s.tokens
	if now.After(s.last) {
		tokens = refill(tokens, now.Sub(s.last), l.rate, l.burst)
	}
	return int(math.Ceil(l.burst - tokens))
}

// Reserve takes a token from key's bucket. If there is none it borrows one,
// provided it becomes due within maxWait: ok is then true and wait is how
// long the request must be held first. If not, ok is false and wait is how
// long until a request would be admitted with no more than maxWait to wait.
func (l *Limiter[K]) Reserve(key K) (wait time.Duration, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.lookup(key, now)
	if now.After(s.last) { // a clock that steps back moves nothing back
		s.tokens = refill(s.tokens, now.Sub(s.last), l.rate, l.burst)
		s.last = now
	}
	if s.tokens >= 1 {
		s.tokens--
		return 0, true
	}
	wait = l.seconds(1 - s.tokens)
	if wait <= l.maxWait {
		s.tokens--
		return wait, true
	}
	return wait - l.maxWait, false
}

// Allow takes a token from key's bucket if one is there now (it waits for
// none, whatever maxWait is), and reports whether it did.
func (l *Limiter[K]) Allow(key K) bool {
	wait, ok := l.Reserve(key)
	if ok && wait > 0 {
		l.Refund(key)
		return false
	}
	return ok
}

// Refund gives back a token Reserve took, for a request refused by a later
// check. A key forgotten meanwhile has a full bucket already.
func (l *Limiter[K]) Refund(key K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, ok := l.index[key]; ok {
		l.slots[i].tokens = min(l.burst, l.slots[i].tokens+1)
	} else if l.shareWhenFull && len(l.slots) == l.capacity {
		l.spill.tokens = min(l.burst, l.spill.tokens+1)
	}
}

func (l *Limiter[K]) seconds(tokens float64) time.Duration {
	return time.Duration(tokens / l.rate * float64(time.Second))
}

// lookup returns key's slot, moved to the head of the list, creating it
// with a full bucket (in the least recently used slot once the table is
// full). l.mu must be held.
func (l *Limiter[K]) lookup(key K, now time.Time) *slot[K] {
	i, ok := l.index[key]
	switch {
	case ok:
		l.unlink(i)
	case len(l.slots) < l.capacity:
		i = int32(len(l.slots))
		l.slots = append(l.slots, slot[K]{})
	default:
		i = l.tail
		if t := &l.slots[i]; l.shareWhenFull && refill(t.tokens, now.Sub(t.last), l.rate, l.burst) < l.burst {
			return &l.spill // no key can be forgotten without a gift of tokens
		}
		l.unlink(i)
		delete(l.index, l.slots[i].key)
	}
	if !ok {
		l.slots[i] = slot[K]{key: key, tokens: l.burst, last: now}
		l.index[key] = i
	}
	l.pushFront(i)
	return &l.slots[i]
}

func (l *Limiter[K]) unlink(i int32) {
	s := &l.slots[i]
	if s.prev >= 0 {
		l.slots[s.prev].next = s.next
	} else {
		l.head = s.next
	}
	if s.next >= 0 {
		l.slots[s.next].prev = s.prev
	} else {
		l.tail = s.prev
	}
}

func (l *Limiter[K]) pushFront(i int32) {
	s := &l.slots[i]
	s.prev, s.next = -1, l.head
	if l.head >= 0 {
		l.slots[l.head].prev = i
	}
	l.head = i
	if l.tail < 0 {
		l.tail = i
	}
}

// size returns the number of buckets held, for tests.
func (l *Limiter[K]) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.index)
}
