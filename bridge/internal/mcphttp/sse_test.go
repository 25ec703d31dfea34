package mcphttp

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

const testMax = 4 << 20

// ev is an event as a test writes it.
func ev(name, id, data string) Event { return Event{Name: name, ID: id, Data: []byte(data)} }

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []Event
		last   string // LastEventID at the end
		err    error  // after the events
	}{
		{"one message", "event: message\ndata: {\"id\":1}\n\n", []Event{ev("message", "", `{"id":1}`)}, "", io.EOF},
		{"no event field means message", "data: x\n\n", []Event{ev("message", "", "x")}, "", io.EOF},
		{"endpoint event of the SSE transport", "event: endpoint\ndata: /message?sessionId=abc\n\n", []Event{ev("endpoint", "", "/message?sessionId=abc")}, "", io.EOF},
		{"CRLF line endings", "event: message\r\ndata: a\r\nid: 7\r\n\r\n", []Event{ev("message", "7", "a")}, "7", io.EOF},
		{"data lines joined by newline", "data: first\ndata: second\ndata\n\n", []Event{ev("message", "", "first\nsecond\n")}, "", io.EOF},
		{"only one leading space is dropped", "data:no space\n\ndata:  two spaces\n\n", []Event{ev("message", "", "no space"), ev("message", "", " two spaces")}, "", io.EOF},
		{"comments and unknown fields are skipped", ": keep-alive\nretry: 1000\nfoo: bar\ndata: x\n\n", []Event{ev("message", "", "x")}, "", io.EOF},
		{"an event without data is not dispatched, nor is its type kept", "event: ping\n\ndata: x\n\n", []Event{ev("message", "", "x")}, "", io.EOF},
		{"several events", "data: 1\n\n\n\ndata: 2\n\n", []Event{ev("message", "", "1"), ev("message", "", "2")}, "", io.EOF},
		{"stream ends inside an event", "data: 1\n\ndata: 2\n", []Event{ev("message", "", "1")}, "", io.ErrUnexpectedEOF},
		{"stream ends inside a line", "data: 1", nil, "", io.ErrUnexpectedEOF},
		{"empty stream", "", nil, "", io.EOF},
		{"a line larger than the limit", "data: " + strings.Repeat("x", testMax) + "\n\n", nil, "", ErrEventTooLarge},
		{"an event larger than the limit in small lines", strings.Repeat("data: "+strings.Repeat("x", 1<<20)+"\n", 5) + "\n", nil, "", ErrEventTooLarge},

		// Event ids, as a client resuming a stream needs them.
		{"the SDK's priming event: empty data is dispatched", "event: prime\nid: S_0\ndata: \n\nevent: message\nid: S_1\ndata: {}\n\n",
			[]Event{ev("prime", "S_0", ""), ev("message", "S_1", "{}")}, "S_1", io.EOF},
		{"an id without data is not dispatched but counts", "id: s_0\n\n", nil, "s_0", io.EOF},
		{"an event's id is its own, the last id stays", "id: a_1\ndata: x\n\ndata: y\n\n", []Event{ev("message", "a_1", "x"), ev("message", "", "y")}, "a_1", io.EOF},
		{"an empty id line resets the last id", "id: a_1\ndata: x\n\nid\ndata: y\n\n", []Event{ev("message", "a_1", "x"), ev("message", "", "y")}, "", io.EOF},
		{"an id with NUL is ignored", "id: a_1\ndata: x\n\nid: b\x00\ndata: y\n\n", []Event{ev("message", "a_1", "x"), ev("message", "", "y")}, "a_1", io.EOF},
		{"an unfinished event's id does not count", "id: a_1\ndata: x\n\nid: a_2\ndata: y\n", []Event{ev("message", "a_1", "x")}, "a_1", io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time as well: events split across reads.
			for _, r := range []io.Reader{strings.NewReader(tt.stream), iotest.OneByteReader(strings.NewReader(tt.stream))} {
				events := NewSSEReader(r, testMax)
				var got []Event
				var err error
				for {
					var e Event
					if e, err = events.Next(); err != nil {
						break
					}
					got = append(got, e)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("events = %q, want %q", got, tt.want)
				}
				if !errors.Is(err, tt.err) {
					t.Errorf("error = %v, want %v", err, tt.err)
				}
				if events.LastEventID() != tt.last {
					t.Errorf("LastEventID = %q, want %q", events.LastEventID(), tt.last)
				}
			}
		})
	}
}

func TestAppendEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Event
		want string
	}{
		{"message with an id", Event{Name: "message", ID: EventID("S", 1), Data: []byte(`{"a":1}`)}, "event: message\nid: S_1\ndata: {\"a\":1}\n\n"},
		{"priming event: empty data", Event{Name: "prime", ID: EventID("S", 0)}, "event: prime\nid: S_0\ndata: \n\n"},
		{"no name, no id", Event{Data: []byte("x")}, "data: x\n\n"},
		{"endpoint", Event{Name: "endpoint", Data: []byte("/message?sessionId=a")}, "event: endpoint\ndata: /message?sessionId=a\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(AppendEvent([]byte("<"), tc.e)); got != "<"+tc.want {
				t.Fatalf("got %q, want %q", got, "<"+tc.want)
			}
			// What is written reads back as it was (a named event).
			if tc.e.Name != "" {
				r := NewSSEReader(strings.NewReader(tc.want), testMax)
				got, err := r.Next()
				if err != nil || got.Name != tc.e.Name || got.ID != tc.e.ID || string(got.Data) != string(tc.e.Data) {
					t.Fatalf("read back %+v, %v", got, err)
				}
			}
		})
	}
}

func TestEventID(t *testing.T) {
	for _, tc := range []struct {
		id     string
		stream string
		idx    int
		ok     bool
	}{
		{EventID("ABC", 0), "ABC", 0, true},
		{EventID("f12c31", 7), "f12c31", 7, true},
		{"_3", "", 3, true},
		{"a_b_1", "", 0, false},
		{"a", "", 0, false},
		{"a_", "", 0, false},
		{"a_-1", "", 0, false},
		{"a_x", "", 0, false},
		{"42", "", 0, false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			stream, idx, ok := ParseEventID(tc.id)
			if ok != tc.ok || ok && (stream != tc.stream || idx != tc.idx) {
				t.Fatalf("ParseEventID(%q) = %q, %d, %v; want %q, %d, %v", tc.id, stream, idx, ok, tc.stream, tc.idx, tc.ok)
			}
		})
	}
}

// A call's answer on a Streamable HTTP stream of the 2025-11-25 era: the
// priming event, then the response, read back by a client.
func ExampleAppendEvent() {
	var stream []byte
	stream = AppendEvent(stream, Event{Name: "prime", ID: EventID("S", 0)})
	stream = AppendEvent(stream, Event{Name: "message", ID: EventID("S", 1), Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)})
	for _, line := range strings.SplitAfter(string(stream), "\n") {
		fmt.Printf("%q\n", line)
	}

	r := NewSSEReader(strings.NewReader(string(stream)), 1<<20)
	for {
		e, err := r.Next()
		if err != nil {
			fmt.Println(err, "; resume from", r.LastEventID())
			break
		}
		fmt.Printf("%s %s %q\n", e.Name, e.ID, e.Data)
	}
	// Output:
	// "event: prime\n"
	// "id: S_0\n"
	// "data: \n"
	// "\n"
	// "event: message\n"
	// "id: S_1\n"
	// "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
	// "\n"
	// ""
	// prime S_0 ""
	// message S_1 "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"
	// EOF ; resume from S_1
}
