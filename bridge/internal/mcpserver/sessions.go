package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/sessionlimit"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// The stateful Streamable HTTP sessions (2025-03-26 to 2025-11-25) are the
// bridge's own, not the SDK handler's: each is an SDK transport connected
// with Server.Connect, which the bridge creates at initialize, indexes by
// Mcp-Session-Id, admits through the session table, records on disk, and
// resumes from its record after a restart (Connect with the recorded
// ServerSessionState and the same SessionID). The SDK's handler can do
// none of the last three.

// restartSentence is the answer to a call whose bridge process died before
// it answered: the client resumed the call's stream (Last-Event-ID) from a
// bridge that never saw it.
const restartSentence = "Browser Bridge restarted while this call was running, so its answer was lost and the action may or may not have happened. " +
	"The session carries on: check the page (read it again) before repeating the action."

// createSession connects a new SDK session for an initialize and serves
// it; the session is admitted, indexed and recorded.
func (h *Streamable) createSession(w http.ResponseWriter, r *http.Request, head messageHead) {
	client := head.clientName()
	ls := &liveSession{id: rand.Text(), idle: h.opts.SessionTimeout, done: make(chan struct{})}
	ls.hash = hashSessionID(ls.id)
	adm, err := h.limit.Admit(sessionlimit.ClientKey(peerHost(r), "", client), ls.close)
	if err != nil {
		writeRefusal(w, head.ID, err)
		return
	}
	ls.adm = adm
	ls.transport = &mcp.StreamableServerTransport{SessionID: ls.id, EventStore: h.events}
	// The SDK's handler connects with the request's context too (its values
	// reach the session); the session outlives the request.
	ss, err := h.s.mcp.Connect(context.WithoutCancel(r.Context()), ls.transport, nil)
	if err != nil {
		adm.Release()
		mcphttp.WriteError(w, http.StatusInternalServerError, head.ID, rpccode.InternalError, "could not start an MCP session: "+err.Error())
		return
	}
	ls.ss = ss
	ls.bridge = h.s.register(ss, newSession(newLinkID(), client, false, ss))
	h.live.track(ls)

	ls.startPOST()
	ls.transport.ServeHTTP(w, h.version.with(r))
	ls.endPOST()
	params := ss.InitializeParams()
	if params == nil {
		_ = ss.Close() // initialize failed: nothing to keep (as the SDK's handler does)
		return
	}
	rec := &sessionRecord{
		Version:    recordVersion,
		IDHash:     ls.hash,
		LinkID:     ls.bridge.id,
		Client:     client,
		Initialize: params,
		Negotiated: mcphttp.Negotiate(params.ProtocolVersion, mcphttp.Versions),
		Created:    time.Now(),
	}
	ls.mu.Lock()
	ls.record = rec
	ls.mu.Unlock()
	ls.bridge.mu.Lock()
	ls.bridge.persist = func() { h.saveRecord(ls) }
	ls.bridge.mu.Unlock()
	h.saveRecord(ls)
}

// saveRecord writes a live session's record with its current state.
func (h *Streamable) saveRecord(ls *liveSession) {
	// One save at a time, each reading the state inside the lock: the last
	// write is then of the latest state (a select_browser racing the save
	// that follows initialize cannot be overwritten by the older one).
	ls.saveMu.Lock()
	defer ls.saveMu.Unlock()
	ls.mu.Lock()
	if ls.record == nil || ls.ended {
		ls.mu.Unlock()
		return
	}
	rec := *ls.record
	ls.mu.Unlock()
	rec.Browser = ls.bridge.chosen()
	h.records.save(&rec)
	ls.touchedAt.Store(time.Now().UnixNano())
}

