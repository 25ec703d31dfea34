package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// echo is what the fake extension answers.
type echo struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Frame  string          `json:"frame"`
}

func echoOf(tb testing.TB, m *relaywire.Message) echo {
	tb.Helper()
	var e echo
	if m.Error != nil || json.Unmarshal(m.Result, &e) != nil {
		tb.Fatalf("not an echo: result %s error %s", m.Result, m.Error)
	}
	return e
}

// world is two users with two extensions each.
type world struct {
	tp   *testProxy
	exts map[string]*fakeExt // "alice/Chrome", …
}

func newWorld(t *testing.T, opts Options) *world {
	w := &world{tp: newTestProxy(t, opts), exts: map[string]*fakeExt{}}
	for _, u := range []string{"alice", "bob"} {
		for _, b := range []string{"Chrome 141", "Edge 140"} {
			w.exts[u+"/"+b] = w.tp.extension(t, u, b).ready(t)
		}
	}
	return w
}

func TestControlMethods(t *testing.T) {
	w := newWorld(t, Options{})
	tp := w.tp
	a := tp.mcp(t, "alice")
	ext := w.exts["alice/Chrome 141"]

	t.Run("extension gets status after authenticated", func(t *testing.T) {
		n := w.exts["alice/Edge 140"].note(relaywire.MethodStatus)
		var p relaywire.StatusParams
		json.Unmarshal(n.Params, &p)
		if !p.Connected || p.PeerCount != 0 || p.Timestamp == "" {
			t.Fatalf("status %s", n.Params)
		}
		if _, err := time.Parse(relaywire.TimestampLayout, p.Timestamp); err != nil {
			t.Fatalf("timestamp %q: %v", p.Timestamp, err)
		}
	})
	t.Run("list_extensions lists only the caller's", func(t *testing.T) {
		r := a.call(1, relaywire.MethodListExtensions, map[string]any{})
		var res relaywire.ListExtensionsResult
		json.Unmarshal(r.Result, &res)
		want := []relaywire.ExtensionInfo{
			{ID: w.exts["alice/Chrome 141"].id, Name: "Chrome 141", Connected: true, Kind: relaywire.ExtensionKindBrowser},
			{ID: w.exts["alice/Edge 140"].id, Name: "Edge 140", Connected: true, Kind: relaywire.ExtensionKindBrowser},
		}
		if fmt.Sprint(res.Extensions) != fmt.Sprint(want) {
			t.Fatalf("got %+v, want %+v", res.Extensions, want)
		}
		if string(r.ID) != "1" {
			t.Fatalf("reply id %s", r.ID)
		}
	})
	t.Run("list_extensions is empty, not null, for a user without any", func(t *testing.T) {
		c := tp.mcp(t, "carol")
		r := c.call(1, relaywire.MethodListExtensions, nil)
		if string(r.Result) != `{"extensions":[]}` {
			t.Fatalf("result %s", r.Result)
		}
	})
	var connID string
	t.Run("connect", func(t *testing.T) {
		r := a.call(2, relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: ext.id})
		var res relaywire.ConnectResult
		json.Unmarshal(r.Result, &res)
		if !strings.HasPrefix(res.ConnectionID, "conn-") || res.ExtensionID != ext.id || res.ExtensionName != "Chrome 141" {
			t.Fatalf("connect result %s", r.Result)
		}
		connID = res.ConnectionID
		var st relaywire.StatusParams
		json.Unmarshal(a.note(relaywire.MethodStatus).Params, &st)
		if !st.Connected || st.PeerCount != 1 {
			t.Fatalf("mcp status %+v", st)
		}
		for {
			json.Unmarshal(ext.note(relaywire.MethodStatus).Params, &st)
			if st.PeerCount == 1 {
				break
			}
		}
	})
	t.Run("connect twice", func(t *testing.T) {
		r := a.call(3, relaywire.MethodConnect, relaywire.ConnectParams{ExtensionID: w.exts["alice/Edge 140"].id})
		if code, msg := errCode(t, r); code != -32001 || msg != relaywire.MsgAlreadyConnected {
			t.Fatalf("got %d %q", code, msg)
		}
	})
	t.Run("forwarding", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			id        any
			rawID     string
			mapped    string
			connField bool
		}{
			{"number id", 7, `7`, connID + `:7`, false},
			{"string id that looks like a number", "7", `"7"`, connID + `:"7"`, false},
			{"uuid", "550e8400-e29b-41d4-a716-446655440000", `"550e8400-e29b-41d4-a716-446655440000"`, connID + `:"550e8400-e29b-41d4-a716-446655440000"`, false},
			{"large number", 12345678901234567, `12345678901234567`, connID + `:12345678901234567`, false},
			{"with connectionId", 8, `8`, connID + `:8`, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ch := make(chan *relaywire.Message, 1)
				a.mu.Lock()
				a.waiters[tc.rawID] = ch
				a.mu.Unlock()
				msg := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(tc.rawID), "method": "createTab", "params": map[string]any{"url": "https://example.com"}}
				if tc.connField {
					msg["connectionId"] = connID
				}
				a.send(msg)
				r := a.wait(ch)
				if string(r.ID) != tc.rawID {
					t.Fatalf("reply id %s, want %s", r.ID, tc.rawID)
				}
				e := echoOf(t, r)
				var seenID string
				json.Unmarshal(e.ID, &seenID)
				if seenID != tc.mapped {
					t.Fatalf("extension saw id %s, want %q", e.ID, tc.mapped)
				}
				if strings.Contains(e.Frame, "connectionId") || !strings.Contains(e.Frame, `"params":{"url":"https://example.com"}`) {
					t.Fatalf("extension saw frame %s", e.Frame)
				}
			})
		}
	})
	t.Run("extension errors come back unchanged", func(t *testing.T) {
		r := a.call(9, "nope", nil)
		if code, _ := errCode(t, r); code != -32601 || string(r.ID) != "9" {
			t.Fatalf("got %s %s", r.ID, r.Error)
		}
	})
	t.Run("disconnect, twice", func(t *testing.T) {
		for i := range 2 {
			r := a.call(10+i, relaywire.MethodDisconnect, map[string]any{})
			if string(r.Result) != `{"disconnected":true}` {
				t.Fatalf("disconnect %d: %s %s", i, r.Result, r.Error)
			}
		}
		r := a.call(12, "createTab", nil)
		if code, _ := errCode(t, r); code != relaywire.CodeNotConnected {
			t.Fatalf("after disconnect: %s", r.Error)
		}
		// Reconnecting to another extension works.
		connectTo(t, a, w.exts["alice/Edge 140"].id)
		if e := echoOf(t, a.call(13, "getTabs", nil)); e.Method != "getTabs" {
			t.Fatalf("echo %+v", e)
		}
	})
	t.Run("metrics and health", func(t *testing.T) {
		// The public listener says the status alone, and has no metrics.
		resp, err := http.Get(tp.hs.URL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
			t.Fatalf("public /health: %d %s", resp.StatusCode, body)
		}
		if resp, err := http.Get(tp.hs.URL + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("public /metrics: %v %v, want 404", resp.Status, err)
		}
		for _, path := range []string{"/metrics", "/health"} {
			resp := tp.internal(path)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d", path, resp.StatusCode)
			}
			want := map[string]string{"/metrics": "browserbridge_proxy_forwarded_total", "/health": `"extensions":4`}[path]
			if !strings.Contains(string(body), want) {
				t.Fatalf("%s lacks %s:\n%s", path, want, body)
			}
		}
	})
}

