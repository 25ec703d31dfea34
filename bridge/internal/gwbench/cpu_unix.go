//go:build unix

package gwbench

import (
	"syscall"
	"time"
)

// selfCPU is the CPU time (user and system) this process has used; -1 if
// unknown.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
