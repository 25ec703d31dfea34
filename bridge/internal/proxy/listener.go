package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Refusing a connection over the per-address cap: the refusal reads the
// request head (so that the client is waiting for an answer, not still
// writing, when it comes) and writes a 429, all within refuseWait; at most
// maxRefusing refusals run at once, and past that a connection is closed
// without a word, so that a flood costs a bounded number of goroutines.
const (
	refuseWait     = 2 * time.Second
	maxRefusing    = 64
	refuseRetry    = 10 // Retry-After, seconds
	refuseHeadSize = 8 << 10
)

// limitListener counts the connections open from each client address and
// refuses those over the cap. It wraps the TCP listener, beneath TLS (which
// it adds itself when configured), so that it sees every connection the
// moment it is accepted, before any handshake or request.
//
// A connection from a trusted proxy (Options.TrustedProxies) carries many
// clients, so it is not counted here: forwardedConns counts each of its
// requests, and each WebSocket upgraded on it, under the client address
// the proxy vouches for, against the same cap.
type limitListener struct {
	net.Listener
	max int
	tls *tls.Config
	s   *Server

	mu    sync.Mutex
	open  map[string]int // by addrKey
	slots chan struct{}  // one per refusal running
}

func newLimitListener(ln net.Listener, max int, tc *tls.Config, s *Server) *limitListener {
	return &limitListener{Listener: ln, max: max, tls: tc, s: s, open: make(map[string]int), slots: make(chan struct{}, maxRefusing)}
}

// Accept returns the next connection under the cap; those over it are
// refused in the background.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.proxies.Trusts(peerAddr(c.RemoteAddr())) {
			if l.tls != nil {
				return tls.Server(c, l.tls), nil
			}
			return c, nil
		}
		key := addrKey(c.RemoteAddr())
		if !l.take(key) {
			l.s.m.connRefused.With("per_ip").Inc()
			select {
			case l.slots <- struct{}{}:
				go func() {
					defer func() { <-l.slots }()
					l.refuse(c)
				}()
			default:
				c.Close()
			}
			continue
		}
		var nc net.Conn = &countedConn{Conn: c, release: func() { l.release(key) }}
		if l.tls != nil {
			nc = tls.Server(nc, l.tls)
		}
		return nc, nil
	}
}

func (l *limitListener) take(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.open[key] >= l.max {
		return false
	}
	l.open[key]++
	return true
}

func (l *limitListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// refuse answers one request on c with 429 and a sentence, and closes c.
func (l *limitListener) refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseWait))
	if l.tls != nil {
		c = tls.Server(c, l.tls)
	}
	if _, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, refuseHeadSize))); err != nil {
		return // not HTTP, or too slow: nobody to tell
	}
	msg := tooManyConns(l.max)
	_, _ = io.WriteString(c, "HTTP/1.1 429 Too Many Requests\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n"+
		"Retry-After: "+strconv.Itoa(refuseRetry)+"\r\n"+
		"Connection: close\r\n"+
		"Content-Length: "+strconv.Itoa(len(msg))+"\r\n\r\n"+msg)
}

func tooManyConns(max int) string {
	return fmt.Sprintf("too many connections from your address: at most %d may be open at once; close some and retry\n", max)
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
		key := ipKey(r.RemoteAddr)
		if !l.take(key) {
			l.s.m.connRefused.With("per_ip").Inc()
			w.Header().Set("Retry-After", strconv.Itoa(refuseRetry))
			http.Error(w, strings.TrimSuffix(tooManyConns(l.max), "\n"), http.StatusTooManyRequests)
			return
		}
		h := &forwardedHold{release: func() { l.release(key) }}
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

// peerAddr is a connection's peer address, unmapped; the zero Addr if it
// is not an IP address.
func peerAddr(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// addrKey is the address connections are counted under: the IP for IPv4,
// the /64 for IPv6 (one host commonly holds a whole /64).
func addrKey(a net.Addr) string {
	var ip net.IP
	switch a := a.(type) {
	case *net.TCPAddr:
		ip = a.IP
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		ip = net.ParseIP(host)
		if ip == nil {
			return host
		}
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// countedConn gives its place back when it is closed, once, whoever closes
// it: the HTTP server, or a WebSocket that took it over.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
