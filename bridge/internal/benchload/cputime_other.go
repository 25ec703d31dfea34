//go:build !unix

package benchload

import "time"

// ProcessCPU is not measured here: benchmarks report 0 CPU per call.
func ProcessCPU() time.Duration { return 0 }
