package stdio

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

const testWatchInterval = 10 * time.Millisecond

// watchFor takes the baseline of path now, then polls it until the test
// ends, sending each delivered content on the returned channel.
func watchFor(t *testing.T, path string) <-chan string {
	t.Helper()
	w := newFileWatch(path)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx, testWatchInterval, func(data []byte) { got <- string(data) })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return got
}

// fires collects what got delivers: it waits up to 10 s for n contents,
// then 30 intervals more to catch any extra one.
func fires(got <-chan string, n int) []string {
	var out []string
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case s := <-got:
			out = append(out, s)
		case <-deadline:
			return out
		}
	}
	quiet := time.After(30 * testWatchInterval)
	for {
		select {
		case s := <-got:
			out = append(out, s)
		case <-quiet:
			return out
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// replace saves content the way many editors do: a new file renamed over
// the old one.
func replace(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	tmp := path + ".tmp"
	writeFile(t, tmp, content)
	if !mtime.IsZero() {
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatchFile(t *testing.T) {
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	tests := []struct {
		name    string
		initial string // "" means no file at start
		oldTime bool   // the initial file's mtime is an hour ago
		change  func(t *testing.T, path string)
		want    []string
	}{
		{name: "nothing happens", initial: "A", change: func(*testing.T, string) {}},
		{name: "new content", initial: "A", change: func(t *testing.T, p string) { writeFile(t, p, "BB") }, want: []string{"BB"}},
		{name: "same content rewritten", initial: "A", change: func(t *testing.T, p string) { writeFile(t, p, "A") }},
		{name: "touch", initial: "A", oldTime: true, change: func(t *testing.T, p string) {
			now := time.Now()
			if err := os.Chtimes(p, now, now); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "rename replace", initial: "A", change: func(t *testing.T, p string) { replace(t, p, "B", time.Time{}) }, want: []string{"B"}},
		{name: "rename replace unchanged", initial: "A", change: func(t *testing.T, p string) { replace(t, p, "A", time.Time{}) }},
		{name: "rename replace keeping size and mtime", initial: "A", oldTime: true,
			change: func(t *testing.T, p string) { replace(t, p, "B", old) }, want: []string{"B"}},
		{name: "same size and mtime in place", initial: "A", change: func(t *testing.T, p string) {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, p, "B")
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, want: []string{"B"}},
		{name: "missing then back changed", initial: "A", change: func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * testWatchInterval) // the file stays missing for some polls: the case under test
			writeFile(t, p, "B")
		}, want: []string{"B"}},
		{name: "missing then back unchanged", initial: "A", change: func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * testWatchInterval) // the file stays missing for some polls: the case under test
			writeFile(t, p, "A")
		}},
		{name: "deleted", initial: "A", change: func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "created after start", change: func(t *testing.T, p string) { writeFile(t, p, "A") }, want: []string{"A"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "servers.json")
			if tt.initial != "" {
				writeFile(t, path, tt.initial)
				if tt.oldTime {
					if err := os.Chtimes(path, old, old); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := watchFor(t, path)
			time.Sleep(5 * testWatchInterval) // a few polls of the baseline
			tt.change(t, path)
			if out := fires(got, len(tt.want)); !slices.Equal(out, tt.want) {
				t.Fatalf("delivered %q, want %q", out, tt.want)
			}
		})
	}
}

// TestWatchFileOncePerChange follows one file through a series of saves:
// each new content is delivered exactly once, and nothing else is.
func TestWatchFileOncePerChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	writeFile(t, path, `{"v": 0}`)
	got := watchFor(t, path)
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"first edit", func() { writeFile(t, path, `{"v": 1}`) }, []string{`{"v": 1}`}},
		{"saved unchanged", func() { writeFile(t, path, `{"v": 1}`) }, nil},
		{"editor save", func() { replace(t, path, `{"v": 2}`, time.Time{}) }, []string{`{"v": 2}`}},
		{"back to an earlier content", func() { writeFile(t, path, `{"v": 1}`) }, []string{`{"v": 1}`}},
	}
	for _, st := range steps {
		st.change()
		if out := fires(got, len(st.want)); !slices.Equal(out, st.want) {
			t.Fatalf("%s: delivered %q, want %q", st.name, out, st.want)
		}
	}
}

func TestWatchFileReturnsWhenCtxEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	writeFile(t, path, "A")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchFile(ctx, path, 0, func([]byte) { t.Error("fired for the initial content") })
	}()
	time.Sleep(50 * time.Millisecond) // time to fire wrongly for the initial content: an absence, nothing to wait on
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("WatchFile did not return after ctx ended")
	}
}

// TestWatchFileHalfSave polls by hand through a save that truncates the
// file and writes it later: the empty file in between is not delivered,
// even when several polls find it empty.
func TestWatchFileHalfSave(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	writeFile(t, path, "A")
	w := newFileWatch(path)
	var got []string
	poll := func() {
		if data, ok := w.poll(false); ok {
			got = append(got, string(data))
		}
	}
	poll()
	writeFile(t, path, "") // truncated...
	poll()
	poll() // ...and still so a poll later (a writer descheduled on a busy machine)
	poll()
	writeFile(t, path, "BB") // ...then written
	poll()
	poll()
	poll()
	if !slices.Equal(got, []string{"BB"}) {
		t.Fatalf("delivered %q, want [BB]", got)
	}
}
