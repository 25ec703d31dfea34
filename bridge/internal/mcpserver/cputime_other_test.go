//go:build !unix

package mcpserver

import "time"

// cpuTime is not measured here: benchmarks report 0 CPU per call.
func cpuTime() time.Duration { return 0 }
