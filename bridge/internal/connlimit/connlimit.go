// Package connlimit bounds the TCP connections one client address may hold
// open at once on a server: a listener that counts them as they are
// accepted, beneath TLS and HTTP, so that idle keep-alive connections,
// half-open handshakes and WebSockets all count. The cloud proxy and the
// public gateway use it (docs/limits.md, "Connections").
package connlimit

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
)

// Refusing a connection over the per-address cap: the refusal reads the
// request head (so that the client is waiting for an answer, not still
// writing, when it comes) and writes a 429, all within refuseWait; at most
// maxRefusing refusals run at once, and past that a connection is closed
// without a word, so that a flood costs a bounded number of goroutines.
const (
	refuseWait     = 2 * time.Second
	maxRefusing    = 64
	refuseHeadSize = 8 << 10
	// RetryAfter is the Retry-After, in seconds, of a refusal.
	RetryAfter = 10
)

// Options configures Listen. Every zero value is documented on its field.
type Options struct {
	// MaxPerAddr caps the connections open at once from one address (an
	// IPv4 address, an IPv6 /64; see AddrKey). 0 or negative: no cap.
	MaxPerAddr int
	// TLS, if set, is added above the count: the listener's connections
	// are then TLS server connections. Nil: plain TCP.
	TLS *tls.Config
	// Exempt, if set, names peers whose connections are not counted: a
	// reverse proxy in front, which carries many clients' connections and
	// bounds them itself. Nil: none.
	Exempt func(netip.Addr) bool
	// Refused, if set, is called for each connection refused (a metric).
	Refused func()
}

// Listen wraps ln: Accept returns the connections under the cap and
// answers the others in the background with a 429, whose body is a
// JSON-RPC error object with a sentence, then closes them. A connection
// gives its place back when it is closed, whoever closes it (the HTTP
// server, or a WebSocket that took it over).
func Listen(ln net.Listener, opts Options) *Listener {
	return &Listener{listener{Listener: ln, opts: opts, open: make(map[string]int), slots: make(chan struct{}, maxRefusing)}}
}

// Listener is Listen's listener. Besides the connections it accepts, it
// counts places held with Hold: the clients behind an exempt reverse
// proxy, whose connections are the proxy's, against the same cap.
type Listener struct{ listener }

// Hold takes a place for a client at key (AddrKey's form, or an address
// a trusted proxy vouched for) until release is called, once; false when
// the key holds the cap already (answer with Refusal and RetryAfter).
func (l *Listener) Hold(key string) (release func(), ok bool) {
	if !l.take(key) {
		if l.opts.Refused != nil {
			l.opts.Refused()
		}
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { l.release(key) }) }, true
}

// Refusal is the sentence a client over the cap is told.
func (l *Listener) Refusal() string { return refusalText(l.opts.MaxPerAddr) }

type listener struct {
	net.Listener
	opts Options

	mu    sync.Mutex
	open  map[string]int // by AddrKey
	slots chan struct{}  // one per refusal running
}

// Accept returns the next connection under the cap; those over it are
// refused in the background.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.exempt(c.RemoteAddr()) {
			return l.wrapTLS(c), nil
		}
		key := AddrKey(c.RemoteAddr())
		if !l.take(key) {
			if l.opts.Refused != nil {
				l.opts.Refused()
			}
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
		return l.wrapTLS(&countedConn{Conn: c, release: func() { l.release(key) }}), nil
	}
}

func (l *listener) wrapTLS(c net.Conn) net.Conn {
	if l.opts.TLS != nil {
		return tls.Server(c, l.opts.TLS)
	}
	return c
}

func (l *listener) exempt(a net.Addr) bool {
	if l.opts.Exempt == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && l.opts.Exempt(ap.Addr().Unmap())
}

func (l *listener) take(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opts.MaxPerAddr > 0 && l.open[key] >= l.opts.MaxPerAddr {
		return false
	}
	l.open[key]++
	return true
}

func (l *listener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// refuse answers one request on c with 429 and a sentence, and closes c.
func (l *listener) refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseWait))
	c = l.wrapTLS(c)
	if _, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, refuseHeadSize))); err != nil {
		return // not HTTP, or too slow: nobody to tell
	}
	body := refusal(l.opts.MaxPerAddr)
	_, _ = io.WriteString(c, "HTTP/1.1 429 Too Many Requests\r\n"+
		"Content-Type: application/json\r\n"+
		"Retry-After: "+strconv.Itoa(RetryAfter)+"\r\n"+
		"Connection: close\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
}

// refusal is the 429's body: a JSON-RPC error object with a null id and
// the server-range code, as every HTTP-level refusal is (httpguard).
func refusal(max int) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32000, "message": refusalText(max)}})
	return string(b) + "\n"
}

func refusalText(max int) string {
	return fmt.Sprintf("too many connections from your address: at most %d may be open at once; close some and retry", max)
}

// AddrKey is the address connections are counted under, the one every
// per-address limit uses ([httpguard.ClientKey]): the IP for IPv4, the /64
// for IPv6.
func AddrKey(a net.Addr) string {
	s := a.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	return httpguard.ClientKey(s)
}

// countedConn gives its place back when it is closed, once.
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
