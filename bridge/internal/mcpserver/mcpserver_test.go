package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// TestEveryEra: initialize (or discover), tools/list, tools/call and an
// isError result, for each protocol era the bridge serves.
func TestEveryEra(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	b.attach("instance-era-1")
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			cs := b.connect(e, nil, "")
			ctx := testutil.Context(t, 10*time.Second)
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, tl := range tools.Tools {
				names[tl.Name] = true
			}
			for _, want := range []string{"echo", "slow", toolListBrowsers, toolSelectBrowser} {
				if !names[want] {
					t.Fatalf("tools/list lacks %q: %v", want, names)
				}
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi from " + e.name}})
			if err != nil {
				t.Fatal(err)
			}
			if got := testutil.Text(res); got != "hi from "+e.name || res.IsError {
				t.Fatalf("echo = %q (isError %v)", got, res.IsError)
			}
			who, _ := res.Meta[metaBrowser].(map[string]any)
			if who["id"] != "instance-era-1" || who["name"] != "TestBrowser" {
				t.Fatalf("result does not say which browser answered: _meta = %v", res.Meta)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail"})
			if err != nil || !res.IsError || testutil.Text(res) != "the page said no" {
				t.Fatalf("fail = %+v, %v", res, err)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
				t.Fatalf("unknown tool: %v", err)
			}
		})
	}
}

func TestProgressReachesItsCaller(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	b.attach("instance-progress-1")
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			cs := b.connect(e, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got = append(got, fmt.Sprintf("%v:%v/%v", r.Params.ProgressToken, r.Params.Progress, r.Params.Total))
				mu.Unlock()
			}}, "")
			// A second client calls at the same time with the same token; it
			// must see only its own progress.
			other := b.connect(e, nil, "")
			go other.CallTool(testutil.Context(t, 5*time.Second), &mcp.CallToolParams{Name: "slow", Meta: mcp.Meta{"progressToken": "tok"}})
			res, err := cs.CallTool(testutil.Context(t, 10*time.Second), &mcp.CallToolParams{Name: "slow", Meta: mcp.Meta{"progressToken": "tok"}})
			if err != nil || testutil.Text(res) != "done" {
				t.Fatalf("slow = %v %q, %v", res, testutil.Text(res), err)
			}
			testutil.WaitFor(t, "three progress notifications", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) >= 3
			})
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(got, ",") != "tok:1/3,tok:2/3,tok:3/3" {
				t.Fatalf("progress seen by the caller: %v", got)
			}
		})
	}
}

func TestCancelReachesTheExtension(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	fe := b.attach("instance-cancel-1")
	for _, e := range eras[:4] { // 2026-07-28 cancels by closing the request, covered below
		t.Run(e.name, func(t *testing.T) {
			cs := b.connect(e, nil, "")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			before := callCount(fe)
			go func() { _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "block"}); done <- err }()
			waitCalls(t, fe, before+1) // the call reached the extension: cancel it there
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled call returned %v", err)
			}
			select {
			case id := <-fe.cancelledIDs():
				if !strings.HasPrefix(id, "local-") {
					t.Fatalf("extension told to cancel %q, not a local session's request", id)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the extension never got notifications/cancelled")
			}
			// The session still works.
			if res, err := cs.CallTool(testutil.Context(t, 5*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "after"}}); err != nil || testutil.Text(res) != "after" {
				t.Fatalf("call after cancel = %v, %v", res, err)
			}
		})
	}
}

func TestToolListChanged(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	fe := b.attach("instance-tools-1")
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			changed := make(chan struct{}, 16)
			cs := b.connect(e, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				changed <- struct{}{}
			}}, "")
			cs.ListTools(testutil.Context(t, 5*time.Second), nil)
			name := "new_tool_" + strings.ReplaceAll(e.name, ".", "_")
			fe.mu.Lock()
			fe.tools = append(append([]map[string]any{}, fe.tools...), map[string]any{"name": name, "description": "new", "inputSchema": map[string]any{"type": "object"}})
			fe.mu.Unlock()
			// A 2026 client's subscription (its subscriptions/listen) may
			// not be open yet: the extension tells again until it is.
			testutil.WaitFor(t, "notifications/tools/list_changed after the extension's tools changed", func() bool {
				fe.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
				select {
				case <-changed:
					return true
				case <-time.After(100 * time.Millisecond):
					return false
				}
			})
			b.waitTools(name)
			tools, _ := cs.ListTools(testutil.Context(t, 5*time.Second), nil)
			found := false
			for _, tl := range tools.Tools {
				found = found || tl.Name == name
			}
			if !found {
				t.Fatalf("%s not listed after list_changed", name)
			}
		})
	}
}

