//go:build windows

package installer

import (
	"io/fs"
	"path/filepath"
	"strings"
)

// isExecutable reports whether a regular file with info fi can be run by a
// browser: on Windows, its extension makes it a program Chrome can start.
func isExecutable(path string, fi fs.FileInfo) bool {
	if !fi.Mode().IsRegular() {
		return false
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".exe", ".com", ".bat", ".cmd":
		return true
	}
	return false
}

// notExecutableFix tells a person how to make the host at path runnable.
func notExecutableFix(path string) string {
	return "point the manifest at browserbridge-host.exe rather than " + path + " by reinstalling Browser Bridge"
}
