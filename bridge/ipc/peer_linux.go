//go:build linux

package ipc

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// PeerUID returns the uid of the process on the other end of a Unix socket,
// as the kernel recorded it at connect time (SO_PEERCRED).
func PeerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("peer uid: %T is not a Unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("peer uid: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, fmt.Errorf("peer uid: %w", err)
	}
	if credErr != nil {
		return -1, fmt.Errorf("peer uid: SO_PEERCRED: %w", credErr)
	}
	return int(cred.Uid), nil
}
