package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
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
	msg := fmt.Sprintf("too many connections from your address: at most %d may be open at once; close some and retry\n", l.max)
	_, _ = io.WriteString(c, "HTTP/1.1 429 Too Many Requests\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n"+
		"Retry-After: "+strconv.Itoa(refuseRetry)+"\r\n"+
		"Connection: close\r\n"+
		"Content-Length: "+strconv.Itoa(len(msg))+"\r\n\r\n"+msg)
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
