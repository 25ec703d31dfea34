package stdioproxy

import (
	"errors"
	"io"
	"strings"
	"testing"
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

func TestReadEvents(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		stopAt   string // fn returns false for the event with this id
		want     []event
		wantErr  bool
	}{
		{"message with id", "id: s_1\ndata: {\"a\":1}\n\n", "", []event{{id: "s_1", data: []byte(`{"a":1}`)}}, false},
		{"priming event: id only", "id: s_0\ndata:\n\n", "", []event{{id: "s_0", data: []byte{}}}, false},
		{"comment and named event", ": ok\n\nevent: ping\ndata: x\n\n", "", []event{{name: "ping", data: []byte("x")}}, false},
		{"multi-line data, CRLF", "data: a\r\ndata: b\r\n\r\n", "", []event{{data: []byte("a\nb")}}, false},
		{"unterminated event is dropped", "data: half", "", nil, false},
		{"oversized event", "data: " + strings.Repeat("x", 100) + "\n\n", "", nil, true},
		// A call's stream is read up to its answer, not past it.
		{"stop at the answer", "id: s_1\ndata: a\n\nid: s_2\ndata: b\n\nid: s_3\ndata: c\n\n", "s_2",
			[]event{{id: "s_1", data: []byte("a")}, {id: "s_2", data: []byte("b")}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []event
			err := readEvents(strings.NewReader(tc.in), 64, func(ev event) bool {
				got = append(got, ev)
				return ev.id != tc.stopAt || tc.stopAt == ""
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("readEvents error = %v, want error %v", err, tc.wantErr)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].name != tc.want[i].name || got[i].id != tc.want[i].id || string(got[i].data) != string(tc.want[i].data) {
					t.Errorf("event %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
