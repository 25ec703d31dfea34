package mcphttp

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// Sessions across restarts (docs/protocol.md, "Sessions across restarts"):
// with a SessionStore, each Streamable HTTP session is recorded as it
// opens and forgotten as it ends (DELETE, idle timeout, eviction, its
// route removed), but not when the server closes. A request that comes
// after a restart with a session id the table does not know and the store
// does re-opens the session: the target opened with the client's original
// initialize params and told notifications/initialized, as the client did
// once; then the request is served. A record is bound to its route and to
// the subject it was opened for: on another route, or for anyone else, the
// id is not found (404), as any unknown id. Legacy SSE sessions are not
// recorded: their stream, which carries their id, dies with the server.

// persistence is a Server's session store and how it learns whom a
// request is from.
type persistence struct {
	store SessionStore
	owner func(*http.Request) string

	mu        sync.Mutex
	restoring map[string]chan struct{} // ids being re-opened → closed when done
}

// Persist makes the server record its Streamable HTTP sessions in store
// and re-open them after a restart. owner names the authenticated subject
// of a request (nil: ServerOptions.Owner, or none); a record is re-opened
// only for the same one. Call it before serving.
func (srv *Server) Persist(store SessionStore, owner func(r *http.Request) string) {
	if owner == nil {
		owner = srv.opts.Owner
	}
	if owner == nil {
		owner = func(*http.Request) string { return "" }
	}
	srv.mu.Lock()
	srv.persist = &persistence{store: store, owner: owner, restoring: map[string]chan struct{}{}}
	srv.mu.Unlock()
}

func (srv *Server) persistence() *persistence {
	srv.mu.RLock()
	defer srv.mu.RUnlock()
	return srv.persist
}

// ownerOf is the subject of r that sessions belong to: Persist's owner,
// else ServerOptions.Owner; "" without either.
func (srv *Server) ownerOf(r *http.Request) string {
	if p := srv.persistence(); p != nil {
		return p.owner(r)
	}
	if srv.opts.Owner != nil {
		return srv.opts.Owner(r)
	}
	return ""
}

// record keeps a new session's record, if the server keeps any.
func (srv *Server) record(s *Session, r *http.Request) {
	p := srv.persistence()
	if p == nil {
		return
	}
	s.persisted.Store(true)
	now := time.Now()
	s.recordedAt.Store(now.UnixNano())
	if err := p.store.Put(map[string]SessionRecord{s.ID: s.recordOf(now)}); err != nil {
		srv.log.Warn("recording a session; it will not survive a restart", "route", s.t.Name(), "err", err)
	}
}

// recordOf is the session's record, last used at lastUsed.
func (s *Session) recordOf(lastUsed time.Time) SessionRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recordLocked(lastUsed)
}

func (s *Session) recordLocked(lastUsed time.Time) SessionRecord {
	return SessionRecord{Route: s.t.Name(), Owner: s.owner, Init: s.Init, Note: s.note, LastUsed: lastUsed}
}

// putRecordLocked writes the record of s, whose lock the caller holds (so
// that an end of the session, which forgets the record after marking it
// closed, cannot come between the caller's check and the write and leave
// the record of an ended session).
func (srv *Server) putRecordLocked(s *Session, now time.Time) {
	p := srv.persistence()
	if p == nil {
		return
	}
	s.recordedAt.Store(now.UnixNano())
	if err := p.store.Put(map[string]SessionRecord{s.ID: s.recordLocked(now)}); err != nil {
		srv.log.Warn("writing a session's record", "route", s.t.Name(), "err", err)
	}
}

// forget drops an ended session's record, unless the server is closing:
// then it ends only for this process, and the next one re-opens it. A
// session that was never recorded or re-opened (its re-opening failed: the
// backend not back yet, say) keeps its record for a later request.
func (srv *Server) forget(s *Session) {
	srv.mu.RLock()
	p, stopping := srv.persist, srv.stopping
	srv.mu.RUnlock()
	if p == nil || stopping || !s.persisted.Load() {
		return
	}
	if err := p.store.Delete(s.ID); err != nil {
		srv.log.Warn("forgetting an ended session's record", "route", s.t.Name(), "err", err)
	}
}

