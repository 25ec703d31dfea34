package logging

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func checkPerm(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	if runtime.GOOS == "windows" {
		return // Windows has no Unix permission bits.
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %v, want %v", path, got, want)
	}
}

func TestOpenCreatesPrivateDirAndFile(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "state", "browserbridge")
	file := filepath.Join(dir, "bridge.log")

	logger, closer, err := Open(Options{File: file})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()

	checkPerm(t, filepath.Join(root, "state"), 0o700)
	checkPerm(t, dir, 0o700)
	checkPerm(t, file, 0o600) // before the first write

	logger.Info("hello", "k", "v")
	checkPerm(t, file, 0o600)
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "msg=hello k=v") {
		t.Errorf("log file = %q, want a text record with msg=hello k=v", data)
	}
}

func TestOpenNarrowsExistingFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permission bits on Windows")
	}
	file := filepath.Join(t.TempDir(), "bridge.log")
	if err := os.WriteFile(file, []byte("old line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o644); err != nil { // in case of a strict umask
		t.Fatal(err)
	}
	logger, closer, err := Open(Options{File: file})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	checkPerm(t, file, 0o600)

	logger.Info("new line")
	closer.Close()
	data, _ := os.ReadFile(file)
	if !strings.HasPrefix(string(data), "old line\n") || !strings.Contains(string(data), "new line") {
		t.Errorf("log file = %q, want the old line kept and the new one appended", data)
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bridge.log")
	logger, closer, err := Open(Options{File: file, MaxSizeMB: 1, MaxBackups: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()

	line := strings.Repeat("x", 1024)
	for i := 0; i < 1200; i++ { // about 1.2 MB of records
		logger.Info(line, "i", i)
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var backups []string
	for _, e := range entries {
		if e.Name() != "bridge.log" {
			backups = append(backups, e.Name())
		}
	}
	if len(backups) == 0 {
		t.Fatalf("no backup after writing more than MaxSizeMB; directory holds %v", entries)
	}
	for _, b := range backups {
		if !strings.HasPrefix(b, "bridge-") || !strings.HasSuffix(b, ".log") {
			t.Errorf("unexpected file %q beside the log (compression must be off)", b)
		}
		checkPerm(t, filepath.Join(dir, b), 0o600)
	}
	checkPerm(t, file, 0o600)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 1<<20 {
		t.Errorf("current log is %d bytes, want at most 1 MB after rotation", fi.Size())
	}
}

func TestCloseTwiceAndWriteAfterClose(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bridge.log")
	logger, closer, err := Open(Options{File: file})
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("before")
	if err := closer.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := closer.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	logger.Info("after") // must not reopen the file
	data, _ := os.ReadFile(file)
	if strings.Contains(string(data), "after") {
		t.Errorf("a record logged after Close reached the file: %q", data)
	}
}

func TestLevel(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bridge.log")
	logger, closer, err := Open(Options{File: file, Level: slog.LevelWarn})
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("quiet")
	logger.Warn("loud")
	closer.Close()
	data, _ := os.ReadFile(file)
	if strings.Contains(string(data), "quiet") || !strings.Contains(string(data), "loud") {
		t.Errorf("log file = %q, want only the Warn record", data)
	}
}

func TestStderrOnly(t *testing.T) {
	logger, closer, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if logger == nil {
		t.Fatal("nil logger")
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidOptions(t *testing.T) {
	for name, opts := range map[string]Options{
		"negative size":    {File: "x.log", MaxSizeMB: -1},
		"negative backups": {File: "x.log", MaxBackups: -1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Open(opts); err == nil {
				t.Error("Open succeeded, want an error")
			}
		})
	}
}

func TestNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Open(Options{File: dir}); err == nil {
		t.Error("Open on a directory succeeded, want an error")
	}
}

func TestAlsoStderr(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bridge.log")
	logger, closer, err := Open(Options{File: file, AlsoStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	w := closer.(*fileWriter)
	if w.stderr != os.Stderr {
		t.Fatal("AlsoStderr did not select stderr")
	}
	var buf strings.Builder
	w.stderr = &buf // the test does not own the process's stderr
	logger.Info("both")
	closer.Close()
	data, _ := os.ReadFile(file)
	if !strings.Contains(string(data), "both") || !strings.Contains(buf.String(), "both") {
		t.Errorf("file = %q, stderr = %q; want the record in both", data, buf.String())
	}
}
