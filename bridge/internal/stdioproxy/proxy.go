// Package stdioproxy serves the bridge's MCP endpoint to clients that only
// speak stdio (Claude Desktop's config, for one): `browserbridge stdio` runs
// it. Each JSON-RPC message the client writes on stdin goes to the bridge's
// Streamable HTTP endpoint unchanged, and each message the bridge sends goes
// to stdout unchanged, so the bridge sees the real client (its name, its
// protocol version) and the client sees the bridge's real answers.
//
// Protocol flow:
//
//	client ──stdin, a JSON value per line──▶ proxy ──POST /mcp───────────────▶ bridge
//	client ◀─stdout, a JSON value per line── proxy ◀──SSE: POST replies, GET── bridge
//
// Step by step:
//
//  1. At start, Run tries the endpoint once. If nothing answers, it says so
//     on the log (the URL, and Options.StartHint) and answers the client
//     itself until the bridge comes (waiting.go): initialize at once, with
//     the tools capability and listChanged, tools/list with no tools, and
//     tools/call with a tool error that says the bridge is not running and
//     how to start it. It tries the endpoint again every two seconds at
//     most; when the bridge answers, it initializes a session there with
//     the client's own initialize, logs that, and sends the client
//     notifications/tools/list_changed, so that it lists the bridge's
//     tools. From then on the proxy forwards, as below.
//  2. When the bridge answered at start, the client's initialize goes
//     through as is. When its result comes back, the proxy notes the
//     protocol version and session, opens the standalone GET stream
//     (server notifications such as notifications/tools/list_changed
//     arrive there), remembers the initialize request, and only then
//     passes the result on.
//  3. Requests go out concurrently, one POST each, their replies and
//     progress notifications coming back on the POST's stream;
//     notifications and responses from the client go out in order.
//  4. The bridge keeps each session across its own restarts (a record in
//     its state directory), and the proxy keeps the session too. When the
//     bridge goes away (a refused connection, a broken stream) the proxy
//     waits for it with backoff, for up to BridgeWait, then carries on
//     with the same Mcp-Session-Id: it reopens the GET stream and resends
//     what the bridge never received, without a new initialize, so the
//     client keeps its session, and with it its tab group. A call whose
//     answer was on its way when the stream broke is resumed from the
//     stream's last event id (Last-Event-ID), so the client gets the
//     bridge's own answer (from a bridge that restarted, a tool error
//     saying the action may or may not have happened); a call whose
//     stream had no event id gets a CodeInterrupted error, which says the
//     same. Only a 404 for the session (mcp.ErrSessionMissing: the bridge
//     ended it with a DELETE, the idle timeout or the session limit, or a
//     restart could not keep it) makes the proxy start a new session: it
//     replays the client's initialize (its answer goes nowhere) and
//     notifications/initialized. The client then carries on without
//     noticing, though in a new tab group.
//  5. EOF on stdin lets calls in flight finish (for a few seconds at most),
//     then ends the session with a DELETE; Run returns nil.
//
// Stdout carries nothing but JSON-RPC messages; the proxy's own news goes
// to Options.Logger.
package stdioproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// Options configure Run. Zero values are documented per field.
type Options struct {
	// Endpoint is the bridge's MCP URL, such as http://127.0.0.1:3456/mcp.
	// Required.
	Endpoint string
	// Token is sent as "Authorization: Bearer <Token>" to the endpoint's
	// host (never to another host); "" sends no Authorization header.
	Token string
	// Stdin carries the client's messages, newline-delimited JSON as the MCP
	// stdio transport specifies; EOF ends Run. Required. Run does not close
	// it, and a Read blocked in it when ctx ends is left to return on its
	// own.
	Stdin io.Reader
	// Stdout receives JSON-RPC messages for the client, one per line, and
	// nothing else. Required.
	Stdout io.Writer
	// Logger receives the proxy's events; nil discards them. It must not
	// write to Stdout.
	Logger *slog.Logger
	// HTTPClient makes the requests to the bridge; nil means a client on
	// http.DefaultTransport. Run adds the headers it needs with a
	// RoundTripper around its Transport. It should have no Timeout: the
	// streams last as long as the session.
	HTTPClient *http.Client
	// BridgeWait bounds how long a message waits for the bridge to come
	// back each time it goes away; 0 means 30 s. (At start, the proxy
	// waits for the bridge as long as the client stays, answering it
	// meanwhile.)
	BridgeWait time.Duration
	// StartHint tells the user how to start the bridge, in the log and in
	// the errors the client gets while no bridge answers; "" means
	// "run `browserbridge start`".
	StartHint string
	// Version is the version the proxy announces in the initialize answer
	// it gives itself while no bridge answers (the bridge's own answer
	// names the bridge's); "" means "dev".
	Version string
}