// keepRecords records when each open session was last used, as the
// server closes: a record expires that long after it.
func (srv *Server) keepRecords(list []*Session) {
	p := srv.persistence()
	if p == nil {
		return
	}
	recs := make(map[string]SessionRecord, len(list))
	for _, s := range list {
		if !s.persisted.Load() {
			continue
		}
		recs[s.ID] = s.recordOf(s.LastUsed())
	}
	if len(recs) == 0 {
		return
	}
	if err := p.store.Put(recs); err != nil {
		srv.log.Warn("recording the sessions' last use at shutdown", "err", err)
	}
}

// recordRefresh is how often a session in use has its record's last use
// pushed forward: a record expires the session timeout after it, so a
// session in use for longer must not lose its record to a crash.
const recordRefresh = time.Minute

// refreshRecord pushes the last use of a session's record forward, at
// most once per recordRefresh.
func (srv *Server) refreshRecord(s *Session) {
	if !s.persisted.Load() {
		return
	}
	now := time.Now()
	last := s.recordedAt.Load()
	if now.UnixNano()-last < int64(recordRefresh) || !s.recordedAt.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.mu.Lock()
	if !s.closed {
		srv.putRecordLocked(s, now)
	}
	s.mu.Unlock()
}

// find returns the route's session id: from the table, else re-opened
// from its record. nil, nil: no such session; an error: its record was
// found but it could not be re-opened (answer it as Open's). With a
// store, a recorded session is found only by the subject it was opened
// for, live or re-opened.
func (srv *Server) find(r *http.Request, id string, t Target) (*Session, error) {
	p := srv.persistence()
	owner := srv.ownerOf(r)
	// owned is s unless it belongs to someone else.
	owned := func(s *Session) *Session {
		if s != nil && s.owner != owner {
			return nil
		}
		return s
	}
	if s := srv.Lookup(id, t.Name()); s != nil || id == "" || p == nil {
		return owned(s), nil
	}
	// One re-open per id: a client's first requests after a restart often
	// come together (its GET stream and a call).
	p.mu.Lock()
	if wait, ok := p.restoring[id]; ok {
		p.mu.Unlock()
		select {
		case <-wait:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
		return owned(srv.Lookup(id, t.Name())), nil
	}
	done := make(chan struct{})
	p.restoring[id] = done
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.restoring, id)
		p.mu.Unlock()
		close(done)
	}()
	if s := srv.Lookup(id, t.Name()); s != nil { // re-opened just before
		return owned(s), nil
	}
	rec, ok := p.store.Get(id)
	if !ok || rec.Route != t.Name() || rec.Owner != owner {
		return nil, nil
	}
	return srv.reopen(r.Context(), r, id, t, rec)
}

// reopen opens the session id again from its record.
func (srv *Server) reopen(ctx context.Context, r *http.Request, id string, t Target, rec SessionRecord) (*Session, error) {
	s := srv.newSession(t, false)
	s.ID, s.owner, s.note = id, rec.Owner, rec.Note
	if err := srv.admitKey(s, ClientKey(r, ClientName(rec.Init))); err != nil {
		return nil, err
	}
	defer s.end()
	if _, err := s.open(ctx, rec.Init); err != nil {
		srv.log.Warn("a session of before the restart could not be re-opened", "route", t.Name(), "err", err)
		return nil, err
	}
	t.Notification(s, &Message{JSONRPC: "2.0", Method: "notifications/initialized"})
	s.recordedAt.Store(time.Now().UnixNano() - int64(recordRefresh)) // its first use refreshes the record
	s.persisted.Store(true)
	if !srv.add(s, "streamable") {
		s.Close()
		return nil, &Refusal{Status: http.StatusServiceUnavailable, RetryAfter: 5 * time.Second, Code: rpccode.Unavailable,
			Message: srv.opts.Name + " is shutting down; try again in a moment"}
	}
	srv.log.Info("session re-opened after a restart", "route", t.Name(), "client", ClientName(rec.Init))
	return s, nil
}

// endedMessage is what a request still waiting when its session ends is
// answered: a restart is named as such, so the client knows the session
// carries on (with a store) and that the request may have happened.
func (srv *Server) endedMessage() string {
	srv.mu.RLock()
	p, stopping := srv.persist, srv.stopping
	srv.mu.RUnlock()
	switch {
	case !stopping:
		return ""
	case p != nil:
		return srv.opts.Name + " is restarting (or stopping) while this request was running, so its answer is lost and what it asked for may or may not have happened; " +
			"the session carries on once the server is back: check, then send the request again"
	default:
		return srv.opts.Name + " is restarting (or stopping) while this request was running, so its answer is lost and what it asked for may or may not have happened; " +
			"the session ends with it: initialize a new session once the server is back"
	}
}
