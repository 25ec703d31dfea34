package mcphttp

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// A Lease is a session's hold on its endpoint, for an endpoint that keeps
// sessions of its own beside a Server (the bridge's, whose sessions are
// the go-sdk's): its place in the admission table and its idle reaper,
// with the Server's rules. Begin and End bracket each request of the
// session; a session with a request being served is neither evicted by
// the table nor reaped, and its idle time counts from the last End. The
// session ends (the end function given to AdmitLease) once it has been
// idle for the timeout and is not otherwise in use.
//
// Its methods are safe for concurrent use.
type Lease struct {
	adm      *sessionlimit.Session // nil without a table
	timeout  time.Duration
	end      func()
	inUse    func() bool
	lastUsed atomic.Int64 // Unix ns of the last End or Touch

	mu     sync.Mutex
	active int
	timer  *time.Timer // nil without a timeout
	closed bool
}

// LeaseOptions configure AdmitLease. Zero values are documented.
type LeaseOptions struct {
	// Timeout ends the session idle this long; 0 means never.
	Timeout time.Duration
	// End ends the session, when it is reaped or evicted to make room; it
	// is called at most once, without a lock held, and the session's end
	// path must then call Release.
	End func()
	// InUse, if set, reports the session in use between requests (a
	// stream open, work of its own in flight): the reaper and the table's
	// eviction pass over it then. nil: in use only while a request is.
	InUse func() bool
}

// AdmitLease admits a new session of client (a sessionlimit.ClientKey)
// into table (nil admits all) and starts its idle reaper. The lease is
// returned begun, for the request that opens the session: the caller
// ends it with End, or gives the place back with Release if the session
// does not open. The error is a *sessionlimit.Refusal.
func AdmitLease(table *sessionlimit.Table, client string, o LeaseOptions) (*Lease, error) {
	l := &Lease{timeout: o.Timeout, end: o.End, inUse: o.InUse, active: 1}
	if l.end == nil {
		l.end = func() {}
	}
	if table != nil {
		// The table asks busy, not o.InUse: the lease is begun from here,
		// so another admission cannot evict it before adm.Begin below.
		adm, err := table.AdmitInUse(client, l.evicted, l.busy)
		if err != nil {
			return nil, err
		}
		adm.Begin()
		l.adm = adm
	}
	l.lastUsed.Store(time.Now().UnixNano())
	if l.timeout > 0 {
		l.mu.Lock()
		l.timer = time.AfterFunc(l.timeout, l.reap)
		l.mu.Unlock()
	}
	return l, nil
}

// Begin marks a request of the session as being served. It reports false,
// having done nothing, if the lease has ended (reaped, evicted, released).
func (l *Lease) Begin() bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.active++
	l.mu.Unlock()
	if l.adm != nil {
		l.adm.Begin()
	}
	return true
}

// End undoes a Begin (or AdmitLease's own); the idle time counts from now.
func (l *Lease) End() {
	l.lastUsed.Store(time.Now().UnixNano())
	l.mu.Lock()
	l.active--
	l.mu.Unlock()
	if l.adm != nil {
		l.adm.End()
	}
}

// Release ends the lease: the reaper stops, the place in the table is
// given back, Begin reports false from now on. Safe to call more than
// once.
func (l *Lease) Release() {
	l.mu.Lock()
	l.closeLocked()
	l.mu.Unlock()
	if l.adm != nil {
		l.adm.Release()
	}
}

func (l *Lease) closeLocked() {
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
}

// evicted is the table's end: the table already gave the place back.
func (l *Lease) evicted() {
	l.mu.Lock()
	l.closeLocked()
	l.mu.Unlock()
	l.end()
}

// busy reports the session in use: a request being served, or InUse.
// The table calls it with its lock held; the lease never holds its own
// lock while calling into the table.
func (l *Lease) busy() bool {
	l.mu.Lock()
	active := l.active
	l.mu.Unlock()
	return active > 0 || (l.inUse != nil && l.inUse())
}

// Touch counts the session as used now (a message it sent or was sent)
// without a request being served.
func (l *Lease) Touch() { l.lastUsed.Store(time.Now().UnixNano()) }

// LastUsed is when the session was last used: the last End or Touch.
func (l *Lease) LastUsed() time.Time { return time.Unix(0, l.lastUsed.Load()) }

// EndIfIdle ends the session now unless a request of it is being served,
// it is in use or it has ended, and reports whether it ended it: an
// endpoint making room for a new session of the same user. The check and
// the end are one step, as in reaping.
func (l *Lease) EndIfIdle() bool {
	ended, _ := l.endIfIdleFor(0)
	return ended
}

// reap ends the session if it has been idle for the timeout, else looks
// again when it could be.
func (l *Lease) reap() {
	if ended, wait := l.endIfIdleFor(l.timeout); !ended && wait > 0 {
		l.mu.Lock()
		if !l.closed {
			l.timer.Reset(wait)
		}
		l.mu.Unlock()
	}
}

// endIfIdleFor ends the session if it has been idle for at least d (no
// request being served, not in use); else wait is when to look again (0:
// it has ended). The check and the end are one step: a Begin meanwhile
// finds the lease either alive or ended.
func (l *Lease) endIfIdleFor(d time.Duration) (ended bool, wait time.Duration) {
	// busy asks whether a request is being served (the opening one too)
	// before it asks InUse, which may read what that request is still
	// setting up (the Target's state of the session): the lease's lock
	// orders that read after the request's End.
	busy := l.busy()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false, 0
	}
	idle := time.Duration(time.Now().UnixNano() - l.lastUsed.Load())
	if busy || l.active > 0 || idle < d {
		l.mu.Unlock()
		return false, max(d-idle, min(d/4, time.Second))
	}
	l.closeLocked()
	l.mu.Unlock()
	l.end()
	return true, 0
}

// A SessionTable indexes an endpoint's live sessions by session id. The
// zero value is an empty table; it is safe for concurrent use.
type SessionTable[S comparable] struct {
	mu   sync.RWMutex
	byID map[string]S
}

// Get returns the session with this id, if any.
func (t *SessionTable[S]) Get(id string) (s S, ok bool) {
	t.mu.RLock()
	s, ok = t.byID[id]
	t.mu.RUnlock()
	return s, ok
}

// Put indexes s under id.
func (t *SessionTable[S]) Put(id string, s S) {
	t.mu.Lock()
	if t.byID == nil {
		t.byID = make(map[string]S)
	}
	t.byID[id] = s
	t.mu.Unlock()
}

// Delete forgets id if it is still s (a session that ended must not take
// a newer one with the same id along).
func (t *SessionTable[S]) Delete(id string, s S) {
	t.mu.Lock()
	if cur, ok := t.byID[id]; ok && cur == s {
		delete(t.byID, id)
	}
	t.mu.Unlock()
}

// All returns every session in the table.
func (t *SessionTable[S]) All() []S {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]S, 0, len(t.byID))
	for _, s := range t.byID {
		out = append(out, s)
	}
	return out
}

// Len is the number of sessions in the table.
func (t *SessionTable[S]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byID)
}
