package stdioproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// testHint is the StartHint these tests pass, to see it come back.
const testHint = "run `bb-test-start`"

// listChangedClient is an SDK client's options that count the
// notifications/tools/list_changed it receives.
func listChangedClient() (*mcp.ClientOptions, chan struct{}) {
	changed := make(chan struct{}, 100)
	return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}}, changed
}

func toolNames(t *testing.T, cs *mcp.ClientSession, when string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bridgeWaitFor)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list %s: %v", when, err)
	}
	names := []string{}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestWaitingForRealBridge starts the proxy with no bridge listening, as a
// client that starts `browserbridge stdio` before the bridge would: the
// client's initialize is answered at once (the version negotiated as the
// SDK's server would, tools with listChanged), the log says what is awaited
// and what to run, tools/list is empty and a call gets a tool error naming
// the fix. Then a real `browserbridge serve` starts on that address: the
// client gets notifications/tools/list_changed, lists the bridge's tools and
// calls one, in a session the bridge initialized with the client's own
// initialize.
func TestWaitingForRealBridge(t *testing.T) {
	for _, tc := range []struct {
		name, asked, want string
	}{
		{"2025-06-18", "2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25", "2025-11-25"},
		// The SDK's default: server/discover first, refused while waiting,
		// then initialize with the newest version that has it.
		{"latest, through server/discover", "", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRealBridge(t)
			reqs := newRequestLog()
			pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: bridgeWaitFor, StartHint: testHint,
				Version: "v9.9.9-test", HTTPClient: &http.Client{Transport: reqs}})
			opts, changed := listChangedClient()
			cs := pr.connect(t, tc.asked, opts)

			init := cs.InitializeResult()
			if init.ProtocolVersion != tc.want {
				t.Errorf("protocol version = %q, want %q", init.ProtocolVersion, tc.want)
			}
			if init.ServerInfo == nil || init.ServerInfo.Name != "browserbridge" || init.ServerInfo.Version != "v9.9.9-test" {
				t.Errorf("server info = %+v, want browserbridge v9.9.9-test", init.ServerInfo)
			}
			if init.Capabilities == nil || init.Capabilities.Tools == nil || !init.Capabilities.Tools.ListChanged {
				t.Errorf("capabilities = %+v, want tools with listChanged", init.Capabilities)
			}
			wantLog := "no bridge answers at " + b.url() + " yet: " + testHint
			if !strings.Contains(pr.logs.String(), wantLog) {
				t.Errorf("the log does not say %q:\n%s", wantLog, pr.logs.String())
			}
			if names := toolNames(t, cs, "while waiting"); len(names) != 0 {
				t.Errorf("tools while waiting = %v, want none", names)
			}
			ctx, cancel := context.WithTimeout(context.Background(), bridgeWaitFor)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_browsers", Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("a call while waiting: %v, want a tool error", err)
			}
			text := ""
			if len(res.Content) == 1 {
				if c, ok := res.Content[0].(*mcp.TextContent); ok {
					text = c.Text
				}
			}
			if !res.IsError || !strings.Contains(text, "not running") || !strings.Contains(text, b.url()) || !strings.Contains(text, testHint) {
				t.Errorf("a call while waiting = %+v (%q), want a tool error naming %s and %q", res, text, b.url(), testHint)
			}
			if len(changed) != 0 {
				t.Fatalf("list_changed before the bridge answered")
			}

			b.start()
			receive(t, changed, "notifications/tools/list_changed once the bridge answers")
			names := toolNames(t, cs, "once the bridge answers")
			for _, want := range []string{"list_browsers", "select_browser"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools once the bridge answers = %v, want %s among them", names, want)
				}
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_browsers", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("list_browsers once the bridge answers = %+v, %v", res, err)
			}
			if !strings.Contains(pr.logs.String(), "the bridge answers at "+b.url()) {
				t.Errorf("the log does not say the bridge answers:\n%s", pr.logs.String())
			}
			// (Attempts refused while waiting are in the log too: only
			// sessions count.)
			if sessions := reqs.sessions(); len(sessions) != 1 {
				t.Errorf("sessions %v reached the bridge, want 1:\n%s", sessions, reqs)
			}
		})
	}
}

