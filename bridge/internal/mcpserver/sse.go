package mcpserver

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// echoID shortens a client-chosen id for a message.
func echoID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

// SSE serves the legacy HTTP+SSE transport (2024-11-05) as spec 004 lays it
// out: GET /sse opens the stream and names the endpoint to POST to,
// /message?sessionId=…; replies come back on the stream as `event: message`;
// `event: ping` keeps idle proxies from closing it. The session ends when
// the stream closes.
type SSE struct {
	s        *Server
	opts     HTTPOptions
	sessions mcphttp.SessionTable[*sseSession]
}

type sseSession struct {
	t     *mcp.SSEServerTransport
	lease *mcphttp.Lease // no idle timeout: the session ends with its stream
}

// NewSSE returns the legacy transport; mount Stream at /sse and Message at
// /message.
func (s *Server) NewSSE(opts HTTPOptions) *SSE {
	opts.defaults()
	return &SSE{s: s, opts: opts}
}

// Sessions reports the open SSE sessions.
func (h *SSE) Sessions() int64 { return int64(h.sessions.Len()) }

// Stream handles GET /sse.
func (h *SSE) Stream(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest, "GET /sse opens the event stream; messages go to POST /message?sessionId=…")
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		mcphttp.WriteError(w, http.StatusInternalServerError, nil, rpccode.InternalError, "streaming is not supported by this connection")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	lease, err := mcphttp.AdmitLease(h.opts.Sessions, mcphttp.ClientKey(r, "legacy-sse"), mcphttp.LeaseOptions{End: cancel})
	if err != nil {
		mcphttp.WriteOpenError(w, nil, err)
		return
	}
	lease.End() // the open stream is not a request: an idle session may make room for another
	defer lease.Release()
	id := rand.Text()
	endpoint := "/message?sessionId=" + id
	if b := r.URL.Query().Get("browser"); b != "" {
		endpoint += "&browser=" + url.QueryEscape(b)
	}
	w.Header().Set("Content-Type", mcphttp.ContentTypeSSE)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	lw := &lockedWriter{w: w, f: flusher}
	t := &mcp.SSEServerTransport{Endpoint: endpoint, Response: lw, MaxRequestBodyBytes: h.opts.MaxBodyBytes}

	sess := &sseSession{t: t, lease: lease}
	h.sessions.Put(id, sess)
	defer h.sessions.Delete(id, sess)

	ss, err := h.s.mcp.Connect(ctx, t, nil)
	if err != nil {
		h.s.log.Warn("opening an SSE session", "error", err)
		return
	}
	defer ss.Close()
	h.s.log.Debug("SSE session opened", "session", id)

	ended := make(chan struct{})
	go func() { _ = ss.Wait(); close(ended) }()
	var tick <-chan time.Time
	if h.opts.PingInterval > 0 {
		t := time.NewTicker(h.opts.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ended:
			return
		case <-tick:
			var ping string
			if h.opts.PingStyle == "comment" {
				ping = mcphttp.PingComment
			} else {
				ping = "event: ping\ndata: {\"timestamp\":" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "}\n\n"
			}
			if _, err := io.WriteString(lw, ping); err != nil {
				return
			}
		}
	}
}

// Message handles POST /message?sessionId=….
func (h *SSE) Message(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, rpccode.InvalidRequest, "POST JSON-RPC messages here; GET /sse opens the stream")
		return
	}
	copyBrowserParam(r)
	id := r.URL.Query().Get("sessionId")
	sess, _ := h.sessions.Get(id)
	if sess == nil || !sess.lease.Begin() {
		mcphttp.WriteError(w, http.StatusNotFound, nil, rpccode.SessionNotFound, fmt.Sprintf(
			"unknown or ended SSE session %q: a legacy SSE session (2024-11-05) ends when its stream breaks, for instance when Browser Bridge restarts; open a new stream with GET /sse (Streamable HTTP at /mcp keeps sessions across restarts)", echoID(id)))
		return
	}
	defer sess.lease.End()
	if !mcphttp.CheckContentType(w, r) {
		return
	}
	if _, ok := readMessage(w, r, h.opts.MaxBodyBytes); !ok {
		return
	}
	sess.t.ServeHTTP(w, r)
}

// lockedWriter serializes the SDK's event writes and the pings: each SDK
// event is one Write, so a ping never lands inside one.
type lockedWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
	f  http.Flusher
}

func (l *lockedWriter) Header() http.Header { return l.w.Header() }
func (l *lockedWriter) WriteHeader(code int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.WriteHeader(code)
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	l.f.Flush()
	return n, err
}

func (l *lockedWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Flush()
}
