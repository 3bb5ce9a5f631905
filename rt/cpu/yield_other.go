//go:build !linux

package cpu

// osYield does nothing where sched_yield is not at hand; the idle workers'
// polling loop that calls it also yields the processor to other goroutines.
func osYield() {}