func TestBrowserArrivalAndDepartureNotify(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	b.attach("instance-first-1")
	changed := make(chan struct{}, 16)
	cs := b.connect(eras[2], &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }}, "")
	cs.ListTools(testutil.Context(t, 5*time.Second), nil)
	second := b.attach("instance-second-1")
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed when a browser connected")
	}
	second.Stop(time.Second)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed when a browser left")
	}
}

func TestCallWaitsForABrowser(t *testing.T) {
	b := newBridge(t, Options{BrowserWait: 10 * time.Second}, HTTPOptions{})
	fe := b.attach("instance-wait-1")
	for _, e := range []era{eras[0], eras[3], eras[4]} {
		t.Run(e.name, func(t *testing.T) {
			cs := b.connect(e, nil, "")
			fe.Stop(time.Second) // the service worker went away
			waitNoBrowser(t, b)
			done := make(chan *mcp.CallToolResult, 1)
			waiting := b.mcps.stats.WaitedCalls.Load()
			go func() {
				res, err := cs.CallTool(testutil.Context(t, 15*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "waited"}})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			testutil.WaitFor(t, "the call waiting for a browser", func() bool { return b.mcps.stats.WaitedCalls.Load() > waiting })
			fe = b.attach("instance-wait-1") // ...and came back
			select {
			case res := <-done:
				if res == nil || testutil.Text(res) != "waited" {
					t.Fatalf("call after the browser came back = %v", res)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("call did not finish after the browser came back")
			}
		})
	}
}

func TestCallTimesOutWithoutBrowser(t *testing.T) {
	b := newBridge(t, Options{BrowserWait: 300 * time.Millisecond}, HTTPOptions{})
	fe := b.attach("instance-timeout-1")
	cs := b.connect(eras[3], nil, "")
	fe.Stop(time.Second)
	waitNoBrowser(t, b)
	res, err := cs.CallTool(testutil.Context(t, 5*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil {
		t.Fatalf("a call with no browser must be a tool error, not a protocol error: %v", err)
	}
	if !res.IsError || !strings.Contains(testutil.Text(res), "no browser is connected") {
		t.Fatalf("timeout result = %+v", res)
	}
	// The session stays usable: the bridge's own tools answer.
	res, err = cs.CallTool(testutil.Context(t, 5*time.Second), &mcp.CallToolParams{Name: toolListBrowsers})
	if err != nil || !strings.Contains(testutil.Text(res), "No browser is connected") {
		t.Fatalf("list_browsers after a timeout = %v, %v", res, err)
	}
}

func waitNoBrowser(t *testing.T, b *bridge) {
	t.Helper()
	testutil.WaitFor(t, "the browser to leave", func() bool { return len(b.links.Browsers()) == 0 })
}

func TestSelectBrowser(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	b.attach("instance-sel-a")
	b.attach("instance-sel-b") // the most recent: the default
	whoAnswered := func(cs *mcp.ClientSession) string {
		res, err := cs.CallTool(testutil.Context(t, 5*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Meta[metaBrowser].(map[string]any)["id"].(string)
	}
	cs := b.connect(eras[3], nil, "")
	if got := whoAnswered(cs); got != "instance-sel-b" {
		t.Fatalf("default browser answered: %s", got)
	}
	res, err := cs.CallTool(testutil.Context(t, 5*time.Second), &mcp.CallToolParams{Name: toolSelectBrowser, Arguments: map[string]any{"browser": "instance-sel-a"}})
	if err != nil || res.IsError {
		t.Fatalf("select_browser = %v, %v", res, err)
	}
	if got := whoAnswered(cs); got != "instance-sel-a" {
		t.Fatalf("after select_browser, %s answered", got)
	}
	res, _ = cs.CallTool(testutil.Context(t, 5*time.Second), &mcp.CallToolParams{Name: toolSelectBrowser, Arguments: map[string]any{"browser": "nope"}})
	if !res.IsError {
		t.Fatal("selecting an unknown browser succeeded")
	}
	for _, e := range []era{eras[0], eras[4]} { // ?browser= on the URL, legacy and stateless
		if got := whoAnswered(b.connect(e, nil, "?browser=instance-sel-a")); got != "instance-sel-a" {
			t.Fatalf("%s with ?browser=instance-sel-a: %s answered", e.name, got)
		}
	}
}

// TestManyClientsSameIDs: 50 clients whose request ids all start at 1 call
// the same extension at once, 10,000 calls in all; every reply must be the
// caller's own.
func TestManyClientsSameIDs(t *testing.T) {
	const clients, perClient = 50, 200
	// Comment pings: the Go SDK's legacy SSE client reads every event's data
	// as a message and ends its connection at an `event: ping` (spec 004's
	// default), which a busy machine stretching this test past 30 s sends.
	b := newBridge(t, Options{}, HTTPOptions{PingStyle: "comment"})
	b.attach("instance-many-1")
	var wrong, failed, isError atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		e := eras[1+c%4] // every streamable era
		if c%5 == 0 {
			e = eras[0] // and legacy SSE
		}
		cs := b.connect(e, nil, "")
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < perClient; i++ {
				want := fmt.Sprintf("client %d call %d", c, i)
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
				switch {
				case err != nil:
					if failed.Add(1) == 1 {
						t.Logf("client %d (%s) call %d: %v", c, e.name, i, err)
					}
				case res.IsError:
					isError.Add(1)
					t.Errorf("client %d call %d: %s", c, i, testutil.Text(res))
				case testutil.Text(res) != want:
					wrong.Add(1)
				}
			}
		}(c)
	}
	wg.Wait()
	if wrong.Load() != 0 || failed.Load() != 0 || isError.Load() != 0 {
		t.Fatalf("%d misrouted, %d failed and %d lost of %d calls", wrong.Load(), isError.Load(), failed.Load(), clients*perClient)
	}
}

func (fe *fakeExtension) cancelledIDs() <-chan string { return fe.cancelled }

var _ = json.Marshal

func TestSessionEndAndClose(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	fe := b.attach("instance-end-1")
	ended := make(chan string, 4)
	fe.OnNotify(func(method string, p json.RawMessage) {
		if method == "session.ended" {
			var n struct{ Session, Client string }
			json.Unmarshal(p, &n)
			ended <- n.Session + " " + n.Client
		}
	})
	// The popup's disconnect button: session.close ends the client's session.
	cs := b.connect(eras[3], nil, "")
	res, err := cs.CallTool(testutil.Context(t, 5*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.IsError {
		t.Fatal(err)
	}
	var call struct {
		Meta map[string]map[string]string `json:"_meta"`
	}
	fe.mu.Lock()
	json.Unmarshal(fe.calls[len(fe.calls)-1], &call)
	fe.mu.Unlock()
	sess := call.Meta[metaSession]["id"]
	if !strings.HasPrefix(sess, "local-") || call.Meta[metaSession]["client"] != "test-streamable-2025-11-25" {
		t.Fatalf("tools/call _meta session = %v", call.Meta)
	}
	m, err := fe.Call(testutil.Context(t, 5*time.Second), "session.close", map[string]string{"session": sess})
	if err != nil || m.Error != nil {
		t.Fatalf("session.close = %+v, %v", m, err)
	}
	select {
	case got := <-ended:
		if got != sess+" test-streamable-2025-11-25" {
			t.Fatalf("session.ended for %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no session.ended after session.close")
	}
	if _, err := cs.CallTool(testutil.Context(t, 5*time.Second), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("a closed session still answers")
	}
	m, _ = fe.Call(testutil.Context(t, 5*time.Second), "session.close", map[string]string{"session": "local-999"})
	if m.Error == nil {
		t.Fatal("closing an unknown session succeeded")
	}
}
