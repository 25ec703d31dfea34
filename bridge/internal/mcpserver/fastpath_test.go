package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// rawClient speaks Streamable HTTP by hand, to see exactly what the bridge
// writes.
type rawClient struct {
	t       testing.TB
	url     string
	sid     string
	version string
}

type rawReply struct {
	status int
	header http.Header
	body   string
}

// rawSession initializes a session of the given era.
func (b *bridge) rawSession(t testing.TB, version string) *rawClient {
	t.Helper()
	c := &rawClient{t: t, url: b.srv.URL + "/mcp", version: version}
	r := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	c.sid = r.header.Get("Mcp-Session-Id")
	if r.status != 200 || c.sid == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	if r := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); r.status != 202 {
		t.Fatalf("initialized: %d %s", r.status, r.body)
	}
	return c
}

// post sends a message on the session with the usual headers, which hdr
// overrides ("" removes one).
func (c *rawClient) post(body string, hdr map[string]string) rawReply {
	c.t.Helper()
	resp := c.send(http.MethodPost, body, hdr)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return rawReply{resp.StatusCode, resp.Header, string(data)}
}

func (c *rawClient) send(method, body string, hdr map[string]string) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		if c.version != "2025-03-26" { // the header came with 2025-06-18
			req.Header.Set("MCP-Protocol-Version", c.version)
		}
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// streamIDs are the stream part of SSE event ids, which differ between
// any two runs.
var streamIDs = regexp.MustCompile(`(?m)^id: [^_\n]+_`)

func normalized(body string) string {
	return timestamps.ReplaceAllString(streamIDs.ReplaceAllString(body, "id: S_"), "<time>")
}

// timestamps are the times list_browsers reports its browsers connected
// at: each bridge's own, a second apart when the two bridges' browsers
// connect on either side of a second (TestFastPathMatchesSDK failed so
// under -race).
var timestamps = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// fastStream reports whether a reply came from the fast path (its streams
// are named f<n>; the SDK's are upper-case base32).
func fastStream(body string) bool { return strings.Contains(body, "\nid: f") }

