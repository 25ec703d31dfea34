package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// rawSession initializes a session at url with tok and returns its id.
func rawSession(tb testing.TB, url, tok string) string {
	tb.Helper()
	status, h, body := rawPost(tb, url, tok, initBody)
	if status != http.StatusOK || h.Get(mcphttp.HeaderSessionID) == "" {
		tb.Fatalf("initialize: %d %s", status, body)
	}
	return h.Get(mcphttp.HeaderSessionID)
}

// TestHTTPRefusals: each request the endpoints refuse gets the rule's
// HTTP status and a JSON-RPC error saying why.
func TestHTTPRefusals(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{MaxMessageSize: 4096}, nil)
	startBrowser(t, tp, "alice", "Chrome")
	tok := accessToken(t, passwordPerson(), tp.public()+"/mcp")
	sid := rawSession(t, tp.public()+"/mcp", tok)
	mcpURL := tp.public() + "/mcp"
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	for _, c := range []struct {
		name   string
		method string
		url    string
		tok    string
		body   string
		header []string // name, value pairs; a value "-" deletes the header
		status int
		want   string // in the body, or in WWW-Authenticate for 401
	}{
		{"another Host", "POST", mcpURL, tok, ping, []string{"Host", "evil.example"}, 403, "not this proxy's public host"},
		// Any origin may call (the bearer token is no ambient credential),
		// but a page without a token is refused like anyone else.
		{"a web page of another origin, without a token", "POST", mcpURL, "", initBody, []string{"Origin", "https://evil.example"}, 401, `resource_metadata="` + tp.public() + `/.well-known/oauth-protected-resource/mcp"`},
		{"no token", "POST", mcpURL, "", initBody, nil, 401, `resource_metadata="` + tp.public() + `/.well-known/oauth-protected-resource/mcp"`},
		{"a token in the URL", "POST", mcpURL + "?access_token=" + tok, "", initBody, nil, 400, "a token in the URL is refused"},
		{"a made-up token", "POST", mcpURL, "bba_made-up", initBody, nil, 401, `error="invalid_token"`},
		{"no session id", "POST", mcpURL, tok, ping, nil, 400, "missing Mcp-Session-Id header"},
		{"an unknown session", "POST", mcpURL, tok, ping, []string{mcphttp.HeaderSessionID, "nope"}, 404, "session not found"},
		{"GET without a session", "GET", mcpURL, tok, "", []string{"Accept", "text/event-stream"}, 400, "GET opens the stream of a session"},
		{"an unknown protocol version", "POST", mcpURL, tok, ping, []string{mcphttp.HeaderSessionID, sid, mcphttp.HeaderProtocolVersion, "2024-01-01"}, 400, "unsupported MCP-Protocol-Version"},
		{"a body over the message limit", "POST", mcpURL, tok, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 5000) + `"}}`, []string{mcphttp.HeaderSessionID, sid}, 413, "4096"},
		{"Accept without event streams", "POST", mcpURL, tok, ping, []string{mcphttp.HeaderSessionID, sid, "Accept", "application/json"}, 406, "text/event-stream"},
		{"not JSON's content type", "POST", mcpURL, tok, ping, []string{mcphttp.HeaderSessionID, sid, "Content-Type", "text/plain"}, 415, "Content-Type must be application/json"},
		{"a batch", "POST", mcpURL, tok, "[" + ping + "]", []string{mcphttp.HeaderSessionID, sid}, 400, "batches are not supported"},
		{"a reserved id", "POST", mcpURL, tok, `{"jsonrpc":"2.0","id":"ext:1","method":"ping"}`, []string{mcphttp.HeaderSessionID, sid}, 400, "reserved for the proxy and extensions"},
		{"a method HTTP does not take", "PUT", mcpURL, tok, ping, []string{mcphttp.HeaderSessionID, sid}, 405, "not a Streamable HTTP method"},
		{"a server name no bridge can have", "POST", tp.public() + "/servers/a%20b/mcp", tok, initBody, nil, 404, "No route"},
		{"another path", "GET", tp.public() + "/admin", "", "", nil, 404, "No route GET /admin"},
		{"Mcp-Method unlike the body", "POST", mcpURL, tok, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			[]string{mcphttp.HeaderProtocolVersion, "2026-07-28", mcphttp.HeaderMethod, "tools/call"}, 400, "must name the body's method"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.tok != "" {
				req.Header.Set("Authorization", "Bearer "+c.tok)
			}
			for i := 0; i+1 < len(c.header); i += 2 {
				if c.header[i] == "Host" {
					req.Host = c.header[i+1]
					continue
				}
				req.Header.Set(c.header[i], c.header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(resp)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			got := body
			if c.status == http.StatusUnauthorized {
				got = resp.Header.Get("WWW-Authenticate")
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("%q lacks %q", got, c.want)
			}
			var e struct {
				Error *relaywire.Error `json:"error"`
			}
			if json.Unmarshal([]byte(body), &e) != nil || e.Error == nil || e.Error.Message == "" {
				t.Errorf("the body is not a JSON-RPC error with a message: %s", body)
			}
		})
	}
}

