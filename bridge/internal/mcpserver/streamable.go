package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// HTTPOptions configure the HTTP transports. Zero values are documented.
type HTTPOptions struct {
	// SessionTimeout ends a Streamable HTTP session with no request for this
	// long (abandoned sessions are reaped); 0 means 30 minutes.
	SessionTimeout time.Duration
	// ReplayBytes bounds each session's buffer of events kept for
	// resumption (Last-Event-ID); 0 means 256 KiB.
	ReplayBytes int
	// MaxBodyBytes bounds a request body; 0 means 4 MiB.
	MaxBodyBytes int64
	// PingInterval is the legacy SSE keep-alive period; 0 means 30 s,
	// negative turns pings off.
	PingInterval time.Duration
	// PingStyle is "event" (an `event: ping` with a timestamp, as spec 004
	// says) or "comment" (an SSE comment line, which no client can
	// mistake for a message); "" means "event".
	PingStyle string
	// SessionDir keeps a record of each Streamable HTTP session, so that a
	// restarted bridge resumes them; "" keeps none.
	SessionDir string
	// Sessions admits every session (Streamable HTTP and legacy SSE, and
	// the gateway's when it shares the table); nil means a table of the
	// endpoint's own with sessionlimit's defaults.
	Sessions *sessionlimit.Table
}

func (o *HTTPOptions) defaults() {
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.ReplayBytes == 0 {
		o.ReplayBytes = 256 << 10
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.PingInterval == 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.PingStyle == "" {
		o.PingStyle = "event"
	}
	if o.Sessions == nil {
		o.Sessions = sessionlimit.New(sessionlimit.Options{})
	}
}

// serverMethods are the requests the server answers; anything else gets
// -32601 before it reaches the SDK, which would answer in plain text.
var serverMethods = map[string]bool{
	"initialize": true, "ping": true, "tools/list": true, "tools/call": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true,
	"logging/setLevel": true, "server/discover": true, "subscriptions/listen": true,
}

// Streamable serves /mcp for every era on one endpoint: requests of the
// 2026-07-28 stateless era (no session, _meta carries the version) go to a
// stateless SDK handler; initialize and everything in a session go to the
// bridge's live sessions (session.go), SDK transports it creates,
// records and resumes itself. Before either, requests are checked so that
// bad input gets JSON-RPC errors rather than the SDK's plain-text ones.
type Streamable struct {
	s         *Server
	opts      HTTPOptions
	stateless *mcp.StreamableHTTPHandler
	events    *eventStore
	live      mcphttp.SessionTable[*liveSession]
	records   *recordStore
	limit     *sessionlimit.Table
	resumeMu  sync.Mutex // one resumption from a record at a time
	version   *versionContext
	stopping  atomic.Bool
	// noFastPath sends every request to the SDK (tests and benchmarks
	// compare the two).
	noFastPath atomic.Bool
}

// NewStreamable returns the /mcp handler. It reads the session records a
// previous bridge process left in opts.SessionDir.
func (s *Server) NewStreamable(opts HTTPOptions) *Streamable {
	opts.defaults()
	h := &Streamable{s: s, opts: opts, events: newEventStore(opts.ReplayBytes), limit: opts.Sessions, version: newVersionContext()}
	h.records = newRecordStore(opts.SessionDir, opts.Sessions.Stats().Max, opts.SessionTimeout, s.log)
	h.records.load()
	s.sessMu.Lock()
	s.pendingSessions = h.pendingSessions
	s.sessMu.Unlock()
	get := func(*http.Request) *mcp.Server { return s.mcp }
	h.stateless = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		MaxRequestBodyBytes:          opts.MaxBodyBytes,
		Logger:                       s.log,
		DisableLocalhostProtection:   true,
	})
	return h
}

// ReplayBytes reports the bytes held for stream resumption.
func (h *Streamable) ReplayBytes() int { return h.events.Bytes() }

// pendingSessions lists the recorded sessions not yet resumed.
func (h *Streamable) pendingSessions() []protocol.SessionRef {
	recs := h.records.pendingRecords()
	out := make([]protocol.SessionRef, 0, len(recs))
	for _, r := range recs {
		out = append(out, protocol.SessionRef{ID: protocol.IDPrefixLocal + r.LinkID, Client: r.Client})
	}
	return out
}

// ExpireRecords drops the records of sessions that were not resumed within
// the session timeout and tells the browsers those sessions ended; the
// daemon calls it periodically.
func (h *Streamable) ExpireRecords() {
	for _, r := range h.records.expire(time.Now()) {
		h.s.sessionEnded(&linkSession{id: r.LinkID, client: r.Client})
	}
}

