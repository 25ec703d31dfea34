package testutil

import (
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestText(t *testing.T) {
	tests := []struct {
		name string
		res  *mcp.CallToolResult
		want string
	}{
		{"nil", nil, ""},
		{"none", &mcp.CallToolResult{}, ""},
		{"text and image", &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "a"}, &mcp.ImageContent{MIMEType: "image/png"}, &mcp.TextContent{Text: "b"},
		}}, "a\nb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text(tc.res); got != tc.want {
				t.Fatalf("Text = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestContextEndsWithTheTest(t *testing.T) {
	var ctx interface{ Err() error }
	t.Run("inner", func(t *testing.T) {
		ctx = Context(t, 1<<40)
		if ctx.Err() != nil {
			t.Fatal("context ended at once")
		}
	})
	if ctx.Err() == nil {
		t.Fatal("context outlived its test")
	}
}

// closed reports whether ch is closed now. Write signals before it
// returns, so no waiting is needed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWatch(t *testing.T) {
	var w Watch
	before := w.Seen("listening on 127.0.0.1:1")
	fmt.Fprint(&w, "starting\nlistening on 127.0.")
	if closed(before) {
		t.Fatal("signalled on half the text")
	}
	fmt.Fprint(&w, "0.1:1\n")
	if !closed(before) {
		t.Fatal("a text split over two writes was not signalled")
	}
	if !closed(w.Seen("starting")) {
		t.Fatal("a text already written was not signalled")
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { fmt.Fprintf(&w, "line %d\n", i) })
	}
	wg.Wait()
	if !closed(w.Seen("line 7")) {
		t.Fatal("a concurrent write was not signalled")
	}
	if got := w.String(); len(got) != len("starting\nlistening on 127.0.0.1:1\n")+8*len("line 0\n") {
		t.Fatalf("String() = %q: lost or doubled output", got)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}
