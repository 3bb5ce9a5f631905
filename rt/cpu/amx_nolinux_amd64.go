//go:build !purego && !linux

package cpu

// amxPermit reports whether this OS lets the process use the tile
// registers: only Linux's way of asking (amx_linux_amd64.go) is known here,
// so BF16 runs on rounded operands elsewhere.
func amxPermit() bool { return false }