// TestHTTPUnmappedSubject: a password sign-in the operator mapped to no
// user is refused on the sign-in page (403), naming the subject to map,
// and gets no token (issue 33, item 8: it used to get one that every
// endpoint then refused, and mcp-remote exited on the 403); the same page
// then takes a pairing code, whose user needs no mapping.
func TestHTTPUnmappedSubject(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, func(o *HTTPOptions) { o.Users = nil })
	// The refused sign-in a step at a time (not testutil.Person), to read
	// the page it answers.
	client := httpClientFrom(loopback(1))
	fields, err := signInPage(tp, client, nil, authorizeQuery(t, tp))
	if err != nil {
		t.Fatalf("the sign-in page: %v", err)
	}
	fields["password"] = []string{testPassword}
	status, page, err := postSignIn(tp, client, nil, fields)
	if err != nil || status != http.StatusForbidden || !strings.Contains(page, "which this proxy maps to no user") ||
		!strings.Contains(page, "&#34;password:owner&#34;") || !strings.Contains(page, `name="password"`) {
		t.Fatalf("a password sign-in mapped to no user: %d %v %.500s; want the sign-in page again, 403, naming the subject", status, err, page)
	}
	alice := startBrowser(t, tp, "alice", "Chrome")
	tok := accessToken(t, pairedPerson(t, alice.tclient), tp.public()+"/mcp")
	if status, _, body := rawPost(t, tp.public()+"/mcp", tok, initBody); status != http.StatusOK {
		t.Fatalf("a pairing-code sign-in on the same proxy: initialize %d %s", status, body)
	}
}

// TestHTTPStatelessRequests: 2026-07-28 requests by hand: server/discover
// answered by the proxy, a tool call at a browser's own endpoint (headers
// matching the body), and a browser that is not the user's found nowhere.
func TestHTTPStatelessRequests(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	startBrowser(t, tp, "alice", "Chrome A")
	b := startBrowser(t, tp, "alice", "Chrome B")
	bob := startBrowser(t, tp, "bob", "Chrome")
	p := passwordPerson()
	stateless := []string{mcphttp.HeaderProtocolVersion, mcphttp.VersionStateless}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`

	status, _, body := rawPost(t, tp.public()+"/mcp", accessToken(t, p, tp.public()+"/mcp"), `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`,
		append(stateless, mcphttp.HeaderMethod, "server/discover")...)
	if status != http.StatusOK || !strings.Contains(body, `"supportedVersions":["2025-03-26","2025-06-18","2025-11-25","2026-07-28"]`) ||
		!strings.Contains(body, `"tools":{"listChanged":true}`) {
		t.Errorf("server/discover: %d %s", status, body)
	}

	url := tp.public() + "/browsers/" + b.id + "/mcp"
	status, _, body = rawPost(t, url, accessToken(t, p, url), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hey"},`+meta+`}}`,
		append(stateless, mcphttp.HeaderMethod, "tools/call", mcphttp.HeaderName, "echo")...)
	if status != http.StatusOK || !strings.Contains(body, `Chrome B: hey`) {
		t.Errorf("echo at %s: %d %s", url, status, body)
	}

	url = tp.public() + "/browsers/" + bob.id + "/mcp"
	status, _, body = rawPost(t, url, accessToken(t, p, url), `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+meta+`}}`,
		append(stateless, mcphttp.HeaderMethod, "tools/list")...)
	if status != http.StatusNotFound || !strings.Contains(body, `no browser of yours with id \"`+bob.id+`\"`) {
		t.Errorf("alice at bob's browser: %d %s", status, body)
	}
}

// pingStatus is the status a ping in the session sid gets: 200 while it
// lives, 404 once it has ended.
func pingStatus(tb testing.TB, url, tok, sid string) int {
	tb.Helper()
	status, _, _ := rawPost(tb, url, tok, `{"jsonrpc":"2.0","id":"p","method":"ping"}`, mcphttp.HeaderSessionID, sid)
	return status
}

