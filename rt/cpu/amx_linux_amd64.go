//go:build !purego

package cpu

import "syscall"

// amxPermit asks Linux for the tile registers (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA): a process must, before its first
// tile instruction, or that instruction faults.
func amxPermit() bool {
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}