// ErrNoBridge is wrapped by the error a request gets when the bridge went
// away and did not come back within Options.BridgeWait.
var ErrNoBridge = errors.New("no bridge answers")

// JSON-RPC error codes the proxy answers with itself, from the
// implementation-defined server error range.
const (
	// CodeBridgeUnavailable answers a request the proxy could not deliver:
	// the bridge did not come back within BridgeWait, or refused the proxy.
	CodeBridgeUnavailable = rpccode.Unavailable
	// CodeInterrupted answers a request that was sent but whose answer
	// was lost when the bridge restarted. (Servers answer an unknown
	// session with the same number, rpccode.SessionNotFound: another
	// meaning, so not that constant.)
	CodeInterrupted = -32001
)

// msgInterrupted is CodeInterrupted's message.
const msgInterrupted = "the bridge restarted before answering; the call may or may not have run"

const (
	defaultBridgeWait = 30 * time.Second
	// retryFirst and retryMax shape the backoff between attempts to reach
	// the bridge: doubling from retryFirst, capped at retryMax.
	retryFirst = 100 * time.Millisecond
	retryMax   = 2 * time.Second
	// attemptTimeout bounds one attempt (a probe, a replayed initialize,
	// opening the GET stream, a notification) against a bridge that
	// accepts connections but does not answer.
	attemptTimeout = 5 * time.Second
	// deleteTimeout bounds the DELETE that ends the session when the
	// proxy stops.
	deleteTimeout = 5 * time.Second
	// drainTimeout is how long calls in flight may take to finish after
	// stdin ends.
	drainTimeout = 5 * time.Second
	// shutdownWait bounds the wait for the proxy's goroutines when it
	// stops (the DELETE takes at most 5 s; a blocked stdout forever).
	shutdownWait = 10 * time.Second
	// maxMessageBytes bounds one message from the client (a line) or the
	// bridge (an SSE event).
	maxMessageBytes = mcp.DefaultMaxLineLength
	// maxOtherFailures bounds the attempts to resume a call's stream that
	// fail in ways other than a bridge that is away, or bring nothing new.
	maxOtherFailures = 3
)

// MCP names the proxy looks at.
const (
	methodInitialize  = "initialize"
	methodInitialized = "notifications/initialized"
	methodCancelled   = "notifications/cancelled"
	// replayIDPrefix starts the id of a replayed initialize; the client
	// never sees it.
	replayIDPrefix = "browserbridge-stdio-reinitialize-"
)

// codeRejected is the SDK's ErrRejected, which its client connection wraps
// around refusals of one message (as opposed to a broken connection). The
// other JSON-RPC codes the proxy reads or writes are rpccode's.
const codeRejected = -32005

// errorBodyMax bounds how much of a refusal's body is read for its message.
const errorBodyMax = 4 << 10

var errClosing = errors.New("the proxy is closing")

// Run forwards messages between opts.Stdin/Stdout and the bridge until
// Stdin ends (then it returns nil), ctx ends (nil as well), or Stdout
// fails. While no bridge answers, it answers the client itself. It fails
// with a description of the refusal when the bridge refuses the proxy (a
// wrong token).
func Run(ctx context.Context, opts Options) error {
	p, err := newProxy(opts)
	if err != nil {
		return err
	}
	return p.run(ctx)
}

// proxy is one run: the client's side (stdin/stdout) and the current link
// to the bridge.
type proxy struct {
	opts    Options
	log     *slog.Logger
	http    *http.Client
	wait    time.Duration
	hint    string       // Options.StartHint or its default
	version atomic.Value // string: the protocol version in use, "" until known

	ctx    context.Context // Run's, cancelled when it returns
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // every goroutine Run starts but the stdin reader

	outMu  sync.Mutex
	outErr error

	// dialing holds a token while one goroutine (re)connects; the others
	// wait for it rather than dial too.
	dialing chan struct{}

	mu          sync.Mutex
	cur         *link                       // nil while the bridge is lost
	gen         uint64                      // the last link's generation
	sid         string                      // the client's session, kept across links; "" for none
	pending     map[jsonrpc.ID]*pendingCall // the client's requests not yet answered
	serverCalls map[jsonrpc.ID]string       // the bridge's requests to the client -> their session
	initReq     *jsonrpc.Request            // the client's initialize, once answered
	initDone    chan struct{}               // closed when the client's initialize in flight is answered
	initialized bool                        // the client sent notifications/initialized
	lastDialErr error                       // why the last attempt to reach the bridge failed
	waiting     bool                        // no bridge has answered yet: the proxy answers the client itself
	answered    bool                        // the proxy answered the client's initialize itself
	quickEnds   int                         // GET streams in a row the bridge ended at once
	closing     bool
	idle        chan struct{} // closed when pending becomes empty, while draining
}

