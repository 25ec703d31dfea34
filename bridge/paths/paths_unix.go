//go:build !windows

package paths

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
)

// socketDir prefers $XDG_RUNTIME_DIR (per-user, 0700, cleared at logout);
// on macOS ~/Library/Caches keeps the path under the 104-byte sun_path limit;
// elsewhere a per-uid directory in /tmp, whose ownership and mode the bridge
// checks before trusting it.
func socketDir() (string, error) {
	if runtime.GOOS != "darwin" {
		if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
			return filepath.Join(d, "browserbridge"), nil
		}
		return filepath.Join(os.TempDir(), "browserbridge-"+strconv.Itoa(os.Getuid())), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "Library", "Caches", "BrowserBridge"), nil
}

func logDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Logs", "BrowserBridge"), nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "browserbridge"), nil
	}
	return filepath.Join(home, ".local", "state", "browserbridge"), nil
}

func stateDir() (string, error) {
	if runtime.GOOS == "darwin" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, "Library", "Application Support", "BrowserBridge"), nil
	}
	return logDir() // $XDG_STATE_HOME/browserbridge: state and logs together
}
