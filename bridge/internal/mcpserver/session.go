package mcpserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// A live session is one stateful Streamable HTTP session (2025-03-26 to
// 2025-11-25), from its initialize (open) or its first request after a
// bridge restart (resume) to its end. It is the bridge's own, not the SDK
// handler's: an SDK transport the bridge connects with Server.Connect,
// indexes by Mcp-Session-Id, admits and reaps with an mcphttp.Lease (the
// session table's rules), records on disk (records.go) and resumes from
// its record after a restart, with the recorded ServerSessionState and
// the same SessionID. The SDK's handler can do none of the last three.
//
// The path of a tools/call on a live session, top to bottom:
//
//	Streamable.ServeHTTP             streamable.go  checks the request
//	  Streamable.session             session.go     finds (or resumes) the live session
//	  Streamable.serveFast           fastpath.go    takes the call or leaves it to the SDK
//	    liveSession.startCall        session.go     begins a request, opens the call's stream
//	    Server.forwardResponse       passthrough.go
//	      Server.callBrowser         call.go        the browser call, on the session's link
//	    liveSession.finishCall       session.go     stores the answer for resumption
//	    liveSession.end              session.go     ends the request
//
// A call the fast path leaves goes to the SDK's transport between
// liveSession.begin and end, and reaches Server.callBrowser through the
// SDK's tool handler (callBrowserTool).
type liveSession struct {
	id   string // Mcp-Session-Id
	hash string // of id: its record's key
	// link is what the browsers know of the session: its link ids, tab
	// group, pinned browser and calls in flight (call.go).
	link      *linkSession
	ss        *mcp.ServerSession
	transport *mcp.StreamableServerTransport
	lease     *mcphttp.Lease // its place in the session table, and its idle reaper
	done      chan struct{}  // closed when the session has ended
	records   *recordStore   // where its record is
	touchedAt atomic.Int64   // when its record's mtime was last pushed, in Unix ns
	saveMu    sync.Mutex     // orders the writes of its record

	mu      sync.Mutex
	ended   bool
	calls   map[string]*fastCall // fast-path calls in flight, by raw request id
	streams map[string]*fastCall // the same, by stream id
	nextID  uint64
	record  *sessionRecord // its durable part, once initialized
}

// fastCall is a fast-path request in flight.
type fastCall struct {
	id      string // raw request id
	stream  string
	cancel  context.CancelFunc
	stored  chan struct{} // closed once its answer is in the event store
	claimed bool          // a GET resumes the stream: it, not the POST, delivers the answer
}

// open starts a live session for an initialize and serves it; the
// session is admitted, indexed and, once initialized, recorded.
func (h *Streamable) open(w http.ResponseWriter, r *http.Request, head *mcphttp.Message) {
	client := mcphttp.ClientName(head.Params)
	ls := &liveSession{id: rand.Text()}
	// The SDK's handler connects with the request's context too (its
	// values reach the session); the session outlives the request.
	if err := h.connect(context.WithoutCancel(r.Context()), ls, r, client, newLinkSession(newLinkID(), client, false), nil); err != nil {
		if errors.As(err, new(*sessionlimit.Refusal)) {
			mcphttp.WriteOpenError(w, head.ID, err)
		} else {
			mcphttp.WriteError(w, http.StatusInternalServerError, head.ID, rpccode.InternalError, err.Error())
		}
		return
	}
	defer ls.end()
	ls.transport.ServeHTTP(w, h.version.with(r))
	params := ls.ss.InitializeParams()
	if params == nil {
		_ = ls.ss.Close() // initialize failed: nothing to keep (as the SDK's handler does)
		return
	}
	rec := &sessionRecord{
		Version:    recordVersion,
		IDHash:     ls.hash,
		LinkID:     ls.link.id,
		Client:     client,
		Initialize: params,
		Negotiated: mcphttp.Negotiate(params.ProtocolVersion, mcphttp.Versions),
		Created:    time.Now(),
	}
	ls.mu.Lock()
	ls.record = rec
	ls.mu.Unlock()
	ls.link.setPersist(func() { h.save(ls) })
	h.save(ls)
}

