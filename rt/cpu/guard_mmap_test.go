//go:build linux || darwin

package cpu

import (
	"syscall"
	"testing"
	"unsafe"
)

// guardedFloats returns a slice of n floats whose last element is the last
// word before a page the process may not touch, so that a kernel reading
// past the end of an operand faults instead of reading a neighbour's
// memory. The mapping is released when the test ends.
func guardedFloats(t *testing.T, n int) []float32 {
	t.Helper()
	page := syscall.Getpagesize()
	data := (4*n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, data+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[data:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&mem[data-4*n])), n)
}

// guardedFloatsWork reports whether guardedFloats really ends its slices at
// an unreadable page here.
const guardedFloatsWork = true
