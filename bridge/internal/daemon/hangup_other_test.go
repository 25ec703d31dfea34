//go:build !unix

package daemon

import "testing"

func hangUp(t *testing.T) { t.Skip("no SIGHUP on this OS") }
