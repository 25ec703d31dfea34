package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/jsonscan"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
)

// The fast path answers the two requests that make up nearly all of a busy
// client's traffic, tools/call of a browser tool and ping, when they are
// POSTed on a live stateful Streamable HTTP session (2025-03-26 to
// 2025-11-25), without the SDK's server path: no jsonrpc2 connection, no
// goroutine per request, no typed decoding of the message. It sends the
// call as the SDK's tool handler does (callBrowser), passes the browser's
// result through when it can (forwardResponse), and writes what the SDK
// would write, byte for byte: the same SSE event (a priming event first from
// 2025-11-25), the same event ids, stored in the same event store, so a
// client resumes a fast-path stream with Last-Event-ID like any other.
//
// It takes only requests whose every part it understands; anything else
// (a progress token or any other _meta, other params, another method,
// an id that is not a plain string or integer, a token-authenticated
// request, a session not yet initialized, an unknown tool or one of the
// bridge's own) goes to the SDK, whose answer is then the same as before.
//
// What the SDK does for a request it runs, the fast path does too:
//   - the session's idle timer is paused while the request is in progress
//     (liveSessions owns that timer: the SDK's cannot see these requests);
//   - notifications/cancelled with the request's id cancels the call, and
//     the extension is told, as forward does on any cancellation;
//   - the end of the HTTP request does not cancel the call (it is not a
//     cancellation in these eras): its answer is stored for resumption;
//   - a second request with the id of one in flight is refused (400);
//   - the end of the session waits for its calls before the browsers are
//     told (session.ended).
//
// Tool arguments are not checked against the tool's input schema, as the
// SDK does not check them for tools registered with Server.AddTool (the
// browser's tools): the extension validates its own arguments.

// fastVersions are the MCP-Protocol-Version values of the eras the fast
// path serves; "" means 2025-03-26, as it does for the SDK.
func fastVersion(v string) bool {
	switch v {
	case "", "2025-03-26", "2025-06-18", "2025-11-25":
		return true
	}
	return false
}

// liveSessions indexes the stateful sessions by Mcp-Session-Id, and ends
// those idle for longer than the session timeout. The rule is the SDK's:
// the timer runs while no POST of the session is in progress (GET streams
// do not count).
type liveSessions struct {
	events  *eventStore
	records *recordStore
	idle    time.Duration // 0: never reaped
	// stopping is the Streamable's: set, a session that ends keeps its
	// record (the bridge stops, not the session).
	stopping *atomic.Bool

	mu   sync.Mutex
	byID map[string]*liveSession
}

// liveSession is one stateful session.
type liveSession struct {
	id        string
	hash      string // of id: its record's key
	ss        *mcp.ServerSession
	transport *mcp.StreamableServerTransport
	adm       *sessionlimit.Session // its place in the session table
	idle      time.Duration
	done      chan struct{} // closed when the session has ended
	records   *recordStore  // where its record is (set by track)
	touchedAt atomic.Int64  // when its record's mtime was last pushed, in Unix ns
	saveMu    sync.Mutex    // orders the writes of its record

	mu      sync.Mutex
	ended   bool
	posts   int                  // POSTs in progress
	timer   *time.Timer          // ends the session when idle; nil when there is no timeout or it has ended
	calls   map[string]*fastCall // fast-path calls in flight, by raw request id
	streams map[string]*fastCall // the same, by stream id
	nextID  uint64
	bridge  *session       // the bridge's state for the session
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

func newLiveSessions(events *eventStore, records *recordStore, idle time.Duration, stopping *atomic.Bool) *liveSessions {
	return &liveSessions{events: events, records: records, idle: idle, stopping: stopping, byID: make(map[string]*liveSession)}
}

// get returns the live session with this id, or nil if there is none.
func (l *liveSessions) get(id string) *liveSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byID[id]
}

// all returns every live session.
func (l *liveSessions) all() []*liveSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*liveSession, 0, len(l.byID))
	for _, ls := range l.byID {
		out = append(out, ls)
	}
	return out
}

