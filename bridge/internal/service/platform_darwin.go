package service

// checkPlatform accepts launchd, which always has a per-user agent domain.
func checkPlatform() error { return nil }

// validateCommand accepts any command: the plist template XML-escapes every
// string it writes.
func validateCommand(path string, args []string) error { return nil }

// explain returns err unchanged.
func explain(action string, err error) error { return err }