// TestFastPathMatchesSDK sends the same requests to a bridge with the fast
// path and to one without, in every era it serves, and wants the same
// status, headers and bytes back, from the fast path where it should
// answer and from the SDK everywhere else.
func TestFastPathMatchesSDK(t *testing.T) {
	fast := newBridge(t, Options{}, HTTPOptions{})
	fast.attach("instance-same-1")
	sdk := newBridge(t, Options{}, HTTPOptions{})
	sdk.attach("instance-same-1")
	sdk.st.noFastPath.Store(true)

	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
	}
	cases := []struct {
		name string
		body string
		hdr  map[string]string
		fast bool
	}{
		{"echo", call("1", `{"name":"echo","arguments":{"text":"x"}}`), nil, true},
		{"no arguments", call("2", `{"name":"echo"}`), nil, true},
		{"arguments first, spaces", "{ \"params\" : { \"arguments\" : { \"text\" : \"a b\" } ,\n\"name\":\"echo\" } , \"method\":\"tools/call\",\"id\":3,\"jsonrpc\":\"2.0\" }\n", nil, true},
		{"string id", call(`"req-<&>"`, `{"name":"echo","arguments":{"text":"s"}}`), nil, true},
		{"negative id", call("-4", `{"name":"echo","arguments":{}}`), nil, true},
		{"tool error", call("5", `{"name":"fail"}`), nil, true},
		{"every kind of content", call("6", `{"name":"rich"}`), nil, true},
		{"no content", call("7", `{"name":"empty"}`), nil, true},
		{"text to escape", call("8", `{"name":"echo","arguments":{"text":"<b>\u2028\"&\"</b> é"}}`), nil, true},
		{"escapes Go writes otherwise", call("11", `{"name":"echo","arguments":{"text":"\/ \ud83d\ude00 \u00E9 \ud800 \t \u0001 \u007f literal: <&> \u2029 é"}}`), nil, true},
		{"empty text", call("12", `{"name":"echo","arguments":{"text":""}}`), nil, true},
		{"ping", `{"jsonrpc":"2.0","id":9,"method":"ping"}`, nil, true},
		{"ping with empty params", `{"jsonrpc":"2.0","id":10,"method":"ping","params":{}}`, nil, true},

		{"progress token", call("20", `{"name":"echo","arguments":{"text":"p"},"_meta":{"progressToken":"t"}}`), nil, false},
		{"other _meta", call("21", `{"name":"echo","_meta":{"k":1}}`), nil, false},
		{"unknown tool", call("22", `{"name":"no_such_tool"}`), nil, false},
		{"the bridge's own tool", call("23", `{"name":"list_browsers"}`), nil, false},
		{"no name", call("24", `{"arguments":{}}`), nil, false},
		{"fractional id", call("25.5", `{"name":"echo"}`), nil, false},
		{"exponent id", call("2e1", `{"name":"echo"}`), nil, false},
		{"minus zero id", call("-0", `{"name":"echo"}`), nil, false},
		{"escaped string id", call(`"a\"b"`, `{"name":"echo"}`), nil, false},
		{"null id", call("null", `{"name":"echo"}`), nil, false},
		{"key in another case", call("26", `{"Name":"echo"}`), nil, false},
		{"repeated key", call("27", `{"name":"echo","name":"fail"}`), nil, false},
		{"params of a newer protocol", call("28", `{"name":"echo","requestState":"x"}`), nil, false},
		{"null arguments", call("29", `{"name":"echo","arguments":null}`), nil, false},
		{"array arguments", call("30", `{"name":"echo","arguments":[1]}`), nil, false},
		{"escaped name", call("31", `{"name":"ech\u006f"}`), nil, false},
		{"another method", `{"jsonrpc":"2.0","id":32,"method":"tools/list"}`, nil, false},
		{"ping with _meta", `{"jsonrpc":"2.0","id":33,"method":"ping","params":{"_meta":{"progressToken":1}}}`, nil, false},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, nil, false},
		{"extra member", `{"jsonrpc":"2.0","id":34,"method":"ping","extra":1}`, nil, false},
		{"Accept without SSE", call("35", `{"name":"echo"}`), map[string]string{"Accept": "application/json"}, false},
		{"no Accept", call("36", `{"name":"echo"}`), map[string]string{"Accept": ""}, false},
		{"Last-Event-ID on a POST", call("37", `{"name":"echo"}`), map[string]string{"Last-Event-ID": "X_1"}, false},
		{"unsupported version header", call("38", `{"name":"echo"}`), map[string]string{"MCP-Protocol-Version": "1999-01-01"}, false},
		{"2024-11-05 header", call("39", `{"name":"echo"}`), map[string]string{"MCP-Protocol-Version": "2024-11-05"}, false},
	}
	for _, version := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			cf, cs := fast.rawSession(t, version), sdk.rawSession(t, version)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before := fast.mcps.stats.FastPath.Load()
					got, want := cf.post(tc.body, tc.hdr), cs.post(tc.body, tc.hdr)
					if served := fast.mcps.stats.FastPath.Load() > before; served != tc.fast || fastStream(got.body) != tc.fast {
						t.Fatalf("fast path answered: %v (stream %v), want %v\n%s", served, fastStream(got.body), tc.fast, got.body)
					}
					if fastStream(want.body) {
						t.Fatalf("the SDK-only bridge used the fast path:\n%s", want.body)
					}
					for _, h := range []string{"Content-Type", "Cache-Control", "Connection"} {
						if got.header.Get(h) != want.header.Get(h) {
							t.Errorf("%s: %q, the SDK's %q", h, got.header.Get(h), want.header.Get(h))
						}
					}
					if got.status != want.status || normalized(got.body) != normalized(want.body) {
						t.Fatalf("got %d\n%s\nthe SDK answers %d\n%s", got.status, got.body, want.status, want.body)
					}
				})
			}
		})
	}
}

