package httpguard

import (
	"sync"
	"time"
)

// maxClients bounds the buckets one limiter holds. Past it, the bucket used
// longest ago is dropped to make room, in constant time: its client starts
// again with a full bucket, as it would after a pause, so forgetting it
// never refuses anyone.
const maxClients = 10000

// limiter holds one token bucket per key, at most capacity of them, in a
// table whose slots form a list from the most to the least recently used.
// A request may borrow a token up to maxWait ahead: it is then admitted
// after that wait rather than refused, so a client that bursts is slowed.
// It is safe for concurrent use; no goroutine runs in the background.
type limiter[K comparable] struct {
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
}

type slot[K comparable] struct {
	key        K
	tokens     float64   // negative while requests wait for tokens they borrowed
	last       time.Time // when tokens was last brought up to date
	prev, next int32     // towards head and tail; -1 at the ends
}

func newLimiter[K comparable](rate float64, burst int, maxWait time.Duration, capacity int, now func() time.Time) *limiter[K] {
	return &limiter[K]{
		rate: rate, burst: float64(burst), maxWait: maxWait, now: now,
		index: make(map[K]int32), capacity: capacity, head: -1, tail: -1,
	}
}

// reserve takes a token from key's bucket. If there is none it borrows one,
// provided it becomes due within maxWait: ok is then true and wait is how
// long the request must be held first. If not, ok is false and wait is how
// long until a request would be admitted with no more than maxWait to wait.
func (l *limiter[K]) reserve(key K) (wait time.Duration, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.lookup(key, now)
	if elapsed := now.Sub(s.last); elapsed > 0 {
		// A clock that steps back refills nothing and moves nothing back.
		s.tokens = min(l.burst, s.tokens+elapsed.Seconds()*l.rate)
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

// refund gives back a token reserve took, for a request refused by a later
// check. A key forgotten meanwhile has a full bucket already.
func (l *limiter[K]) refund(key K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, ok := l.index[key]; ok {
		l.slots[i].tokens = min(l.burst, l.slots[i].tokens+1)
	}
}

func (l *limiter[K]) seconds(tokens float64) time.Duration {
	return time.Duration(tokens / l.rate * float64(time.Second))
}

// lookup returns key's slot, moved to the head of the list, creating it
// with a full bucket (in the least recently used slot once the table is
// full). l.mu must be held.
func (l *limiter[K]) lookup(key K, now time.Time) *slot[K] {
	i, ok := l.index[key]
	switch {
	case ok:
		l.unlink(i)
	case len(l.slots) < l.capacity:
		i = int32(len(l.slots))
		l.slots = append(l.slots, slot[K]{})
	default:
		i = l.tail
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

func (l *limiter[K]) unlink(i int32) {
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

func (l *limiter[K]) pushFront(i int32) {
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
func (l *limiter[K]) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.index)
}
