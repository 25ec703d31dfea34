//go:build !unix

package proxy

func raiseFileLimit(want uint64) uint64 { return 0 }
