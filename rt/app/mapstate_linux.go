package app

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// mapState returns an arena of size float32s whose first len(image)/4
// hold image, a part of the program's own executable in memory (the
// weights that `mlbuild compile --weights` laid out as the arena), and
// the rest zeros, without copying: the image's pages of the executable
// file are mapped copy-on-write in front of anonymous zero pages, so that
// a one-sample predict reads only the weights it uses, from the page
// cache, and a write (training) copies only the pages it touches. It
// returns nil, and the caller copies, where that cannot be done: the image
// is not 4-byte aligned, is not in a mapping of the executable, or the
// mapped bytes differ from it.
func mapState(image []byte, size int) []float32 {
	if len(image) == 0 || len(image) > 4*size || uintptr(unsafe.Pointer(unsafe.SliceData(image)))%4 != 0 {
		return nil
	}
	off, ok := exeOffset(uintptr(unsafe.Pointer(unsafe.SliceData(image))), len(image))
	if !ok {
		return nil
	}
	// A raw descriptor: os.File's Fd brings 20 KB of bookkeeping.
	exe, err := syscall.Open("/proc/self/exe", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(exe)
	page := int64(syscall.Getpagesize())
	lead := int(off % page)
	// One anonymous reservation for the whole arena, then the image's
	// pages of the file over its start.
	total := lead + 4*size
	base, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, uintptr(total), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON, ^uintptr(0), 0)
	if errno != 0 {
		return nil
	}
	// Raw system calls rather than syscall.Mmap, whose bookkeeping adds
	// 20 KB to every program.
	// (The memory is outside Go's heap: its address may be held as a
	// uintptr; the double conversion keeps vet's pointer check quiet.)
	region := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&base))), total)
	unmap := func() { syscall.Syscall(syscall.SYS_MUNMAP, base, uintptr(total), 0) }
	fileLen := (lead + len(image) + int(page) - 1) / int(page) * int(page)
	fileLen = min(fileLen, len(region))
	_, _, errno = syscall.Syscall6(syscall.SYS_MMAP, base, uintptr(fileLen),
		syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_FIXED, uintptr(exe), uintptr(off-int64(lead)))
	if errno != 0 {
		unmap()
		return nil
	}
	arena := region[lead : lead+4*size]
	// The file's bytes after the image (the rest of the program's data)
	// are the arena's zeros; a check of both ends of the image makes sure
	// the mapping is the image.
	clear(arena[len(image):min(fileLen-lead, len(arena))])
	ends := min(len(image), 4096)
	if !bytes.Equal(arena[:ends], image[:ends]) || !bytes.Equal(arena[len(image)-ends:len(image)], image[len(image)-ends:]) {
		unmap()
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&arena[0])), size)
}

// exeOffset returns the offset in the executable file of the n bytes at
// addr, from /proc/self/maps: they must lie in one mapping of a file.
func exeOffset(addr uintptr, n int) (int64, bool) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, false
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(maps), "\n") {
		// lo-hi perms offset dev inode path (fmt's scanner would add 80 KB
		// to every program)
		fields := strings.Fields(line)
		if len(fields) != 6 {
			continue // no path, or a path with spaces: not matched
		}
		span := strings.SplitN(fields[0], "-", 2)
		if len(span) != 2 {
			continue
		}
		lo, err1 := strconv.ParseUint(span[0], 16, 64)
		hi, err2 := strconv.ParseUint(span[1], 16, 64)
		off, err3 := strconv.ParseInt(fields[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if uintptr(lo) <= addr && addr+uintptr(n) <= uintptr(hi) {
			if fields[5] != exe || fields[4] == "0" {
				return 0, false
			}
			return off + int64(addr-uintptr(lo)), true
		}
	}
	return 0, false
}
