package stdioproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// TestForwarding drives the proxy with the SDK's client, in every protocol
// era, against a server that requires a token: initialize reaches the
// server unchanged, tools are listed and called, progress and list_changed
// notifications reach stdout, and closing stdin ends the session.
func TestForwarding(t *testing.T) {
	for _, tc := range []struct {
		version  string
		sessions bool
	}{
		{"2025-03-26", true},
		{"2025-06-18", true},
		{"2025-11-25", true},
		{"2026-07-28", false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			b := startFakeBridge(t, "s3cret", true)
			pr := startProxy(t, Options{Endpoint: b.url(), Token: "s3cret", BridgeWait: 5 * time.Second})
			changed := make(chan struct{}, 10)
			progress := make(chan float64, 10)
			cs := pr.connect(t, tc.version, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					progress <- req.Params.Progress
				},
			}, &mcp.Root{URI: "file:///work", Name: "work"})
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()

			if got := cs.InitializeResult(); got == nil || got.ServerInfo == nil || got.ServerInfo.Name != "fake-bridge" {
				t.Fatalf("initialize result = %+v, want the server's own", got)
			}
			if tc.sessions {
				b.waitInit(t, "stdio-test-client "+tc.version) // the client's own initialize and version
				// A request from the server, answered by the client.
				if got, err := callText(ctx, cs, &mcp.CallToolParams{Name: "roots"}); err != nil || got != "file:///work" {
					t.Fatalf("roots = %q, %v; want the client's root", got, err)
				}
			}

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if want := []string{"block", "count", "echo", "gate", "roots"}; !slices.Equal(names, want) {
				t.Fatalf("tools = %v, want %v", names, want)
			}

			mustEcho(t, cs, "hello through stdio")

			params := &mcp.CallToolParams{Name: "count"}
			params.SetProgressToken("tok-1")
			if got, err := callText(ctx, cs, params); err != nil || got != "counted" {
				t.Fatalf("count = %q, %v", got, err)
			}
			var seen []float64
			for range 3 {
				seen = append(seen, receive(t, progress, "a progress notification"))
			}
			if !slices.Equal(seen, []float64{1, 2, 3}) {
				t.Errorf("progress = %v, want 1, 2, 3", seen)
			}

			mcp.AddTool(b.mcpServer(), &mcp.Tool{Name: "late", Description: "added later"},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{}, nil, nil
				})
			receive(t, changed, "notifications/tools/list_changed")

			if err := cs.Close(); err != nil {
				t.Logf("closing the client: %v", err)
			}
			if err := pr.wait(t); err != nil {
				t.Fatalf("Run after stdin closed = %v, want nil", err)
			}

			posts, deletes := b.seen()
			for _, p := range posts {
				if p.auth != "Bearer s3cret" {
					t.Errorf("%s sent Authorization %q", p.method, p.auth)
				}
				if p.session != "" && p.version != tc.version {
					t.Errorf("%s in a session sent Mcp-Protocol-Version %q, want %q", p.method, p.version, tc.version)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.sessions]; deletes != want {
				t.Errorf("DELETE requests = %d, want %d", deletes, want)
			}
		})
	}
}

// TestBridgeRestart restarts, under a live client, a bridge that keeps no
// sessions across restarts (as the real one does when it could not keep a
// session's record): the proxy learns from the 404 that the session is
// gone. The call in flight gets a clear error, the next call succeeds on a
// session the proxy re-initialized with the client's own initialize, and
// server notifications keep coming.
func TestBridgeRestart(t *testing.T) {
	for _, tc := range []struct {
		name       string
		version    string
		eventStore bool // with event ids, the SDK fails the connection when the stream breaks
		progress   bool // the call's stream has started (a progress event) when the bridge goes
	}{
		{"2025-06-18, call not started", "2025-06-18", false, false},
		{"2025-06-18, stream without event ids", "2025-06-18", false, true},
		{"2025-03-26, event store", "2025-03-26", true, true},
		{"2025-11-25, event store, priming event", "2025-11-25", true, false},
		{"2026-07-28, stateless", "2026-07-28", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startFakeBridge(t, "", tc.eventStore)
			pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: 5 * time.Second})
			changed := make(chan struct{}, 10)
			cs := pr.connect(t, tc.version, &mcp.ClientOptions{
				ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
				ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {},
			})
			mustEcho(t, cs, "before")

			errc := make(chan error, 1)
			go func() {
				params := &mcp.CallToolParams{Name: "block"}
				if tc.progress {
					params.SetProgressToken("tok")
				}
				_, err := callText(context.Background(), cs, params)
				errc <- err
			}()
			receive(t, b.started, "the blocking call to start")
			b.restart(200 * time.Millisecond)
			err := receive(t, errc, "the interrupted call's answer")
			if err == nil || !strings.Contains(err.Error(), msgInterrupted) {
				t.Fatalf("the call in flight returned %v, want %q", err, msgInterrupted)
			}

			mustEcho(t, cs, "after")
			if tc.version >= mcphttp.VersionStateless {
				return // no session to re-initialize, and the listen subscription was a call in flight
			}
			b.waitInit(t, "stdio-test-client "+tc.version)
			for len(changed) > 0 {
				<-changed
			}
			mcp.AddTool(b.mcpServer(), &mcp.Tool{Name: "late", Description: "added after the restart"},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{}, nil, nil
				})
			receive(t, changed, "notifications/tools/list_changed after the restart")
		})
	}
}

