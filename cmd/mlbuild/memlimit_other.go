//go:build !linux && !darwin

package main

// machineMemory is 0 (no limit) where mlbuild has no portable way to ask
// for the machine's memory; --memory-limit sets one explicitly.
func machineMemory() int64 { return 0 }