// pendingCall is a client request not yet answered. Its context lives
// until then: the request and its reply stream run under it, and cancel
// ends them (the answer came, the client cancelled, the proxy stops).
type pendingCall struct {
	req    *jsonrpc.Request
	ctx    context.Context
	cancel context.CancelFunc
}

func newProxy(opts Options) (*proxy, error) {
	u, err := url.Parse(opts.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the endpoint %q is not an http:// or https:// URL", opts.Endpoint)
	}
	if opts.Stdin == nil || opts.Stdout == nil {
		return nil, errors.New("stdioproxy: Stdin and Stdout are required")
	}
	p := &proxy{
		opts:        opts,
		log:         opts.Logger,
		wait:        opts.BridgeWait,
		dialing:     make(chan struct{}, 1),
		pending:     make(map[jsonrpc.ID]*pendingCall),
		serverCalls: make(map[jsonrpc.ID]string),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.wait <= 0 {
		p.wait = defaultBridgeWait
	}
	p.hint = opts.StartHint
	if p.hint == "" {
		p.hint = defaultStartHint
	}
	p.version.Store("")
	client := http.Client{}
	if opts.HTTPClient != nil {
		client = *opts.HTTPClient
	}
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	client.Transport = &headerTransport{base: base, host: u.Host, token: opts.Token, version: p.protoVersion}
	p.http = &client
	return p, nil
}

func (p *proxy) protoVersion() string { return p.version.Load().(string) }

func (p *proxy) setProtoVersion(v string) {
	if v != "" {
		p.version.Store(v)
	}
}

// stdinItem is one line read from stdin, or the error that ended reading.
type stdinItem struct {
	line []byte
	err  error
}

func (p *proxy) run(parent context.Context) error {
	p.ctx, p.cancel = context.WithCancelCause(parent)
	defer p.cancel(nil)

	found, err := p.firstAttempt()
	if err != nil {
		p.shutdown()
		if parent.Err() != nil {
			return nil
		}
		return err
	}
	var bridgeCame <-chan linkResult // while waiting for the bridge
	if found {
		p.log.Info("forwarding stdio to the bridge", "url", p.opts.Endpoint)
	} else {
		bridgeCame = p.awaitBridge()
	}

	lines := make(chan stdinItem)
	go p.readStdin(lines)
	var result error
loop:
	for {
		select {
		case <-p.ctx.Done():
			if parent.Err() == nil {
				result = context.Cause(p.ctx)
			}
			break loop
		case r := <-bridgeCame:
			bridgeCame = nil
			if r.err != nil {
				result = r.err
				break loop
			}
			if !p.bridgeArrived(r.link) {
				bridgeCame = p.awaitBridge()
			}
		case in := <-lines:
			switch {
			case in.err == nil:
				p.fromClient(in.line)
			case errors.Is(in.err, errLineTooLong):
				p.log.Warn("dropped a message from the client", "error", in.err)
				p.writeError(nil, rpccode.InvalidRequest, in.err.Error())
			case errors.Is(in.err, io.EOF):
				p.log.Info("stdin closed: ending the session")
				p.drain()
				break loop
			default:
				result = fmt.Errorf("reading stdin: %w", in.err)
				break loop
			}
		}
	}
	p.shutdown()
	return result
}

// readStdin sends each line of stdin to lines, then the error that ended
// reading (io.EOF at the end).
func (p *proxy) readStdin(lines chan<- stdinItem) {
	r := newLineReader(p.opts.Stdin, maxMessageBytes)
	for {
		line, err := r.next()
		select {
		case lines <- stdinItem{line, err}:
		case <-p.ctx.Done():
			return
		}
		if err != nil && !errors.Is(err, errLineTooLong) {
			return
		}
	}
}

// drain waits, up to drainTimeout, for the client's requests in flight to
// be answered.
func (p *proxy) drain() {
	p.mu.Lock()
	if len(p.pending) == 0 {
		p.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	p.idle = idle
	n := len(p.pending)
	p.mu.Unlock()
	p.log.Info("waiting for calls in flight", "calls", n, "at_most", drainTimeout)
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-p.ctx.Done():
	}
}

// shutdown ends the session (DELETE), stops every goroutine and waits for
// them.
func (p *proxy) shutdown() {
	p.mu.Lock()
	p.closing = true
	l, sid := p.cur, p.sid
	p.cur = nil
	if l != nil {
		l.dead = true
	}
	p.mu.Unlock()
	if l != nil {
		l.cancel()
	}
	if sid != "" {
		p.endSession(sid)
	}
	p.cancel(errClosing)
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(shutdownWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		// Only a write to a stdout nobody reads blocks this long.
		p.log.Warn("gave up waiting for the proxy's goroutines to stop", "waited", shutdownWait)
	}
}

// fromClient handles one line from stdin.
func (p *proxy) fromClient(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if line[0] == '[' {
		p.writeError(nil, rpccode.InvalidRequest, "JSON-RPC batches are not supported (removed in MCP 2025-06-18): send one message per line")
		return
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		if !json.Valid(line) {
			p.writeError(nil, rpccode.ParseError, "a line on stdin is not valid JSON")
			return
		}
		p.writeError(idOf(line), rpccode.InvalidRequest, "not a JSON-RPC 2.0 message: "+err.Error())
		return
	}
	if p.answerWhileWaiting(msg) {
		return
	}
	if req, ok := msg.(*jsonrpc.Request); !ok || (req.Method != methodInitialize && req.Method != "ping" && req.Method != methodCancelled) {
		p.waitInitialize()
	}
	switch m := msg.(type) {
	case *jsonrpc.Request:
		p.noteVersion(m)
		if !m.IsCall() {
			p.notify(m)
			return
		}
		p.mu.Lock()
		_, dup := p.pending[m.ID]
		var pc *pendingCall
		if !dup {
			ctx, cancel := context.WithCancel(p.ctx)
			pc = &pendingCall{req: m, ctx: ctx, cancel: cancel}
			p.pending[m.ID] = pc
			if m.Method == methodInitialize && p.initDone == nil {
				p.initDone = make(chan struct{})
			}
		}
		p.mu.Unlock()
		if dup {
			p.toClient(errorResponse(m.ID, rpccode.InvalidRequest, fmt.Sprintf("request id %v is already in use by a request in flight", m.ID.Raw())))
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.call(pc)
		}()
	case *jsonrpc.Response:
		p.respond(m)
	}
}

// waitInitialize waits for the answer to the client's initialize, if one
// is in flight: until then there is no session to send anything in. (A
// client should wait for it anyway; one that pipes a script may not.)
func (p *proxy) waitInitialize() {
	p.mu.Lock()
	done := p.initDone
	p.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-p.ctx.Done():
	}
}

