// Package logging opens the bridge's log: a log/slog text logger that writes
// to a size-rotated file readable only by its owner, and optionally to stderr.
//
// lumberjack assumes one writer per file, so each process that logs must be
// given its own File.
package logging

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Defaults applied when the matching Options field is zero.
const (
	DefaultMaxSizeMB  = 10
	DefaultMaxBackups = 3
)

// Permissions of what Open creates: the log may name sites and tools the user
// drives, so nobody else may read it.
const (
	dirPerm  fs.FileMode = 0o700
	filePerm fs.FileMode = 0o600
)

// Options configures Open. The zero value logs at Info level to stderr only.
type Options struct {
	// File is the log file's path. "" means stderr only, and the size and
	// backup fields are ignored.
	File string
	// MaxSizeMB is the size in megabytes at which the file is rotated.
	// 0 means DefaultMaxSizeMB.
	MaxSizeMB int
	// MaxBackups is how many rotated files are kept beside File.
	// 0 means DefaultMaxBackups.
	MaxBackups int
	// Level is the minimum level logged; the zero value is slog.LevelInfo.
	Level slog.Level
	// AlsoStderr copies every record to stderr as well as to File.
	// It has no effect when File is "".
	AlsoStderr bool
}

// Open returns a text logger configured by opts and a Closer that closes the
// log file. The file's directory is created with mode 0700 if missing (an
// existing directory is left as it is), and the file is created with mode
// 0600, or changed to 0600 if it already exists; rotated backups keep that
// mode. Rotated files are not compressed.
//
// Close is safe to call more than once and concurrently with logging; records
// logged after Close are no longer written to the file.
func Open(opts Options) (*slog.Logger, io.Closer, error) {
	if opts.MaxSizeMB < 0 {
		return nil, nil, fmt.Errorf("logging: MaxSizeMB is %d; it must not be negative", opts.MaxSizeMB)
	}
	if opts.MaxBackups < 0 {
		return nil, nil, fmt.Errorf("logging: MaxBackups is %d; it must not be negative", opts.MaxBackups)
	}
	handlerOpts := &slog.HandlerOptions{Level: opts.Level}
	if opts.File == "" {
		return slog.New(slog.NewTextHandler(os.Stderr, handlerOpts)), nopCloser{}, nil
	}

	if err := prepareFile(opts.File); err != nil {
		return nil, nil, err
	}
	maxSize := opts.MaxSizeMB
	if maxSize == 0 {
		maxSize = DefaultMaxSizeMB
	}
	maxBackups := opts.MaxBackups
	if maxBackups == 0 {
		maxBackups = DefaultMaxBackups
	}
	w := &fileWriter{lj: &lumberjack.Logger{
		Filename:   opts.File,
		MaxSize:    maxSize,
		MaxBackups: maxBackups,
		Compress:   false,
	}}
	if opts.AlsoStderr {
		w.stderr = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, handlerOpts)), w, nil
}

// prepareFile creates the log directory (0700) and the log file (0600) if they
// are missing, and narrows an existing file to 0600. lumberjack creates a new
// file as 0600 but gives a rotated-in file the mode of the one it replaces, so
// fixing the mode here keeps every later file private too.
func prepareFile(name string) error {
	if err := os.MkdirAll(filepath.Dir(name), dirPerm); err != nil {
		return fmt.Errorf("logging: creating log directory: %w", err)
	}
	fi, err := os.Stat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, filePerm)
		if err != nil {
			return fmt.Errorf("logging: creating log file: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("logging: creating log file: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("logging: checking log file: %w", err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("logging: %s is not a regular file", name)
	case fi.Mode().Perm() != filePerm:
		if err := os.Chmod(name, filePerm); err != nil {
			return fmt.Errorf("logging: making log file private: %w", err)
		}
	}
	return nil
}

// fileWriter writes to the rotating file and, if stderr is set, to stderr.
// Once closed it stops writing to the file, because lumberjack would
// otherwise reopen it on the next write.
type fileWriter struct {
	lj     *lumberjack.Logger
	stderr io.Writer

	mu     sync.Mutex
	closed bool
}

var _ io.WriteCloser = (*fileWriter)(nil)

// Write writes p to the file first, so a broken stderr (a service has none on
// some systems) cannot cost a record in the file, then to stderr.
func (w *fileWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	if w.closed {
		err = fmt.Errorf("logging: write after close: %w", os.ErrClosed)
	} else if _, ferr := w.lj.Write(p); ferr != nil {
		err = fmt.Errorf("logging: writing log file: %w", ferr)
	}
	if w.stderr != nil {
		if _, serr := w.stderr.Write(p); serr != nil && err == nil {
			err = fmt.Errorf("logging: writing stderr: %w", serr)
		}
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close closes the log file. Calls after the first return nil.
func (w *fileWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.lj.Close(); err != nil {
		return fmt.Errorf("logging: closing log file: %w", err)
	}
	return nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
