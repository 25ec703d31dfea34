package installer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Modes of what Install creates.
const (
	dirMode  = 0o755
	fileMode = 0o644
)

// mkdirAll creates dir and its missing parents with mode 0755 and returns the
// directories it created, outermost first, so that they can be recorded. On
// error it still returns what it created.
func mkdirAll(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return nil, fmt.Errorf("creating %s: %s is not a directory", dir, d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], dirMode); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue // made concurrently by someone else: not ours
			}
			return created, fmt.Errorf("creating %s: %w", dir, err)
		}
		created = append(created, missing[i])
	}
	return created, nil
}

// dirIsEmpty reports whether dir exists and has no entries.
func dirIsEmpty(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return false, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return true, nil
}