// TestStreamCut cuts every connection to a bridge that stays up, while a
// call runs: the proxy keeps the session (no second initialize), and the
// call whose stream had an event id (a priming event, from 2025-11-25)
// gets the bridge's own answer through the resumed stream (Last-Event-ID);
// one whose stream had none gets CodeInterrupted.
func TestStreamCut(t *testing.T) {
	for _, tc := range []struct {
		version string
		primed  bool   // the call's stream opens with a priming event
		want    string // the call's text, or "" for a CodeInterrupted error
	}{
		{"2025-11-25", true, "opened"},
		{"2025-06-18", false, ""},
	} {
		t.Run(tc.version, func(t *testing.T) {
			b := startFakeBridge(t, "", true)
			reqs := newRequestLog()
			pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: 5 * time.Second, HTTPClient: &http.Client{Transport: reqs}})
			cs := pr.connect(t, tc.version, nil)
			mustEcho(t, cs, "before")
			for len(reqs.callRead) > 0 {
				<-reqs.callRead // echo's
			}

			type result struct {
				text string
				err  error
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitFor)
				defer cancel()
				text, err := callText(ctx, cs, &mcp.CallToolParams{Name: "gate"})
				done <- result{text, err}
			}()
			receive(t, b.started, "the call to start")
			if tc.primed {
				receive(t, reqs.callRead, "the proxy to read the call's priming event")
			}
			b.cut()
			close(b.gate)
			got := receive(t, done, "the call's answer")
			switch {
			case tc.want != "" && (got.err != nil || got.text != tc.want):
				t.Errorf("the call = %q, %v; want %q, the bridge's own answer", got.text, got.err, tc.want)
			case tc.want == "" && (got.err == nil || !strings.Contains(got.err.Error(), msgInterrupted)):
				t.Errorf("the call = %q, %v; want the error %q", got.text, got.err, msgInterrupted)
			}

			mustEcho(t, cs, "after")
			b.mu.Lock()
			inits := len(b.inits)
			b.mu.Unlock()
			if n := reqs.count(methodInitialize); inits != 1 || n != 1 || len(reqs.sessions()) != 1 {
				t.Errorf("%d sessions initialized on the bridge, %d initialize requests and %d session ids from the proxy; want 1 of each", inits, n, len(reqs.sessions()))
			}
		})
	}
}

// TestCallDuringOutage sends a call while the bridge is down: it waits for
// the bridge to come back and is answered as if nothing happened.
func TestCallDuringOutage(t *testing.T) {
	b := startFakeBridge(t, "", false)
	pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: 5 * time.Second})
	cs := pr.connect(t, "2025-06-18", nil)
	mustEcho(t, cs, "before")

	b.stop()
	go func() {
		time.Sleep(500 * time.Millisecond) // the outage's length, under test
		b.start()
	}()
	mustEcho(t, cs, "during the outage")
	b.waitInit(t, "stdio-test-client 2025-06-18")
}

// TestSessionReaped ends the session on the server, as the bridge does to
// idle ones: the proxy opens a new one and the client does not notice.
func TestSessionReaped(t *testing.T) {
	b := startFakeBridge(t, "", true)
	pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: 5 * time.Second})
	cs := pr.connect(t, "2025-11-25", nil)
	mustEcho(t, cs, "before")
	b.closeSessions()
	mustEcho(t, cs, "after")
	mustEcho(t, cs, "and again")
}

// TestBridgeGoneForGood: when the bridge does not come back within
// BridgeWait, a call gets an error saying how to start it.
func TestBridgeGoneForGood(t *testing.T) {
	b := startFakeBridge(t, "", false)
	pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: 500 * time.Millisecond})
	cs := pr.connect(t, "2025-06-18", nil)
	mustEcho(t, cs, "before")
	b.stop()
	start := time.Now()
	_, err := callText(context.Background(), cs, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err == nil || !strings.Contains(err.Error(), "no bridge answers at "+b.url()) || !strings.Contains(err.Error(), defaultStartHint) {
		t.Fatalf("call with the bridge gone = %v, want a 'no bridge answers' error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the error took %v, with a 500ms bound", d)
	}
}

