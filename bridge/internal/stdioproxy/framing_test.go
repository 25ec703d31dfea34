package stdioproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

func TestLineReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		max      int
		want     []string // lines, or "ERR:too long"
	}{
		{"lines", "{\"a\":1}\n{\"b\":2}\n", 64, []string{"{\"a\":1}\n", "{\"b\":2}\n"}},
		{"last line without newline", "one\ntwo", 64, []string{"one\n", "two"}},
		{"CRLF", "one\r\n", 64, []string{"one\r\n"}},
		{"too long, then on", "0123456789abcdef\nok\n", 8, []string{"ERR:too long", "ok\n"}},
		{"too long at EOF", "0123456789abcdef", 8, []string{"ERR:too long"}},
		{"empty", "", 8, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLineReader(strings.NewReader(tc.in), tc.max)
			var got []string
			for {
				line, err := r.next()
				if errors.Is(err, io.EOF) {
					break
				}
				switch {
				case errors.Is(err, errLineTooLong):
					got = append(got, "ERR:too long")
				case err != nil:
					t.Fatalf("next: %v", err)
				default:
					got = append(got, string(line))
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("lines = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadReply reads a call's event stream (SSE reading itself is
// mcphttp's, tested there): up to the answer and no further, passing the
// other messages to the client and keeping the last event id to resume
// from.
func TestReadReply(t *testing.T) {
	const (
		note   = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":%d}}`
		answer = `{"jsonrpc":"2.0","id":1,"result":{}}`
	)
	n := func(i int) string { return fmt.Sprintf(note, i) }
	for _, tc := range []struct {
		name, in string
		lastID   string   // what the caller resumed from
		answered bool     // the answer to id 1 came
		last     string   // the event id to resume from
		client   []string // what reached the client
	}{
		{"stop at the answer", "id: s_1\ndata: " + n(1) + "\n\nid: s_2\ndata: " + answer + "\n\nid: s_3\ndata: " + n(3) + "\n\n", "",
			true, "s_2", []string{n(1)}},
		{"answer without event ids", "data: " + n(1) + "\n\nevent: message\ndata: " + answer + "\n\n", "",
			true, "", []string{n(1)}},
		{"a priming event counts", "id: s_0\ndata:\n\n", "", false, "s_0", nil},
		{"an id-only event counts", "id: s_0\n\n", "", false, "s_0", nil},
		{"other events are not messages", "event: ping\nid: s_1\ndata: " + n(1) + "\n\n", "", false, "s_1", nil},
		{"resumed: ids start from the caller's", ": ping\n\ndata: " + n(1) + "\n\n", "s_4", false, "s_4", []string{n(1)}},
		{"an empty id keeps the last one", "id: s_1\ndata: " + n(1) + "\n\nid\ndata: " + n(2) + "\n\n", "", false, "s_1", []string{n(1), n(2)}},
		{"malformed messages are dropped", "id: s_1\ndata: {nope\n\n", "", false, "s_1", nil},
		// The resume logic takes it from the last event that arrived whole.
		{"cut inside an event", "id: s_1\ndata: " + n(1) + "\n\nid: s_2\ndata: " + answer, "", false, "s_1", []string{n(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p, err := newProxy(Options{Endpoint: "http://bridge.invalid/mcp", Stdin: strings.NewReader(""), Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			p.ctx = context.Background()
			resp := &http.Response{
				StatusCode: http.StatusOK,
				Header:     http.Header{"Content-Type": {mcphttp.ContentTypeSSE}},
				Body:       io.NopCloser(strings.NewReader(tc.in)),
			}
			want, _ := jsonrpc.MakeID(float64(1))
			got, last, err := p.readReply(&link{}, resp, want, tc.lastID)
			if err != nil {
				t.Fatalf("readReply: %v", err)
			}
			if (got != nil) != tc.answered || got != nil && got.ID != want {
				t.Errorf("answer = %+v, want answered %v", got, tc.answered)
			}
			if last != tc.last {
				t.Errorf("last event id = %q, want %q", last, tc.last)
			}
			if lines := strings.Fields(out.String()); strings.Join(lines, "|") != strings.Join(tc.client, "|") {
				t.Errorf("the client got %q, want %q", lines, tc.client)
			}
		})
	}
}
