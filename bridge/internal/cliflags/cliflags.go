// Package cliflags is what the project's command lines share: flag sets
// that report errors instead of exiting, and the usage error that makes a
// command exit with code 2. browserbridge and browserbridge-gateway both
// use it, so that the gateway's command line (package gatewaycli) serves
// both without a copy.
package cliflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// UsageError marks bad command-line input (exit code 2).
type UsageError struct{ msg string }

func (e UsageError) Error() string { return e.msg }

// Usage is a UsageError saying msg.
func Usage(msg string) error { return UsageError{msg} }

// IsUsage reports whether err is, or wraps, a UsageError.
func IsUsage(err error) bool {
	var ue UsageError
	return errors.As(err, &ue)
}

// New returns a FlagSet named prog (the command as typed, e.g.
// "browserbridge gateway") that reports errors to stderr instead of exiting.
func New(prog string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// Parse parses flags and refuses stray arguments; bad flags are a
// UsageError, -h is flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return UsageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