// track starts indexing a connected session (ls.ss set) and forgets it,
// with its events, its place in the session table and its record, when it
// ends.
func (l *liveSessions) track(ls *liveSession) {
	ls.records = l.records
	l.mu.Lock()
	if ls.idle > 0 {
		ls.timer = time.AfterFunc(ls.idle, ls.close)
	}
	l.byID[ls.id] = ls
	l.mu.Unlock()
	go func() {
		_ = ls.ss.Wait()
		l.mu.Lock()
		if l.byID[ls.id] == ls {
			delete(l.byID, ls.id)
		}
		l.mu.Unlock()
		ls.mu.Lock()
		ls.ended = true
		if ls.timer != nil {
			ls.timer.Stop()
			ls.timer = nil
		}
		ls.mu.Unlock()
		close(ls.done)
		// The SDK forgot the session's events when it closed; a fast-path
		// answer stored since then (none is stored once ended is set) goes too.
		_ = l.events.SessionClosed(context.Background(), ls.id)
		ls.adm.Release()
		if !l.stopping.Load() {
			l.records.remove(ls.hash)
		}
	}()
}

// close ends the session (idle timeout, eviction by the session table).
func (ls *liveSession) close() {
	if ls.ss != nil {
		_ = ls.ss.Close()
	}
}

// startPOST and endPOST bracket every POST of the session: the idle timer
// stops at the first and starts again when the last ends.
func (ls *liveSession) startPOST() {
	ls.mu.Lock()
	ls.startPOSTLocked()
	ls.mu.Unlock()
}

// startPOSTLocked is startPOST with ls.mu held.
func (ls *liveSession) startPOSTLocked() {
	if ls.posts == 0 && ls.timer != nil {
		ls.timer.Stop()
	}
	ls.posts++
	ls.adm.Begin()
}