func TestErrors(t *testing.T) {
	w := newWorld(t, Options{MaxMessageSize: 4096})
	tp := w.tp
	ext := w.exts["alice/Chrome 141"]

	fresh := dial(t, tp.url+relaywire.PathMCP, false) // not authenticated
	unconnected := tp.mcp(t, "alice")
	connected := tp.mcp(t, "alice")
	connID := connectTo(t, connected, ext.id)
	connected.note(relaywire.MethodStatus)

	for _, tc := range []struct {
		name   string
		c      *tclient
		frame  string
		id     string // raw id expected on the error reply
		code   int
		inMsg  string
		noResp bool
	}{
		{"malformed JSON", connected, `{"jsonrpc":"2.0","id":1,`, "null", -32700, "not valid JSON", false},
		{"not an object", connected, `[1,2]`, "null", -32600, "not a JSON-RPC 2.0 object", false},
		{"missing jsonrpc", connected, `{"id":1,"method":"createTab"}`, "1", -32600, `"jsonrpc" must be "2.0"`, false},
		{"method of the wrong type", connected, `{"jsonrpc":"2.0","id":2,"method":5}`, "2", -32600, "wrong type", false},
		{"object id", connected, `{"jsonrpc":"2.0","id":{"a":1},"method":"x"}`, "null", -32600, "string or a number", false},
		{"null id", connected, `{"jsonrpc":"2.0","id":null,"method":"x"}`, "null", -32600, "string or a number", false},
		{"reserved proxy: id", connected, `{"jsonrpc":"2.0","id":"proxy:1","method":"createTab"}`, `"proxy:1"`, -32600, "reserved", false},
		{"reserved ext: id", connected, `{"jsonrpc":"2.0","id":"ext:3","method":"createTab"}`, `"ext:3"`, -32600, "reserved", false},
		{"reserved id on a control method", unconnected, `{"jsonrpc":"2.0","id":"proxy:2","method":"list_extensions"}`, `"proxy:2"`, -32600, "reserved", false},
		{"no method, no id", connected, `{"jsonrpc":"2.0"}`, "null", -32600, "neither a method nor an id", false},
		{"method the proxy sends", connected, `{"jsonrpc":"2.0","id":4,"method":"authenticate"}`, "4", -32601, "the proxy sends it", false},
		{"rpc. method", connected, `{"jsonrpc":"2.0","id":5,"method":"rpc.discover"}`, "5", -32601, "reserved by JSON-RPC", false},
		{"unknown method, connected: the extension's answer", connected, `{"jsonrpc":"2.0","id":6,"method":"nope"}`, "6", -32601, `method "nope" not found`, false},
		{"unknown method, not connected", unconnected, `{"jsonrpc":"2.0","id":7,"method":"nope"}`, "7", -32002, "call connect first", false},
		{"before the handshake", fresh, `{"jsonrpc":"2.0","id":8,"method":"list_extensions"}`, "8", -32003, "send mcp_handshake first", false},
		{"connect without params", unconnected, `{"jsonrpc":"2.0","id":9,"method":"connect"}`, "9", -32602, "extension_id", false},
		{"connect with a number", unconnected, `{"jsonrpc":"2.0","id":10,"method":"connect","params":{"extension_id":5}}`, "10", -32602, "extension_id", false},
		{"connect to an unknown extension", unconnected, `{"jsonrpc":"2.0","id":11,"method":"connect","params":{"extension_id":"ext-nope"}}`, "11", -32000, relaywire.MsgExtensionNotFound, false},
		{"handshake twice", unconnected, `{"jsonrpc":"2.0","id":12,"method":"mcp_handshake","params":{"accessToken":"x"}}`, "12", -32600, "already authenticated", false},
		{"handshake without token", fresh, `{"jsonrpc":"2.0","id":13,"method":"mcp_handshake","params":{}}`, "13", -32602, "accessToken", false},
		{"wrong connectionId", connected, `{"jsonrpc":"2.0","id":14,"method":"createTab","connectionId":"conn-other"}`, "14", -32602, "not this client's connection", false},
		{"oversized message", connected, `{"jsonrpc":"2.0","id":15,"method":"createTab","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`, "null", -32600, "exceeds the 4096-byte limit", false},
		{"a reply from an MCP client is ignored", connected, `{"jsonrpc":"2.0","id":16,"result":{}}`, "", 0, "", true},
		{"a notification is forwarded, never answered", connected, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, "", 0, "", true},
		{"session_ended as a request", connected, `{"jsonrpc":"2.0","id":17,"method":"session_ended","params":{"key":"abc"}}`, "17", -32600, "is a notification", false},
		{"session_ended without a valid key is dropped", connected, `{"jsonrpc":"2.0","method":"session_ended","params":{"key":"NOT A KEY"}}`, "", 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.sendRaw([]byte(tc.frame)); err != nil {
				t.Fatal(err)
			}
			if tc.noResp {
				// The next call's reply must be the next thing we see.
				if r := tc.c.call(99, "createTab", nil); r.Error != nil {
					t.Fatalf("follow-up: %s", r.Error)
				}
				select {
				case m := <-tc.c.notes:
					t.Fatalf("unexpected message %+v", m)
				default:
				}
				return
			}
			var m *relaywire.Message
			select {
			case m = <-tc.c.notes:
			case <-time.After(5 * time.Second):
				t.Fatal("no answer")
			}
			if string(m.ID) != tc.id {
				t.Errorf("reply id %s, want %s", m.ID, tc.id)
			}
			code, msg := errCode(t, m)
			if code != tc.code || !strings.Contains(msg, tc.inMsg) {
				t.Errorf("got %d %q, want %d containing %q", code, msg, tc.code, tc.inMsg)
			}
		})
	}
	t.Run("duplicate id in flight", func(t *testing.T) {
		// The held call stays in flight; the second one with its id is
		// refused, and the refusal reaches the waiter for id 100.
		ch := connected.start(100, "hold", nil)
		<-ext.seen
		connected.sendRaw([]byte(`{"jsonrpc":"2.0","id":100,"method":"createTab"}`))
		m := connected.wait(ch)
		if code, _ := errCode(t, m); code != relaywire.CodeDuplicateID || string(m.ID) != "100" {
			t.Fatalf("got %s %s", m.ID, m.Error)
		}
	})
	t.Run("session_ended without a valid key is counted as dropped", func(t *testing.T) {
		// The case above sent one: the proxy dropped it rather than
		// passing it to the browser.
		if v := metric(t, tp, `browserbridge_proxy_dropped_total{reason="session_ended"}`); v != 1 {
			t.Errorf("dropped session_ended: %v, want 1", v)
		}
	})
	t.Run("the connection survives", func(t *testing.T) {
		if e := echoOf(t, connected.call(200, "getTabs", nil)); e.Method != "getTabs" {
			t.Fatal(e)
		}
		_ = connID
	})
	t.Run("extension: requests refused, bad frames answered", func(t *testing.T) {
		for _, tc := range []struct {
			frame string
			code  int
		}{
			{`{"jsonrpc":"2.0","id":"ext:1","method":"createTab"}`, -32601},
			{`not json`, -32700},
			{`{"jsonrpc":"2.0","id":"x"}`, -32600},
		} {
			ext.sendRaw([]byte(tc.frame))
			select {
			case m := <-ext.replies:
				if code, _ := errCode(t, m); code != tc.code {
					t.Errorf("%s: got %s", tc.frame, m.Error)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: no answer", tc.frame)
			}
		}
	})
}