// TestFastPathCancelAndDuplicateID: notifications/cancelled stops a call
// the fast path runs (the extension is told, the caller gets the SDK's
// answer to a cancelled call), and an id already in flight is refused as
// the SDK refuses it.
func TestFastPathCancelAndDuplicateID(t *testing.T) {
	replies := map[bool][]rawReply{}
	for _, useFast := range []bool{true, false} {
		b := newBridge(t, Options{}, HTTPOptions{})
		fe := b.attach("instance-cancel-2")
		b.st.noFastPath.Store(!useFast)
		c := b.rawSession(t, "2025-06-18")
		done := make(chan rawReply, 1)
		go func() {
			done <- c.post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"block"}}`, nil)
		}()
		waitCalls(t, fe, 1)
		dup := c.post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"dup"}}}`, nil)
		if r := c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"enough"}}`, nil); r.status != 202 {
			t.Fatalf("cancelled: %d %s", r.status, r.body)
		}
		select {
		case id := <-fe.cancelledIDs():
			if !strings.HasPrefix(id, "local-") {
				t.Fatalf("extension told to cancel %q", id)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the extension never got notifications/cancelled")
		}
		var r rawReply
		select {
		case r = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the cancelled call's POST never ended")
		}
		if useFast != fastStream(r.body) {
			t.Fatalf("fast path %v, reply %s", useFast, r.body)
		}
		replies[useFast] = []rawReply{dup, r}
	}
	for i, what := range []string{"duplicate id", "cancelled call"} {
		got, want := replies[true][i], replies[false][i]
		if got.status != want.status || normalized(got.body) != normalized(want.body) {
			t.Errorf("%s: fast path %d %s, SDK %d %s", what, got.status, got.body, want.status, want.body)
		}
	}
	if !strings.Contains(replies[true][0].body, "duplicate in-flight request ID 5") || !strings.Contains(replies[true][1].body, `"context canceled"`) {
		t.Errorf("replies: %+v", replies[true])
	}
}

func waitCalls(t *testing.T, fe *fakeExtension, n int) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("%d calls at the extension", n), func() bool { return callCount(fe) >= n })
}

// callCount is the number of tools/call the extension has got.
func callCount(fe *fakeExtension) int {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	return len(fe.calls)
}

// TestFastPathKeepsSessionAlive: a session used only through the fast path
// is not reaped while in use (a call longer than the timeout, calls more
// often than it), and is once idle.
func TestFastPathKeepsSessionAlive(t *testing.T) {
	// Margins of four times the gap between calls: a loaded CI machine
	// must not make a session in use look idle.
	const timeout = 600 * time.Millisecond
	b := newBridge(t, Options{}, HTTPOptions{SessionTimeout: timeout})
	b.attach("instance-alive-1")
	c := b.rawSession(t, "2025-11-25")
	sessions := func() int {
		n := 0
		for range b.mcps.MCP().Sessions() {
			n++
		}
		return n
	}
	before := b.mcps.stats.FastPath.Load()
	if r := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{"ms":1000}}}`, nil); r.status != 200 || !strings.Contains(r.body, "waited") {
		t.Fatalf("a call longer than the idle timeout: %d %s", r.status, r.body)
	}
	for i := range 8 { // 1.2 s of calls, 150 ms apart
		time.Sleep(timeout / 4)
		r := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, i+2), nil)
		if r.status != 200 || !strings.Contains(r.body, `"text":"x"`) {
			t.Fatalf("call %d, %v after the first: %d %s", i+2, time.Duration(i+1)*timeout/4, r.status, r.body)
		}
	}
	if n := b.mcps.stats.FastPath.Load() - before; n != 9 {
		t.Fatalf("the fast path answered %d of the 9 calls", n)
	}
	if n := sessions(); n != 1 {
		t.Fatalf("%d sessions while in use", n)
	}
	testutil.WaitFor(t, "the idle session reaped", func() bool { return sessions() == 0 })
	if r := c.post(`{"jsonrpc":"2.0","id":99,"method":"ping"}`, nil); r.status != 404 {
		t.Fatalf("a reaped session answered %d %s", r.status, r.body)
	}
	if _, ok := b.st.live.Get(c.sid); ok {
		t.Fatal("the reaped session is still indexed")
	}
}

