package rpcstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
)

// connPair is a Conn on one end of a pipe and a rawPeer on the other. The
// conn's handler answers "ping" with "pong", records every request it is
// given, and answers "big" with a result larger than the link's limit.
type connPair struct {
	conn *Conn
	peer rawPeer
	raw  net.Conn

	mu       sync.Mutex
	requests []*jsonrpc2.Request
}

func newConnPair(t *testing.T, limit int) *connPair {
	t.Helper()
	a, b := net.Pipe()
	p := &connPair{peer: rawPeer{t, b}, raw: b}
	p.conn = NewConn(context.Background(), New(a, limit), func(_ context.Context, c *Conn, req *jsonrpc2.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, req)
		p.mu.Unlock()
		switch {
		case req.Notif:
		case req.Method == "big":
			_ = c.Reply(req.ID, strings.Repeat("y", 2*limit))
		case req.Method == "fail":
			_ = c.ReplyWithError(req.ID, &jsonrpc2.Error{Code: rpccode.InvalidParams, Message: "bad <params>"})
		default:
			_ = c.Reply(req.ID, "pong")
		}
	}, nil)
	t.Cleanup(func() { p.conn.Close(); b.Close() })
	return p
}

// sendRaw writes frame from the peer, also one over the limit or empty.
func (p *connPair) sendRaw(frame []byte) {
	go func() {
		_, _ = p.raw.Write(append(nativemsg.AppendHeader(nil, uint32(len(frame))), frame...))
	}()
}

func (p *connPair) recorded() []*jsonrpc2.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*jsonrpc2.Request(nil), p.requests...)
}

// pingWorks checks the link still answers after whatever came before.
func (p *connPair) pingWorks(t *testing.T) {
	t.Helper()
	p.sendRaw([]byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`))
	if r := p.peer.recv(); r["result"] != "pong" || r["id"] != float64(7) {
		t.Fatalf("ping got %v, want pong with id 7", r)
	}
}

func TestConnSurvivesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name     string
		frame    string
		wantCode float64
		wantText string
	}{
		{"bad JSON", `{"jsonrpc":"2.0",`, rpccode.ParseError, "not valid JSON"},
		{"only spaces", "  ", rpccode.ParseError, "not valid JSON"},
		{"empty frame", "", rpccode.InvalidRequest, "empty message"},
		{"over the limit", `"` + strings.Repeat("x", 2000) + `"`, rpccode.InvalidRequest, "exceeds"},
		{"not JSON-RPC", `{"hello":1}`, rpccode.InvalidRequest, "not a JSON-RPC"},
		{"not an object", `"ping"`, rpccode.InvalidRequest, "not a JSON-RPC"},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, rpccode.InvalidRequest, "batches"},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"ping","result":1}`, rpccode.InvalidRequest, "both"},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, rpccode.InvalidRequest, "not a string"},
		{"fractional request id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, rpccode.InvalidRequest, "neither a string nor an integer"},
		{"object request id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, rpccode.InvalidRequest, "neither a string nor an integer"},
		{"negative reply id", `{"jsonrpc":"2.0","id":-1,"result":1}`, rpccode.InvalidRequest, "unsigned integer"},
		{"error not an object", `{"jsonrpc":"2.0","id":"x","error":"no"}`, rpccode.InvalidRequest, "its error"},
		{"null error, no result", `{"jsonrpc":"2.0","id":"x","error":null}`, rpccode.InvalidRequest, "neither a method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newConnPair(t, 1024)
			p.sendRaw([]byte(tc.frame))
			reply := p.peer.recv()
			e, _ := reply["error"].(map[string]any)
			if e == nil || e["code"] != tc.wantCode || !strings.Contains(e["message"].(string), tc.wantText) || reply["id"] != nil {
				t.Fatalf("reply to %q = %v, want error %v mentioning %q with id null", tc.frame, reply, tc.wantCode, tc.wantText)
			}
			p.pingWorks(t)
			if n := len(p.recorded()); n != 1 {
				t.Errorf("the handler was given %d requests, want the ping alone", n)
			}
		})
	}
}

