package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

type rawReply struct {
	status int
	header http.Header
	code   int
	msg    string
	body   []byte
}

func (tg *testGateway) raw(method, path, body string, hdr map[string]string) rawReply {
	tg.t.Helper()
	req, _ := http.NewRequest(method, tg.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tg.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(b, &m)
	return rawReply{resp.StatusCode, resp.Header, m.Error.Code, m.Error.Message, b}
}

// checkErrorObject fails unless body is one JSON-RPC 2.0 error response:
// "jsonrpc": "2.0", an id (null, a string or a number), an error with an
// integer code and a message, and nothing else.
func checkErrorObject(t *testing.T, body []byte) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("not a JSON object (%v): %q", err, body)
	}
	var errObj struct {
		Code    *int    `json:"code"`
		Message *string `json:"message"`
	}
	id := string(top["id"])
	switch {
	case string(top["jsonrpc"]) != `"2.0"`:
		t.Fatalf(`"jsonrpc" is not "2.0": %q`, body)
	case len(top) != 3 || top["error"] == nil:
		t.Fatalf("not exactly jsonrpc, id and error: %q", body)
	case id != "null" && !mcphttp.ValidID(top["id"]):
		t.Fatalf("bad id: %q", body)
	case json.Unmarshal(top["error"], &errObj) != nil || errObj.Code == nil || errObj.Message == nil || *errObj.Message == "":
		t.Fatalf("the error has no code or no message: %q", body)
	}
}

