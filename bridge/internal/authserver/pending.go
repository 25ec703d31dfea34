package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// pendingSet indexes what anyone may make the server store without signing
// in: registrations that never obtained a token, and sign-in requests. It
// keeps their number bounded, per address and in total, by choosing which
// ones to delete; the caller deletes them from the store.
//
// Who goes first: past the per-address bound, that address's oldest; past
// the total, the oldest of the address holding the most. An address that
// floods thus loses its own entries before one that made a few (a person
// signing in, claude.ai registering) loses any, however old those are; only
// a flood from more addresses than the total bound reaches them.
//
// The index lives in this process. The server rebuilds it from the store
// on first use (loadPending), so entries written before a restart count;
// on a cluster each node indexes what it saw (docs/limits.md).
type pendingSet struct {
	mu      sync.Mutex
	perAddr int // 0: no per-address bound
	max     int // 0: no total bound (the caller evicts)
	byAddr  map[string][]pendingEntry
	addrOf  map[string]string // id -> address
}

// pendingEntry is one indexed entry; an address's entries are kept oldest
// first.
type pendingEntry struct {
	id      string
	at      time.Time
	expires time.Time
}

func newPendingSet(perAddr, max int) *pendingSet {
	return &pendingSet{perAddr: perAddr, max: max, byAddr: map[string][]pendingEntry{}, addrOf: map[string]string{}}
}

// add indexes id, made by addr at at, which the store drops at expires, and
// returns the ids to delete to stay within the bounds. An entry added now
// is the newest, so it is never among them while another entry is
// indexed. An id already indexed is moved.
func (p *pendingSet) add(addr, id string, at, expires time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(id)
	list := p.byAddr[addr]
	// Keep the address's list in time order: entries loaded from the store
	// come in any order.
	i := len(list)
	for i > 0 && list[i-1].at.After(at) {
		i--
	}
	list = append(list, pendingEntry{})
	copy(list[i+1:], list[i:])
	list[i] = pendingEntry{id: id, at: at, expires: expires}
	p.byAddr[addr] = list
	p.addrOf[id] = addr

	var out []string
	now := at
	if p.perAddr > 0 && len(list) > p.perAddr {
		p.pruneAddr(addr, now)
		for len(p.byAddr[addr]) > p.perAddr {
			out = append(out, p.popOldest(addr))
		}
	}
	if p.max > 0 && len(p.addrOf) > p.max {
		p.pruneLocked(now)
		if n := len(p.addrOf) - p.max; n > 0 {
			out = append(out, p.evictLocked(n)...)
		}
	}
	return out
}

// evict removes n live entries (fewer if it holds fewer) by the rule in
// the type's comment and returns their ids; expired ones are dropped
// first without being counted.
func (p *pendingSet) evict(n int, now time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneLocked(now)
	return p.evictLocked(n)
}

func (p *pendingSet) evictLocked(n int) []string {
	var out []string
	for ; n > 0 && len(p.addrOf) > 0; n-- {
		var victim string
		var most int
		var oldest time.Time
		for addr, list := range p.byAddr {
			if len(list) > most || (len(list) == most && list[0].at.Before(oldest)) {
				victim, most, oldest = addr, len(list), list[0].at
			}
		}
		out = append(out, p.popOldest(victim))
	}
	return out
}

// remove forgets id (spent, or promoted); unknown ids are ignored.
func (p *pendingSet) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(id)
}

func (p *pendingSet) removeLocked(id string) {
	addr, ok := p.addrOf[id]
	if !ok {
		return
	}
	delete(p.addrOf, id)
	list := p.byAddr[addr]
	for i, e := range list {
		if e.id == id {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	p.setList(addr, list)
}

// len is the number of entries indexed, expired or not.
func (p *pendingSet) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.addrOf)
}

func (p *pendingSet) popOldest(addr string) string {
	list := p.byAddr[addr]
	id := list[0].id
	delete(p.addrOf, id)
	p.setList(addr, list[1:])
	return id
}

func (p *pendingSet) setList(addr string, list []pendingEntry) {
	if len(list) == 0 {
		delete(p.byAddr, addr)
		return
	}
	p.byAddr[addr] = list
}

// pruneLocked drops every expired entry: the store has dropped them.
func (p *pendingSet) pruneLocked(now time.Time) {
	for addr := range p.byAddr {
		p.pruneAddr(addr, now)
	}
}

func (p *pendingSet) pruneAddr(addr string, now time.Time) {
	list := p.byAddr[addr]
	kept := list[:0]
	for _, e := range list {
		if now.Before(e.expires) {
			kept = append(kept, e)
		} else {
			delete(p.addrOf, e.id)
		}
	}
	p.setList(addr, kept)
}

// loadPending fills the pending indexes from the store, once: what was
// registered or opened before this process started counts too. After a
// failure it tries again at the next call, and meanwhile the indexes hold
// what this process added.
func (s *Server) loadPending(ctx context.Context) {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.loaded {
		return
	}
	if err := errors.Join(s.loadClients(ctx), s.loadRequests(ctx)); err != nil {
		s.log.Warn("authserver: reading the pending registrations and sign-ins", "err", err)
		return
	}
	s.loaded = true
}

// loadClients indexes the stored registrations that never obtained a
// token. One older than UnusedClientTTL (an older version kept them for
// ClientIdleTTL) is deleted.
func (s *Server) loadClients(ctx context.Context) error {
	vals, err := s.kv.List(ctx, bucketClients)
	if err != nil {
		return err
	}
	now, ttl := s.now(), s.cfg.Limits.UnusedClientTTL
	for _, v := range vals {
		var c Client
		if json.Unmarshal(v, &c) != nil || c.ID == "" || c.signedIn() {
			continue
		}
		if expires := c.CreatedAt.Add(ttl); now.Before(expires) {
			s.pendingClients.add(c.Address, c.ID, c.CreatedAt, expires)
			continue
		}
		if err := s.kv.Delete(ctx, bucketClients, c.ID); err != nil {
			return err
		}
	}
	return nil
}

// loadRequests indexes the stored sign-in requests, deleting those beyond
// the bounds.
func (s *Server) loadRequests(ctx context.Context) error {
	vals, err := s.kv.List(ctx, bucketRequests)
	if err != nil {
		return err
	}
	for _, v := range vals {
		var req AuthRequest
		if json.Unmarshal(v, &req) != nil || !validRequestID(req.ID) || req.CSRF == "" {
			continue // spent: deleted in a moment
		}
		s.dropRequests(ctx, s.requests.add(req.Address, req.ID, req.CreatedAt, req.CreatedAt.Add(s.requestTTL())))
	}
	return nil
}

// dropRequests deletes sign-in requests the index pushed out.
func (s *Server) dropRequests(ctx context.Context, ids []string) {
	for _, id := range ids {
		if err := s.kv.Delete(ctx, bucketRequests, id); err != nil {
			s.log.Warn("authserver: deleting a sign-in request pushed out by newer ones", "err", err)
		}
	}
	if len(ids) > 0 {
		s.log.Debug("authserver: sign-in requests pushed out by newer ones", "deleted", len(ids))
	}
}