func (h *Streamable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	copyBrowserParam(r)
	sid := r.Header.Get(mcphttp.HeaderSessionID)
	if sid != "" && h.stopping.Load() {
		h.writeNoSession(w, nil) // its session is closing for the next process to resume
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet:
		h.serveGET(w, r, sid)
		return
	case http.MethodDelete:
		h.serveDELETE(w, r, sid)
		return
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest, r.Method+" is not a Streamable HTTP method: POST sends messages, GET opens a stream, DELETE ends a session")
		return
	}
	if !mcphttp.CheckPOSTAccept(w, r) || !mcphttp.CheckContentType(w, r) {
		return
	}
	body, ok := mcphttp.ReadBody(w, r, h.opts.MaxBodyBytes)
	if !ok {
		return
	}
	var ls *liveSession
	if sid != "" {
		if ls = h.session(r, sid); ls != nil && h.serveFast(w, r, ls, body) {
			return
		}
	}
	head, ok := checkMessage(w, r, body)
	if !ok {
		return
	}

	switch {
	case sid != "":
		if ls == nil {
			h.writeNoSession(w, head.ID)
			return
		}
		if head.Method == "notifications/cancelled" {
			var p struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(head.Params, &p) == nil {
				if key := cancelKey(p.RequestID); key != "" {
					ls.cancel(key)
				}
			}
		}
		if !checkVersion(w, r, head.ID) {
			return
		}
		if !ls.begin() {
			h.writeNoSession(w, head.ID)
			return
		}
		defer ls.end()
		ls.transport.ServeHTTP(w, h.version.with(r))
	case mcphttp.IsStatelessRequest(r.Header, head.Params):
		h.stateless.ServeHTTP(w, r)
	case head.Method == "initialize":
		if h.stopping.Load() {
			mcphttp.WriteError(w, http.StatusServiceUnavailable, head.ID, rpccode.Unavailable, "Browser Bridge is stopping; try again in a moment")
			return
		}
		h.open(w, r, head)
	default:
		mcphttp.WriteError(w, http.StatusBadRequest, head.ID, rpccode.InvalidRequest,
			"Mcp-Session-Id header is required: send initialize first (or, as a 2026-07-28 client, put the protocol version in _meta)")
	}
}

// awaitFastStream holds a GET that resumes a fast-path stream still in
// flight until its answer is stored, for the SDK to replay it from there.
func (h *Streamable) awaitFastStream(r *http.Request, ls *liveSession) {
	last := r.Header.Get(mcphttp.HeaderLastEventID)
	if !strings.HasPrefix(last, "f") {
		return
	}
	stream, _, _ := strings.Cut(last, "_")
	if stored := ls.resuming(stream); stored != nil {
		select {
		case <-stored:
		case <-ls.done:
		case <-r.Context().Done():
		}
	}
}

// readMessage reads and checks a posted JSON-RPC message, answering bad
// input itself (ok false), and puts the body back for the SDK.
func readMessage(w http.ResponseWriter, r *http.Request, limit int64) (head *mcphttp.Message, ok bool) {
	body, ok := mcphttp.ReadBody(w, r, limit)
	if !ok {
		return nil, false
	}
	return checkMessage(w, r, body)
}

