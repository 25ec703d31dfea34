//go:build windows

package mcpserver

import "io/fs"

// oNoFollow: Windows has no O_NOFOLLOW; records live under
// %LOCALAPPDATA%, which admits only the user, and the Lstat check refuses
// links.
const oNoFollow = 0

// ownedByUs: the state directory under %LOCALAPPDATA% admits only the
// user, so there is no other owner to refuse.
func ownedByUs(fs.FileInfo) error { return nil }
