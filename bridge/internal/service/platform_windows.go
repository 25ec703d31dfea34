package service

import (
	"errors"
	"fmt"
	"syscall"
)

// checkPlatform accepts the Service Control Manager, which is always present.
func checkPlatform() error { return nil }

// validateCommand accepts any command: the Service Control Manager stores the
// path and arguments without a template.
func validateCommand(path string, args []string) error { return nil }

// explain turns "access denied" into what to do about it: kardianos registers
// a machine-wide service, which needs administrator rights.
func explain(action string, err error) error {
	if errors.Is(err, syscall.ERROR_ACCESS_DENIED) {
		return fmt.Errorf("%w; to %s the Browser Bridge service, run the command from an administrator prompt", err, action)
	}
	return err
}

// unitDir is "": no unit file goes into the user's folders here.
func unitDir() (string, error) { return "", nil }
