//go:build linux || darwin

package npy

import (
	"errors"
	"os"
	"syscall"
)

// mapFile maps size bytes of f read-only into memory. The mapping outlives
// the file descriptor; unmap releases it.
func mapFile(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	if size <= 0 || size != int64(int(size)) {
		return nil, nil, errors.New("cannot map an empty or oversized file")
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
