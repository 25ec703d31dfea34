package stdioproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

// fakeBridge stands in for `browserbridge serve`: an MCP server with a few
// tools behind the SDK's Streamable HTTP handlers (stateful for the session
// eras, stateless for 2026-07-28, routed as the bridge routes them), on an
// address that stays the same across restarts.
type fakeBridge struct {
	t          testing.TB
	token      string // required as a bearer token when set
	eventStore bool   // give the stateful handler an event store (priming events, event ids)

	mu       sync.Mutex
	addr     string
	srv      *httptest.Server
	server   *mcp.Server
	stopped  chan struct{} // closed when this instance stops: releases blocked tools
	inits    []string      // "client-name version" of each session initialized on this instance
	deletes  int           // sessions ended by DELETE on this instance
	posts    []postSeen
	started  chan struct{} // a "block" or "gate" call started
	canceled chan struct{} // a "block" call saw its context end
	gate     chan struct{} // closed to let "gate" calls answer
}

// postSeen is what the fake bridge saw of one POST.
type postSeen struct {
	method, session, version, auth string
}

func startFakeBridge(t testing.TB, token string, eventStore bool) *fakeBridge {
	b := &fakeBridge{t: t, token: token, eventStore: eventStore, addr: "127.0.0.1:0",
		started: make(chan struct{}, 10), canceled: make(chan struct{}, 10), gate: make(chan struct{})}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *fakeBridge) url() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return "http://" + b.addr + "/mcp"
}

// start serves a fresh MCP server (no sessions) on the bridge's address.
func (b *fakeBridge) start() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var ln net.Listener
	var err error
	// The old listener's port may take a moment to free.
	testutil.WaitFor(b.t, b.addr+" to be free again", func() bool {
		ln, err = net.Listen("tcp", b.addr)
		return err == nil
	})
	if err != nil {
		b.t.Fatalf("listening on %s again: %v", b.addr, err)
	}
	b.addr = ln.Addr().String()
	b.server = b.newServer()
	b.stopped = make(chan struct{})
	b.inits, b.deletes, b.posts = nil, 0, nil
	b.srv = httptest.NewUnstartedServer(b.handler(b.server))
	b.srv.Listener.Close()
	b.srv.Listener = ln
	b.srv.Start()
}

// stop closes the server and every connection to it, as a bridge that
// exits does.
func (b *fakeBridge) stop() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	if srv != nil {
		close(b.stopped)
	}
	b.mu.Unlock()
	if srv != nil {
		// Like a bridge that exits: no new connections, then every
		// connection dropped, streams included.
		srv.Listener.Close()
		srv.CloseClientConnections()
		srv.Close()
	}
}

// cut drops every connection to the bridge, streams included, as a
// network fault would: the bridge and its sessions go on.
func (b *fakeBridge) cut() {
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	srv.CloseClientConnections()
}

// restart stops the bridge and starts a new one after gap: same address,
// no sessions.
func (b *fakeBridge) restart(gap time.Duration) {
	b.stop()
	time.Sleep(gap)
	b.start()
}

func (b *fakeBridge) mcpServer() *mcp.Server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.server
}

// closeSessions ends every session, as the bridge does to idle ones.
func (b *fakeBridge) closeSessions() {
	for ss := range b.mcpServer().Sessions() {
		ss.Close()
	}
}

// waitInit waits until a session initialized by want ("name version")
// exists on the current instance.
func (b *fakeBridge) waitInit(t *testing.T, want string) {
	t.Helper()
	defer func() {
		if t.Failed() {
			b.mu.Lock()
			defer b.mu.Unlock()
			t.Logf("sessions initialized by %q", b.inits)
		}
	}()
	testutil.WaitFor(t, "a session initialized by "+want, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return slices.Contains(b.inits, want)
	})
}

func (b *fakeBridge) seen() (posts []postSeen, deletes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.posts), b.deletes
}

type echoIn struct {
	Text string `json:"text"`
}

