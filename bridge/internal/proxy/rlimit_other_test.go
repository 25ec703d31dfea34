//go:build !unix

package proxy

import "time"

func raiseFileLimit(want uint64) uint64 { return 0 }

func processCPU() time.Duration { return 0 }
