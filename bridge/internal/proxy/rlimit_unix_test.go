//go:build unix

package proxy

import "syscall"

// raiseFileLimit raises RLIMIT_NOFILE to want (the hard limit too, which
// needs privilege) and returns the soft limit in force.
func raiseFileLimit(want uint64) uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0
	}
	if l.Cur >= want {
		return l.Cur
	}
	n := l
	n.Cur = want
	if n.Max < want {
		n.Max = want
	}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &n) != nil {
		n.Cur, n.Max = min(want, l.Max), l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &n)
	}
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur
}
