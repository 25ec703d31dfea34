//go:build !unix

package gatewayserver

import "testing"

func hangUp(t *testing.T) { t.Skip("no SIGHUP on this OS") }
