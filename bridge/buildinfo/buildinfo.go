// Package buildinfo holds the version stamped into the binaries by the
// Makefile (-ldflags "-X .../buildinfo.Version=v1.2.3").
package buildinfo

import "runtime/debug"

// Version is set at link time; without it, the module version or "dev".
var Version = ""

// String returns the version to show and to report on the links.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
