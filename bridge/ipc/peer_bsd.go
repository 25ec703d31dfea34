//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package ipc

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// PeerUID returns the uid of the process on the other end of a Unix socket
// (getpeereid).
func PeerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("peer uid: %T is not a Unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("peer uid: %w", err)
	}
	uid := -1
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		var u int
		u, _, credErr = getpeereid(int(fd))
		uid = u
	}); err != nil {
		return -1, fmt.Errorf("peer uid: %w", err)
	}
	if credErr != nil {
		return -1, fmt.Errorf("peer uid: getpeereid: %w", credErr)
	}
	return uid, nil
}

// getpeereid is LOCAL_PEERCRED, which is what libc's getpeereid reads.
func getpeereid(fd int) (uid, gid int, err error) {
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return -1, -1, err
	}
	gid = -1
	if cred.Ngroups > 0 {
		gid = int(cred.Groups[0])
	}
	return int(cred.Uid), gid, nil
}