func (ls *liveSession) endPOST() {
	ls.mu.Lock()
	ls.posts--
	if ls.posts == 0 && ls.timer != nil {
		ls.timer.Reset(ls.idle)
	}
	ls.mu.Unlock()
	ls.adm.End()
	ls.touch()
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

// cancel cancels the fast-path call with this raw request id, if any.
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

// fastRequest is what the fast path needs of a message.
type fastRequest struct {
	id   []byte // raw: a string of printable ASCII with no escapes, or an integer
	ping bool   // ping, else tools/call
	name string
	args json.RawMessage // nil when absent
	// prime: the stream opens with a priming event (2025-11-25); set by
	// takeFast, from the request's protocol version.
	prime bool
	// version is the protocol version the call is answered in, from its
	// header (2025-03-26 without one, as the specification says).
	version string
}

// parseFast reads a request the fast path can take; ok is false for
// anything else, and for anything it is unsure of. Keys must be exactly
// the protocol's (the SDK matches them case-sensitively) and appear once.
func parseFast(body []byte) (req fastRequest, ok bool) {
	if !json.Valid(body) {
		return req, false
	}
	var version, method, params []byte
	ok = jsonscan.EachMember(body, func(key, val []byte) bool {
		switch string(key) {
		case "jsonrpc":
			return version == nil && setRaw(&version, val)
		case "id":
			return req.id == nil && plainID(val) && setRaw(&req.id, val)
		case "method":
			return method == nil && setRaw(&method, val)
		case "params":
			return params == nil && len(val) > 0 && val[0] == '{' && setRaw(&params, val)
		}
		return false
	})
	if !ok || string(version) != `"2.0"` || req.id == nil {
		return req, false
	}
	switch string(method) {
	case `"ping"`:
		req.ping = true
		empty := jsonscan.EachMember(params, func(_, _ []byte) bool { return false })
		return req, params == nil || empty
	case `"tools/call"`:
		var name []byte
		ok = params != nil && jsonscan.EachMember(params, func(key, val []byte) bool {
			switch string(key) {
			case "name":
				return name == nil && plainString(val) && setRaw(&name, val)
			case "arguments":
				if req.args != nil || len(val) == 0 || val[0] != '{' {
					return false
				}
				req.args = json.RawMessage(val)
				return true
			}
			return false // _meta (a progress token…), or anything newer
		})
		if !ok || name == nil {
			return req, false
		}
		req.name = string(name[1 : len(name)-1])
		return req, true
	}
	return req, false
}

func setRaw(dst *[]byte, val []byte) bool {
	*dst = val
	return true
}

// plainString reports whether a JSON value is a string of printable ASCII
// without escapes, which every encoder writes back unchanged.
func plainString(v []byte) bool {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	for _, c := range v[1 : len(v)-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// plainID reports whether a request id is one the SDK writes back exactly
// as it came: a plain string, or an integer it holds exactly (the SDK reads
// numbers as float64 and writes them as int64).
func plainID(v []byte) bool {
	if plainString(v) {
		return true
	}
	d := v
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || d[0] == '0' && (len(d) > 1 || len(v) > len(d)) {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// serveFast answers a request the fast path takes and returns true, or
// returns false having done nothing (the SDK then gets the request). It
// goes in four steps: takeFast reads the request and decides, registerFast
// enters the call in its session and opens its stream, answerFast runs it
// (the priming event going out first if the answer is slow), storeFast
// keeps the answer for resumption and ends the stream with it.
func (h *Streamable) serveFast(w http.ResponseWriter, r *http.Request, ls *liveSession, body []byte) bool {
	req, ok := h.takeFast(r, ls, body)
	if !ok {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call, ok := h.registerFast(ctx, ls, req, cancel)
	if !ok {
		return false // the session ended: the SDK answers 404
	}
	defer ls.endPOST()
	if call == nil {
		w.Header().Set("Content-Type", mcphttp.ContentTypeJSON)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(response(req.id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "duplicate in-flight request ID " + idText(req.id)}))
		return true
	}
	mcphttp.SetStreamHeaders(w.Header())
	stream, flushed, data := h.answerFast(ctx, w, r, ls, req, call)
	h.storeFast(ctx, w, ls, req, call, stream, flushed, data)
	return true
}

// takeFast reads a request and reports whether the fast path takes it.
// (Its Accept needs no look: ServeHTTP has refused, by the SDK's own rule,
// every POST whose Accept the SDK would refuse.)
func (h *Streamable) takeFast(r *http.Request, ls *liveSession, body []byte) (fastRequest, bool) {
	version := r.Header.Get(mcphttp.HeaderProtocolVersion)
	if h.noFastPath.Load() || !fastVersion(version) || len(r.Header.Values(mcphttp.HeaderLastEventID)) > 0 {
		return fastRequest{}, false
	}
	if auth.TokenInfoFromContext(r.Context()) != nil {
		return fastRequest{}, false // the SDK ties sessions to token users
	}
	req, ok := parseFast(body)
	if !ok {
		return req, false
	}
	if !req.ping && !h.s.sdkTools()[req.name] {
		return req, false // an unknown tool, or one of the bridge's own
	}
	if ls.ss.InitializeParams() == nil {
		return req, false // the SDK refuses calls before initialize
	}
	// The priming event (SEP-1699) opens the stream from 2025-11-25.
	req.prime = version >= "2025-11-25"
	req.version = version
	if version == "" {
		req.version = "2025-03-26"
	}
	return req, true
}

// registerFast enters the call in its session as a POST in progress (the
// caller ends it with ls.endPOST once ok) and opens its stream in the
// event store, with the priming event stored empty so that indices line
// up, as the SDK stores it. It reports false if the session has ended, and
// a nil call, ok, for a request id already in flight.
func (h *Streamable) registerFast(ctx context.Context, ls *liveSession, req fastRequest, cancel context.CancelFunc) (call *fastCall, ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.ended {
		return nil, false
	}
	ls.startPOSTLocked()
	h.s.stats.FastPath.Add(1)
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
	_ = h.events.Open(ctx, ls.id, call.stream)
	if req.prime {
		_ = h.events.Append(ctx, ls.id, call.stream, nil)
	}
	return call, true
}

// answerFast runs the call and returns its answer (data) and what of the
// stream is still to be written before it: the priming event, unless it
// went out already (flushed).
func (h *Streamable) answerFast(ctx context.Context, w http.ResponseWriter, r *http.Request, ls *liveSession, req fastRequest, call *fastCall) (stream []byte, flushed bool, data []byte) {
	answer := func() []byte {
		if req.ping {
			return response(req.id, struct{}{}, nil)
		}
		h.s.stats.Calls.Add(1)
		bs := ls.bridgeSession(h.s)
		return h.s.forwardResponse(ctx, toolCall{sess: bs, header: r.Header, name: req.name, args: req.args, version: req.version}, req.id)
	}
	if !req.prime {
		return nil, false, answer()
	}
	stream = mcphttp.AppendEvent(stream, mcphttp.Event{Name: "prime", ID: mcphttp.EventID(call.stream, 0)})
	if req.ping {
		return stream, false, answer()
	}
	// The priming event goes out with the answer if that comes within
	// primeDelay (one write, one read for the client, instead of two),
	// else on its own then.
	answered := make(chan []byte, 1)
	go func() { answered <- answer() }()
	t := time.NewTimer(primeDelay)
	select {
	case data = <-answered:
		t.Stop()
		return stream, false, data
	case <-t.C:
		_, _ = w.Write(stream)
		_ = http.NewResponseController(w).Flush()
		return stream[:0], true, <-answered
	}
}

// storeFast stores the call's answer for resumption, forgets the call, and
// ends the stream with the answer, unless a GET that resumed the stream
// (claimed) delivers it. The stream is written in one piece with a
// Content-Length when nothing went out yet: one write for the bridge and
// the end of the body in the same segment for the client, where a flushed
// chunked stream takes a second write for its last chunk.
func (h *Streamable) storeFast(ctx context.Context, w http.ResponseWriter, ls *liveSession, req fastRequest, call *fastCall, stream []byte, flushed bool, data []byte) {
	ls.mu.Lock()
	if !ls.ended {
		_ = h.events.Append(ctx, ls.id, call.stream, data)
	}
	delete(ls.calls, call.id)
	delete(ls.streams, call.stream)
	claimed := call.claimed
	close(call.stored)
	ls.mu.Unlock()
	if !claimed {
		idx := 0
		if req.prime {
			idx = 1
		}
		stream = mcphttp.AppendEvent(stream, mcphttp.Event{Name: "message", ID: mcphttp.EventID(call.stream, idx), Data: data})
	}
	if !flushed {
		w.Header().Set("Content-Length", strconv.Itoa(len(stream)))
	}
	_, _ = w.Write(stream)
}

// bridgeSession returns the bridge's state for the session.
func (ls *liveSession) bridgeSession(s *Server) *session {
	ls.mu.Lock()
	bs := ls.bridge
	ls.mu.Unlock()
	if bs != nil {
		return bs
	}
	return s.statefulSession(ls.ss, clientName(ls.ss))
}

// response encodes a JSON-RPC response as the SDK does (no HTML escaping;
// an error that is not a JSON-RPC one has code 0 and its text).
func response(id []byte, result any, err error) []byte {
	var buf bytes.Buffer
	buf.Grow(256)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(id)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err != nil {
		buf.WriteString(`,"error":`)
		_ = enc.Encode(wireError(err))
	} else {
		buf.WriteString(`,"result":`)
		if e := enc.Encode(result); e != nil {
			return response(id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encoding the result: " + e.Error()})
		}
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	buf.WriteByte('}')
	return buf.Bytes()
}

// wireError is the SDK's (jsonrpc2's) mapping of a handler's error.
func wireError(err error) *jsonrpc.Error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		if werr == err {
			return werr
		}
		return &jsonrpc.Error{Code: werr.Code, Message: err.Error()}
	}
	return &jsonrpc.Error{Message: err.Error()}
}

// idText is a raw request id as the SDK prints it (%v of its value).
func idText(id []byte) string {
	if id[0] == '"' {
		return string(id[1 : len(id)-1])
	}
	return string(id)
}

// primeDelay is how long a call's priming event may wait to go out
// together with its answer.
const primeDelay = 2 * time.Millisecond

// cancelKey is the raw id a notifications/cancelled refers to, in the form
// the fast path keys its calls by ("" when it cannot be one of them).
func cancelKey(requestID any) string {
	switch v := requestID.(type) {
	case float64:
		return strconv.FormatInt(int64(v), 10)
	case string:
		return `"` + v + `"`
	}
	return ""
}
