package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Options configure CheckURL, NewDialer and NewClient. The zero value is
// the strict production setting with the default limits.
type Options struct {
	// AllowPrivateForTests lets loopback (localhost, 127.0.0.0/8, ::1) and
	// private networks (10/8, 172.16/12, 192.168/16, fc00::/7) through, and
	// plain http to loopback: for tests against httptest servers only.
	// Metadata, link-local and the other ranges stay refused.
	AllowPrivateForTests bool
	// Purpose names the URL in refusals ("the client metadata document");
	// "" means "the URL".
	Purpose string

	// DialTimeout bounds connecting (default 5 s); TLSHandshakeTimeout the
	// handshake (default 5 s); ResponseHeaderTimeout the wait for the
	// response's header once the request is sent (default 10 s); Timeout
	// the whole exchange, redirects and body included (default 30 s).
	DialTimeout           time.Duration
	TLSHandshakeTimeout   time.Duration
	ResponseHeaderTimeout time.Duration
	Timeout               time.Duration
	// MaxRedirects is how many redirects NewClient follows (default 3);
	// negative: none, the 3xx response is returned as it is.
	MaxRedirects int
	// RootCAs are the certificate authorities trusted; nil: the system's.
	RootCAs *x509.CertPool
	// Resolver looks host names up; nil: net.DefaultResolver.
	Resolver *net.Resolver
}

// Default limits.
const (
	DefaultDialTimeout           = 5 * time.Second
	DefaultTLSHandshakeTimeout   = 5 * time.Second
	DefaultResponseHeaderTimeout = 10 * time.Second
	DefaultTimeout               = 30 * time.Second
	DefaultMaxRedirects          = 3
	// maxHeaderBytes bounds a response's header; net/http's default is 1 MiB.
	maxHeaderBytes = 64 << 10
)

func (o Options) purpose() string {
	if o.Purpose == "" {
		return "the URL"
	}
	return o.Purpose
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// NewDialer returns a dialer that refuses to connect to an address
// CheckURL would refuse, checked after the name is resolved: the address it
// connects to is the one checked, so DNS rebinding gains nothing. Only TCP.
func NewDialer(opts Options) *net.Dialer {
	return &net.Dialer{
		Timeout:        orDefault(opts.DialTimeout, DefaultDialTimeout),
		KeepAlive:      30 * time.Second,
		Resolver:       opts.Resolver,
		ControlContext: control(opts),
	}
}

func control(opts Options) func(ctx context.Context, network, address string, c syscall.RawConn) error {
	return func(_ context.Context, network, address string, _ syscall.RawConn) error {
		if network != "tcp4" && network != "tcp6" {
			return &RefusedError{"a connection to", address, "it is over " + network + ", and only TCP is allowed"}
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &RefusedError{"a connection to", address, "it is not an IP address and port"}
		}
		if v := classify(ap.Addr()); v.refusedWith(opts) {
			return &RefusedError{"a connection to", ap.Addr().String(), "it is " + v.phrase}
		}
		return nil
	}
}

// dialNaming dials with d and, when the dialer's check refused the address
// a host name resolved to, says so with the name.
func dialNaming(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		var re *RefusedError
		if err != nil && errors.As(err, &re) {
			host, _, _ := net.SplitHostPort(addr)
			if _, perr := netip.ParseAddr(host); perr != nil && host != "" {
				return nil, &RefusedError{"", host, "it resolves to " + re.Target + ", which " + strings.TrimPrefix(re.Reason, "it ")}
			}
			return nil, re
		}
		return conn, err
	}
}

// NewClient returns an HTTP client for URLs that anyone may supply: every
// request URL and every redirect target is checked (CheckURL), every
// address connected to is checked (NewDialer), proxies from the
// environment are ignored (a proxy would connect for us, unchecked), TLS is
// 1.2 or later, and opts' timeouts apply. At most opts.MaxRedirects
// redirects are followed, never from https to http. Read bodies with
// ReadBody or LimitReader.
func NewClient(opts Options) *http.Client {
	return newClient(opts, newTransport(opts))
}

func newTransport(opts Options) *http.Transport {
	return &http.Transport{
		Proxy:       nil,
		DialContext: dialNaming(NewDialer(opts)),
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			RootCAs:    opts.RootCAs,
		},
		TLSHandshakeTimeout:    orDefault(opts.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout),
		ResponseHeaderTimeout:  orDefault(opts.ResponseHeaderTimeout, DefaultResponseHeaderTimeout),
		MaxResponseHeaderBytes: maxHeaderBytes,
		// A custom dialer and TLS config turn HTTP/2 off unless asked for.
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          32,
		IdleConnTimeout:       60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// newClient builds the client around base (the real transport, or in
// tests a stand-in for servers out on the internet).
func newClient(opts Options, base http.RoundTripper) *http.Client {
	maxRedirects := opts.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}
	return &http.Client{
		Transport: &checkedTransport{opts: opts, base: base},
		Timeout:   orDefault(opts.Timeout, DefaultTimeout),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if maxRedirects < 0 {
				return http.ErrUseLastResponse
			}
			shown := Shown(req.URL)
			if len(via) > maxRedirects {
				return &RefusedError{"the redirect to", shown, fmt.Sprintf("it would be redirect number %d, and at most %d are followed", len(via), maxRedirects)}
			}
			if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme == "http" {
				return &RefusedError{"the redirect to", shown, "it would leave https for plain http"}
			}
			return checkParsed(req.URL, "the redirect target", opts)
		},
	}
}

// checkedTransport checks every request's URL before base sends it, so a
// caller that did not call CheckURL is covered too.
type checkedTransport struct {
	opts Options
	base http.RoundTripper
}

func (t *checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkParsed(req.URL, t.opts.purpose(), t.opts); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // RoundTrip must close it, even on error
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach base.
func (t *checkedTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// ErrTooLarge is what a body longer than its limit matches (errors.Is).
var ErrTooLarge = errors.New("netguard: body too large")

// TooLargeError is a body that went past its limit.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return "the response is larger than " + FormatSize(e.Limit) + ", the most accepted"
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// LimitReader reads r up to limit bytes; reading more fails with a
// *TooLargeError (io.LimitReader would end quietly, passing a cut body off
// as whole).
func LimitReader(r io.Reader, limit int64) io.Reader {
	return &limitedReader{r: r, limit: limit, left: limit}
}

type limitedReader struct {
	r     io.Reader
	limit int64
	left  int64 // -1 once the limit was passed
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, &TooLargeError{l.limit}
	}
	// Ask for one byte more than allowed: getting it is how we know.
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	if int64(n) > l.left {
		n, l.left = int(l.left), -1
		return n, &TooLargeError{l.limit}
	}
	l.left -= int64(n)
	return n, err
}

// ReadBody reads and closes resp.Body: all of it, or a *TooLargeError
// when it is longer than limit (told by Content-Length before reading, when
// the server sends one).
func ReadBody(resp *http.Response, limit int64) ([]byte, error) {
	defer resp.Body.Close()
	if resp.ContentLength > limit {
		return nil, &TooLargeError{limit}
	}
	return io.ReadAll(LimitReader(resp.Body, limit))
}

// FormatSize writes a byte count the way limits are spoken of: "64 KiB".
func FormatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Shown is u as refusals show it: scheme, host and path, without the query
// (which may carry secrets), shortened when long.
func Shown(u *url.URL) string {
	return shorten(u.Scheme + "://" + u.Host + u.EscapedPath())
}