// Bad input gets the right status, code and a sentence; the session and
// the child survive it.
func TestBadInput(t *testing.T) {
	cfg := everything(t)
	cfg.Tools = &stdio.ToolFilter{Deny: []string{"get-env"}}
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": cfg}, Options{MaxBodyBytes: 1 << 16})
	sid := tg.raw("POST", "/servers/everything/mcp", initBody, nil).header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session")
	}
	s := map[string]string{"Mcp-Session-Id": sid}
	tests := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status, code             int
		says                     string
	}{
		{"not json", "POST", "/servers/everything/mcp", `{"jsonrpc":`, s, 400, -32700, "not valid JSON"},
		{"batch", "POST", "/servers/everything/mcp", `[` + initBody + `]`, s, 400, -32600, "batches"},
		{"wrong version", "POST", "/servers/everything/mcp", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, s, 400, -32600, `"2.0"`},
		{"no method", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":1}`, s, 400, -32600, "needs a method"},
		{"object id", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, s, 400, -32600, "string or a number"},
		{"no session", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil, 400, -32600, "Mcp-Session-Id"},
		{"unknown session", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": "nope"}, 404, -32001, "not found"},
		{"unknown server", "POST", "/servers/nothing/mcp", initBody, nil, 404, -32600, "no server named"},
		{"unknown route", "GET", "/servers/everything/else", "", nil, 404, -32600, "no route"},
		{"bad protocol header", "POST", "/servers/everything/mcp", initBody, map[string]string{"MCP-Protocol-Version": "1999-01-01"}, 400, -32600, "unsupported"},
		{"bad accept", "POST", "/servers/everything/mcp", initBody, map[string]string{"Accept": "text/html"}, 406, -32600, "Accept"},
		{"bad content type", "POST", "/servers/everything/mcp", initBody, map[string]string{"Content-Type": "text/plain"}, 415, -32600, "Content-Type"},
		{"too large", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 1<<16) + `"}}`, s, 413, -32600, "limit"},
		{"denied tool", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get-env","arguments":{}}}`, s, 200, -32602, "does not allow"},
		{"tools/call without name", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{}}`, s, 200, -32602, "params.name"},
		{"initialize twice", "POST", "/servers/everything/mcp", initBody, s, 200, -32600, "already initialized"},
		{"unknown method reaches the child", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":9,"method":"no/such"}`, s, 200, -32601, ""},
		{"answer to nothing", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":"bb-999","result":{}}`, s, 202, 0, ""},
		{"GET without session", "GET", "/servers/everything/mcp", "", map[string]string{"Accept": "text/event-stream"}, 400, -32600, "Mcp-Session-Id"},
		{"PUT", "PUT", "/servers/everything/mcp", "", nil, 405, -32600, "POST"},
		{"SSE message to no session", "POST", "/servers/everything/message?sessionId=x", initBody, nil, 404, -32001, "open the stream"},
		{"null id", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, s, 400, -32600, "must not be null"},
		{"null id initialize", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":null,"method":"initialize","params":{}}`, nil, 400, -32600, "must not be null"},
		{"null id answer", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":null,"result":{}}`, s, 400, -32600, "must not be null"},
		{"null id on the legacy transport", "POST", "/servers/everything/message?sessionId=" + sseSession(t, tg, "/servers/everything/sse"), `{"jsonrpc":"2.0","id":null,"method":"ping"}`, nil, 400, -32600, "must not be null"},
		{"DELETE unknown session", "DELETE", "/servers/everything/mcp", "", map[string]string{"Mcp-Session-Id": "nope"}, 404, -32001, "not found"},
		{"GET on message", "GET", "/servers/everything/message?sessionId=x", "", nil, 405, -32600, "POST"},
		{"POST on sse", "POST", "/servers/everything/sse", initBody, nil, 405, -32600, "GET"},
		{"POST on the list", "POST", "/servers/", initBody, nil, 405, -32600, "GET"},
		{"sse on the aggregate", "GET", "/servers/all/sse", "", nil, 404, -32600, "Streamable HTTP only"},
		{"bad Last-Event-ID", "GET", "/servers/everything/mcp", "", map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": sid, "Last-Event-ID": "x"}, 400, -32600, "Last-Event-ID"},
		{"GET without event stream", "GET", "/servers/everything/mcp", "", map[string]string{"Accept": "application/json", "Mcp-Session-Id": sid}, 406, -32600, "text/event-stream"},
		{"stateless headers disagree", "POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}, 400, -32600, "Mcp-Method"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tg.raw(tc.method, tc.path, tc.body, tc.hdr)
			if r.status != tc.status || r.code != tc.code || !strings.Contains(r.msg, tc.says) {
				t.Fatalf("got %d %d %q, want %d %d ~%q", r.status, r.code, r.msg, tc.status, tc.code, tc.says)
			}
			if tc.code != 0 {
				// Every refusal is a JSON-RPC error object a client can read.
				checkErrorObject(t, r.body)
			}
		})
	}
	// The session is still good.
	if r := tg.raw("POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ok"}}}`, s); r.status != 200 || r.code != 0 {
		t.Fatalf("after bad input: %+v", r)
	}
	if st, _ := tg.gw.Supervisor().State("everything"); st.Restarts != 0 {
		t.Fatalf("bad input restarted the child: %+v", st)
	}
}

// per_session gives each session its own child, ended with the session.
func TestPerSessionChildren(t *testing.T) {
	cfg := everything(t)
	cfg.PerSession = true
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": cfg}, Options{})
	ctx := testutil.Context(t, 30*time.Second)
	a := tg.connect("/servers/everything", sessionEra, nil)
	b := tg.connect("/servers/everything", sessionEra, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}}})
	tg.waitState("everything", "two private children", func(st stdio.State) bool { return st.Private == 2 && st.PID == 0 })
	for i, cs := range []*mcp.ClientSession{a, b} {
		if got, err := echo(ctx, cs, "mine"); err != nil || got != "Echo: mine" {
			t.Fatalf("session %d: %q %v", i, got, err)
		}
	}
	// b's child was initialized with b's own capabilities: it offers the
	// roots tool, which a shared child (no client roots) does not.
	lt, err := b.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	roots := false
	for _, tl := range lt.Tools {
		roots = roots || tl.Name == "get-roots-list"
	}
	if !roots {
		t.Fatal("the private child did not see its client's roots capability")
	}
	a.Close()
	tg.waitState("everything", "one private child after a session ended", func(st stdio.State) bool { return st.Private == 1 })
}

// Abandoned Streamable HTTP sessions are reaped. The timeout leaves room
// for a slow initialize under -race on a loaded CI machine: at 200 ms the
// session was sometimes reaped before the test could count it.
func TestIdleSessionsReaped(t *testing.T) {
	tg := newTestGateway(t, map[string]stdio.ServerConfig{"everything": everything(t)}, Options{SessionTimeout: time.Second})
	sid := tg.raw("POST", "/servers/everything/mcp", initBody, nil).header.Get("Mcp-Session-Id")
	if tg.gw.Sessions() != 1 {
		t.Fatalf("sessions %d", tg.gw.Sessions())
	}
	testutil.WaitFor(t, "the idle session to be reaped", func() bool { return tg.gw.Sessions() == 0 })
	if r := tg.raw("POST", "/servers/everything/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Mcp-Session-Id": sid}); r.status != 404 {
		t.Fatalf("a reaped session answered %d", r.status)
	}
}

// sseSession opens a legacy SSE stream at path and returns its session
// id; the stream stays open until the test ends.
func sseSession(t *testing.T, tg *testGateway, path string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", tg.srv.URL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), "sessionId="); ok {
			return after
		}
	}
	t.Fatalf("no endpoint event: %v", sc.Err())
	return ""
}