// Requests and notifications reach the handler in order, as jsonrpc2 gives
// them: a null or missing id is a notification; params nil when absent,
// "null" when null, and otherwise the frame's text.
func TestConnDispatchesInOrder(t *testing.T) {
	p := newConnPair(t, nativemsg.MaxLink)
	frames := []string{
		`{"jsonrpc":"2.0","method":"first","params":{"a": [1, "\u003c"]}}`,
		`{"jsonrpc":"2.0","id":null,"method":"second","params":null}`,
		`{"jsonrpc":"2.0","id":"t:\u0031","method":"third"}`,
		`{"jsonrpc":"2.0","id":-2,"method":"fourth","params":[]}`,
		`{"method":"fifth","id":3,"method":"sixth"}`, // the last member wins, as with encoding/json
	}
	go func() { // net.Pipe holds each write until it is read
		for _, f := range frames {
			_ = nativemsg.WriteFrame(p.raw, []byte(f), nativemsg.MaxLink)
		}
	}()
	for _, wantID := range []any{"t:1", float64(1<<64 - 2), float64(3)} {
		if r := p.peer.recv(); r["id"] != wantID || r["result"] != "pong" {
			t.Fatalf("reply %v, want pong with id %v", r, wantID)
		}
	}
	params := func(s string) *json.RawMessage { r := json.RawMessage(s); return &r }
	want := []*jsonrpc2.Request{
		{Method: "first", Notif: true, Params: params(`{"a": [1, "\u003c"]}`)},
		{Method: "second", Notif: true, Params: params("null")},
		{Method: "third", ID: jsonrpc2.ID{Str: "t:1", IsString: true}},
		{Method: "fourth", ID: jsonrpc2.ID{Num: 1<<64 - 2}, Params: params("[]")},
		{Method: "sixth", ID: jsonrpc2.ID{Num: 3}},
	}
	got := p.recorded()
	if len(got) != len(want) {
		t.Fatalf("handler got %d requests, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Method != w.Method || g.ID != w.ID || g.Notif != w.Notif || (g.Params == nil) != (w.Params == nil) ||
			(g.Params != nil && string(*g.Params) != string(*w.Params)) {
			t.Errorf("request %d = %+v (params %s), want %+v (params %s)", i, g, str(g.Params), w, str(w.Params))
		}
	}
}

func str(r *json.RawMessage) string {
	if r == nil {
		return "<none>"
	}
	return string(*r)
}

// The replies a call can get, each answered by the peer as written here.
func TestConnCallReplies(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reply      string // %s is the request's id as the peer got it
		wantResult string
		wantErr    *jsonrpc2.Error
	}{
		{"result", `{"jsonrpc":"2.0","id":%s,"result":{"content": [ {"text":"x"} ]}}`, `{"content": [ {"text":"x"} ]}`, nil},
		{"null result", `{"id":%s,"result":null,"jsonrpc":"2.0"}`, "null", nil},
		{"error", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"bad","data":{"k":1}}}`, "",
			&jsonrpc2.Error{Code: -32602, Message: "bad", Data: rawPtr(`{"k":1}`)}},
		{"error beside a result", `{"jsonrpc":"2.0","id":%s,"result":1,"error":{"code":1,"message":"m"}}`, "",
			&jsonrpc2.Error{Code: 1, Message: "m"}},
		{"id with escapes", `{"jsonrpc":"2.0","id":"local\u002dx:1","result":true}`, "true", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newConnPair(t, nativemsg.MaxLink)
			type outcome struct {
				res json.RawMessage
				err error
			}
			got := make(chan outcome, 1)
			go func() {
				res, err := p.conn.Call(context.Background(), "local-x:1", "tools/call", map[string]string{"name": "echo"})
				got <- outcome{res, err}
			}()
			req := p.peer.recv()
			if req["id"] != "local-x:1" || req["method"] != "tools/call" || req["jsonrpc"] != "2.0" {
				t.Fatalf("request on the wire = %v", req)
			}
			p.peer.send([]byte(strings.ReplaceAll(tc.reply, "%s", `"local-x:1"`)))
			o := <-got
			if tc.wantErr != nil {
				var e *jsonrpc2.Error
				if !errors.As(o.err, &e) || e.Code != tc.wantErr.Code || e.Message != tc.wantErr.Message || str(e.Data) != str(tc.wantErr.Data) {
					t.Fatalf("Call = %s, %v; want error %+v", o.res, o.err, tc.wantErr)
				}
				return
			}
			if o.err != nil || string(o.res) != tc.wantResult {
				t.Fatalf("Call = %s, %v; want %s", o.res, o.err, tc.wantResult)
			}
		})
	}
}

func rawPtr(s string) *json.RawMessage { r := json.RawMessage(s); return &r }

// An id stays taken from its call until its reply arrives, also after the
// caller gave up, or until the link closes; ids are told apart by type
// (the number 1 answers no call of id "1").
func TestConnIDLifetime(t *testing.T) {
	p := newConnPair(t, nativemsg.MaxLink)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := p.conn.Call(ctx, "1", "slow", nil)
		gaveUp <- err
	}()
	r := p.peer.recv()
	if r["id"] != "1" {
		t.Fatalf("request %v", r)
	}
	if _, ok := r["params"]; ok {
		t.Fatalf("a call without params sent a params member: %v", r)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call after cancel = %v", err)
	}
	if _, err := p.conn.Call(context.Background(), "1", "again", nil); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("Call with an id in flight = %v, want ErrDuplicateID", err)
	}
	// A reply of another type is to no call: the id stays taken.
	p.peer.send([]byte(`{"jsonrpc":"2.0","id":1,"result":"late"}`))
	p.pingWorks(t) // the reply above has been read
	if _, err := p.conn.Call(context.Background(), "1", "again", nil); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("after a reply with the number 1, Call = %v, want ErrDuplicateID", err)
	}
	// The late reply frees it.
	p.peer.send([]byte(`{"jsonrpc":"2.0","id":"1","result":"late"}`))
	p.pingWorks(t)
	again := make(chan error, 1)
	go func() {
		res, err := p.conn.Call(context.Background(), "1", "again", nil)
		if err == nil && string(res) != `"second"` {
			err = errors.New("result " + string(res))
		}
		again <- err
	}()
	if req := p.peer.recv(); req["method"] != "again" {
		t.Fatalf("request %v", req)
	}
	p.peer.send([]byte(`{"jsonrpc":"2.0","id":"1","result":"second"}`))
	if err := <-again; err != nil {
		t.Fatalf("Call after the late reply = %v", err)
	}

	// Closing fails what waits and what comes after, and says so on Done.
	waiting := make(chan error, 1)
	go func() { _, err := p.conn.Call(context.Background(), "2", "never", nil); waiting <- err }()
	p.peer.recv()
	p.conn.Close()
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiting Call at close = %v, want ErrClosed", err)
	}
	<-p.conn.Done()
	if _, err := p.conn.Call(context.Background(), "3", "after", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call after close = %v, want ErrClosed", err)
	}
	if err := p.conn.Notify("after", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Notify after close = %v, want ErrClosed", err)
	}
}

// Replies to the other end: an error result keeps its code, a reply too
// large for the link becomes an error reply with the same id, and a
// result that cannot be encoded an internal error.
func TestConnReplies(t *testing.T) {
	for _, tc := range []struct {
		name, frame string
		wantID      any
		wantCode    float64
		wantText    string
	}{
		{"error reply", `{"jsonrpc":"2.0","id":"e","method":"fail"}`, "e", rpccode.InvalidParams, "bad <params>"},
		{"oversized reply", `{"jsonrpc":"2.0","id":"big","method":"big"}`, "big", rpccode.InternalError, "exceeds the 1024-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newConnPair(t, 1024)
			p.sendRaw([]byte(tc.frame))
			r := p.peer.recv()
			e, _ := r["error"].(map[string]any)
			if r["id"] != tc.wantID || e == nil || e["code"] != tc.wantCode || !strings.Contains(e["message"].(string), tc.wantText) {
				t.Fatalf("reply %v, want error %v mentioning %q with id %v", r, tc.wantCode, tc.wantText, tc.wantID)
			}
			p.pingWorks(t)
		})
	}
	t.Run("unencodable result", func(t *testing.T) {
		a, b := net.Pipe()
		peer := rawPeer{t, b}
		conn := NewConn(context.Background(), New(a, nativemsg.MaxLink), func(_ context.Context, c *Conn, req *jsonrpc2.Request) {
			_ = c.Reply(req.ID, func() {})
		}, nil)
		defer conn.Close()
		go peer.send([]byte(`{"jsonrpc":"2.0","id":4,"method":"x"}`))
		r := peer.recv()
		if e, _ := r["error"].(map[string]any); r["id"] != float64(4) || e == nil || e["code"] != float64(rpccode.InternalError) {
			t.Fatalf("reply %v, want an internal error with id 4", r)
		}
	})
}

// The conn writes what jsonrpc2 writes, byte for byte.
func TestConnEncodesAsJSONRPC2(t *testing.T) {
	params := map[string]any{"text": "<b>&amp;</b> \u2028 \"q\" é", "n": 1.5}
	encParams, _ := json.Marshal(params)
	rawParams := json.RawMessage(encParams)
	for _, tc := range []struct {
		name string
		got  func() ([]byte, error)
		want any
	}{
		{"request", func() ([]byte, error) {
			id := "local-abc:12"
			return appendRequest(nil, &id, "tools/call", encParams), nil
		}, &jsonrpc2.Request{Method: "tools/call", ID: jsonrpc2.ID{Str: "local-abc:12", IsString: true}, Params: &rawParams}},
		{"request with an id to escape", func() ([]byte, error) {
			id := "<é>\x01"
			return appendRequest(nil, &id, "m\u2029", nil), nil
		}, &jsonrpc2.Request{Method: "m\u2029", ID: jsonrpc2.ID{Str: "<é>\x01", IsString: true}}},
		{"notification", func() ([]byte, error) {
			return appendRequest(nil, nil, "notifications/cancelled", encParams), nil
		}, &jsonrpc2.Request{Method: "notifications/cancelled", Notif: true, Params: &rawParams}},
		{"result", func() ([]byte, error) {
			return appendResult(nil, jsonrpc2.ID{Num: 9}, encParams), nil
		}, &jsonrpc2.Response{ID: jsonrpc2.ID{Num: 9}, Result: &rawParams}},
		{"error", func() ([]byte, error) {
			return appendError(nil, jsonrpc2.ID{Str: "x", IsString: true}, &jsonrpc2.Error{Code: -1, Message: "<no>", Data: rawPtr(`{"a":1}`)})
		}, &jsonrpc2.Response{ID: jsonrpc2.ID{Str: "x", IsString: true}, Error: &jsonrpc2.Error{Code: -1, Message: "<no>", Data: rawPtr(`{"a":1}`)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.got()
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("conn wrote  %s\njsonrpc2's %s", got, want)
			}
		})
	}
}

// Replies written at once by many goroutines all arrive whole.
func TestConnConcurrentCalls(t *testing.T) {
	p := newConnPair(t, nativemsg.MaxLink)
	const calls = 50
	// The peer echoes each request's params as its result.
	go func() {
		for range calls {
			_ = p.raw.SetReadDeadline(time.Now().Add(30 * time.Second))
			f, err := nativemsg.ReadFrame(p.raw, nativemsg.MaxLink)
			if err != nil {
				return
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(f, &m) != nil {
				return
			}
			reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": m.Params})
			if nativemsg.WriteFrame(p.raw, reply, nativemsg.MaxLink) != nil {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			id := "local-c:" + strconv.Itoa(i)
			res, err := p.conn.Call(context.Background(), id, "echo", []int{i})
			if err == nil && string(res) != "["+strconv.Itoa(i)+"]" {
				err = errors.New(id + " got " + string(res))
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// parseMessage finds the members encoding/json finds, in any valid JSON,
// and never reads past a frame.
func FuzzParseMessage(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":"local-x:1","result":{"content":[{"type":"text","text":"a\"}]"}]}}`,
		`{"jsonrpc":"2.0","method":"m","params":[1,{"a":"}"}],"id":null}`,
		` { "id" : 1 , "error" : { "code" : 1 , "message" : "" } } `,
		`{"\u0069d":"x","result":null,"id":"y"}`,
		`[1]`, `"s"`, `null`, `{}`, `{"method":true}`, `{"method":"\ud800"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, frame string) {
		b := []byte(frame)
		if !json.Valid(b) {
			return
		}
		m, err := parseMessage(b)
		var members map[string]json.RawMessage
		if json.Unmarshal(b, &members) != nil {
			if err == nil {
				t.Fatalf("%q is not an object, yet parseMessage accepted it", frame)
			}
			return
		}
		member := func(name string, nullIsAbsent bool) []byte {
			v, ok := members[name]
			if !ok || (nullIsAbsent && string(v) == "null") {
				return nil
			}
			return v
		}
		for _, c := range []struct {
			name string
			got  []byte
			null bool
		}{{"id", m.id, true}, {"method", m.method, true}, {"params", m.params, false}, {"result", m.result, false}, {"error", m.error, true}} {
			want := member(c.name, c.null)
			if (want == nil) != (c.got == nil) || !bytes.Equal(want, c.got) {
				t.Fatalf("%q: member %s = %q, encoding/json finds %q", frame, c.name, c.got, want)
			}
		}
		if err == nil && m.isRequest() {
			_, _ = m.request()
		} else if err == nil {
			_, _, _ = m.responseID()
			_, _ = m.responseError()
		}
	})
}

// Encoded params go onto the link as they are, where any other value is
// marshalled (and so compacted).
func TestConnWritesEncodedParamsAsTheyAre(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params any
		want   string
	}{
		{"encoded, with its whitespace", Encoded("{ \"a\" : [1, 2] }"), `{"id":"c1","jsonrpc":"2.0","method":"m","params":{ "a" : [1, 2] }}`},
		{"raw message, compacted", json.RawMessage("{ \"a\" : [1, 2] }"), `{"id":"c1","jsonrpc":"2.0","method":"m","params":{"a":[1,2]}}`},
		{"none", nil, `{"id":"c1","jsonrpc":"2.0","method":"m"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newConnPair(t, nativemsg.MaxLink)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _, _ = p.conn.Call(ctx, "c1", "m", tc.params) }()
			_ = p.raw.SetReadDeadline(time.Now().Add(5 * time.Second))
			f, err := nativemsg.ReadFrame(p.raw, nativemsg.MaxLink)
			if err != nil {
				t.Fatal(err)
			}
			if string(f) != tc.want {
				t.Errorf("the link carried %s\nwant               %s", f, tc.want)
			}
		})
	}
}
