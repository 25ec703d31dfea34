package gwbench

import (
	"errors"
	"testing"
)

func TestMuxRouting(t *testing.T) {
	resp := func(s string) *rpcMessage {
		ms, err := decodeMessages([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return ms[0]
	}
	tests := []struct {
		name          string
		replies       []string // delivered after the call s3-c1 (id 1) began
		wantErr       error    // how the call settles; nil: it must settle rightly
		wantMisrouted int64
		rpcErr        bool
	}{
		{
			name:    "its own reply",
			replies: []string{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: s3-c1"}]}}`},
		},
		{
			name: "another session's reply with the same id, then its own",
			replies: []string{
				`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: s4-c1"}]}}`,
				`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: s3-c1"}]}}`,
			},
			wantErr:       errMisrouted,
			wantMisrouted: 1, // its own reply, late, is not counted again
		},
		{
			name: "a reply to an id not in flight, then its own",
			replies: []string{
				`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Echo: s4-c2"}]}}`,
				`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: s3-c1"}]}}`,
			},
			wantMisrouted: 1,
		},
		{
			name: "a string id is not ours",
			replies: []string{
				`{"jsonrpc":"2.0","id":"1","result":{}}`,
				`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: s3-c1"}]}}`,
			},
			wantMisrouted: 1,
		},
		{
			name: "server notifications and requests are ignored",
			replies: []string{
				`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`,
				`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`,
				`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: s3-c1"}]}}`,
			},
		},
		{
			name:    "a JSON-RPC error settles the call as an error, not a misroute",
			replies: []string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no such tool"}}`},
			rpcErr:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMux()
			id, msg, p := m.begin(3, true)
			if id != 1 || msg != "s3-c1" {
				t.Fatalf("begin = %d, %q; want 1, s3-c1", id, msg)
			}
			for _, r := range tt.replies {
				m.deliver(resp(r))
			}
			var err error
			select {
			case r := <-p.done:
				err = settled(r)
			default:
				t.Fatal("the call did not settle")
			}
			var rpcErr *rpcError
			switch {
			case tt.rpcErr:
				if !errors.As(err, &rpcErr) {
					t.Errorf("settled with %v, want a JSON-RPC error", err)
				}
			case !errors.Is(err, tt.wantErr):
				t.Errorf("settled with %v, want %v", err, tt.wantErr)
			}
			if got := m.misrouted.Load(); got != tt.wantMisrouted {
				t.Errorf("misrouted = %d, want %d", got, tt.wantMisrouted)
			}
		})
	}
}

func TestMuxFailAll(t *testing.T) {
	m := newMux()
	_, _, before := m.begin(1, true)
	gone := errors.New("gone")
	m.failAll(gone)
	_, _, after := m.begin(1, true)
	for name, p := range map[string]*pendingCall{"in flight": before, "begun after": after} {
		select {
		case r := <-p.done:
			if !errors.Is(settled(r), gone) {
				t.Errorf("%s: settled with %v, want %v", name, settled(r), gone)
			}
		default:
			t.Errorf("%s: not settled", name)
		}
	}
}
