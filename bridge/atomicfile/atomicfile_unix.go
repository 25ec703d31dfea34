//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"syscall"
)

// rename replaces newpath atomically; rename(2) does on every unix.
func rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// syncDir makes a rename in dir durable: a file's fsync does not cover the
// directory entry that names it.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some file systems (some FUSE and network ones) cannot sync a
	// directory; the rename is then as durable as they make it.
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}
