//go:build linux

package main

import "golang.org/x/sys/unix"

// pipeSize is what the host asks for its stdio pipes: a 512 KiB message
// then crosses in one write instead of eight 64 KiB ones, each a wake-up
// of the other side. Linux lets an unprivileged process raise a pipe it
// holds up to /proc/sys/fs/pipe-max-size (1 MiB by default).
const pipeSize = 1 << 20

func enlargePipes() {
	for _, fd := range []int{0, 1} {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, pipeSize) // not a pipe, or capped: keep the default
	}
}
