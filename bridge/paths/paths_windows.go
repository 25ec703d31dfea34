//go:build windows

package paths

import (
	"errors"
	"os"
	"path/filepath"
)

func localAppData() (string, error) {
	if d := os.Getenv("LOCALAPPDATA"); d != "" {
		return filepath.Join(d, "BrowserBridge"), nil
	}
	return "", errors.New("LOCALAPPDATA is not set")
}

// socketDir is under %LOCALAPPDATA%, whose ACL already admits only the user:
// Windows has no peer-credential check for AF_UNIX sockets.
func socketDir() (string, error) { return localAppData() }

func logDir() (string, error) {
	d, err := localAppData()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "logs"), nil
}

func stateDir() (string, error) { return localAppData() }
