package gwbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// fakeEcho answers an echo request; crossed answers as if for session 99.
func fakeEcho(body []byte, crossed bool) (reply []byte, isRequest bool, err error) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Arguments struct {
				Message string `json:"message"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, false, err
	}
	switch req.Method {
	case "initialize":
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q}}`, req.ID, protocolVersion), true, nil
	case "tools/call":
		text := "Echo: " + req.Params.Arguments.Message
		if crossed {
			text = "Echo: s99-c2"
		}
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%q}]}}`, req.ID, text), true, nil
	}
	return nil, false, nil // a notification
}

// fakeStreamable is a Streamable HTTP endpoint that answers as JSON or as an
// event stream with a notification before the reply.
func fakeStreamable(asStream, crossed bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body [4096]byte
		n, _ := r.Body.Read(body[:])
		reply, isRequest, err := fakeEcho(body[:n], crossed)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodDelete {
			return
		}
		if sid := r.Header.Get("Mcp-Session-Id"); sid == "" {
			w.Header().Set("Mcp-Session-Id", "sid-1")
		} else if sid != "sid-1" {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		if !isRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if !asStream {
			w.Header().Set("Content-Type", "application/json")
			w.Write(reply)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
		fmt.Fprintf(w, "event: message\r\nid: 1\r\ndata: %s\r\n\r\n", reply)
	})
}

// fakeSSE is an HTTP+SSE endpoint for one session.
func fakeSSE(crossed bool) http.Handler {
	out := make(chan []byte, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: /message?sessionId=1\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case m := <-out:
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /message", func(w http.ResponseWriter, r *http.Request) {
		var body [4096]byte
		n, _ := r.Body.Read(body[:])
		reply, isRequest, err := fakeEcho(body[:n], crossed)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if isRequest {
			out <- reply
			if crossed && !bytes.Contains(body[:n], []byte(`"initialize"`)) { // and a reply to a call never made
				out <- []byte(`{"jsonrpc":"2.0","id":77,"result":{"content":[{"type":"text","text":"Echo: s99-c77"}]}}`)
			}
		}
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

// TestSessions runs one suite over both HTTP transports: initialize, then
// an echo call, rightly or crossed with another session's reply.
func TestSessions(t *testing.T) {
	tests := []struct {
		name          string
		handler       http.Handler
		path          string
		sse           bool
		wantErr       error
		wantMisrouted int64
	}{
		{"streamable JSON", fakeStreamable(false, false), "/mcp", false, nil, 0},
		{"streamable event stream", fakeStreamable(true, false), "/mcp", false, nil, 0},
		{"streamable crossed", fakeStreamable(true, true), "/mcp", false, errMisrouted, 1},
		{"SSE", fakeSSE(false), "/sse", true, nil, 0},
		{"SSE crossed", fakeSSE(true), "/sse", true, errMisrouted, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var (
				s   session
				err error
			)
			if tt.sse {
				s, err = openSSE(ctx, srv.Client(), srv.URL+tt.path, 1)
			} else {
				s, err = openStreamable(ctx, srv.Client(), srv.URL+tt.path, 1)
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer s.close()
			if err := s.call(ctx, 1); !errors.Is(err, tt.wantErr) {
				t.Fatalf("call = %v, want %v", err, tt.wantErr)
			}
			// The SSE transport's stray reply may trail the call's.
			testutil.WaitFor(t, "the stray reply", func() bool { return s.replies().misrouted.Load() >= tt.wantMisrouted })
			if got := s.replies().misrouted.Load(); got != tt.wantMisrouted {
				t.Errorf("misrouted = %d, want %d", got, tt.wantMisrouted)
			}
		})
	}
}