// session returns the live session with this id, resuming it from its
// record if a previous bridge process left one; nil if there is neither.
func (h *Streamable) session(r *http.Request, sid string) *liveSession {
	if ls, ok := h.live.Get(sid); ok {
		return ls
	}
	h.resumeMu.Lock()
	defer h.resumeMu.Unlock()
	if ls, ok := h.live.Get(sid); ok {
		return ls // resumed by a request that came at the same time
	}
	rec := h.records.take(sid)
	if rec == nil {
		return nil
	}
	ls := &liveSession{id: sid, record: rec}
	link := newLinkSession(rec.LinkID, rec.Client, false)
	link.browser = rec.Browser
	// The dead process numbered this session's link requests from 1, and
	// the browser may still be running some of them: go on from a number
	// none of them can have (microseconds since 1970 grow faster than any
	// process sends calls), so no id is in flight twice.
	link.next.Store(uint64(time.Now().UnixMicro()))
	link.persist = func() { h.save(ls) }
	if err := h.connect(context.Background(), ls, r, rec.Client, link, rec.state()); err != nil {
		h.s.log.Warn("could not resume a recorded session", "error", err)
		h.records.remove(rec.IDHash)
		return nil
	}
	ls.end() // the request that resumed it begins its own
	h.s.log.Info("MCP session resumed after a bridge restart", "client", rec.Client, "session", protocol.IDPrefixLocal+rec.LinkID)
	return ls
}

// connect admits ls (begun, for the request that opens it: the caller
// ends it), connects its SDK session with state (nil for a new one) and
// indexes it until it ends. The error is a refusal to answer with.
func (h *Streamable) connect(ctx context.Context, ls *liveSession, r *http.Request, client string, link *linkSession, state *mcp.ServerSessionState) error {
	ls.hash = hashSessionID(ls.id)
	ls.done = make(chan struct{})
	ls.records = h.records
	lease, err := mcphttp.AdmitLease(h.limit, mcphttp.ClientKey(r, client), mcphttp.LeaseOptions{Timeout: h.opts.SessionTimeout, End: ls.close})
	if err != nil {
		return err
	}
	ls.lease = lease
	ls.transport = &mcp.StreamableServerTransport{SessionID: ls.id, EventStore: h.events}
	ss, err := h.s.mcp.Connect(ctx, ls.transport, &mcp.ServerSessionOptions{State: state})
	if err != nil {
		lease.Release()
		return fmt.Errorf("could not start an MCP session: %w", err)
	}
	ls.ss = ss
	ls.link = h.s.adopt(ss, link)
	h.live.Put(ls.id, ls)
	go h.ended(ls)
	return nil
}

// begin marks a request of the session in progress (its idle time stops
// counting); false if the session has ended. end ends it.
func (ls *liveSession) begin() bool { return ls.lease.Begin() }

func (ls *liveSession) end() {
	ls.lease.End()
	ls.touch()
}

// startCall enters a fast-path call in the session as a request in
// progress (the caller ends it with ls.end once ok) and opens its stream
// in the event store, with the priming event stored empty so that
// indices line up, as the SDK stores it. It reports false if the session
// has ended, and a nil call, ok, for a request id already in flight.
func (ls *liveSession) startCall(ctx context.Context, events *eventStore, req fastRequest, cancel context.CancelFunc) (call *fastCall, ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.ended || !ls.lease.Begin() {
		return nil, false
	}
	if ls.calls[string(req.id)] != nil {
		return nil, true
	}
	ls.nextID++
	call = &fastCall{
		id:     string(req.id),
		stream: fastStreamID(ls.nextID, req.id), // never an SDK stream id: those are upper case
		cancel: cancel,
		stored: make(chan struct{}),
	}
	if ls.calls == nil {
		ls.calls, ls.streams = make(map[string]*fastCall), make(map[string]*fastCall)
	}
	ls.calls[call.id], ls.streams[call.stream] = call, call
	_ = events.Open(ctx, ls.id, call.stream)
	if req.prime {
		_ = events.Append(ctx, ls.id, call.stream, nil)
	}
	return call, true
}