// openStream opens the GET stream of the session sid; the stream ends
// with the test.
func openStream(tb testing.TB, url, tok, sid string) *http.Response {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(mcphttp.HeaderSessionID, sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET stream: %v %v", err, resp)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestHTTPAbandonedSessionsMakeRoom (issue 33, item 9): a client that
// opens sessions and never DELETEs them does not lock its user out at the
// per-user cap (64, WebSocket clients included): each new session ends
// the user's least recently used idle one; a session in use (here, its
// GET stream open) is passed over, and so is a WebSocket client, which
// arriving at the cap makes room too.
func TestHTTPAbandonedSessionsMakeRoom(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	url := tp.public() + "/mcp"
	tp.mcp(t, "alice") // a WebSocket client: one place of the 64
	tok := accessToken(t, passwordPerson(), url)
	streamed := rawSession(t, url, tok) // the oldest, but in use
	openStream(t, url, tok, streamed)
	var abandoned []string
	for len(abandoned) < DefaultMaxMCPPerUser-2 {
		abandoned = append(abandoned, rawSession(t, url, tok))
	}
	if status, _, body := rawPost(t, tp.public()+"/mcp", tok, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusBadRequest {
		t.Fatalf("a message with no session: %d %s", status, body) // the table is full, not broken
	}
	const more = 10
	var fresh []string
	for range more {
		fresh = append(fresh, rawSession(t, url, tok)) // fails the test unless 200
	}
	for i, sid := range abandoned {
		want := http.StatusOK
		if i < more {
			want = http.StatusNotFound
		}
		if got := pingStatus(t, url, tok, sid); got != want {
			t.Errorf("abandoned session %d (of %d, %d newer ones opened): ping %d, want %d", i, len(abandoned), more, got, want)
		}
	}
	for _, sid := range append(fresh, streamed) {
		if got := pingStatus(t, url, tok, sid); got != http.StatusOK {
			t.Errorf("session %s, new or streaming: ping %d", sid, got)
		}
	}
	// A WebSocket client arriving at the cap makes room the same way.
	tp.mcp(t, "alice")
	if got := pingStatus(t, url, tok, abandoned[more]); got != http.StatusNotFound {
		t.Errorf("the oldest idle session after a WebSocket client came at the cap: ping %d", got)
	}
	if got := tp.srv.m.evicted.Value(); got != more+1 {
		t.Errorf("evicted counter %v, want %d", got, more+1)
	}
}

// TestHTTPSessionsPerUserInUse: when every session of the user is in use
// (WebSocket clients, a session with a GET stream open, one with a call
// in flight) one more is refused 429 with Retry-After and a sentence
// saying why; the session coming out of use makes room.
func TestHTTPSessionsPerUserInUse(t *testing.T) {
	for _, c := range []struct {
		name string
		// use puts the session sid in use and returns what ends that use.
		use func(t *testing.T, tp *testProxy, b *fakeBrowser, url, tok, sid string) (stop func())
	}{
		{
			name: "GET stream open",
			use: func(t *testing.T, tp *testProxy, b *fakeBrowser, url, tok, sid string) func() {
				stream := openStream(t, url, tok, sid)
				return func() { stream.Body.Close() }
			},
		},
		{
			name: "call in flight",
			use: func(t *testing.T, tp *testProxy, b *fakeBrowser, url, tok, sid string) func() {
				answered := make(chan struct{})
				go func() {
					defer close(answered)
					rawPost(t, url, tok, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"hang"}}`, mcphttp.HeaderSessionID, sid)
				}()
				b.call(t) // the browser has it: the call is in flight
				return func() {
					// The browser leaves: the call is answered, the POST
					// ends, the session is idle.
					b.leave()
					<-answered
				}
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := newHTTPTestProxy(t, Options{MaxMCPPerUser: 2}, nil)
			b := startBrowser(t, tp, "alice", "Chrome")
			tp.mcp(t, "alice") // a WebSocket client of alice's
			url := tp.public() + "/mcp"
			tok := accessToken(t, passwordPerson(), url)
			sid := rawSession(t, url, tok)
			stop := c.use(t, tp, b, url, tok, sid)
			status, h, body := rawPost(t, url, tok, initBody)
			if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" ||
				!strings.Contains(body, "too many MCP sessions for this user: at most 2 at once, WebSocket connections included, and each in use") {
				t.Fatalf("one session too many: %d %q %s", status, h.Get("Retry-After"), body)
			}
			if got := pingStatus(t, url, tok, sid); got != http.StatusOK {
				t.Fatalf("the session in use after the refusal: ping %d", got)
			}
			stop()
			testutil.WaitFor(t, "a new session once the other is out of use", func() bool {
				status, _, _ := rawPost(t, url, tok, initBody)
				return status == http.StatusOK
			})
			if got := pingStatus(t, url, tok, sid); got != http.StatusNotFound {
				t.Errorf("the session that made room: ping %d", got)
			}
		})
	}
}

// TestHTTPWebSocketSideUnchanged: with the HTTP side on, /mcp still
// upgrades spec 001's WebSocket clients, who connect and call as before.
func TestHTTPWebSocketSideUnchanged(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	b := startBrowser(t, tp, "alice", "Chrome")
	c := tp.mcp(t, "alice")
	connectTo(t, c, b.id)
	r := c.call(1, "tools/call", map[string]any{"name": "echo", "arguments": map[string]string{"message": "ws"}})
	if r.Error != nil || !strings.Contains(string(r.Result), "Chrome: ws") {
		t.Fatalf("a WebSocket call: %s %s", r.Result, r.Error)
	}
}

// TestHTTPShutdownAnswersCalls: the proxy stopping answers a call in
// flight over HTTP with -32007 and ends the session's GET stream, so
// that the HTTP server can stop too.
func TestHTTPShutdownAnswersCalls(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{ShutdownGrace: 100 * time.Millisecond}, nil)
	b := startBrowser(t, tp, "alice", "Chrome")
	tok := accessToken(t, passwordPerson(), tp.public()+"/mcp")
	sid := rawSession(t, tp.public()+"/mcp", tok)

	req, _ := http.NewRequest(http.MethodGet, tp.public()+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(mcphttp.HeaderSessionID, sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, stream)
	}
	streamEnded := make(chan struct{})
	go func() { readAll(stream); close(streamEnded) }()

	answer := make(chan string, 1)
	go func() {
		_, _, body := rawPost(t, tp.public()+"/mcp", tok, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"hang"}}`, mcphttp.HeaderSessionID, sid)
		answer <- body
	}()
	b.call(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-answer:
		if !strings.Contains(body, `"code":-32007`) || !strings.Contains(body, "shutting down") {
			t.Errorf("the call in flight was answered %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight was not answered")
	}
	select {
	case <-streamEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the session's GET stream did not end")
	}
}

// TestHTTPIdleSessionExpires: a session with nothing going on for the
// session timeout ends: its browser is told it has one client less, and
// the session is gone.
func TestHTTPIdleSessionExpires(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, func(o *HTTPOptions) { o.SessionTimeout = 200 * time.Millisecond })
	b := startBrowser(t, tp, "alice", "Chrome")
	tok := accessToken(t, passwordPerson(), tp.public()+"/mcp")
	peers := func(want int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case m := <-b.notes:
				var p relaywire.StatusParams
				if m.Method == relaywire.MethodStatus && json.Unmarshal(m.Params, &p) == nil && p.PeerCount == want {
					return
				}
			case <-deadline:
				t.Fatalf("the browser was never told it has %d clients", want)
			}
		}
	}
	sid := rawSession(t, tp.public()+"/mcp", tok)
	peers(1)
	peers(0)
	status, _, body := rawPost(t, tp.public()+"/mcp", tok, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, mcphttp.HeaderSessionID, sid)
	if status != http.StatusNotFound {
		t.Errorf("the expired session answered %d %s", status, body)
	}
}

// TestHTTPStatelessCallsShareASession: a stateless client's calls reach the
// browser under one key per client name (one tab group for the client, as
// the bridge does for its own stateless requests), not one session per
// request; another client's calls under another key, and a Streamable HTTP
// session's under its own.
func TestHTTPStatelessCallsShareASession(t *testing.T) {
	tp := newHTTPTestProxy(t, Options{}, nil)
	b := startBrowser(t, tp, "alice", "Chrome")
	p := passwordPerson()
	url := tp.public() + "/browsers/" + b.id + "/mcp"
	tok := accessToken(t, p, url)
	keyOf := func(client string, id int) relaywire.ClientMeta {
		t.Helper()
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"` + client + `","version":"1"}}`
		status, _, body := rawPost(t, url, tok, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},`+meta+`}}`,
			mcphttp.HeaderProtocolVersion, mcphttp.VersionStateless, mcphttp.HeaderMethod, "tools/call", mcphttp.HeaderName, "echo")
		if status != http.StatusOK || !strings.Contains(body, "Chrome: hi") {
			t.Fatalf("stateless echo of %s: %d %s", client, status, body)
		}
		var cm relaywire.ClientMeta
		select {
		case m := <-b.calls:
			if err := json.Unmarshal(m.Client, &cm); err != nil {
				t.Fatalf("the call's client %s: %v", m.Client, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the browser got no call")
		}
		if cm.Name != client || !relaywire.ValidClientKey(cm.Key) {
			t.Fatalf("the call's client is %+v; want %s with a valid key", cm, client)
		}
		return cm
	}
	x1, x2, y := keyOf("agent-x", 1), keyOf("agent-x", 2), keyOf("agent-y", 3)
	if x1.Key != x2.Key {
		t.Errorf("one client's stateless calls came under two keys, %s and %s: a tab group per call", x1.Key, x2.Key)
	}
	if y.Key == x1.Key {
		t.Errorf("two clients' stateless calls share the key %s", y.Key)
	}
	sid := rawSession(t, tp.public()+"/mcp", accessToken(t, p, tp.public()+"/mcp"))
	if x1.Key == sessionKey(sid) {
		t.Errorf("a stateless key equals a session's")
	}
}
