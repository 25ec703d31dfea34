package stdio

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// ClaudeDesktopConfigPath returns where Claude Desktop keeps its
// claude_desktop_config.json on this OS:
//
//	linux (and other unix): ~/.config/Claude/claude_desktop_config.json
//	darwin:  ~/Library/Application Support/Claude/claude_desktop_config.json
//	windows: %APPDATA%\Claude\claude_desktop_config.json
//
// The file need not exist.
func ClaudeDesktopConfigPath() (string, error) {
	home, _ := os.UserHomeDir()
	return claudeDesktopConfigPath(runtime.GOOS, home, os.Getenv("APPDATA"), filepath.Join)
}

// claudeDesktopConfigPath is the GOOS table behind ClaudeDesktopConfigPath;
// join is filepath.Join, passed in so tests can check every OS's table.
func claudeDesktopConfigPath(goos, home, appData string, join func(...string) string) (string, error) {
	const file = "claude_desktop_config.json"
	switch goos {
	case "windows":
		if appData == "" {
			return "", errors.New("claude desktop config: %APPDATA% is not set")
		}
		return join(appData, "Claude", file), nil
	case "darwin":
		if home == "" {
			return "", errors.New("claude desktop config: no home directory")
		}
		return join(home, "Library", "Application Support", "Claude", file), nil
	default:
		if home == "" {
			return "", errors.New("claude desktop config: no home directory")
		}
		return join(home, ".config", "Claude", file), nil
	}
}