// checkMessage checks a posted JSON-RPC message, answering bad input itself
// (ok false), and puts the body back for the SDK.
func checkMessage(w http.ResponseWriter, r *http.Request, body []byte) (head *mcphttp.Message, ok bool) {
	head, status, code, msg := inspect(body)
	if status != 0 {
		var id json.RawMessage
		if head != nil && mcphttp.ValidID(head.ID) {
			id = head.ID
		}
		mcphttp.WriteError(w, status, id, code, msg)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return head, true
}

// inspect checks a message body: mcphttp's rules for every message, then
// the bridge's own for requests (an id it can answer exactly, a method it
// serves). A non-zero status means refuse it with that HTTP status,
// JSON-RPC code and message, answered to head's id if it has a valid one.
func inspect(body []byte) (head *mcphttp.Message, status, code int, msg string) {
	head, code, err := mcphttp.ParseMessage(body)
	if err != nil {
		return head, http.StatusBadRequest, code, err.Error()
	}
	if p := bytes.TrimSpace(head.Params); len(p) > 0 && p[0] != '{' && string(p) != "null" {
		return head, http.StatusBadRequest, rpccode.InvalidRequest, `"params" must be a JSON object: every MCP method takes its parameters by name`
	}
	switch head.Kind() {
	case mcphttp.KindRequest:
		if why := idProblem(head.ID); why != "" {
			head.ID = nil // it cannot be echoed: the error goes with a null id
			return head, http.StatusBadRequest, rpccode.InvalidRequest, why
		}
		if !serverMethods[head.Method] {
			return head, http.StatusOK, rpccode.MethodNotFound, fmt.Sprintf("method %q is not served by Browser Bridge", head.Method)
		}
	case mcphttp.KindNotification:
		if serverMethods[head.Method] {
			return head, http.StatusBadRequest, rpccode.InvalidRequest, fmt.Sprintf("%s is a request and needs an \"id\" (a message without one is a notification, which gets no answer)", head.Method)
		}
	}
	return head, 0, 0, ""
}

// maxExactID is the largest integer id every JSON-RPC peer (and the SDK,
// which reads numbers as float64) holds exactly: 2^53 - 1.
const maxExactID = 1<<53 - 1

// idProblem says why a request id cannot come back exactly as it was sent
// ("" when it can): an answer must carry the id of its request, and an id
// that the server rounds (1.5 to 1, 2^53 + 1 to 2^53) can be answered as
// another request of the same client.
func idProblem(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return ""
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > maxExactID || n < -maxExactID {
			return fmt.Sprintf("request id %s cannot be answered exactly: use a string, or an integer between -%d and %d", echoID(string(raw)), int64(maxExactID), int64(maxExactID))
		}
		return ""
	}
	return fmt.Sprintf("request id %s is not a string or an integer", echoID(string(raw)))
}

// copyBrowserParam moves ?browser= into a header the tool handlers see.
func copyBrowserParam(r *http.Request) {
	r.Header.Del(BrowserHeader) // only the URL may choose
	if b := r.URL.Query().Get("browser"); b != "" {
		r.Header.Set(BrowserHeader, b)
	}
}

// serveGET serves a session's GET stream, or the resumption of a call's
// stream (Last-Event-ID).
func (h *Streamable) serveGET(w http.ResponseWriter, r *http.Request, sid string) {
	if !mcphttp.CheckGETAccept(w, r) {
		return
	}
	if sid == "" {
		mcphttp.WriteError(w, http.StatusBadRequest, nil, rpccode.InvalidRequest, "GET needs the Mcp-Session-Id header of an initialized session")
		return
	}
	ls := h.session(r, sid)
	if ls == nil {
		h.writeNoSession(w, nil)
		return
	}
	if h.answerLostCall(w, r, ls) {
		return
	}
	if !checkVersion(w, r, nil) {
		return
	}
	h.awaitFastStream(r, ls)
	if last := r.Header.Get(mcphttp.HeaderLastEventID); strings.HasPrefix(last, "g") {
		// The standalone stream, opened again: it has no events to replay
		// (its priming event is not stored), so it is a new one.
		r.Header.Del(mcphttp.HeaderLastEventID)
	}
	if last := r.Header.Get(mcphttp.HeaderLastEventID); last == "" && mcphttp.PrimesStreams(mcphttp.RequestVersion(r.Header)) {
		w = &primingWriter{ResponseWriter: w, event: mcphttp.AppendEvent(nil, mcphttp.Event{Name: "prime", ID: mcphttp.EventID("g"+rand.Text(), 0)})}
	}
	ls.transport.ServeHTTP(w, h.version.with(r))
}

// primingWriter opens a standalone GET stream with a priming event
// (2025-11-25, SEP-1699) whose id is new on every stream. A client counts
// the times its stream broke without a new event id and gives the session
// up after a few (the Go SDK after 5): a stream that only carried
// keep-alives before each bridge restart would otherwise cost the session
// its life after the fifth restart.
type primingWriter struct {
	http.ResponseWriter
	event  []byte
	primed bool
}

func (p *primingWriter) prime() {
	if p.primed {
		return
	}
	p.primed = true
	if strings.HasPrefix(p.Header().Get("Content-Type"), mcphttp.ContentTypeSSE) {
		_, _ = p.ResponseWriter.Write(p.event)
	}
}

func (p *primingWriter) WriteHeader(code int) {
	p.ResponseWriter.WriteHeader(code)
	if code == http.StatusOK {
		p.prime()
	}
}

func (p *primingWriter) Write(b []byte) (int, error) {
	p.prime()
	return p.ResponseWriter.Write(b)
}

