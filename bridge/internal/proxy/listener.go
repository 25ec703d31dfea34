package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/browserbridge/browserbridge/bridge/internal/connlimit"
	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// limitListener counts the connections open from each client address and
// refuses those over the cap (connlimit, which the public gateway shares).
// It wraps the TCP listener, beneath TLS (which it adds itself when
// configured), so that it sees every connection the moment it is
// accepted, before any handshake or request.
//
// A connection from a trusted proxy (Options.TrustedProxies) carries many
// clients, so it is not counted there: forwardedConns counts each of its
// requests, and each WebSocket upgraded on it, under the client address
// the proxy vouches for, against the same cap (connlimit's Hold).
type limitListener struct {
	*connlimit.Listener
	s *Server
}

func newLimitListener(ln net.Listener, max int, tc *tls.Config, s *Server) *limitListener {
	opts := connlimit.Options{MaxPerAddr: max, TLS: tc, Refused: func() { s.m.connRefused.With("per_ip").Inc() }}
	if s.proxies != nil {
		opts.Exempt = s.proxies.Trusts
	}
	return &limitListener{Listener: connlimit.Listen(ln, opts), s: s}
}

// forwardedConns is the handler Run serves with behind the listener: a
// request from a trusted proxy (Options.TrustedProxies) is given the client
// address the proxy vouches for as its RemoteAddr, for every limit counted
// by address behind it (the sign-in's and pairing's, the MCP endpoints'
// rates), and holds one of that address's places under MaxConnsPerIP while
// it is served, or, if it becomes a WebSocket, while that lives
// (holdForwarded). A request from any other peer passes unchanged: its
// connection was counted by the listener, and its X-Forwarded-For is no
// one's word.
func (l *limitListener) forwardedConns(next http.Handler) http.Handler {
	if l.s.proxies == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil || !l.s.proxies.Trusts(ap.Addr()) {
			next.ServeHTTP(w, r)
			return
		}
		r = l.s.proxies.FromProxy(r)
		release, ok := l.Hold(httpguard.ClientKey(r.RemoteAddr))
		if !ok {
			w.Header().Set("Retry-After", strconv.Itoa(connlimit.RetryAfter))
			mcphttp.WriteError(w, http.StatusTooManyRequests, nil, -32000, l.Refusal())
			return
		}
		h := &forwardedHold{release: release}
		defer h.done()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardedHoldKey{}, h)))
	})
}

// forwardedHold is one place of a client behind a trusted proxy; it is
// given back when the request ends, unless a WebSocket keeps it.
type forwardedHold struct {
	once    sync.Once
	release func()
	kept    atomic.Bool
}

type forwardedHoldKey struct{}

func (h *forwardedHold) done() {
	if !h.kept.Load() {
		h.once.Do(h.release)
	}
}

// holdForwarded makes the place of r's client (if r came through a trusted
// proxy) last until done is closed: the life of the WebSocket r became.
func holdForwarded(r *http.Request, done <-chan struct{}) {
	h, _ := r.Context().Value(forwardedHoldKey{}).(*forwardedHold)
	if h == nil {
		return
	}
	h.kept.Store(true)
	go func() {
		<-done
		h.once.Do(h.release)
	}()
}
