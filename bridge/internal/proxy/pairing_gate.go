package proxy

import (
	"container/heap"
	"math"
	"sync"
	"time"
)

// pairingGate is the proxy-wide bound on failed pairing-code checks
// (PairingOptions.AttemptsGlobal), which must bound guessing without ever
// locking out the person who holds a valid code. A code cannot be told from
// a guess before it is checked, so the gate never refuses for the bound:
//
//   - a token bucket of AttemptsGlobal turns a minute (as many at once) pays
//     for checks; a check whose code works gives its turn back, so only
//     failed checks use the bound;
//   - with no turn free, an attempt waits in a queue ordered by how much its
//     address has failed lately (a decaying count, failScore), then by
//     arrival: turns go round the addresses, the least failing first, so a
//     person typing a fresh code goes ahead of every address that has been
//     guessing, however many there are;
//   - the queue holds at most MaxWaiting attempts, and maxWaitingPerAddress
//     of one address; when full, a newcomer that failed less than the worst
//     waiting attempt takes its place. An attempt waits at most MaxWait.
//
// All of it is guarded by pairing.mu.
type pairingGate struct {
	rate       float64 // turns per second
	burst      float64
	tokens     float64
	last       time.Time // when tokens was last brought up to date
	maxWaiting int

	queue   waitQueue
	seq     uint64
	perAddr map[string]int // attempts waiting, by address
	scores  map[string]*failScore
	timer   *time.Timer // wakes the queue when the next turn is due
	mu      *sync.Mutex // pairing.mu, for the timer
	now     func() time.Time
}

// maxWaitingPerAddress bounds the attempts of one address waiting at once.
const maxWaitingPerAddress = 2

// failHalfLife is how fast an address's failures are forgotten: an address
// that guessed a minute ago still ranks behind one that never did.
const failHalfLife = 10 * time.Minute

// maxScores bounds the addresses whose failures are remembered; past it,
// the sweep forgets the least failing ones first.
const maxScores = 1 << 16

// failScore is an address's failures, each weighing less as it ages.
type failScore struct {
	v float64
	t time.Time
}

func (f *failScore) at(now time.Time) float64 {
	return f.v * math.Exp2(-now.Sub(f.t).Seconds()/failHalfLife.Seconds())
}

// pairWaiter is one attempt waiting for its turn; turn receives nil (its
// turn) or the error to answer.
type pairWaiter struct {
	key   string
	score float64
	seq   uint64
	index int // in the queue; -1 once out of it
	turn  chan error
}

func (g *pairingGate) configure(perMinute, maxWaiting int, mu *sync.Mutex, clock func() time.Time) {
	now := clock()
	g.mu, g.now = mu, clock
	g.rate = float64(perMinute) / 60
	g.burst = float64(perMinute)
	if g.last.IsZero() {
		g.tokens, g.last = g.burst, now
	}
	g.maxWaiting = maxWaiting
	if g.perAddr == nil {
		g.perAddr = make(map[string]int)
		g.scores = make(map[string]*failScore)
	}
}

func (g *pairingGate) refill(now time.Time) {
	if d := now.Sub(g.last).Seconds(); d > 0 {
		g.tokens = min(g.burst, g.tokens+d*g.rate)
	}
	g.last = now
}

func (g *pairingGate) score(key string, now time.Time) float64 {
	if f := g.scores[key]; f != nil {
		return f.at(now)
	}
	return 0
}

// enter takes a turn for an attempt from key: (nil, nil) when it may be
// checked at once, a waiter to wait on otherwise, or the error to answer
// when it cannot even wait.
func (g *pairingGate) enter(key string, now time.Time) (*pairWaiter, error) {
	g.refill(now)
	if g.queue.Len() == 0 && g.tokens >= 1 {
		g.tokens--
		return nil, nil
	}
	if g.perAddr[key] >= maxWaitingPerAddress {
		return nil, errPairingQueued
	}
	w := &pairWaiter{key: key, score: g.score(key, now), seq: g.seq, turn: make(chan error, 1)}
	g.seq++
	if g.queue.Len() >= g.maxWaiting {
		worst := g.queue.worst()
		if !worst.before(w) {
			return nil, errPairingGlobal
		}
		g.remove(worst)
		worst.turn <- errPairingGlobal
	}
	heap.Push(&g.queue, w)
	g.perAddr[key]++
	g.dispatch(now)
	return w, nil
}

