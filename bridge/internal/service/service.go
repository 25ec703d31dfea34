// Package service installs, controls and runs the bridge as a per-user
// service: a systemd user unit on Linux, a LaunchAgent on macOS and a service
// registered with the Service Control Manager on Windows. It wraps
// github.com/kardianos/service with the bridge's own unit templates and with
// checks that refuse anything but a per-user service.
package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	kservice "github.com/kardianos/service"
)

// Identity of the service in every service manager.
const (
	Name        = "browserbridge"
	DisplayName = "Browser Bridge"
	Description = "Browser Bridge: lets MCP clients drive your browser through its extension."
)

// serveArgs are the arguments the installed service starts the bridge with.
var serveArgs = []string{"serve"}

// Control actions.
const (
	ActionInstall   = "install"
	ActionUninstall = "uninstall"
	ActionStart     = "start"
	ActionStop      = "stop"
	ActionRestart   = "restart"
)

var (
	// ErrNoUserManager means the system has no per-user service manager this
	// package can use (on Linux: no systemd user manager reachable over D-Bus).
	ErrNoUserManager = errors.New("no systemd user manager is running; the native host starts the bridge on demand, and `browserbridge start` starts it without one")
	// ErrNotInstalled means the service is not installed.
	ErrNotInstalled = errors.New("the Browser Bridge service is not installed")
	// ErrAlreadyInstalled means install found the service already installed.
	ErrAlreadyInstalled = errors.New("the Browser Bridge service is already installed; uninstall it first to install it again")
)

// Config returns the kardianos configuration of the per-user service that runs
// execPath with args (normally ["serve"]). The systemd unit and launchd plist
// are the package's own templates (see systemdUnit and launchdPlist); Windows
// is set to restart the service when it fails.
func Config(execPath string, args []string) *kservice.Config {
	return &kservice.Config{
		Name:        Name,
		DisplayName: DisplayName,
		Description: Description,
		Executable:  execPath,
		Arguments:   append([]string(nil), args...),
		Option: kservice.KeyValue{
			"UserService":   true,
			"Restart":       "on-failure", // systemd, rendered into systemdUnit
			"SystemdScript": systemdUnit,
			"LaunchdConfig": launchdPlist,
			// KeepAlive and RunAtLoad feed launchd templates. launchdPlist
			// renders RunAtLoad and always writes KeepAlive as
			// {SuccessfulExit: false}, i.e. restart only after a failure.
			"KeepAlive": true,
			"RunAtLoad": true,
			// Windows recovery actions.
			"OnFailure":              "restart",
			"OnFailureDelayDuration": "2s",
		},
	}
}

// State is the state of the installed service.
type State int

// States reported by Status.
const (
	StateUnknown State = iota
	StateRunning
	StateStopped
	StateNotInstalled
)

// String returns "running", "stopped", "not-installed" or "unknown".
func (s State) String() string {
	switch s {
	case StateRunning:
		return "running"
	case StateStopped:
		return "stopped"
	case StateNotInstalled:
		return "not-installed"
	default:
		return "unknown"
	}
}

// Available returns nil when a per-user service manager is usable here, and
// otherwise the reason (wrapping ErrNoUserManager on Linux without a systemd
// user manager). Unlike Status it touches no file.
func Available() error { return checkPlatform() }

// UnitDir is the folder the service manager's file for the per-user
// service goes in (~/.config/systemd/user, ~/Library/LaunchAgents), which
// installing the service creates if it is missing; "" where the service
// has no such file in the user's folders (Windows).
func UnitDir() (string, error) { return unitDir() }

