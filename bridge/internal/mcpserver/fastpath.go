package mcpserver

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/browserbridge/browserbridge/bridge/internal/jsonscan"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
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
//     (the live session's lease owns that timer: the SDK's cannot see
//     these requests);
//   - notifications/cancelled with the request's id cancels the call, and
//     the extension is told, as forward does on any cancellation;
//   - the end of the HTTP request does not cancel the call (it is not a
//     cancellation in these eras): its answer is stored for resumption;
//   - a second request with the id of one in flight is refused (400);
//   - the end of the session waits for its calls before the browsers are
//     told (session.ended: Server.forget).
//
// Tool arguments are not checked against the tool's input schema, as the
// SDK does not check them for tools registered with Server.AddTool (the
// browser's tools): the extension validates its own arguments.

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
// goes in four steps: takeFast reads the request and decides,
// liveSession.startCall enters the call in its session and opens its
// stream, answerFast runs it (the priming event going out first if the
// answer is slow), storeFast keeps the answer for resumption and ends the
// stream with it.
func (h *Streamable) serveFast(w http.ResponseWriter, r *http.Request, ls *liveSession, body []byte) bool {
	req, ok := h.takeFast(r, ls, body)
	if !ok {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call, ok := ls.startCall(ctx, h.events, req, cancel)
	if !ok {
		return false // the session ended: ServeHTTP answers 404
	}
	h.s.stats.FastPath.Add(1)
	defer ls.end()
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
	if h.noFastPath.Load() || !mcphttp.IsSessionVersion(r.Header.Get(mcphttp.HeaderProtocolVersion)) || len(r.Header.Values(mcphttp.HeaderLastEventID)) > 0 {
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
	req.version = mcphttp.RequestVersion(r.Header)
	req.prime = mcphttp.PrimesStreams(req.version)
	return req, true
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
		return h.s.forwardResponse(ctx, toolCall{link: ls.link, header: r.Header, name: req.name, args: req.args, version: req.version}, req.id)
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
	if !ls.finishCall(ctx, h.events, call, data) {
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

// restartSentence is the answer to a call whose bridge process died before
// it answered: the client resumed the call's stream (Last-Event-ID) from a
// bridge that never saw it.
const restartSentence = "Browser Bridge restarted while this call was running, so its answer was lost and the action may or may not have happened. " +
	"The session carries on: check the page (read it again) before repeating the action."

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
	if ls.inFlight(stream) {
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
