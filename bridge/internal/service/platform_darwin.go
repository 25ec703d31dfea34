package service

import (
	"os"
	"path/filepath"
)

// checkPlatform accepts launchd, which always has a per-user agent domain.
func checkPlatform() error { return nil }

// validateCommand accepts any command: the plist template XML-escapes every
// string it writes.
func validateCommand(path string, args []string) error { return nil }

// explain returns err unchanged.
func explain(action string, err error) error { return err }

// unitDir is where kardianos writes a LaunchAgent's plist.
func unitDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "Library", "LaunchAgents"), nil
}
