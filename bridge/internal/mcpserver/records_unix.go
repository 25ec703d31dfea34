//go:build unix

package mcpserver

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// oNoFollow makes opening a record fail on a symlink swapped in after the
// Lstat check.
const oNoFollow = syscall.O_NOFOLLOW

// ownedByUs refuses a file or directory of another user: a record planted
// by someone else must not choose a session's tab group.
func ownedByUs(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Getuid(); int(st.Uid) != uid {
		return fmt.Errorf("owned by uid %d, not this user (%d)", st.Uid, uid)
	}
	return nil
}
