// Package atomicfile replaces a file so that a reader, or the next start
// after a crash, sees the old content or the new, never a part: the data
// goes to a temporary file in the same directory, which is synced and
// renamed over the file, and the directory is synced too where the OS
// allows it. It is a leaf (standard library and golang.org/x/sys only), so
// the installer and the host may use it.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Option changes what WriteFile does; the zero set is right for the
// program's own state files.
type Option int

const (
	// KeepMode gives the new file the permission bits of the file it
	// replaces, when there is one; perm is then only for a new file. For a
	// file that is the user's, such as an MCP client's config.
	KeepMode Option = 1 << iota
	// FollowLinks replaces the file a symbolic link at path points to,
	// leaving the link, instead of replacing the link with a file.
	FollowLinks
)

// tempSuffix ends every temporary file's name: "." + base + ".*" + tempSuffix.
const tempSuffix = ".tmp"

// WriteFile replaces the file at path with data, with permission bits perm
// (exactly, whatever the umask; use 0o600 for state). On any error the
// file at path is as it was and no temporary file is left behind; an error
// names path and the step that failed. Two writers of one path at once each
// leave a whole file, the last rename winning.
func WriteFile(path string, data []byte, perm fs.FileMode, opts ...Option) (err error) {
	var o Option
	for _, opt := range opts {
		o |= opt
	}
	if o&FollowLinks != 0 {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			path = real
		}
	}
	if o&KeepMode != 0 {
		switch st, err := os.Stat(path); {
		case err == nil:
			perm = st.Mode().Perm()
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("replacing %s: %w", path, err)
		}
	}
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, "."+base+".*"+tempSuffix)
	if err != nil {
		return fmt.Errorf("replacing %s: creating a temporary file: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close() // a second Close after the first fails is harmless
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	// CreateTemp made it 0600; set the mode asked for, regardless of umask.
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	if err = rename(tmp, path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	// The file is in place; a failed directory sync only means the rename
	// may not yet be on disk, so it is reported but nothing is undone.
	if serr := syncDir(filepath.Dir(path)); serr != nil {
		return fmt.Errorf("replaced %s, but syncing its directory: %w", path, serr)
	}
	return nil
}

// IsTemp reports whether name (a base name) is that of a temporary file
// WriteFile makes: one that a crash between its create and its rename
// left behind, and that a reader of the directory should skip or remove.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, tempSuffix)
}
