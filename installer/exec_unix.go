//go:build !windows

package installer

import "io/fs"

// isExecutable reports whether a regular file with info fi can be run by a
// browser: on Unix, some execute bit is set.
func isExecutable(_ string, fi fs.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// notExecutableFix tells a person how to make the host at path runnable.
func notExecutableFix(path string) string { return "run: chmod +x " + path }
