package mcpserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// rpcError parses a body as one JSON-RPC error object, or fails.
func rpcError(t *testing.T, body string) (id json.RawMessage, code int, msg string) {
	t.Helper()
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || m.JSONRPC != "2.0" || m.Error == nil || m.ID == nil || m.Error.Message == "" {
		t.Fatalf("not a JSON-RPC error object with a sentence: %q", body)
	}
	return m.ID, m.Error.Code, m.Error.Message
}

// TestRequestIDsComeBackExactly: an id comes back exactly as sent, on the
// fast path and the SDK's, or is refused with -32600 and a sentence when
// the bridge could not echo it exactly.
func TestRequestIDsComeBackExactly(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	b.attach("instance-ids")
	c := b.rawSession(t, "2025-06-18")
	long := `"` + strings.Repeat("x", 300) + `"`
	for _, tc := range []struct {
		name, id string
		refused  bool
	}{
		{"small integer", "1", false},
		{"largest exact integer", "9007199254740991", false},
		{"smallest exact integer", "-9007199254740991", false},
		{"long string", long, false},
		{"string of digits", `"9007199254740993"`, false},
		{"fraction", "1.5", true},
		{"beyond 2^53", "9007199254740993", true},
		{"39 digits", "123456789012345678901234567890123456789", true},
		{"exponent", "1e3", true},
		{"null", "null", true},
		{"object", `{"a":1}`, true},
		{"boolean", "true", true},
	} {
		for _, method := range []string{
			`"tools/call","params":{"name":"echo","arguments":{"text":"x"}}`, // the fast path
			`"tools/list"`, // the SDK's path
		} {
			t.Run(tc.name+" "+strings.Split(method, `"`)[1], func(t *testing.T) {
				r := c.post(`{"jsonrpc":"2.0","id":`+tc.id+`,"method":`+method+`}`, nil)
				body := r.body
				if i := strings.Index(body, "data: {"); i >= 0 {
					body = strings.TrimSpace(body[i+len("data: "):])
				}
				if tc.refused {
					id, code, msg := rpcError(t, body)
					if r.status != http.StatusBadRequest || code != -32600 || string(id) != "null" || !strings.Contains(msg, "id") {
						t.Fatalf("got %d %s; want 400, -32600, id null, a sentence about the id", r.status, r.body)
					}
					return
				}
				var m struct{ ID json.RawMessage }
				if err := json.Unmarshal([]byte(body), &m); err != nil || string(m.ID) != tc.id {
					t.Fatalf("sent id %s, got back %s (%d %s)", tc.id, m.ID, r.status, r.body)
				}
			})
		}
	}
}

// TestEveryRefusalIsJSONRPC: each way a request can be refused on /mcp and
// /message answers a JSON-RPC error object with a sentence and the right
// HTTP status.
func TestEveryRefusalIsJSONRPC(t *testing.T) {
	b := newBridge(t, Options{}, HTTPOptions{})
	b.attach("instance-refusals")
	c := b.rawSession(t, "2025-06-18")
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, tc := range []struct {
		name   string
		method string
		body   string
		hdr    map[string]string
		status int
		code   int
	}{
		{"unknown session", http.MethodPost, ping, map[string]string{"Mcp-Session-Id": "no-such-session"}, 404, -32001},
		{"GET of an unknown session", http.MethodGet, "", map[string]string{"Mcp-Session-Id": "no-such-session", "Content-Type": ""}, 404, -32001},
		{"DELETE of an unknown session", http.MethodDelete, "", map[string]string{"Mcp-Session-Id": "no-such-session"}, 404, -32001},
		{"GET without a session", http.MethodGet, "", map[string]string{"Mcp-Session-Id": "", "Content-Type": ""}, 400, -32600},
		{"GET without text/event-stream", http.MethodGet, "", map[string]string{"Accept": "application/json"}, 406, -32600},
		{"unsupported protocol version", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"MCP-Protocol-Version": "1999-01-01"}, 400, -32600},
		{"request without an id", http.MethodPost, `{"jsonrpc":"2.0","method":"tools/list"}`, nil, 400, -32600},
		{"PUT", http.MethodPut, ping, nil, 405, -32600},
		{"text/plain", http.MethodPost, ping, map[string]string{"Content-Type": "text/plain"}, 415, -32600},
		{"not JSON", http.MethodPost, `{"jsonrpc":`, nil, 400, -32700},
		{"batch", http.MethodPost, `[` + ping + `]`, nil, 400, -32600},
		{"answer without an id", http.MethodPost, `{"jsonrpc":"2.0","result":{}}`, nil, 400, -32600},
		{"params not an object", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":5}`, nil, 400, -32600},
		{"unknown method", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/destroy"}`, nil, 200, -32601},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.send(tc.method, tc.body, tc.hdr)
			defer resp.Body.Close()
			var sb strings.Builder
			buf := make([]byte, 4096)
			for {
				n, err := resp.Body.Read(buf)
				sb.Write(buf[:n])
				if err != nil {
					break
				}
			}
			_, code, _ := rpcError(t, sb.String())
			if resp.StatusCode != tc.status || code != tc.code || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %s (%s); want %d and code %d", resp.StatusCode, sb.String(), resp.Header.Get("Content-Type"), tc.status, tc.code)
			}
		})
	}

	// The legacy transport refuses alike: an unknown session, and a body
	// that is not JSON, like /mcp.
	for _, tc := range []struct {
		name, query, ctype string
		status, code       int
	}{
		{"unknown SSE session", "?sessionId=nope", "application/json", 404, -32001},
		{"text/plain on /message", "", "text/plain", 415, -32600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			query := tc.query
			if query == "" {
				query = "?sessionId=" + openSSE(t, b)
			}
			req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/message"+query, strings.NewReader(ping))
			req.Header.Set("Content-Type", tc.ctype)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var sb strings.Builder
			buf := make([]byte, 4096)
			n, _ := resp.Body.Read(buf)
			sb.Write(buf[:n])
			_, code, msg := rpcError(t, sb.String())
			if resp.StatusCode != tc.status || code != tc.code {
				t.Fatalf("got %d %s; want %d and code %d", resp.StatusCode, msg, tc.status, tc.code)
			}
		})
	}
}

// openSSE opens a legacy SSE stream and returns its session id; the stream
// stays open until the test ends.
func openSSE(t *testing.T, b *bridge) string {
	t.Helper()
	resp, err := http.Get(b.srv.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	buf := make([]byte, 512)
	var got string
	for !strings.Contains(got, "sessionId=") || !strings.Contains(got[strings.Index(got, "sessionId="):], "\n") {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("reading the endpoint event: %v (%q)", err, got)
		}
		got += string(buf[:n])
	}
	rest := got[strings.Index(got, "sessionId=")+len("sessionId="):]
	return strings.TrimSpace(rest[:strings.IndexAny(rest, "&\n")])
}
