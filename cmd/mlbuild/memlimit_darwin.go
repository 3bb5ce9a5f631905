package main

import (
	"encoding/binary"
	"syscall"
)

// machineMemory is the machine's physical memory in bytes (sysctl
// hw.memsize), or 0 (no limit) when it cannot be read.
func machineMemory() int64 {
	s, err := syscall.Sysctl("hw.memsize")
	if err != nil {
		return 0
	}
	b := []byte(s)
	// Sysctl returns the raw little-endian value with its trailing zero
	// bytes trimmed.
	for len(b) < 8 {
		b = append(b, 0)
	}
	return int64(binary.LittleEndian.Uint64(b[:8]))
}
