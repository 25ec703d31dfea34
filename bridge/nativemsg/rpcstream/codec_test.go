package rpcstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// recordingStream hands jsonrpc2 the messages of in one by one and keeps
// every object jsonrpc2 writes.
type recordingStream struct {
	in      chan []byte
	written chan any
}

func (s *recordingStream) ReadObject(v any) error {
	b, ok := <-s.in
	if !ok {
		return io.EOF
	}
	return unmarshal(b, v)
}

func (s *recordingStream) WriteObject(obj any) error { s.written <- obj; return nil }
func (s *recordingStream) Close() error              { return nil }

// TestCodecMatchesEncodingJSON holds marshal and unmarshal to what
// json.Marshal and json.Unmarshal make of jsonrpc2's messages: the same
// bytes out, the same request in.
func TestCodecMatchesEncodingJSON(t *testing.T) {
	s := &recordingStream{in: make(chan []byte), written: make(chan any, 8)}
	got := make(chan *jsonrpc2.Request, 1)
	conn := jsonrpc2.NewConn(context.Background(), s, jsonrpc2.HandlerWithError(
		func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
			got <- r
			return map[string]any{"text": "<b>&amp;</b> \u2028 \"q\" é", "n": 1.5}, nil
		}))
	defer conn.Close()
	ctx := context.Background()

	const req = " \n{\"jsonrpc\":\"2.0\",\"id\":\"local-x\",\"method\":\"tools/call\",\"params\":{\"a\":\"<&>\\u2028\",\"b\":[1,null]}}\r\n"
	s.in <- []byte(req)
	r := <-got
	var want jsonrpc2.Request
	if err := json.Unmarshal([]byte(req), &want); err != nil {
		t.Fatal(err)
	}
	if r.Method != want.Method || r.ID != want.ID || !bytes.Equal(*r.Params, *want.Params) {
		t.Errorf("read %+v, want %+v", r, want)
	}
	if err := conn.Notify(ctx, "n", map[string]any{"x": "<script>\u2029"}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the reply and the notification
		obj := <-s.written
		fast, err := marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fast, slow) {
			t.Errorf("marshal = %s\njson.Marshal = %s", fast, slow)
		}
	}
	if b, err := marshal(map[string]any{"k": json.RawMessage(`{ "a" : 1 }`)}); err != nil || string(b) != `{"k":{"a":1}}` {
		t.Errorf("marshal of another type = %s, %v; want json.Marshal's", b, err)
	}
}

func TestUnmarshalRejectsWhatJSONRejects(t *testing.T) {
	for _, frame := range []string{"", "  ", "{", `{"jsonrpc":"2.0"} x`, "\v{}"} {
		var m struct{ jsonrpc2.Request }
		errJSON := json.Unmarshal([]byte(frame), &m.Request)
		errFast := unmarshal([]byte(frame), &m.Request)
		if (errJSON == nil) != (errFast == nil) {
			t.Errorf("%q: unmarshal error %v, json.Unmarshal's %v", frame, errFast, errJSON)
		}
	}
}

// BenchmarkCodec reads and writes a tools/call request and its reply as
// jsonrpc2 hands them to the stream, through json.Marshal and
// json.Unmarshal ("encoding-json") and through marshal and unmarshal
// ("stream"), and as Conn does ("conn"), in one run: the ratios are what
// the stream and the conn save a message. The conn's figure also holds
// the params' encoding, which jsonrpc2 does before the stream sees the
// request.
func BenchmarkCodec(b *testing.B) {
	s := &recordingStream{in: make(chan []byte), written: make(chan any, 1)}
	conn := jsonrpc2.NewConn(context.Background(), s, jsonrpc2.HandlerWithError(
		func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) (any, error) { return nil, nil }))
	defer conn.Close()
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"x"},"_meta":{"sessionId":"local-0123456789abcdefghijklmnop"}}`)
	go conn.Call(context.Background(), "tools/call", params, nil, jsonrpc2.PickID(jsonrpc2.ID{Str: "local-0123456789abcdefghijklmnop:7", IsString: true}))
	req := <-s.written
	reply := []byte(`{"jsonrpc":"2.0","id":"local-0123456789abcdefghijklmnop:7","result":{"content":[{"type":"text","text":"x"}]}}`)
	for _, c := range []struct {
		name      string
		marshal   func(any) ([]byte, error)
		unmarshal func([]byte, any) error
	}{
		{"encoding-json", json.Marshal, json.Unmarshal},
		{"stream", marshal, unmarshal},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.marshal(req); err != nil {
					b.Fatal(err)
				}
				var m jsonrpc2.Response
				if err := c.unmarshal(reply, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("conn", func(b *testing.B) {
		b.ReportAllocs()
		id := "local-0123456789abcdefghijklmnop:7"
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			enc, err := json.Marshal(params)
			if err != nil {
				b.Fatal(err)
			}
			buf = appendRequest(buf[:0], &id, "tools/call", enc)
			if !json.Valid(reply) {
				b.Fatal("reply not valid")
			}
			m, err := parseMessage(reply)
			if err != nil {
				b.Fatal(err)
			}
			if got, _, err := m.responseID(); err != nil || string(got) != id {
				b.Fatalf("reply id %q, %v", got, err)
			}
			if e, err := m.responseError(); e != nil || err != nil {
				b.Fatal(e, err)
			}
		}
	})
}
