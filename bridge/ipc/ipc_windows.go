//go:build windows

package ipc

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/windows"
)

// prepareDir creates the directory under %LOCALAPPDATA%, whose inherited ACL
// admits only the user, SYSTEM and administrators.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating socket directory: %w", err)
	}
	return nil
}

func lockDir(dir string) (func(), error) {
	name := filepath.Join(dir, lockName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	ol := new(windows.Overlapped)
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w%s: %s", ErrAlreadyServing, lockHolder(dir), dir)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

// PeerUID is not available for AF_UNIX sockets on Windows.
func PeerUID(net.Conn) (int, error) { return -1, ErrNoPeerCredentials }