func (b *fakeBridge) newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fake-bridge", Version: "1.0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			ip := req.Session.InitializeParams()
			b.mu.Lock()
			b.inits = append(b.inits, ip.ClientInfo.Name+" "+ip.ProtocolVersion)
			b.mu.Unlock()
		},
	})
	stopped := b.stopped
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "Report progress 1, 2, 3, then answer"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 3; i++ {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3}); err != nil {
						return nil, nil, err
					}
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "roots", Description: "Ask the client for its roots (a request from the server)"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, err
			}
			var uris []string
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(uris, " ")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "gate", Description: "Answer once the test opens the gate"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			b.started <- struct{}{}
			select {
			case <-b.gate:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "opened"}}}, nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "Report progress once if asked, then answer only when cancelled or the bridge stops"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1}); err != nil {
					return nil, nil, err
				}
			}
			b.started <- struct{}{}
			select {
			case <-ctx.Done():
				b.canceled <- struct{}{}
				return nil, nil, ctx.Err()
			case <-stopped:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "too late"}}}, nil, nil
			}
		})
	return s
}

// handler routes like the bridge's /mcp: requests of the stateless era to
// a stateless handler, the rest to a stateful one; and it checks the token
// as the bridge's guard does.
func (b *fakeBridge) handler(server *mcp.Server) http.Handler {
	get := func(*http.Request) *mcp.Server { return server }
	var events mcp.EventStore
	if b.eventStore {
		events = mcp.NewMemoryEventStore(nil)
	}
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{EventStore: events})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b.recordPost(r)
		}
		if b.token != "" && r.Header.Get("Authorization") != "Bearer "+b.token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"a valid bearer token is required"}}`)
			return
		}
		if r.Header.Get(mcphttp.HeaderSessionID) == "" && r.Header.Get(mcphttp.HeaderProtocolVersion) >= mcphttp.VersionStateless {
			stateless.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodDelete {
			rec := &statusRecorder{ResponseWriter: w}
			stateful.ServeHTTP(rec, r)
			if rec.status/100 == 2 {
				b.mu.Lock()
				b.deletes++
				b.mu.Unlock()
			}
			return
		}
		stateful.ServeHTTP(w, r)
	})
}

// recordPost notes what a POST carried.
func (b *fakeBridge) recordPost(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	if m.Method == "" {
		m.Method = "(response)"
	}
	b.mu.Lock()
	b.posts = append(b.posts, postSeen{m.Method, r.Header.Get(mcphttp.HeaderSessionID), r.Header.Get(mcphttp.HeaderProtocolVersion), r.Header.Get("Authorization")})
	b.mu.Unlock()
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// proxyRun is Run on pipes: the test writes the client's messages to stdin
// and reads the proxy's from stdout. Its log is shown when the test fails,
// or always with STDIOPROXY_LOG=1.
type proxyRun struct {
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	logs   *testbrowser.SyncBuffer
	done   chan struct{}
	err    error
}

func startProxy(t testing.TB, opts Options) *proxyRun {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	pr := &proxyRun{stdin: inW, stdout: outR, logs: &testbrowser.SyncBuffer{}, done: make(chan struct{})}
	opts.Stdin, opts.Stdout = inR, outW
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(pr.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	go func() {
		pr.err = Run(context.Background(), opts)
		outW.Close()
		close(pr.done)
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-pr.done:
		case <-time.After(waitFor):
			t.Error("the proxy did not stop after stdin closed")
		}
		outR.Close()
		if t.Failed() || os.Getenv("STDIOPROXY_LOG") != "" {
			t.Logf("proxy log:\n%s", pr.logs.String())
		}
	})
	return pr
}

// wait returns Run's result.
func (pr *proxyRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-pr.done:
		return pr.err
	case <-time.After(waitFor):
		t.Fatal("the proxy did not stop")
		return nil
	}
}

// connect starts an SDK client on the proxy's stdio, as a stdio-only MCP
// client would run it.
func (pr *proxyRun) connect(t testing.TB, version string, opts *mcp.ClientOptions, roots ...*mcp.Root) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test-client", Version: "1.0"}, opts)
	c.AddRoots(roots...)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: pr.stdout, Writer: pr.stdin}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting through the proxy: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callText calls a tool and returns its text, or the error.
func callText(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams) (string, error) {
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", strings.Join(texts, " "))
	}
	return strings.Join(texts, " "), nil
}

func mustEcho(t *testing.T, cs *mcp.ClientSession, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	got, err := callText(ctx, cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil || got != text {
		t.Fatalf("echo %q = %q, %v", text, got, err)
	}
}

// receive waits for a value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}