// TestStartFailures: with a bridge that refuses the token, Run fails with
// a message that says what to do, and writes nothing to stdout. (With no
// bridge, it waits for one: waiting_test.go.)
func TestStartFailures(t *testing.T) {
	b := startFakeBridge(t, "s3cret", false)
	for _, tc := range []struct {
		name     string
		endpoint string
		token    string
		wantIs   error
		want     []string
		atLeast  time.Duration
	}{
		{"wrong token", b.url(), "wrong", nil, []string{"refused", "401", "a valid bearer token is required"}, 0},
		{"no token", b.url(), "", nil, []string{"refused", "401"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout testbrowser.SyncBuffer
			start := time.Now()
			err := Run(context.Background(), Options{
				Endpoint: tc.endpoint, Token: tc.token, BridgeWait: 300 * time.Millisecond,
				Stdin: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"), Stdout: &stdout,
			})
			elapsed := time.Since(start)
			if err == nil {
				t.Fatal("Run succeeded")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("Run = %v, want it to wrap %v", err, tc.wantIs)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Run = %q, want it to say %q", err, w)
				}
			}
			if elapsed < tc.atLeast || elapsed > 3*time.Second {
				t.Errorf("Run failed after %v, want between %v and 3s", elapsed, tc.atLeast)
			}
			if stdout.String() != "" {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

// TestRawLines speaks newline-delimited JSON directly: bad lines get
// JSON-RPC errors and the proxy goes on; good ones are forwarded as they
// are; stdout carries one JSON-RPC message per line.
func TestRawLines(t *testing.T) {
	b := startFakeBridge(t, "", false)
	pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: 5 * time.Second})
	out := bufio.NewScanner(pr.stdout)
	out.Buffer(nil, 1<<20)
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(pr.stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	type reply struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	next := func() reply {
		t.Helper()
		lines := make(chan string, 1)
		go func() {
			if out.Scan() {
				lines <- out.Text()
			}
			close(lines)
		}()
		line, ok := <-lines
		if !ok {
			t.Fatalf("stdout ended: %v", out.Err())
		}
		var r reply
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.JSONRPC != "2.0" {
			t.Fatalf("stdout line %q is not a JSON-RPC message: %v", line, err)
		}
		return r
	}
	for _, tc := range []struct {
		name, line string
		wantID     string
		wantCode   int
	}{
		{"not JSON", "this is not json", "null", -32700},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "null", -32600},
		{"no version tag", `{"id":5,"method":"ping"}`, "5", -32600},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, "null", -32600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send(tc.line)
			r := next()
			if string(r.ID) != tc.wantID || r.Error == nil || r.Error.Code != tc.wantCode {
				t.Fatalf("reply to %q = id %s, error %+v; want id %s, code %d", tc.line, r.ID, r.Error, tc.wantID, tc.wantCode)
			}
		})
	}

	send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-client","version":"0.1"}}}`)
	if r := next(); string(r.ID) != `"init"` || r.Error != nil || !strings.Contains(string(r.Result), `"fake-bridge"`) {
		t.Fatalf("initialize reply = %+v (%s)", r, r.Result)
	}
	send("") // blank lines are skipped
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	if r := next(); string(r.ID) != "7" || r.Error != nil || !strings.Contains(string(r.Result), `"echo"`) {
		t.Fatalf("tools/list reply = %+v (%s)", r, r.Result)
	}
	b.waitInit(t, "raw-client 2025-06-18")

	// After a restart the proxy replays the initialize; its answer must not
	// reach stdout: the next line answers the next request.
	b.restart(100 * time.Millisecond)
	b.waitInit(t, "raw-client 2025-06-18")
	send(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
	if r := next(); string(r.ID) != "8" || r.Error != nil || !strings.Contains(string(r.Result), `"echo"`) {
		t.Fatalf("tools/list reply after the restart = %+v (%s)", r, r.Result)
	}

	pr.stdin.Close()
	if err := pr.wait(t); err != nil {
		t.Fatalf("Run after EOF = %v", err)
	}
	if _, deletes := b.seen(); deletes != 1 {
		t.Errorf("DELETE requests = %d, want 1 (the session closed at EOF)", deletes)
	}
}

// TestCancel: a call the client cancels is cancelled on the bridge: by
// notifications/cancelled in a session, by closing its request in the
// stateless era.
func TestCancel(t *testing.T) {
	for _, version := range []string{"2025-06-18", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			b := startFakeBridge(t, "", false)
			pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: 5 * time.Second})
			cs := pr.connect(t, version, nil)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "block"})
				errc <- err
			}()
			receive(t, b.started, "the blocking call to start")
			cancel()
			if err := receive(t, errc, "the cancelled call to return"); err == nil {
				t.Fatal("the cancelled call succeeded")
			}
			receive(t, b.canceled, "the bridge to cancel the call")
			mustEcho(t, cs, "still fine")
		})
	}
}
