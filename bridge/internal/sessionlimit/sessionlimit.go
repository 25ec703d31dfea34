// Package sessionlimit bounds the MCP sessions a process holds: a cap on all
// sessions together and a cap per client. Every session-holding endpoint of
// the bridge (Streamable HTTP, legacy SSE, the gateway's routes and its
// aggregate) admits its sessions through one Table, so one careless or
// hostile client cannot make the bridge hold sessions without bound.
//
// At a cap, the table first makes room by ending the least recently used
// session of the same client that has no request in flight: a one-shot
// client that never deletes its sessions (the Inspector's CLI, scripts)
// keeps working, and only its own oldest sessions go. When the client has
// no such session, the new one is refused with a Refusal that says which
// cap was reached and when to try again.
package sessionlimit

import (
	"container/list"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Defaults sized for one person's machine: a few MCP clients, each with a
// handful of sessions, and one-shot clients that never DELETE theirs. An
// idle session costs tens of KiB, so the global cap bounds the total to
// tens of MB.
const (
	DefaultMax        = 512
	DefaultPerClient  = 64
	DefaultRetryAfter = 5 * time.Second
)

// Options configure a Table; zero values take the defaults above.
type Options struct {
	// Max bounds all sessions together; 0 means DefaultMax, negative means
	// no global cap.
	Max int
	// PerClient bounds one client's sessions; 0 means DefaultPerClient,
	// negative means no per-client cap.
	PerClient int
	// RetryAfter is what a refusal asks the client to wait; 0 means
	// DefaultRetryAfter.
	RetryAfter time.Duration
}

// Table counts live sessions per client. It is safe for concurrent use.
type Table struct {
	opts Options

	mu      sync.Mutex
	total   int
	clients map[string]*list.List // of *Session, least recently used first
	evicted int64
	refused int64
}

// New returns an empty Table.
func New(opts Options) *Table {
	if opts.Max == 0 {
		opts.Max = DefaultMax
	}
	if opts.PerClient == 0 {
		opts.PerClient = DefaultPerClient
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = DefaultRetryAfter
	}
	return &Table{opts: opts, clients: make(map[string]*list.List)}
}

// Session is one admitted session. Begin and End bracket each of its
// requests (a session with a request in flight is never evicted, and each
// request makes it the client's most recently used); Release ends its
// place in the table.
type Session struct {
	t      *Table
	client string
	end    func()
	inUse  func() bool   // nil: in use only while busy
	elem   *list.Element // nil once released
	busy   int
}

// Refusal is the error Admit returns at a cap.
type Refusal struct {
	// Status is the HTTP status to answer: 429 when the client's own cap
	// was reached, 503 when the bridge is full.
	Status     int
	RetryAfter time.Duration
	Message    string
}

func (r *Refusal) Error() string { return r.Message }

// RetryAfterSeconds is the Retry-After header value: whole seconds, at
// least 1.
func (r *Refusal) RetryAfterSeconds() string {
	s := int(r.RetryAfter.Round(time.Second) / time.Second)
	if s < 1 {
		s = 1
	}
	return fmt.Sprint(s)
}

// Admit takes a place for a new session of client (a key the caller
// builds from what identifies the client: peer address, authenticated
// identity, clientInfo.name). end is called, at most once and without
// the table's lock, if the table ends the session to make room; it must
// end the session, whose end path then calls Release.
func (t *Table) Admit(client string, end func()) (*Session, error) {
	return t.AdmitInUse(client, end, nil)
}

// AdmitInUse is Admit for a session that can be in use between requests
// (a call forwarded and not yet answered): inUse, if not nil, is asked
// before the session is chosen to make room, and a session it reports in
// use is passed over as one with a request in flight is. It is called
// with the table's lock held, so it must be quick and must not call into
// the table.
func (t *Table) AdmitInUse(client string, end func(), inUse func() bool) (*Session, error) {
	t.mu.Lock()
	l := t.clients[client]
	var victims []*Session
	perClientFull := func() bool { return t.opts.PerClient > 0 && l != nil && l.Len() >= t.opts.PerClient }
	globalFull := func() bool { return t.opts.Max > 0 && t.total >= t.opts.Max }
	for perClientFull() || globalFull() {
		v := t.idlest(l)
		if v == nil {
			var r *Refusal
			if perClientFull() {
				r = &Refusal{Status: http.StatusTooManyRequests, RetryAfter: t.opts.RetryAfter, Message: fmt.Sprintf(
					"this client already has %d open MCP sessions, each with a request in progress (the limit is %d per client): end one (DELETE it) or wait for one to finish, then try again",
					l.Len(), t.opts.PerClient)}
			} else {
				r = &Refusal{Status: http.StatusServiceUnavailable, RetryAfter: t.opts.RetryAfter, Message: fmt.Sprintf(
					"Browser Bridge holds its limit of %d MCP sessions; sessions idle for the session timeout are ended, or end unused ones (DELETE), then try again",
					t.opts.Max)}
			}
			t.refused++
			t.mu.Unlock()
			t.endAll(victims)
			return nil, r
		}
		t.remove(v)
		t.evicted++
		victims = append(victims, v)
		l = t.clients[client]
	}
	if l == nil {
		l = list.New()
		t.clients[client] = l
	}
	s := &Session{t: t, client: client, end: end, inUse: inUse}
	s.elem = l.PushBack(s)
	t.total++
	t.mu.Unlock()
	t.endAll(victims)
	return s, nil
}

// idlest is the least recently used session of l with no request in
// flight and not otherwise in use, or nil.
func (t *Table) idlest(l *list.List) *Session {
	if l == nil {
		return nil
	}
	for e := l.Front(); e != nil; e = e.Next() {
		if s := e.Value.(*Session); s.busy == 0 && (s.inUse == nil || !s.inUse()) {
			return s
		}
	}
	return nil
}

func (t *Table) remove(s *Session) {
	l := t.clients[s.client]
	l.Remove(s.elem)
	s.elem = nil
	t.total--
	if l.Len() == 0 {
		delete(t.clients, s.client)
	}
}

func (t *Table) endAll(victims []*Session) {
	for _, v := range victims {
		if v.end != nil {
			v.end()
		}
	}
}

// Begin marks a request of the session in flight and makes the session
// its client's most recently used.
func (s *Session) Begin() {
	t := s.t
	t.mu.Lock()
	s.busy++
	if s.elem != nil {
		t.clients[s.client].MoveToBack(s.elem)
	}
	t.mu.Unlock()
}

// End marks a request of the session finished.
func (s *Session) End() {
	t := s.t
	t.mu.Lock()
	s.busy--
	if s.elem != nil {
		t.clients[s.client].MoveToBack(s.elem)
	}
	t.mu.Unlock()
}

// Release gives the session's place back; safe to call more than once.
func (s *Session) Release() {
	t := s.t
	t.mu.Lock()
	if s.elem != nil {
		t.remove(s)
	}
	t.mu.Unlock()
}

// Stats are the table's figures for /health and /metrics.
type Stats struct {
	Sessions  int   `json:"sessions"`
	Clients   int   `json:"clients"`
	Max       int   `json:"max"`
	PerClient int   `json:"perClient"`
	Evicted   int64 `json:"evicted"`
	Refused   int64 `json:"refused"`
}

// Stats returns the table's figures.
func (t *Table) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{Sessions: t.total, Clients: len(t.clients), Max: t.opts.Max, PerClient: t.opts.PerClient, Evicted: t.evicted, Refused: t.refused}
}

// ClientKey builds a client key from the parts that identify a client.
// name is client-chosen (clientInfo.name), so it is cut short: the
// global cap, not the name, is what bounds a client that invents names.
func ClientKey(peer, identity, name string) string {
	if len(name) > 64 {
		name = name[:64]
	}
	return peer + "\x00" + identity + "\x00" + name
}