// lookup returns the live session with this id, resuming it from its
// record if a previous bridge process left one; nil if there is neither.
func (h *Streamable) lookup(r *http.Request, sid string) *liveSession {
	if ls := h.live.get(sid); ls != nil {
		return ls
	}
	h.resumeMu.Lock()
	defer h.resumeMu.Unlock()
	if ls := h.live.get(sid); ls != nil {
		return ls // resumed by a request that came at the same time
	}
	rec := h.records.take(sid)
	if rec == nil {
		return nil
	}
	ls := &liveSession{id: sid, hash: rec.IDHash, idle: h.opts.SessionTimeout, done: make(chan struct{}), record: rec}
	adm, err := h.limit.Admit(sessionlimit.ClientKey(peerHost(r), "", rec.Client), ls.close)
	if err != nil {
		h.s.log.Warn("could not resume a recorded session", "error", err)
		h.records.remove(rec.IDHash)
		return nil
	}
	ls.adm = adm
	ls.transport = &mcp.StreamableServerTransport{SessionID: sid, EventStore: h.events}
	ss, err := h.s.mcp.Connect(context.Background(), ls.transport, &mcp.ServerSessionOptions{State: rec.state()})
	if err != nil {
		adm.Release()
		h.s.log.Warn("could not resume a recorded session", "error", err)
		return nil
	}
	ls.ss = ss
	st := newSession(rec.LinkID, rec.Client, false, ss)
	st.browser = rec.Browser
	// The dead process numbered this session's link requests from 1, and
	// the browser may still be running some of them: go on from a number
	// none of them can have (microseconds since 1970 grow faster than any
	// process sends calls), so no id is in flight twice.
	st.next.Store(uint64(time.Now().UnixMicro()))
	st.persist = func() { h.saveRecord(ls) }
	ls.bridge = h.s.register(ss, st)
	h.live.track(ls)
	h.s.log.Info("MCP session resumed after a bridge restart", "client", rec.Client, "session", protocol.IDPrefixLocal+rec.LinkID)
	return ls
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
	ls := h.lookup(r, sid)
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
	if last := r.Header.Get(mcphttp.HeaderLastEventID); last == "" && r.Header.Get(mcphttp.HeaderProtocolVersion) >= "2025-11-25" {
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

// answerLostCall answers the resumption of a fast-path call's stream that
// no process of this bridge has: the process that ran the call died
// before answering. The stream id names the call's request id, so the
// call ends with a tool error that says what happened instead of an error
// the client cannot explain (or a wait that never ends).
func (h *Streamable) answerLostCall(w http.ResponseWriter, r *http.Request, ls *liveSession) bool {
	last := r.Header.Get(mcphttp.HeaderLastEventID)
	stream, _, ok := strings.Cut(last, "_")
	if !ok || !strings.HasPrefix(stream, "f") || h.events.known(ls.id, stream) {
		return false
	}
	ls.mu.Lock()
	inFlight := ls.streams[stream] != nil
	ls.mu.Unlock()
	if inFlight {
		return false
	}
	id, ok := fastStreamRequestID(stream)
	if !ok {
		return false
	}
	data := response(id, toolError(restartSentence), nil)
	_, idx, _ := mcphttp.ParseEventID(last) // 0 when it has none
	event := mcphttp.AppendEvent(nil, mcphttp.Event{Name: "message", ID: mcphttp.EventID(stream, idx+1), Data: data})
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", mcphttp.ContentTypeSSE)
	w.Header().Set("Content-Length", fmt.Sprint(len(event)))
	_, _ = w.Write(event)
	return true
}

// fastStreamID names a fast-path call's stream: "f<n>" and, for a request
// id short enough, "c" and the hex of the raw id, so that a bridge that
// restarted can still answer the call (answerLostCall).
func fastStreamID(n uint64, rawID []byte) string {
	b := make([]byte, 0, 2+20+2*len(rawID))
	b = strconv.AppendUint(append(b, 'f'), n, 10)
	if len(rawID) <= maxStreamIDBytes {
		b = hex.AppendEncode(append(b, 'c'), rawID)
	}
	return string(b)
}

// maxStreamIDBytes bounds the request ids carried in stream ids (and so
// in every event id of the stream).
const maxStreamIDBytes = 64

// fastStreamRequestID reads the raw request id back from a stream id.
func fastStreamRequestID(stream string) ([]byte, bool) {
	_, enc, ok := strings.Cut(stream, "c")
	if !ok {
		return nil, false
	}
	raw, err := hex.DecodeString(enc)
	if err != nil || len(raw) == 0 || !plainID(raw) {
		return nil, false
	}
	return raw, true
}

// serveDELETE ends a session at the client's request.
func (h *Streamable) serveDELETE(w http.ResponseWriter, r *http.Request, sid string) {
	if sid == "" {
		mcphttp.WriteError(w, http.StatusBadRequest, nil, rpccode.InvalidRequest, "DELETE needs the Mcp-Session-Id header of the session to end")
		return
	}
	ls := h.lookup(r, sid)
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
	for _, ls := range h.live.all() {
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

// writeRefusal answers a session the table refused.
func writeRefusal(w http.ResponseWriter, id json.RawMessage, err error) {
	var r *sessionlimit.Refusal
	if errors.As(err, &r) {
		w.Header().Set("Retry-After", r.RetryAfterSeconds())
		mcphttp.WriteError(w, r.Status, id, rpccode.Unavailable, r.Message)
		return
	}
	mcphttp.WriteError(w, http.StatusServiceUnavailable, id, rpccode.Unavailable, err.Error())
}

// peerHost is the client's address without its port: one client makes
// connections from many ports.
func peerHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
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
