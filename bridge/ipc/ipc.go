// Package ipc is the local link between the native host and the bridge: a
// Unix socket in a directory only the user can enter, held by at most one
// bridge at a time, whose peers are checked to be the same user.
//
//	ln, err := ipc.Listen(path)  // bridge: 0700 dir, lock, 0600 socket
//	c, err := ipc.Dial(ctx, path) // host and CLI
//	uid, err := ipc.PeerUID(c)    // bridge, on every accepted connection
package ipc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrAlreadyServing means another bridge holds the socket's lock.
var ErrAlreadyServing = errors.New("another bridge is already serving this socket")

// ErrNoPeerCredentials means the platform cannot tell who is on the other
// end of a socket (Windows); the directory's ACL is the only guard there.
var ErrNoPeerCredentials = errors.New("peer credentials are not available on this platform")

// Listener is a Unix-socket listener that also holds the bridge's lock.
// Close releases both and removes the socket file.
type Listener struct {
	net.Listener
	path       string
	unlock     func()
	unlockOnce sync.Once
}

// Close stops listening, removes the socket and releases the lock. It is
// safe to call more than once and from several goroutines.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.unlockOnce.Do(l.unlock)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Path returns the socket's path.
func (l *Listener) Path() string { return l.path }

// Listen prepares the socket's directory (created 0700; refused if it is a
// symlink, another user's, or open to others), takes the directory's lock so
// two bridges never race for one socket, removes a stale socket file left by
// a crashed bridge, listens, and makes the socket 0600.
func Listen(path string) (*Listener, error) {
	dir := filepath.Dir(path)
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	// Holding the lock, any socket file left is stale.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		unlock()
		return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	// Only the socket's own name is unlinked by Close, not whatever replaced it.
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		unlock()
		return nil, fmt.Errorf("restricting %s to its owner: %w", path, err)
	}
	return &Listener{Listener: ln, path: path, unlock: unlock}, nil
}

// SocketBuffer is the send and receive buffer both ends ask for, so that a
// message of up to 1 MiB (the largest that goes to the browser unchunked)
// crosses without the writer waiting on the reader mid-message.
const SocketBuffer = 1 << 20

// Tune sets the socket buffers of a link connection; a platform that caps
// them keeps its own sizes.
func Tune(c net.Conn) {
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.SetReadBuffer(SocketBuffer)
		_ = uc.SetWriteBuffer(SocketBuffer)
	}
}

// Dial connects to the bridge's socket.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connecting to the bridge at %s: %w", path, err)
	}
	Tune(c)
	return c, nil
}

// lockHolder reads the pid a bridge wrote into the lock file, for messages.
func lockHolder(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, lockName))
	if err != nil {
		return ""
	}
	pid := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(pid); err != nil {
		return ""
	}
	return " (pid " + pid + ")"
}

const lockName = "bridge.lock"
