package proxy

import (
	"crypto/tls"
	"net"

	"github.com/browserbridge/browserbridge/bridge/internal/connlimit"
)

// newLimitListener counts the connections open from each client address
// and refuses those over max (connlimit, which the public gateway shares).
// It wraps the TCP listener, beneath TLS (which it adds itself when
// configured), so that it sees every connection the moment it is
// accepted, before any handshake or request.
func newLimitListener(ln net.Listener, max int, tc *tls.Config, s *Server) net.Listener {
	return connlimit.Listen(ln, connlimit.Options{MaxPerAddr: max, TLS: tc,
		Refused: func() { s.m.connRefused.With("per_ip").Inc() }})
}
