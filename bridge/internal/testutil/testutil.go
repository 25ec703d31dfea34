// Package testutil holds the small helpers that several packages' tests
// share: the text of a tool result, a context bounded by a test, and a
// TestMain that builds the programs from this checkout. It is imported by
// tests only (bridge/internal/archtest holds that line), so nothing here
// ends up in a shipped binary.
package testutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/paths"
)

// Text joins the text content of a tool result, one line per part; other
// content is skipped. A nil result has no text.
func Text(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ClosedAddr returns a loopback address nothing listens on: bound, then
// closed (a dial to it is refused).
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Context returns a context that ends after d or when t ends, whichever
// comes first.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// RunWithBinaries is the body of a TestMain whose tests run the host and
// the bridge built from this checkout (testbrowser.Build): it builds them
// into a new temporary directory named after prefix, sets *bins, runs the
// tests and removes the directory. It returns the code to pass to os.Exit:
// the tests', or 1 (the error on stderr) when the build failed.
func RunWithBinaries(m *testing.M, prefix string, bins *testbrowser.Binaries) int {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bins, err = testbrowser.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Bridges these tests run in process keep their state (session
	// records, the tool cache) in this run's own home, never the user's,
	// unless a test names another.
	if os.Getenv(paths.EnvHome) == "" {
		os.Setenv(paths.EnvHome, filepath.Join(dir, "home"))
	}
	return m.Run()
}

// Watch is an io.Writer for a program's output (a log) that keeps all it is
// given and tells when the output first holds a text: a readiness signal,
// so that a test waits for "listening on" rather than sleeping. Its zero
// value is ready to use; it is safe for concurrent use.
type Watch struct {
	mu    sync.Mutex
	buf   strings.Builder
	waits []watchFor
}

type watchFor struct {
	text string
	seen chan struct{}
}

// Write keeps p and signals the texts the output now holds.
func (w *Watch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	out := w.buf.String()
	waits := w.waits[:0]
	for _, wf := range w.waits {
		if strings.Contains(out, wf.text) {
			close(wf.seen)
		} else {
			waits = append(waits, wf)
		}
	}
	w.waits = waits
	return len(p), nil
}

// String returns all the output so far.
func (w *Watch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Seen returns a channel that is closed once the output holds text
// (at once if it already does).
func (w *Watch) Seen(text string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := make(chan struct{})
	if strings.Contains(w.buf.String(), text) {
		close(seen)
	} else {
		w.waits = append(w.waits, watchFor{text, seen})
	}
	return seen
}