// Control performs action, one of install, uninstall, start, stop and restart,
// on the per-user service that runs execPath serve. execPath "" means the
// running executable. Install only registers the service (on systemd it is
// also enabled); call Control with start to run it. Uninstall stops a running
// service first.
//
// On Linux, Control refuses to do anything unless a systemd user manager is
// reachable, returning an error wrapping ErrNoUserManager; it never falls back
// to a system-wide init script. Errors are meant to be shown to the user as
// they are.
func Control(action, execPath string) error {
	switch action {
	case ActionInstall, ActionUninstall, ActionStart, ActionStop, ActionRestart:
	default:
		return fmt.Errorf("unknown service action %q: use install, uninstall, start, stop or restart", action)
	}
	if err := checkPlatform(); err != nil {
		return err
	}
	path, err := resolveExec(execPath)
	if err != nil {
		return err
	}
	if action == ActionInstall {
		if fi, err := os.Stat(path); err != nil {
			return fmt.Errorf("cannot install the Browser Bridge service: the bridge executable %s is missing: %w", path, err)
		} else if fi.IsDir() {
			return fmt.Errorf("cannot install the Browser Bridge service: %s is a directory, not the bridge executable", path)
		}
		if err := validateCommand(path, serveArgs); err != nil {
			return fmt.Errorf("cannot install the Browser Bridge service: %w", err)
		}
	}
	s, err := newService(path)
	if err != nil {
		return err
	}

	state, _ := status(s) // a failed query is left for the action to report
	switch action {
	case ActionInstall:
		if state != StateNotInstalled && state != StateUnknown {
			return ErrAlreadyInstalled
		}
		err = s.Install()
	case ActionUninstall:
		if state == StateNotInstalled {
			return ErrNotInstalled
		}
		if state == StateRunning {
			// systemd's disable does not stop a running unit.
			_ = s.Stop()
		}
		err = s.Uninstall()
	case ActionStart, ActionStop, ActionRestart:
		if state == StateNotInstalled {
			return fmt.Errorf("cannot %s the Browser Bridge service: %w; install it first", action, ErrNotInstalled)
		}
		switch action {
		case ActionStart:
			err = s.Start()
		case ActionStop:
			err = s.Stop()
		default:
			err = s.Restart()
		}
	}
	if err != nil {
		return explain(action, fmt.Errorf("could not %s the Browser Bridge service (%s): %w", action, s.Platform(), err))
	}
	return nil
}

// Status reports the state of the per-user service that runs execPath serve
// (execPath "" means the running executable). A service that is installed but
// failed counts as stopped. On Linux without a systemd user manager it returns
// StateUnknown and an error wrapping ErrNoUserManager.
func Status(execPath string) (State, error) {
	if err := checkPlatform(); err != nil {
		return StateUnknown, err
	}
	path, err := resolveExec(execPath)
	if err != nil {
		return StateUnknown, err
	}
	s, err := newService(path)
	if err != nil {
		return StateUnknown, err
	}
	state, err := status(s)
	if err != nil {
		return state, explain("query", fmt.Errorf("could not query the Browser Bridge service (%s): %w", s.Platform(), err))
	}
	return state, nil
}

// status maps kardianos's status onto State.
func status(s kservice.Service) (State, error) {
	st, err := s.Status()
	switch {
	case errors.Is(err, kservice.ErrNotInstalled):
		return StateNotInstalled, nil
	case err != nil && strings.Contains(err.Error(), "failed state"):
		// kardianos reports a systemd unit in the failed state as an
		// unexported error; the unit is installed and not running.
		return StateStopped, nil
	case err != nil:
		return StateUnknown, err
	}
	switch st {
	case kservice.StatusRunning:
		return StateRunning, nil
	case kservice.StatusStopped:
		return StateStopped, nil
	default:
		return StateUnknown, nil
	}
}

// resolveExec returns the absolute path of execPath, or of the running
// executable when execPath is "".
func resolveExec(execPath string) (string, error) {
	if execPath == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("finding the bridge executable: %w", err)
		}
		execPath = exe
	}
	abs, err := filepath.Abs(execPath)
	if err != nil {
		return "", fmt.Errorf("resolving the bridge executable path %q: %w", execPath, err)
	}
	return abs, nil
}

// newService returns a kardianos Service for controlling, not running, the
// bridge.
func newService(execPath string) (kservice.Service, error) {
	s, err := kservice.New(controlOnly{}, Config(execPath, serveArgs))
	if err != nil {
		return nil, fmt.Errorf("setting up the service manager (%s): %w", kservice.Platform(), err)
	}
	return s, nil
}

// controlOnly is the kardianos Interface used when only controlling the
// service; its methods are never called.
type controlOnly struct{}

var _ kservice.Interface = controlOnly{}

func (controlOnly) Start(kservice.Service) error { return nil }
func (controlOnly) Stop(kservice.Service) error  { return nil }