// noteVersion learns the protocol version from a request of the stateless
// era, which carries it in _meta.
func (p *proxy) noteVersion(req *jsonrpc.Request) {
	if req.Method == methodInitialize || !bytes.Contains(req.Params, []byte(mcp.MetaKeyProtocolVersion)) {
		return
	}
	var params struct {
		Meta map[string]any `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &params) == nil {
		if v, ok := params.Meta[mcp.MetaKeyProtocolVersion].(string); ok {
			p.setProtoVersion(v)
		}
	}
}

// notify sends one client notification, resending it after a reconnect if
// the bridge never got it.
func (p *proxy) notify(n *jsonrpc.Request) {
	switch n.Method {
	case methodInitialized:
		p.mu.Lock()
		p.initialized = true
		p.mu.Unlock()
	case methodCancelled:
		p.forgetCancelled(n)
		if mcphttp.IsStateless(p.protoVersion()) {
			// There is no session to tell: closing the call's request,
			// which forgetCancelled did, is how it is cancelled.
			return
		}
	}
	var deadline time.Time
	for attempt := 0; ; attempt++ {
		l, err := p.link(&deadline)
		if err != nil {
			if !errors.Is(err, errClosing) {
				p.log.Warn("dropped a notification from the client", "method", n.Method, "error", err)
			}
			return
		}
		err = p.writeShort(l, n)
		if err == nil {
			return
		}
		kind, _ := p.classify(err)
		switch kind {
		case closing:
			return
		case lost:
			p.breakLink(l, err)
			return
		case refused, busy:
			p.log.Warn("the bridge refused a notification", "method", n.Method, "error", err)
			return
		}
		p.breakLink(l, err)
		if n.Method == methodInitialized {
			// A session the bridge resumes is initialized; a new one gets
			// it from the reconnect, which replays it.
			return
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(p.wait)
		}
		if attempt > 0 && !p.pause(attempt, deadline) {
			p.log.Warn("dropped a notification from the client", "method", n.Method, "error", p.noBridge(err))
			return
		}
	}
}

// forgetCancelled drops the request a notifications/cancelled names, and
// stops waiting for its answer: the client expects none any more.
func (p *proxy) forgetCancelled(n *jsonrpc.Request) {
	var params struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(n.Params, &params) != nil {
		return
	}
	id, err := jsonrpc.MakeID(params.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	p.mu.Lock()
	if _, ok := p.pending[id]; ok {
		p.deletePendingLocked(id)
	}
	p.mu.Unlock()
}

// respond sends the client's answer to a request from the bridge, if the
// session that asked still exists (a bridge that restarted meanwhile has
// forgotten the request, and ignores the answer).
func (p *proxy) respond(r *jsonrpc.Response) {
	p.mu.Lock()
	sid, ok := p.serverCalls[r.ID]
	delete(p.serverCalls, r.ID)
	p.mu.Unlock()
	if !ok {
		p.log.Debug("dropped the client's answer to a request nobody made", "id", r.ID.Raw())
		return
	}
	var deadline time.Time
	l, err := p.link(&deadline)
	if err != nil {
		if !errors.Is(err, errClosing) {
			p.log.Warn("could not pass the client's answer to the bridge", "error", err)
		}
		return
	}
	if p.sessionOf(l) != sid {
		p.log.Debug("dropped the client's answer to a request from a session that ended", "id", r.ID.Raw())
		return
	}
	if err := p.writeShort(l, r); err != nil {
		kind, _ := p.classify(err)
		if kind != closing && kind != refused && kind != busy {
			p.breakLink(l, err)
		}
		p.log.Warn("could not pass the client's answer to the bridge", "error", err)
	}
}

// writeShort writes a notification or a response in l's session, which
// the bridge accepts at once (202), under a bound so that a bridge that
// hangs cannot stall stdin. Not under l.ctx: a write under way when the
// link breaks ends on its own, which tells whether the bridge got the
// message.
func (p *proxy) writeShort(l *link, msg jsonrpc.Message) error {
	ctx, cancel := context.WithTimeout(p.ctx, attemptTimeout)
	defer cancel()
	resp, err := p.post(ctx, p.sessionOf(l), msg)
	if err != nil {
		return err
	}
	resp.Body.Close() // a 202 has nothing to read
	return nil
}

// take removes pc from the pending requests; false means it was answered
// (or cancelled) already.
func (p *proxy) take(pc *pendingCall) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending[pc.req.ID] != pc {
		return false
	}
	p.deletePendingLocked(pc.req.ID)
	return true
}

// takeID removes and returns the pending request with this id, if any.
func (p *proxy) takeID(id jsonrpc.ID) *pendingCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.pending[id]
	if pc != nil {
		p.deletePendingLocked(id)
	}
	return pc
}

// answer gives the client resp if pc is still pending.
func (p *proxy) answer(pc *pendingCall, resp *jsonrpc.Response) {
	if p.take(pc) {
		p.toClient(resp)
	}
}

// deletePendingLocked forgets a request, ending its write's context (its
// answer has come, or will never be read).
func (p *proxy) deletePendingLocked(id jsonrpc.ID) {
	if pc := p.pending[id]; pc != nil {
		pc.cancel()
		if pc.req.Method == methodInitialize && p.initDone != nil {
			close(p.initDone)
			p.initDone = nil
		}
	}
	delete(p.pending, id)
	if len(p.pending) == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
}

// toClient writes one message to stdout.
func (p *proxy) toClient(msg jsonrpc.Message) {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		p.log.Error("could not encode a message for the client", "error", err)
		return
	}
	p.writeLine(data)
}

// writeError writes an error response with a raw id (null when nil), for
// lines that are not messages.
func (p *proxy) writeError(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	type wireError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, msg}})
	if err != nil {
		return
	}
	p.writeLine(data)
}

func (p *proxy) writeLine(data []byte) {
	p.outMu.Lock()
	defer p.outMu.Unlock()
	if p.outErr != nil {
		return
	}
	line := make([]byte, 0, len(data)+1)
	line = append(append(line, data...), '\n')
	if _, err := p.opts.Stdout.Write(line); err != nil {
		p.outErr = fmt.Errorf("writing to stdout: %w", err)
		p.cancel(p.outErr)
	}
}

func errorResponse(id jsonrpc.ID, code int64, msg string) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}}
}

// idOf returns the id of a JSON object if it has a usable one.
func idOf(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	switch m.ID[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return m.ID
	}
	return nil
}
