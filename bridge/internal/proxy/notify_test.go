package proxy

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// mappedIDs reads n forwarded requests from the extension and returns their
// mapped ids by connection id.
func mappedIDs(tb testing.TB, e *fakeExt, n int) map[string]string {
	tb.Helper()
	got := map[string]string{}
	for range n {
		select {
		case data := <-e.seen:
			var m relaywire.Message
			json.Unmarshal(data, &m)
			id, _ := relaywire.IDString(m.ID)
			conn, _, ok := relaywire.UnmapID(id)
			if !ok {
				tb.Fatalf("forwarded id %s is not mapped", m.ID)
			}
			got[conn] = id
		case <-time.After(5 * time.Second):
			tb.Fatal("the extension received no request")
		}
	}
	return got
}

// quiet fails if c received anything but status notifications.
func quiet(tb testing.TB, name string, c *tclient) {
	tb.Helper()
	for {
		select {
		case m := <-c.notes:
			if m.Method != relaywire.MethodStatus {
				tb.Errorf("%s received %s %s %s", name, m.Method, m.Params, m.ID)
			}
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

// roundTrip makes a call and waits for its answer (any), so that
// everything c sent before was handled.
func roundTrip(tb testing.TB, c *tclient, id any) {
	tb.Helper()
	c.call(id, "getTabs", nil)
}

func dropped(tb testing.TB, tp *testProxy, reason string) string {
	tb.Helper()
	resp := tp.internal("/metrics")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, `browserbridge_proxy_dropped_total{reason="`+reason+`"}`) {
			return strings.Fields(line)[1]
		}
	}
	return "0"
}

// TestProgressGoesToItsCallerOnly: an extension's notifications/progress
// about one request reaches the client that made it, with params unchanged
// and no requestId, and nobody else: not another client of the same
// extension using the same id, not a client of the user's other extension,
// not another user's client; and not after the reply.
func TestProgressGoesToItsCallerOnly(t *testing.T) {
	w := newWorld(t, Options{})
	tp := w.tp
	ext, other := w.exts["alice/Chrome 141"], w.exts["alice/Edge 140"]
	a, b, c, d := tp.mcp(t, "alice"), tp.mcp(t, "alice"), tp.mcp(t, "alice"), tp.mcp(t, "bob")
	connA, connB := connectTo(t, a, ext.id), connectTo(t, b, ext.id)
	connectTo(t, c, other.id)
	connectTo(t, d, w.exts["bob/Chrome 141"].id)
	heldA, heldB := a.start(1, "hold", nil), b.start(1, "hold", nil) // the same id on both
	ids := mappedIDs(t, ext, 2)
	mappedA, mappedB := ids[connA], ids[connB]
	if mappedA == "" || mappedB == "" || mappedA == mappedB {
		t.Fatalf("mapped ids %v", ids)
	}
	for _, cl := range []*tclient{a, b, c, d} {
		quiet(t, "setup", cl)
	}

	progress := func(e *fakeExt, requestID string, params string) {
		t.Helper()
		frame := relaywire.AppendRequestNotification(nil, requestID, relaywire.MethodProgress, json.RawMessage(params))
		if err := e.sendRaw(frame); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("to the caller, params unchanged", func(t *testing.T) {
		params := `{"progressToken":"tok-a","progress":1,"total":3,"message":"loading","_meta":{"x":1}}`
		progress(ext, mappedA, params)
		n := a.note(relaywire.MethodProgress)
		if string(n.Params) != params || n.RequestID != nil || n.ID != nil {
			t.Fatalf("client got %+v", n)
		}
		progress(ext, mappedB, `{"progressToken":7,"progress":2}`)
		if n := b.note(relaywire.MethodProgress); string(n.Params) != `{"progressToken":7,"progress":2}` {
			t.Fatalf("second client got %s", n.Params)
		}
		quiet(t, "a", a)
		for name, cl := range map[string]*tclient{"c (other extension)": c, "d (other user)": d} {
			quiet(t, name, cl)
		}
	})
	t.Run("refused", func(t *testing.T) {
		before := dropped(t, tp, "progress_not_in_flight")
		for _, tc := range []struct {
			name  string
			e     *fakeExt
			frame string
		}{
			{"an unknown connection", ext, `{"jsonrpc":"2.0","method":"notifications/progress","requestId":"conn-nope:1","params":{"progress":1}}`},
			{"an id not in flight", ext, `{"jsonrpc":"2.0","method":"notifications/progress","requestId":"` + connA + `:2","params":{"progress":1}}`},
			{"a number", ext, `{"jsonrpc":"2.0","method":"notifications/progress","requestId":1,"params":{"progress":1}}`},
			{"the id as the client sent it", ext, `{"jsonrpc":"2.0","method":"notifications/progress","requestId":"1","params":{"progress":1}}`},
			{"another extension's request", other, `{"jsonrpc":"2.0","method":"notifications/progress","requestId":` + string(relaywire.AppendString(nil, mappedA)) + `,"params":{"progress":1}}`},
			{"another method about a request", ext, `{"jsonrpc":"2.0","method":"disconnected","requestId":` + string(relaywire.AppendString(nil, mappedA)) + `,"params":{"connection_id":"x"}}`},
			{"progress without requestId", ext, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`},
			{"a notification of the proxy's", ext, `{"jsonrpc":"2.0","method":"status","params":{"connected":false}}`},
		} {
			if err := tc.e.sendRaw([]byte(tc.frame)); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		for name, cl := range map[string]*tclient{"a": a, "b": b, "c": c, "d": d} {
			quiet(t, name, cl)
		}
		if after := dropped(t, tp, "progress_not_in_flight"); after == before {
			t.Errorf("progress_not_in_flight stayed %s", after)
		}
	})
	t.Run("not after the reply", func(t *testing.T) {
		ext.sendRaw(relaywire.AppendResult(nil, relaywire.AppendString(nil, mappedA), json.RawMessage(`{"done":true}`)))
		if r := a.wait(heldA); string(r.Result) != `{"done":true}` {
			t.Fatalf("reply %s %s", r.Result, r.Error)
		}
		progress(ext, mappedA, `{"progressToken":"tok-a","progress":3}`)
		quiet(t, "a after its reply", a)
		// b's request with the same original id is still served.
		progress(ext, mappedB, `{"progressToken":7,"progress":3}`)
		b.note(relaywire.MethodProgress)
		ext.sendRaw(relaywire.AppendResult(nil, relaywire.AppendString(nil, mappedB), nil))
		b.wait(heldB)
	})
}

// TestListChangedReachesEveryClientOfThatExtension: a list_changed from an
// extension goes to each MCP client connected to it, and to no other.
func TestListChangedReachesEveryClientOfThatExtension(t *testing.T) {
	w := newWorld(t, Options{})
	tp := w.tp
	ext := w.exts["alice/Chrome 141"]
	a, b, c, d, idle := tp.mcp(t, "alice"), tp.mcp(t, "alice"), tp.mcp(t, "alice"), tp.mcp(t, "bob"), tp.mcp(t, "alice")
	connectTo(t, a, ext.id)
	connectTo(t, b, ext.id)
	connectTo(t, c, w.exts["alice/Edge 140"].id)
	connectTo(t, d, w.exts["bob/Chrome 141"].id)
	ext.sendRaw([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	for _, cl := range []*tclient{a, b} {
		if n := cl.note(relaywire.MethodToolsListChanged); n.Params != nil || n.ID != nil {
			t.Fatalf("got %+v", n)
		}
	}
	for name, cl := range map[string]*tclient{"c (other extension)": c, "d (other user)": d, "not connected": idle} {
		quiet(t, name, cl)
	}
	// After disconnect, no more.
	a.call("x", relaywire.MethodDisconnect, nil)
	quiet(t, "a", a)
	ext.sendRaw([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}`))
	if n := b.note(relaywire.MethodToolsListChanged); string(n.Params) != `{}` {
		t.Fatalf("params %s", n.Params)
	}
	quiet(t, "a after disconnect", a)
}

// TestCancelledIsMapped: a client's notifications/cancelled reaches the
// extension with the id mapped as the request was (numbers and strings
// exactly), and only for a request of that client still in flight.
func TestCancelledIsMapped(t *testing.T) {
	w := newWorld(t, Options{})
	tp := w.tp
	ext := w.exts["alice/Chrome 141"]
	a, b, idle := tp.mcp(t, "alice"), tp.mcp(t, "alice"), tp.mcp(t, "alice")
	connA := connectTo(t, a, ext.id)
	connectTo(t, b, ext.id)
	for _, id := range []any{7, "7", "550e8400-e29b-41d4-a716-446655440000", 1.5} {
		a.start(id, "hold", nil)
	}
	mappedIDs(t, ext, 4)

	// The extension sees cancellations in the order a sent them; each
	// refused one is followed by a sentinel that must come through first.
	cancelled := func() relaywire.CancelledParams {
		t.Helper()
		n := ext.note(relaywire.MethodCancelled)
		var p relaywire.CancelledParams
		if err := json.Unmarshal(n.Params, &p); err != nil {
			t.Fatalf("params %s: %v", n.Params, err)
		}
		return p
	}
	send := func(c *tclient, params string) {
		t.Helper()
		if err := c.sendRaw([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":` + params + `}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, params string
		want         string // mapped id the extension must see, "" for none
	}{
		{"number", `{"requestId":7,"reason":"user stopped it"}`, connA + `:7`},
		{"string that looks like a number", `{"requestId":"7"}`, connA + `:"7"`},
		{"uuid", `{"requestId":"550e8400-e29b-41d4-a716-446655440000"}`, connA + `:"550e8400-e29b-41d4-a716-446655440000"`},
		{"number text kept", `{"requestId":1.5}`, connA + `:1.5`},
		{"same number, other text", `{"requestId":1.50}`, ""},
		{"not in flight", `{"requestId":8}`, ""},
		{"an already mapped id", `{"requestId":"` + connA + `:7"}`, ""},
		{"no requestId", `{"reason":"x"}`, ""},
		{"null requestId", `{"requestId":null}`, ""},
		{"object requestId", `{"requestId":{"a":1}}`, ""},
		{"no params", `null`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send(a, tc.params)
			if tc.want == "" {
				send(a, `{"requestId":7,"reason":"sentinel"}`)
			}
			p := cancelled()
			got, _ := relaywire.IDString(p.RequestID)
			want := tc.want
			if want == "" {
				want = connA + `:7`
				if p.Reason != "sentinel" {
					t.Fatalf("the extension saw %s (reason %q), want it dropped", p.RequestID, p.Reason)
				}
			}
			if got != want {
				t.Fatalf("the extension saw requestId %s, want %q", p.RequestID, want)
			}
			if tc.name == "number" && p.Reason != "user stopped it" {
				t.Errorf("reason %q", p.Reason)
			}
		})
	}
	t.Run("another client cannot cancel a's request", func(t *testing.T) {
		before := dropped(t, tp, "cancel_not_in_flight")
		send(b, `{"requestId":7}`)
		send(idle, `{"requestId":7}`)
		roundTrip(t, b, "b-sync")
		roundTrip(t, idle, "idle-sync") // not connected: -32002, still a round trip
		send(a, `{"requestId":"7","reason":"sentinel"}`)
		if p := cancelled(); p.Reason != "sentinel" {
			t.Fatalf("the extension saw %s from another client", p.RequestID)
		}
		if after := dropped(t, tp, "cancel_not_in_flight"); after == before {
			t.Errorf("cancel_not_in_flight stayed %s", after)
		}
	})
}
