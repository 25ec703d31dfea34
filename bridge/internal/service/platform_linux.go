package service

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	kservice "github.com/kardianos/service"
)

// systemdPlatform is kardianos's name for a systemd system.
const systemdPlatform = "linux-systemd"

// probeTimeout bounds the systemctl call that looks for a user manager.
const probeTimeout = 5 * time.Second

// checkPlatform refuses to go on unless systemd is the init system and a
// systemd user manager answers. Without this, kardianos would pick another
// init system and, as root, write an init script to /etc/init.d.
func checkPlatform() error {
	return checkSystemdUser(kservice.Platform(), probeUserManager)
}

// checkSystemdUser is checkPlatform with the platform name and the
// user-manager probe passed in.
func checkSystemdUser(platform string, probe func() error) error {
	if platform != systemdPlatform {
		if platform == "" {
			platform = "none detected"
		}
		return fmt.Errorf("%w (the init system is %s, not systemd)", ErrNoUserManager, platform)
	}
	if err := probe(); err != nil {
		return fmt.Errorf("%w (%v)", ErrNoUserManager, err)
	}
	return nil
}

// probeUserManager asks the user's systemd manager for its environment, which
// fails when there is no user manager or no D-Bus session to reach it.
func probeUserManager() error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "systemctl", "--user", "show-environment")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("systemctl --user: %s", msg)
		}
		return fmt.Errorf("systemctl --user: %w", err)
	}
	return nil
}

// validateCommand refuses an executable path or argument that the ExecStart
// line of systemdUnit cannot carry unchanged: systemd expands % specifiers and
// $ variables and interprets backslashes even inside quotes; the path is not
// quoted, so quotes in it would be taken as quoting; control characters would
// break the line.
func validateCommand(path string, args []string) error {
	if strings.ContainsFunc(path, isControl) || strings.ContainsAny(path, "%$\\\"'") {
		return fmt.Errorf("the bridge executable path %q contains a character systemd would rewrite (%%, $, \\, a quote or a control character); move browserbridge to a folder whose path has none", path)
	}
	for _, a := range args {
		if strings.ContainsFunc(a, isControl) || strings.ContainsAny(a, "%$\\") {
			return fmt.Errorf("the service argument %q contains a character systemd would rewrite (%%, $, \\ or a control character)", a)
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// explain adds nothing on Linux: checkPlatform already turned the common
// failure, a missing user manager, into a sentence.
func explain(action string, err error) error { return err }

// unitDir is where kardianos writes a user unit: ~/.config/systemd/user,
// whatever XDG_CONFIG_HOME says.
func unitDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".config", "systemd", "user"), nil
}