// finishCall stores a fast-path call's answer for resumption (unless the
// session has ended) and forgets the call. claimed reports that a GET
// resuming the call's stream delivers the answer, not the POST.
func (ls *liveSession) finishCall(ctx context.Context, events *eventStore, call *fastCall, data []byte) (claimed bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if !ls.ended {
		_ = events.Append(ctx, ls.id, call.stream, data)
	}
	delete(ls.calls, call.id)
	delete(ls.streams, call.stream)
	close(call.stored)
	return call.claimed
}

// cancel cancels the fast-path call with this raw request id, if any
// (notifications/cancelled).
func (ls *liveSession) cancel(id string) {
	ls.mu.Lock()
	c := ls.calls[id]
	ls.mu.Unlock()
	if c != nil && c.cancel != nil {
		c.cancel()
	}
}

// resuming is called for a GET with Last-Event-ID on stream: if it is a
// fast-path stream still in flight, the GET takes over delivering its
// answer and gets a channel closed once the answer is stored.
func (ls *liveSession) resuming(stream string) <-chan struct{} {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	c := ls.streams[stream]
	if c == nil {
		return nil
	}
	c.claimed = true
	return c.stored
}

// inFlight reports whether a fast-path stream is still running.
func (ls *liveSession) inFlight(stream string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.streams[stream] != nil
}

// save writes the session's record with its current state.
func (h *Streamable) save(ls *liveSession) {
	// One save at a time, each reading the state inside the lock: the last
	// write is then of the latest state (a select_browser racing the save
	// that follows initialize cannot be overwritten by the older one).
	ls.saveMu.Lock()
	defer ls.saveMu.Unlock()
	browser := ls.link.chosen()
	// The write is inside ls.mu: the end of the session (ended) sets ended
	// under it before it removes the record, so a DELETE coming right
	// after initialize cannot remove the record before it is written.
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.record == nil || ls.ended {
		return
	}
	rec := *ls.record
	rec.Browser = browser
	h.records.save(&rec)
	ls.touchedAt.Store(time.Now().UnixNano())
}

// touch pushes the session record's mtime forward at most once a
// touchEvery: a restarted bridge keeps only records used within the
// session timeout, and the mtime says when. No lock: one atomic load on
// most calls.
func (ls *liveSession) touch() {
	now := time.Now()
	last := ls.touchedAt.Load()
	if now.UnixNano()-last < int64(touchEvery) || !ls.touchedAt.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	ls.records.touch(ls.hash, now)
}

// close ends the session (DELETE, idle timeout, eviction by the session
// table, the bridge stopping); ended does the rest.
func (ls *liveSession) close() {
	if ls.ss != nil {
		_ = ls.ss.Close()
	}
}

// ended waits for the session's end, then forgets it with its events,
// its place in the session table and, unless the bridge is stopping (the
// next process resumes it), its record; then, once its calls have
// answered, the browsers are told (session.ended).
func (h *Streamable) ended(ls *liveSession) {
	_ = ls.ss.Wait()
	h.live.Delete(ls.id, ls)
	ls.mu.Lock()
	ls.ended = true
	ls.mu.Unlock()
	close(ls.done)
	// The SDK forgot the session's events when it closed; a fast-path
	// answer stored since then (none is stored once ended is set) goes too.
	_ = h.events.SessionClosed(context.Background(), ls.id)
	ls.lease.Release()
	if !h.stopping.Load() {
		h.records.remove(ls.hash)
	}
	h.s.forget(ls.ss, ls.link)
}
