//go:build race

package proxy

// raceBuild: the race detector is on, so memory figures (its shadow memory
// multiplies them) and timings say little.
const raceBuild = true
