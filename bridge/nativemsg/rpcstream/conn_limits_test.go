package rpcstream

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
)

// limitPair is a Conn with a small limit on one end of a pipe and a raw
// peer on the other. Its handler answers "fail-big" with an error whose
// message is larger than the link's limit, and anything else with "pong".
func limitPair(t *testing.T, limit int) (rawPeer, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	conn := NewConn(context.Background(), New(a, limit), func(_ context.Context, c *Conn, req *jsonrpc2.Request) {
		switch {
		case req.Notif:
		case req.Method == "fail-big":
			_ = c.ReplyWithError(req.ID, &jsonrpc2.Error{Code: rpccode.InvalidParams, Message: strings.Repeat("m", 2*limit)})
		default:
			_ = c.Reply(req.ID, "pong")
		}
	}, nil)
	t.Cleanup(func() { conn.Close(); b.Close() })
	return rawPeer{t, b}, b
}

// sendInOrder writes the frames from one goroutine, so they arrive in
// this order (the conn handles each before it reads the next).
func sendInOrder(raw net.Conn, frames ...string) {
	go func() {
		for _, f := range frames {
			if nativemsg.WriteFrame(raw, []byte(f), nativemsg.MaxLink) != nil {
				return
			}
		}
	}()
}

// An error reply too large for the link must still answer its request:
// Stream.WriteObject (the link's writer before rpcstream.Conn) replaced
// any oversized response, error replies included, by a short error with
// the same id, and so must Conn.ReplyWithError, or the other end waits for
// an answer that never comes (WriteFrame refuses the frame).
func TestConnOversizedErrorReplyStillAnswers(t *testing.T) {
	const limit = 1024
	peer, raw := limitPair(t, limit)
	sendInOrder(raw,
		`{"jsonrpc":"2.0","id":"e","method":"fail-big"}`,
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	r := peer.recv()
	if r["id"] != "e" {
		t.Fatalf("the first frame back is %v: the request with id \"e\" got no answer (its error reply exceeded the limit and was dropped)", r)
	}
	if e, _ := r["error"].(map[string]any); e == nil {
		t.Fatalf("reply to id \"e\" = %v, want an error", r)
	}

	// What the old path did with the same response.
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := New(a, limit)
	go func() {
		_ = s.WriteObject(&jsonrpc2.Response{ID: jsonrpc2.ID{Str: "e", IsString: true},
			Error: &jsonrpc2.Error{Code: rpccode.InvalidParams, Message: strings.Repeat("m", 2*limit)}})
	}()
	if old := (rawPeer{t, b}).recv(); old["id"] != "e" || old["error"] == nil {
		t.Fatalf("Stream.WriteObject wrote %v, want a short error with id \"e\"", old)
	}
}

// A frame the conn rejects is answered (id null) whatever its size: the
// reject message must not grow with the frame. A request or reply whose id
// is a large array or object near the limit would, quoted whole in the
// message, make a reject larger than the link allows, which writeFrame
// refuses: no answer at all (and the whole id in the Warn log through
// OnBadMessage). jsonrpc2 said "unexpected ID type: []interface {}" and
// answered.
func TestConnRejectOfLargeIDIsAnswered(t *testing.T) {
	const limit = 1024
	for _, tc := range []struct{ name, head, tail string }{
		{"request", `{"jsonrpc":"2.0","method":"ping","id":`, `}`},
		{"reply", `{"jsonrpc":"2.0","result":1,"id":`, `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer, raw := limitPair(t, limit)
			id := "[0" + strings.Repeat(",0", (limit-len(tc.head)-len(tc.tail)-3)/2) + "]"
			frame := tc.head + id + tc.tail
			if len(frame) > limit {
				t.Fatalf("test frame of %d bytes is over the limit", len(frame))
			}
			sendInOrder(raw, frame, `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
			r := peer.recv()
			e, _ := r["error"].(map[string]any)
			if e == nil || e["code"] != float64(rpccode.InvalidRequest) || r["id"] != nil {
				t.Fatalf("the first frame back is %v: the %d-byte frame with a %d-byte id got no reject (its message quotes the id and exceeded the %d-byte limit)",
					r, len(frame), len(id), limit)
			}
		})
	}
}