// remove takes w out of the queue.
func (g *pairingGate) remove(w *pairWaiter) {
	heap.Remove(&g.queue, w.index)
	if g.perAddr[w.key]--; g.perAddr[w.key] <= 0 {
		delete(g.perAddr, w.key)
	}
}

// leave takes w out of the queue after its wait ran out; false if it was
// in it still, true if its answer came meanwhile (read it from w.turn).
func (g *pairingGate) leave(w *pairWaiter) bool {
	if w.index < 0 {
		return true
	}
	g.remove(w)
	return false
}

// dispatch gives the free turns to the first in the queue, and sets the
// timer for when the next one is due.
func (g *pairingGate) dispatch(now time.Time) {
	g.refill(now)
	for g.queue.Len() > 0 && g.tokens >= 1 {
		g.tokens--
		w := g.queue.first()
		g.remove(w)
		w.turn <- nil
	}
	if g.queue.Len() == 0 || g.timer != nil {
		return
	}
	due := time.Duration((1 - g.tokens) / g.rate * float64(time.Second))
	g.timer = time.AfterFunc(max(due, time.Millisecond), g.wake)
}

// wake is the timer's: it takes pairing.mu.
func (g *pairingGate) wake() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timer = nil
	g.dispatch(g.now())
}

// giveBack returns the turn of a check that did not fail.
func (g *pairingGate) giveBack(now time.Time) {
	g.refill(now)
	g.tokens = min(g.burst, g.tokens+1)
	g.dispatch(now)
}

// failed records a failed check of an attempt from key.
func (g *pairingGate) failed(key string, now time.Time) {
	f := g.scores[key]
	if f == nil {
		if len(g.scores) >= maxScores {
			return // the sweep makes room; until then this one fails unranked
		}
		f = &failScore{}
		g.scores[key] = f
	}
	f.v, f.t = f.at(now)+1, now
}

// sweep forgets addresses whose failures have faded, and, over maxScores,
// the least failing.
func (g *pairingGate) sweep(now time.Time) {
	for k, f := range g.scores {
		if f.at(now) < 0.05 {
			delete(g.scores, k)
		}
	}
	for cut := 0.5; len(g.scores) >= maxScores; cut *= 2 {
		for k, f := range g.scores {
			if f.at(now) < cut {
				delete(g.scores, k)
			}
		}
	}
}

// before orders waiters: the address that failed less first, then the
// earlier.
func (w *pairWaiter) before(o *pairWaiter) bool {
	if w.score != o.score {
		return w.score < o.score
	}
	return w.seq < o.seq
}

// waitQueue is a heap of waiters, first the one whose turn is next.
type waitQueue []*pairWaiter

func (q waitQueue) Len() int           { return len(q) }
func (q waitQueue) Less(i, j int) bool { return q[i].before(q[j]) }
func (q waitQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *waitQueue) Push(x any) {
	w := x.(*pairWaiter)
	w.index = len(*q)
	*q = append(*q, w)
}
func (q *waitQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	w.index = -1
	return w
}

func (q waitQueue) first() *pairWaiter { return q[0] }

// worst is the waiter whose turn would come last: a leaf of the heap, so a
// scan of the second half (MaxWaiting is a few thousand; this runs only
// when the queue is full).
func (q waitQueue) worst() *pairWaiter {
	w := q[len(q)/2]
	for _, o := range q[len(q)/2:] {
		if w.before(o) {
			w = o
		}
	}
	return w
}
