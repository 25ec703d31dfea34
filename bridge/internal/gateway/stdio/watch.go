package stdio

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// DefaultWatchInterval is how often WatchFile polls when its interval is 0.
const DefaultWatchInterval = time.Second

// racyWindow is how long after a file's mtime WatchFile keeps reading it
// even when its size and mtime look unchanged: a same-size write within one
// mtime tick leaves both as they were (FAT keeps mtimes to 2 s; other file
// systems to a kernel clock tick).
const racyWindow = 2 * time.Second

// WatchFile calls onChange with the content of the file at path each time
// that content changes, until ctx ends. It polls every interval (0 means
// DefaultWatchInterval): a poll that finds the size, mtime or file identity
// changed, or a recently modified file, reads the file and fires only if its
// SHA-256 differs from that of the content last delivered. A new content is
// delivered once a second poll finds the file the same, so a save caught
// half-way (truncated, not yet written) is not reported; an empty file is
// never delivered, however long it stays so (a writer descheduled between
// truncating and writing on a busy machine can leave it empty for many
// polls, and no servers file is empty on purpose: it would not be JSON). Touching a file,
// or saving it unchanged, fires nothing, and the content present when
// WatchFile starts is the baseline, not a change.
//
// Editors that save by writing a new file and renaming it over the old one
// are caught like any other write. While the file is missing (between the
// remove and the rename of such a save, or deleted) or unreadable, polls do
// nothing: it is never reported as empty, and the next content that differs
// from the last delivered one fires when the file is back. A writer that
// pauses for longer than a poll in the middle of a save can still have its
// partial content delivered: a consumer must expect content that does not
// parse, and wait for the next change.
//
// WatchFile polls rather than using inotify, kqueue or
// ReadDirectoryChangesW: that needs no new dependency, works the same on
// every OS and file system (network shares, container bind mounts), and
// does not lose the file when a save replaces its inode. One stat a second
// of a small config file costs nothing.
//
// onChange runs on WatchFile's goroutine; no poll happens until it returns.
// WatchFile blocks: run it in its own goroutine.
func WatchFile(ctx context.Context, path string, interval time.Duration, onChange func(data []byte)) {
	newFileWatch(path).run(ctx, interval, onChange)
}

// newFileWatch reads the baseline content of path.
func newFileWatch(path string) *fileWatch {
	w := &fileWatch{path: path}
	w.poll(true)
	return w
}

// run is WatchFile after the baseline.
func (w *fileWatch) run(ctx context.Context, interval time.Duration, onChange func(data []byte)) {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if data, ok := w.poll(false); ok {
			onChange(data)
		}
	}
}

// fileWatch is the state of one WatchFile.
type fileWatch struct {
	path   string
	stat   os.FileInfo // at the last read, nil before
	readAt time.Time   // when that was
	sum    [sha256.Size]byte
	have   bool // sum is set: the content last delivered, or the baseline
	// pending is a new content seen once, delivered when the next poll
	// finds it still there.
	pending     bool
	pendingSum  [sha256.Size]byte
	pendingStat os.FileInfo
}

// poll reads the file if it may have changed and returns its content when
// it differs from the last delivered and has stayed the same since the
// previous poll. The baseline poll only records what it reads.
func (w *fileWatch) poll(baseline bool) ([]byte, bool) {
	before, err := os.Stat(w.path)
	if err != nil || !before.Mode().IsRegular() {
		w.pending = false
		return nil, false // missing (mid-rename?) or not a file: wait
	}
	if !w.pending && w.stat != nil && sameStat(before, w.stat) && before.ModTime().Before(w.readAt.Add(-racyWindow)) {
		return nil, false
	}
	readAt := time.Now()
	data, err := os.ReadFile(w.path)
	if err != nil {
		w.pending = false
		return nil, false
	}
	if after, err := os.Stat(w.path); !baseline && (err != nil || !sameStat(before, after)) {
		w.pending = false
		return nil, false // being written or replaced: read it again next time
	}
	w.stat, w.readAt = before, readAt
	if len(data) == 0 {
		w.pending = false
		return nil, false
	}
	sum := sha256.Sum256(data)
	switch {
	case baseline:
		w.sum, w.have = sum, true
		return nil, false
	case w.have && sum == w.sum:
		w.pending = false
		return nil, false
	case w.pending && sum == w.pendingSum && sameStat(before, w.pendingStat):
		w.sum, w.have, w.pending = sum, true, false
		return data, true
	}
	// New, or still changing: a save that truncates and then writes can
	// be caught in between. Deliver it if it is still so next time.
	w.pending, w.pendingSum, w.pendingStat = true, sum, before
	return nil, false
}

// sameStat reports whether a and b describe the same file with the same
// size and mtime.
func sameStat(a, b os.FileInfo) bool {
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}