func (p *primingWriter) Flush() {
	p.prime()
	_ = http.NewResponseController(p.ResponseWriter).Flush()
}

func (p *primingWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// serveDELETE ends a session at the client's request.
func (h *Streamable) serveDELETE(w http.ResponseWriter, r *http.Request, sid string) {
	if sid == "" {
		mcphttp.WriteError(w, http.StatusBadRequest, nil, rpccode.InvalidRequest, "DELETE needs the Mcp-Session-Id header of the session to end")
		return
	}
	ls := h.session(r, sid)
	if ls == nil {
		h.writeNoSession(w, nil)
		return
	}
	_ = ls.ss.Close()
	w.WriteHeader(http.StatusNoContent)
}

// Close ends every Streamable HTTP session for a bridge that stops: their
// records stay, so a restarted bridge resumes them.
func (h *Streamable) Close() {
	h.s.Stopping()
	h.stopping.Store(true)
	for _, ls := range h.live.All() {
		_ = ls.ss.Close()
	}
}

// writeNoSession answers a request for a session the bridge does not have:
// 404, or, while the bridge is stopping, 503 with Retry-After, since the
// session is then only closed for the next process to resume (its record
// stays) and a 404 would make the client give it up.
func (h *Streamable) writeNoSession(w http.ResponseWriter, id json.RawMessage) {
	if h.stopping.Load() {
		w.Header().Set("Retry-After", "1")
		mcphttp.WriteError(w, http.StatusServiceUnavailable, id, rpccode.Unavailable, "Browser Bridge is restarting; this session carries on in a moment: try again")
		return
	}
	writeSessionNotFound(w, id)
}

// writeSessionNotFound answers a request for a session the bridge does not
// have (404, as the spec asks, so the client starts a new one).
func writeSessionNotFound(w http.ResponseWriter, id json.RawMessage) {
	mcphttp.WriteError(w, http.StatusNotFound, id, rpccode.SessionNotFound,
		"session not found: it was ended (DELETE, the session timeout, or the session limit) or a bridge restart could not keep it; send initialize to start a new session")
}

// versionContext gives a request the protocol version the SDK's transport
// reads from its context (priming events from 2025-11-25, batch refusal
// from 2025-06-18). Only the SDK's own handler can put it there, under an
// unexported key, so a session-less probe of the request goes through a
// handler that keeps no sessions: it prepares the context, then asks its
// server callback for a server with that context, and the callback hands
// the context back instead. The MCP-Protocol-Version header was checked
// before (checkVersion).
type versionContext struct {
	probe *mcp.StreamableHTTPHandler
}

type probeSlot struct{}

func newVersionContext() *versionContext {
	return &versionContext{probe: mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if slot, ok := r.Context().Value(probeSlot{}).(*context.Context); ok {
			*slot = r.Context() // the last call, the one that matters, has the version
		}
		return nil // no server: the probe never becomes a session
	}, &mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})}
}

// with returns r carrying its MCP-Protocol-Version as the SDK's transport
// expects it.
func (v *versionContext) with(r *http.Request) *http.Request {
	var got context.Context
	probe := r.WithContext(context.WithValue(r.Context(), probeSlot{}, &got))
	probe.Method = http.MethodPost
	probe.Header = http.Header{
		"Content-Type": {mcphttp.ContentTypeJSON},
		"Accept":       {mcphttp.ContentTypeJSON + ", " + mcphttp.ContentTypeSSE},
	}
	if ver := r.Header.Values(mcphttp.HeaderProtocolVersion); len(ver) > 0 {
		probe.Header[mcphttp.HeaderProtocolVersion] = ver
	}
	probe.Body = http.NoBody
	v.probe.ServeHTTP(discardResponse{}, probe)
	if got == nil {
		return r
	}
	return r.WithContext(got)
}

// discardResponse swallows the probe's answer.
type discardResponse struct{}

func (discardResponse) Header() http.Header         { return http.Header{} }
func (discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (discardResponse) WriteHeader(int)             {}

// checkVersion refuses an MCP-Protocol-Version the bridge does not speak,
// as the SDK's handler would, but as a JSON-RPC error. A version of the
// stateless era or later goes on to the SDK's stateless handler, which
// answers a version it does not know itself.
func checkVersion(w http.ResponseWriter, r *http.Request, id json.RawMessage) bool {
	return mcphttp.IsStateless(r.Header.Get(mcphttp.HeaderProtocolVersion)) ||
		mcphttp.CheckVersion(w, r, id, mcphttp.Versions)
}