// TestFastPathResume: the client's connection drops while the fast path
// runs a call; the call goes on, and a GET with Last-Event-ID gets its
// answer, as it would from the SDK.
func TestFastPathResume(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	fe := b.attach("instance-resume-1")
	c := b.rawSession(t, "2025-11-25")
	resp := c.send(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{"ms":400}}}`, nil)
	// The priming event names the stream; then the connection drops.
	rd := bufio.NewReader(resp.Body)
	var last string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the priming event: %v", err)
		}
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			last = strings.TrimSpace(id)
		}
		if line == "\n" {
			break
		}
	}
	resp.Body.Close()
	if !strings.HasPrefix(last, "f") {
		t.Fatalf("priming event id %q is not a fast-path stream's", last)
	}
	get := c.send(http.MethodGet, "", map[string]string{"Last-Event-ID": last, "Accept": "text/event-stream"})
	defer get.Body.Close()
	data, _ := io.ReadAll(get.Body)
	stream, _, _ := strings.Cut(last, "_")
	if get.StatusCode != 200 || !strings.Contains(string(data), "id: "+stream+"_1\n") || !strings.Contains(string(data), "waited") {
		t.Fatalf("resumed stream: %d %s", get.StatusCode, data)
	}
	select {
	case id := <-fe.cancelledIDs():
		t.Fatalf("a dropped connection cancelled call %s", id)
	default:
	}
	// Once answered, it replays from the event store like any stream.
	again := c.send(http.MethodGet, "", map[string]string{"Last-Event-ID": last, "Accept": "text/event-stream"})
	data2, _ := io.ReadAll(again.Body)
	again.Body.Close()
	if string(data2) != string(data) {
		t.Fatalf("second replay %q, first %q", data2, data)
	}
}

// TestFastPathSessionEndWaitsForCalls: as with the SDK, the browsers hear
// that a session ended only after its calls in flight are done.
func TestFastPathSessionEndWaitsForCalls(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	fe := b.attach("instance-end-2")
	ended := make(chan time.Time, 1)
	fe.OnNotify(func(method string, p json.RawMessage) {
		if method == "session.ended" {
			ended <- time.Now()
		}
	})
	c := b.rawSession(t, "2025-06-18")
	answered := make(chan time.Time, 1)
	go func() {
		r := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{"ms":400}}}`, nil)
		if !fastStream(r.body) || !strings.Contains(r.body, "waited") {
			t.Errorf("call: %d %s", r.status, r.body)
		}
		answered <- time.Now()
	}()
	waitCalls(t, fe, 1)
	del := c.send(http.MethodDelete, "", nil)
	del.Body.Close()
	var at, end time.Time
	select {
	case end = <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("no session.ended")
	}
	at = <-answered
	// The call takes 400 ms: a session.ended sent at the DELETE would come
	// that much early; 250 ms leaves room for a slow scheduler.
	if end.Before(at.Add(-250 * time.Millisecond)) {
		t.Fatalf("session.ended %v before the call in flight was answered", at.Sub(end))
	}
}

