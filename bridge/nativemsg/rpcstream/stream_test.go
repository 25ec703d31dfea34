package rpcstream

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
)

// rawPeer is the far end of a link, written frame by frame by the test.
type rawPeer struct {
	t *testing.T
	c net.Conn
}

func (p rawPeer) send(b []byte) {
	p.t.Helper()
	if err := nativemsg.WriteFrame(p.c, b, nativemsg.MaxLink); err != nil {
		p.t.Fatal(err)
	}
}

func (p rawPeer) recv() map[string]any {
	p.t.Helper()
	_ = p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := nativemsg.ReadFrame(p.c, nativemsg.MaxLink)
	if err != nil {
		p.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(f, &m); err != nil {
		p.t.Fatal(err)
	}
	return m
}

func TestStreamSurvivesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name     string
		frame    []byte
		wantCode float64
		wantText string
	}{
		{"bad JSON", []byte(`{"jsonrpc":"2.0",`), rpccode.ParseError, "not valid JSON"},
		{"not JSON-RPC", []byte(`{"hello":1}`), rpccode.InvalidRequest, "not a JSON-RPC"},
		{"empty frame", nil, rpccode.InvalidRequest, "empty message"},
		{"over the limit", []byte(`"` + strings.Repeat("x", 2000) + `"`), rpccode.InvalidRequest, "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			peer := rawPeer{t, b}
			handler := jsonrpc2.HandlerWithError(func(ctx context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
				return "pong", nil
			})
			conn := jsonrpc2.NewConn(context.Background(), New(a, 1024), handler)
			defer conn.Close()

			go func() {
				if tc.frame == nil {
					_, _ = b.Write(nativemsg.AppendHeader(nil, 0))
				} else if len(tc.frame) > 1024 {
					_, _ = b.Write(append(nativemsg.AppendHeader(nil, uint32(len(tc.frame))), tc.frame...))
				} else {
					_ = nativemsg.WriteFrame(b, tc.frame, nativemsg.MaxLink)
				}
			}()
			reply := peer.recv()
			e, _ := reply["error"].(map[string]any)
			if e == nil || e["code"] != tc.wantCode || !strings.Contains(e["message"].(string), tc.wantText) || reply["id"] != nil {
				t.Fatalf("reply to bad frame = %v, want error %v mentioning %q with id null", reply, tc.wantCode, tc.wantText)
			}
			// The link still works.
			go peer.send([]byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`))
			if r := peer.recv(); r["result"] != "pong" || r["id"] != float64(7) {
				t.Fatalf("after bad input, ping got %v", r)
			}
		})
	}
}

func TestStreamAnswersOversizedReplyWithError(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	peer := rawPeer{t, b}
	handler := jsonrpc2.HandlerWithError(func(ctx context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request) (any, error) {
		return strings.Repeat("y", 4096), nil
	})
	conn := jsonrpc2.NewConn(context.Background(), New(a, 1024), handler)
	defer conn.Close()
	go peer.send([]byte(`{"jsonrpc":"2.0","id":"big","method":"get"}`))
	r := peer.recv()
	e, _ := r["error"].(map[string]any)
	if r["id"] != "big" || e == nil || e["code"] != float64(rpccode.InternalError) {
		t.Fatalf("oversized reply became %v; want an error reply with id \"big\"", r)
	}
}
