//go:build windows

package atomicfile

import (
	"os"

	"golang.org/x/sys/windows"
)

// rename replaces newpath with MoveFileEx: MOVEFILE_REPLACE_EXISTING for the
// replace that rename(2) does on unix, MOVEFILE_WRITE_THROUGH so that it
// returns once the move is on disk (Windows cannot sync a directory).
func rename(oldpath, newpath string) error {
	from, err := windows.UTF16PtrFromString(oldpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	to, err := windows.UTF16PtrFromString(newpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	if err := windows.MoveFileEx(from, to, windows.MOVEFILE_REPLACE_EXISTING|windows.MOVEFILE_WRITE_THROUGH); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

// syncDir has nothing to do: the rename was written through.
func syncDir(string) error { return nil }
