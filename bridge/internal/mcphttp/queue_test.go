package mcphttp

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestResponseQueue(t *testing.T) {
	type msg struct {
		data  string
		final bool
	}
	many := make([]msg, MaxQueuedNotifications+5)
	for i := range many {
		many[i] = msg{fmt.Sprintf("n%d", i), false}
	}
	tests := []struct {
		name      string
		sends     []msg
		wantLen   int
		wantLast  string // the last message taken
		wantFinal bool
	}{
		{"nothing sent", nil, 0, "", false},
		{"the response alone", []msg{{"r", true}}, 1, "r", true},
		{"notifications first, then the response", []msg{{"n1", false}, {"n2", false}, {"r", true}}, 3, "r", true},
		{"notifications without a response yet", []msg{{"n1", false}}, 1, "n1", false},
		{"nothing gets in after the response", []msg{{"r", true}, {"late", false}, {"r2", true}}, 1, "r", true},
		{"notifications are bounded", many, MaxQueuedNotifications, fmt.Sprintf("n%d", MaxQueuedNotifications-1), false},
		{"the response is never dropped, even past the bound", append(slices.Clone(many), msg{"r", true}), MaxQueuedNotifications + 1, "r", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q ResponseQueue
			for _, m := range tt.sends {
				q.Send([]byte(m.data), m.final)
			}
			got, final := q.Take()
			if len(got) != tt.wantLen || final != tt.wantFinal {
				t.Fatalf("Take() = %d messages, final %v; want %d, %v", len(got), final, tt.wantLen, tt.wantFinal)
			}
			if len(got) > 0 && string(got[len(got)-1]) != tt.wantLast {
				t.Errorf("last message %q, want %q", got[len(got)-1], tt.wantLast)
			}
			if again, _ := q.Take(); len(again) != 0 {
				t.Errorf("a second Take() returned %d messages; Take empties the queue", len(again))
			}
		})
	}
}

func TestResponseQueueWake(t *testing.T) {
	tests := []struct {
		name string
		ops  func(q *ResponseQueue)
		want bool
	}{
		{"nothing sent", func(q *ResponseQueue) {}, false},
		{"sent before the writer first waits: signalled at once", func(q *ResponseQueue) { q.Send([]byte("r"), true) }, true},
		{"sent while the writer waits", func(q *ResponseQueue) { q.Wake(); q.Send([]byte("n"), false) }, true},
		{"sent and taken before the writer first waits: nothing to wake for", func(q *ResponseQueue) {
			q.Send([]byte("n"), false)
			q.Take()
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q ResponseQueue
			tt.ops(&q)
			if got := signalled(q.Wake()); got != tt.want {
				t.Errorf("signalled = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestResponseQueueWriter runs a producer against a writer that Takes and
// waits the way a POST handler does: every message arrives, in order, and
// the writer learns of the response.
func TestResponseQueueWriter(t *testing.T) {
	const n = 1000
	var q ResponseQueue
	go func() {
		for i := range n {
			q.Send(fmt.Appendf(nil, "%d", i), false)
		}
		q.Send([]byte("final"), true)
	}()
	deadlock := time.After(30 * time.Second) // a guard, not a timing assertion
	var got []string
	for {
		msgs, final := q.Take()
		for _, m := range msgs {
			got = append(got, string(m))
		}
		if final {
			break
		}
		select {
		case <-q.Wake():
		case <-deadlock:
			t.Fatalf("the writer was not woken: %d messages taken", len(got))
		}
	}
	if len(got) != n+1 || got[n] != "final" {
		t.Fatalf("took %d messages ending %q, want %d ending with the response", len(got), got[len(got)-1], n+1)
	}
	for i := range n {
		if got[i] != fmt.Sprint(i) {
			t.Fatalf("message %d is %q: out of order", i, got[i])
		}
	}
}
