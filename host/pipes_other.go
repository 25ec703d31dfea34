//go:build !linux

package main

// enlargePipes has nothing to do where pipe sizes are fixed.
func enlargePipes() {}