// TestWaitingInitializesWithClientParams: the session the proxy opens when
// the bridge comes is the client's: its name and its protocol version,
// and notifications/initialized (the bridge's InitializedHandler sees
// both). Messages the proxy answers itself while waiting: ping, the lists
// its capabilities promise (empty), and an error naming the fix for the
// rest.
func TestWaitingInitializesWithClientParams(t *testing.T) {
	b := startFakeBridge(t, "", false)
	b.stop() // the address stays free for start
	pr := startProxy(t, Options{Endpoint: b.url(), BridgeWait: 5 * time.Second, StartHint: testHint})
	opts, changed := listChangedClient()
	cs := pr.connect(t, "2025-06-18", opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := cs.Ping(ctx, nil); err != nil {
		t.Errorf("ping while waiting: %v", err)
	}
	if res, err := cs.ListResources(ctx, nil); err != nil || len(res.Resources) != 0 {
		t.Errorf("resources/list while waiting = %+v, %v; want an empty list", res, err)
	}
	if _, err := cs.ListPrompts(ctx, nil); err == nil || !strings.Contains(err.Error(), "not running") || !strings.Contains(err.Error(), testHint) {
		t.Errorf("prompts/list while waiting = %v, want an error naming %q", err, testHint)
	}

	b.start()
	receive(t, changed, "notifications/tools/list_changed once the bridge answers")
	b.waitInit(t, "stdio-test-client 2025-06-18")
	mustEcho(t, cs, "through the bridge")
	if names := toolNames(t, cs, "once the bridge answers"); !slices.Contains(names, "echo") {
		t.Errorf("tools = %v, want the bridge's echo", names)
	}
}

// TestWaitingRefused: a bridge that comes and refuses the proxy (a wrong
// token) ends the wait and Run, with the refusal: waiting longer would
// not help.
func TestWaitingRefused(t *testing.T) {
	b := startFakeBridge(t, "s3cret", false)
	b.stop()
	pr := startProxy(t, Options{Endpoint: b.url(), Token: "wrong", BridgeWait: 5 * time.Second})
	cs := pr.connect(t, "2025-11-25", nil)
	if names := toolNames(t, cs, "while waiting"); len(names) != 0 {
		t.Errorf("tools while waiting = %v, want none", names)
	}
	b.start()
	err := pr.wait(t)
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Run = %v, want the bridge's refusal", err)
	}
}

// TestLocalAnswers reads the proxy's own answers while waiting as raw
// lines: what the initialize result holds, a second initialize, and
// messages that expect no answer.
func TestLocalAnswers(t *testing.T) {
	pr := startProxy(t, Options{Endpoint: "http://" + testutil.ClosedAddr(t) + "/mcp", BridgeWait: time.Second})
	lines := make(chan map[string]any, 10)
	go func() {
		dec := json.NewDecoder(pr.stdout)
		for {
			var m map[string]any
			if dec.Decode(&m) != nil {
				close(lines)
				return
			}
			lines <- m
		}
	}()
	send := func(line string) {
		t.Helper()
		if _, err := pr.stdin.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		t.Helper()
		m := receive(t, lines, "an answer")
		data, _ := json.Marshal(m)
		return string(data)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if got, want := next(), `{"id":1,"jsonrpc":"2.0","result":{"capabilities":{"resources":{},"tools":{"listChanged":true}},"protocolVersion":"2025-11-25","serverInfo":{"name":"browserbridge","title":"Browser Bridge","version":"dev"}}}`; got != want {
		t.Errorf("initialize answer:\n got %s\nwant %s", got, want)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":"x","result":{}}`) // an answer to nothing: dropped
	send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if got := next(); !strings.Contains(got, `"id":2`) || !strings.Contains(got, `"code":-32600`) {
		t.Errorf("second initialize answer = %s, want a -32600 error", got)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if got, want := next(), `{"id":3,"jsonrpc":"2.0","result":{"tools":[]}}`; got != want {
		t.Errorf("tools/list answer = %s, want %s", got, want)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{}}`)
	if got := next(); !strings.Contains(got, `"id":4`) || !strings.Contains(got, `"code":-32601`) {
		t.Errorf("server/discover answer = %s, want -32601", got)
	}
}
