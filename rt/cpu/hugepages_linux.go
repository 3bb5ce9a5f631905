package cpu

import (
	"syscall"
	"unsafe"
)

// hugeBytes is the smallest buffer that Floats asks the kernel to back
// with huge pages: below it the 4 KiB pages cost little.
const hugeBytes = 4 << 20

// Floats makes n zeroed float32s. A buffer of hugeBytes or more is marked
// for transparent huge pages (madvise MADV_HUGEPAGE, which the kernel's
// default "madvise" mode waits for), so that its first touch costs a
// fault per 2 MiB rather than per 4 KiB: copying resnet18's 46 MB of
// weights into a fresh arena took about 11,000 faults, a fifth of a
// one-sample predict. Where the kernel has no huge pages the advice is
// refused and ignored; the memory is Go's either way.
func Floats(n int) []float32 {
	a := make([]float32, n)
	if 4*n >= hugeBytes {
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), 4*n)
		skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (pageBytes - 1))
		_ = syscall.Madvise(b[skip:], syscall.MADV_HUGEPAGE)
	}
	return a
}

// pageBytes is the base page size, to which madvise's start is aligned.
var pageBytes = uintptr(syscall.Getpagesize())
