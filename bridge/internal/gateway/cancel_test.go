package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// holderState is what the holder child was sent: the ids of its calls to
// "wait", and the request ids notifications/cancelled named.
type holderState struct {
	Held      []json.RawMessage `json:"held"`
	Cancelled []json.RawMessage `json:"cancelled"`
}

// post sends one message to the gateway and returns the reply's body; it
// may run on any goroutine.
func post(ctx context.Context, url, body string, hdr map[string]string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// statelessCall is a 2026-07-28 tools/call of tool: no session.
func statelessCall(tool string) (string, map[string]string) {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, tool),
		map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool}
}

// A client session's end cancels its calls in flight at the shared child,
// and only its own: another session's call and the gateway's stateless
// one-request sessions that ended with their answer are left alone.
func TestEndedSessionCancelsOnlyItsCalls(t *testing.T) {
	tests := []struct {
		name string
		// call sends tools/call "wait" as the session that will end, and
		// returns how to end it.
		call func(t *testing.T, url string, done chan<- []byte) (end func())
	}{
		{"stateless request whose client leaves", func(t *testing.T, url string, done chan<- []byte) func() {
			ctx, cancel := context.WithCancel(context.Background())
			body, hdr := statelessCall("wait")
			go func() {
				b, _ := post(ctx, url, body, hdr)
				done <- b
			}()
			return cancel
		}},
		{"session ended by DELETE", func(t *testing.T, url string, done chan<- []byte) func() {
			sid := initSession(t, url)
			go func() {
				b, err := post(context.Background(), url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{}}}`,
					map[string]string{"Mcp-Session-Id": sid})
				if err != nil {
					b = []byte(err.Error())
				}
				done <- b
			}()
			return func() {
				req, _ := http.NewRequest(http.MethodDelete, url, nil)
				req.Header.Set("Mcp-Session-Id", sid)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("DELETE: status %d, want 204", resp.StatusCode)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTestGateway(t, map[string]stdio.ServerConfig{"hold": testChild(t, "holder")}, Options{})
			url := tg.srv.URL + "/servers/hold/mcp"

			// The bystander: a session whose call stays in flight throughout.
			sid := initSession(t, url)
			bystander := make(chan []byte, 1)
			go func() {
				b, err := post(context.Background(), url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{}}}`,
					map[string]string{"Mcp-Session-Id": sid})
				if err != nil {
					b = []byte(err.Error())
				}
				bystander <- b
			}()
			waitHolder(t, url, "the bystander's call held", func(s holderState) bool { return len(s.Held) == 1 })

			ended := make(chan []byte, 1)
			end := tt.call(t, url, ended)
			st := waitHolder(t, url, "the second call held", func(s holderState) bool { return len(s.Held) == 2 })
			end()
			st = waitHolder(t, url, "a notifications/cancelled", func(s holderState) bool { return len(s.Cancelled) > 0 })
			if len(st.Cancelled) != 1 || string(st.Cancelled[0]) != string(st.Held[1]) {
				t.Fatalf("the child was sent %s and cancels for %s; want exactly one cancel, for the ended session's call %s",
					st.Held, st.Cancelled, st.Held[1])
			}
			if got := <-ended; tt.name == "session ended by DELETE" && !bytes.Contains(got, []byte("session ended before the server answered")) {
				t.Errorf("the ended session's call got %q, want the error saying its session ended", got)
			}

			// Release: the bystander's call is answered; nothing more was
			// cancelled (the state calls, stateless sessions of their own,
			// ended answered).
			body, hdr := statelessCall("release")
			if _, err := post(context.Background(), url, body, hdr); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-bystander:
				if !bytes.Contains(got, []byte(`"released"`)) {
					t.Errorf("the bystander's call got %q, want its answer", got)
				}
			case <-time.After(20 * time.Second): // a deadlock guard only
				t.Fatal("the bystander's call was never answered")
			}
			if st := holderNow(t, url); len(st.Cancelled) != 1 {
				t.Errorf("cancels for %s after the release, want only the ended session's", st.Cancelled)
			}
		})
	}
}

// initSession opens a 2025-06-18 session and returns its id.
func initSession(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(initBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: status %d and no session id", resp.StatusCode)
	}
	return sid
}

// holderNow asks the holder child what it was sent.
func holderNow(t *testing.T, url string) holderState {
	t.Helper()
	body, hdr := statelessCall("state")
	b, err := post(context.Background(), url, body, hdr)
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	var st holderState
	if err := json.Unmarshal(b, &reply); err != nil || len(reply.Result.Content) != 1 ||
		json.Unmarshal([]byte(reply.Result.Content[0].Text), &st) != nil {
		t.Fatalf("state: %q", b)
	}
	return st
}

// waitHolder asks the holder child until cond holds of what it was sent.
func waitHolder(t *testing.T, url, what string, cond func(holderState) bool) holderState {
	t.Helper()
	var st holderState
	defer func() {
		if t.Failed() {
			t.Logf("the child was sent %s and cancels for %s", st.Held, st.Cancelled)
		}
	}()
	testutil.WaitFor(t, what, func() bool { st = holderNow(t, url); return cond(st) })
	return st
}
