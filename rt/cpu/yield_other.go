//go:build !linux

package cpu

// osYield does nothing where sched_yield is not at hand; the polling loops
// that call it also yield the processor to other goroutines.
func osYield() {}
