package gwbench

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []sseEvent
		err    error // after the events
	}{
		{
			name:   "one message",
			stream: "event: message\ndata: {\"id\":1}\n\n",
			want:   []sseEvent{{Type: "message", Data: `{"id":1}`}},
			err:    io.EOF,
		},
		{
			name:   "no event field means message",
			stream: "data: x\n\n",
			want:   []sseEvent{{Type: "message", Data: "x"}},
			err:    io.EOF,
		},
		{
			name:   "endpoint event of the SSE transport",
			stream: "event: endpoint\ndata: /message?sessionId=abc\n\n",
			want:   []sseEvent{{Type: "endpoint", Data: "/message?sessionId=abc"}},
			err:    io.EOF,
		},
		{
			name:   "CRLF line endings",
			stream: "event: message\r\ndata: a\r\nid: 7\r\n\r\n",
			want:   []sseEvent{{Type: "message", Data: "a", ID: "7"}},
			err:    io.EOF,
		},
		{
			name:   "data lines joined by newline",
			stream: "data: first\ndata: second\ndata\n\n",
			want:   []sseEvent{{Type: "message", Data: "first\nsecond\n"}},
			err:    io.EOF,
		},
		{
			name:   "only one leading space is dropped",
			stream: "data:no space\n\ndata:  two spaces\n\n",
			want:   []sseEvent{{Type: "message", Data: "no space"}, {Type: "message", Data: " two spaces"}},
			err:    io.EOF,
		},
		{
			name:   "comments and unknown fields are skipped",
			stream: ": keep-alive\nretry: 1000\nfoo: bar\ndata: x\n\n",
			want:   []sseEvent{{Type: "message", Data: "x"}},
			err:    io.EOF,
		},
		{
			name:   "an event without data is not dispatched, nor is its type kept",
			stream: "event: ping\n\ndata: x\n\n",
			want:   []sseEvent{{Type: "message", Data: "x"}},
			err:    io.EOF,
		},
		{
			name:   "several events",
			stream: "data: 1\n\n\n\ndata: 2\n\n",
			want:   []sseEvent{{Type: "message", Data: "1"}, {Type: "message", Data: "2"}},
			err:    io.EOF,
		},
		{
			name:   "stream ends inside an event",
			stream: "data: 1\n\ndata: 2\n",
			want:   []sseEvent{{Type: "message", Data: "1"}},
			err:    io.ErrUnexpectedEOF,
		},
		{
			name:   "stream ends inside a line",
			stream: "data: 1",
			err:    io.ErrUnexpectedEOF,
		},
		{
			name:   "empty stream",
			stream: "",
			err:    io.EOF,
		},
		{
			name:   "a line larger than the limit",
			stream: "data: " + strings.Repeat("x", maxEventSize) + "\n\n",
			err:    errEventTooLarge,
		},
		{
			name:   "an event larger than the limit in small lines",
			stream: strings.Repeat("data: "+strings.Repeat("x", 1<<20)+"\n", 5) + "\n",
			err:    errEventTooLarge,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time as well: events split across reads.
			for _, r := range []io.Reader{strings.NewReader(tt.stream), iotest.OneByteReader(strings.NewReader(tt.stream))} {
				events := newSSEReader(r)
				var got []sseEvent
				var err error
				for {
					var ev sseEvent
					if ev, err = events.next(); err != nil {
						break
					}
					got = append(got, ev)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("events = %q, want %q", got, tt.want)
				}
				if !errors.Is(err, tt.err) {
					t.Errorf("error = %v, want %v", err, tt.err)
				}
			}
		})
	}
}
