// Package paths knows where Browser Bridge keeps its per-user files: the
// bridge's Unix socket, its config, its logs and the installer's record.
// Every function honours an override so tests and odd setups never touch the
// user's real files: BROWSERBRIDGE_SOCKET for the socket and
// BROWSERBRIDGE_HOME for everything else.
package paths

import (
	"fmt"
	"os"
	"path/filepath"
)

// Environment variables that override the defaults.
const (
	// EnvSocket names the bridge's Unix socket, for the host and the bridge alike.
	EnvSocket = "BROWSERBRIDGE_SOCKET"
	// EnvHome puts config, state and logs under one directory.
	EnvHome = "BROWSERBRIDGE_HOME"
)

// SocketName is the file name of the bridge's socket inside its directory.
const SocketName = "bridge.sock"

// Socket returns the bridge's socket path: $BROWSERBRIDGE_SOCKET if set,
// otherwise a per-user default (see socketDir in the per-OS files).
func Socket() (string, error) {
	if p := os.Getenv(EnvSocket); p != "" {
		return filepath.Abs(p)
	}
	dir, err := socketDir()
	if err != nil {
		return "", fmt.Errorf("finding the socket directory: %w", err)
	}
	return filepath.Join(dir, SocketName), nil
}

// ConfigDir is where config.json and the installer's record live.
func ConfigDir() (string, error) {
	if h := os.Getenv(EnvHome); h != "" {
		return filepath.Join(h, "config"), nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding the config directory: %w", err)
	}
	return filepath.Join(d, "browserbridge"), nil
}

// ConfigFile is the bridge's default config file.
func ConfigFile() (string, error) {
	d, err := ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "config.json"), nil
}

// StopMarker is the file beside the bridge's socket that `browserbridge
// stop` leaves: while it exists, native hosts do not start a bridge (the
// user stopped it on purpose); `start`, `restart` and `serve` remove it. It
// lives in the runtime folder, so a reboot forgets it.
func StopMarker(socket string) string { return filepath.Join(filepath.Dir(socket), "stopped") }

// InstallRecord is the file in which `browserbridge install` lists what it
// wrote, so that `browserbridge uninstall` removes exactly that.
func InstallRecord() (string, error) {
	d, err := ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "installed.json"), nil
}

// LogDir is where the bridge writes its rotating log.
func LogDir() (string, error) {
	if h := os.Getenv(EnvHome); h != "" {
		return filepath.Join(h, "logs"), nil
	}
	return logDir()
}

// StateDir is where the bridge keeps state worth surviving a restart (the
// last tool list a browser gave).
func StateDir() (string, error) {
	if h := os.Getenv(EnvHome); h != "" {
		return filepath.Join(h, "state"), nil
	}
	return stateDir()
}

// BridgeLog is the bridge's log file.
func BridgeLog() (string, error) {
	d, err := LogDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "bridge.log"), nil
}
