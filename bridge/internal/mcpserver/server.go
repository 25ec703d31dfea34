// Package mcpserver makes the bridge an MCP server: it answers initialize
// and discovery itself, offers the connected browser's tools (learned with
// tools/list over the host link) plus its own browser-selection tools, and
// forwards each tools/call to the right browser with a request id unique to
// the MCP session, mapping progress and cancellation both ways. The HTTP
// transports (Streamable HTTP in every era, legacy HTTP+SSE) are in
// streamable.go and sse.go; session.go is a stateful Streamable HTTP
// session's life, and traces a tools/call through the files; fastpath.go
// answers the hot requests of those sessions without the SDK's server
// path.
package mcpserver

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// GCPercent is the garbage-collector setting `browserbridge serve` runs
// with. The bridge's live heap is a few MB, so Go's default (100) collects
// after every few hundred calls; 400 halves the CPU per call
// (BenchmarkCallsRawClient: 5,800 -> 11,600 calls/s with 10 clients on 2
// cores) for a heap that still stays in the tens of MB.
const GCPercent = 400

// DefaultBrowserWait is how long a call waits for a browser by default: a
// worker that Chrome stopped is woken by the extension's standing alarm,
// whose period is 30 s (Chrome's minimum for packed extensions) and which
// may fire late; then the worker, the host and hello take about half a
// second more.
const DefaultBrowserWait = 45 * time.Second

// Options configure a Server. Zero values are documented per field.
type Options struct {
	// Logger receives session and call events; nil discards them.
	Logger *slog.Logger
	// Version is the server version reported to clients; "" means "dev".
	Version string
	// BrowserWait is how long a call waits for a browser when none is
	// connected (service worker restarting, host respawning, browser
	// closed); 0 means DefaultBrowserWait.
	BrowserWait time.Duration
	// ToolsCache is a file that keeps the last tool list a browser gave,
	// so that clients see the browser's tools while it reconnects after a
	// bridge restart; "" keeps it in memory only.
	ToolsCache string
}

// Server is the bridge's MCP server. Create it with New, then Attach the
// host link; it is safe for concurrent use.
type Server struct {
	opts  Options
	log   *slog.Logger
	mcp   *mcp.Server
	links *hostlink.Server

	refreshMu sync.Mutex // one tools/list round at a time
	toolsMu   sync.Mutex
	tools     map[string]*mcp.Tool // the browser tools currently offered
	toolsFrom string               // the browser they came from
	// callable holds the names of the browser tools the SDK server has
	// (it may refuse one); the fast path serves only those. Replaced, never
	// modified.
	callable atomic.Pointer[map[string]bool]

	changeMu sync.Mutex
	change   chan struct{} // closed and replaced when browsers come or go

	sessMu   sync.Mutex
	sessions map[*mcp.ServerSession]*linkSession
	// pendingSessions lists the recorded sessions of a previous bridge
	// process not yet resumed (set by NewStreamable).
	pendingSessions func() []protocol.SessionRef
	stopping        atomic.Bool
	// statelessNext spaces out the link ids of stateless requests, which
	// share a session label per client: each request gets its own range.
	statelessNext atomic.Uint64

	progMu   sync.Mutex
	progress map[string]progressRoute // link request id -> caller

	stats Stats
}

// New returns a Server with the bridge's own tools registered.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.BrowserWait == 0 {
		opts.BrowserWait = DefaultBrowserWait
	}
	s := &Server{
		opts:     opts,
		log:      opts.Logger,
		tools:    make(map[string]*mcp.Tool),
		change:   make(chan struct{}),
		sessions: make(map[*mcp.ServerSession]*linkSession),
		progress: make(map[string]progressRoute),
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "browserbridge", Title: "Browser Bridge", Version: opts.Version}, &mcp.ServerOptions{
		Logger: opts.Logger,
		Instructions: "Browser Bridge drives the user's own browser, with its logins. " +
			"Each MCP session gets its own tab group. Use list_browsers and select_browser when several browsers are connected.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}, Resources: &mcp.ResourceCapabilities{}},
	})
	s.mcp.AddReceivingMiddleware(eraMiddleware)
	s.addOwnTools()
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: screenshotURITemplate,
		Name:        "screenshot",
		Title:       "Full-resolution screenshot",
		Description: "A screenshot the computer tool took, at full resolution (its resource_link names it).",
	}, s.readBrowserResource)
	s.loadToolsCache()
	return s
}

// Attach connects the server to the host link whose browsers it serves.
// The link's Options.Handle and Options.OnChange must be this server's
// HandleBrowserMessage and BrowsersChanged.
func (s *Server) Attach(links *hostlink.Server) { s.links = links }

// MCP returns the underlying SDK server, for the transports.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// BrowsersChanged is called by the host link when a browser connects, says
// hello again, or leaves: calls waiting for a browser wake up, the tool list
// is refreshed from the default browser, and clients are told the list
// changed.
func (s *Server) BrowsersChanged() {
	s.changeMu.Lock()
	close(s.change)
	s.change = make(chan struct{})
	s.changeMu.Unlock()
	go s.refreshTools(context.Background())
}

// changed returns a channel closed at the next browser change.
func (s *Server) changed() <-chan struct{} {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	return s.change
}

// Stats are counters for /health and /metrics.
type Stats struct {
	Calls        atomic.Int64
	CallErrors   atomic.Int64
	WaitedCalls  atomic.Int64
	TimedOut     atomic.Int64
	BrowserGone  atomic.Int64
	Cancelled    atomic.Int64
	ToolsChanges atomic.Int64
	// FastPath counts the requests (tools/call, ping) the Streamable HTTP
	// fast path answered without the SDK's server path.
	FastPath atomic.Int64
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }
