//go:build !unix

package gwbench

import "time"

// selfCPU is unknown here.
func selfCPU() time.Duration { return -1 }