// TestFastPathSDKClients: the SDK's own client, in every era, many
// sessions at once: every streamable call takes the fast path, and answers
// reach the right caller.
func TestFastPathSDKClients(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	b.attach("instance-sdk-1")
	before := b.mcps.stats.FastPath.Load()
	var wg sync.WaitGroup
	const perEra, calls = 4, 50
	for _, e := range eras[1:4] {
		for i := range perEra {
			cs := b.connect(e, nil, "")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range calls {
					want := fmt.Sprintf("%s %d %d", e.name, i, n)
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
					if err != nil || testutil.Text(res) != want {
						t.Errorf("%s: %v %v", want, res, err)
						return
					}
				}
				if err := cs.Ping(context.Background(), nil); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	if n, want := b.mcps.stats.FastPath.Load()-before, int64(3*perEra*(calls+1)); n != want {
		t.Fatalf("the fast path answered %d of %d requests", n, want)
	}
}

func TestParseFast(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
		want fastRequest
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,{"b":"}"}]}}}`, true,
			fastRequest{id: []byte("1"), name: "echo", args: json.RawMessage(`{"a":[1,{"b":"}"}]}`)}},
		{` {"id":"x","params":{"name":"t"},"method":"tools/call","jsonrpc":"2.0"} `, true, fastRequest{id: []byte(`"x"`), name: "t"}},
		{`{"jsonrpc":"2.0","id":123456789012345,"method":"ping"}`, true, fastRequest{id: []byte("123456789012345"), ping: true}},
		{`{"jsonrpc":"2.0","id":1234567890123456,"method":"ping"}`, false, fastRequest{}}, // beyond float64's exact integers, nearly
		{`{"jsonrpc":"2.0","id":01,"method":"ping"}`, false, fastRequest{}},               // not JSON
		{`{"jsonrpc":"2.0","id":1,"method":"ping"`, false, fastRequest{}},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}{}`, false, fastRequest{}},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false, fastRequest{}},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, false, fastRequest{}},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}`, false, fastRequest{}},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, false, fastRequest{}},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}},"id":2}`, false, fastRequest{}},
		{`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"a"}}`, false, fastRequest{}},
		{`{"jsonrpc":"2.0","id":1,"\u006dethod":"ping"}`, false, fastRequest{}},
		{`{"jsonrpc":"2.0","id":"é","method":"ping"}`, false, fastRequest{}},
	} {
		got, ok := parseFast([]byte(tc.body))
		if ok != tc.ok || ok && (string(got.id) != string(tc.want.id) || got.ping != tc.want.ping || got.name != tc.want.name || string(got.args) != string(tc.want.args)) {
			t.Errorf("parseFast(%s) = %+v %v, want %+v %v", tc.body, got, ok, tc.want, tc.ok)
		}
	}
}

// TestDecodeToolResult: the direct decoding of text results gives what the
// SDK's decoder gives.
func TestDecodeToolResult(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		direct bool
	}{
		{`{"content":[{"type":"text","text":"x"}]}`, true},
		{`{"isError":true,"content":[{"text":"a\"b\u00e9<>&\u2028","type":"text"},{"type":"text","text":""}]}`, true},
		{`{"content":[],"isError":false}`, true},
		{` { "content" : [ { "type" : "text" , "text" : "sp" } ] } `, true},
		{`{}`, false},
		{`{"content":null}`, false},
		{`{"content":[{"type":"text","text":"x","annotations":{"priority":1}}]}`, false},
		{`{"content":[{"type":"text","text":"x"}],"_meta":{"a":1}}`, false},
		{`{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":1}}`, false},
		{`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`, false},
		{`{"content":[{"type":"text","text":"x"}],"isError":"yes"}`, false},
		{`{"content":[{"type":"text","text":"x"}],"content":[]}`, false},
		{richResult, false},
	} {
		_, direct := decodeTextResult([]byte(tc.raw))
		if direct != tc.direct {
			t.Errorf("%s: read directly %v, want %v", tc.raw, direct, tc.direct)
		}
		got, gotErr := decodeToolResult(json.RawMessage(tc.raw))
		var want mcp.CallToolResult
		wantErr := json.Unmarshal([]byte(tc.raw), &want)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("%s: error %v, the SDK's %v", tc.raw, gotErr, wantErr)
		}
		if gotErr != nil {
			continue
		}
		if got.Content == nil && want.Content == nil { // as the server sends them
			got.Content, want.Content = []mcp.Content{}, []mcp.Content{}
		}
		if len(got.Content) == 0 && len(want.Content) == 0 {
			got.Content, want.Content = []mcp.Content{}, []mcp.Content{}
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(&want)
		if string(gb) != string(wb) {
			t.Errorf("%s: decoded to %s, the SDK's %s", tc.raw, gb, wb)
		}
	}
}
