package gatewaycli

import (
	"io"
	"os"
)

// isTerminal reports whether r is a terminal (a person typing), for the
// prompt hash-password shows only then.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
