//go:build unix

package cpu

import (
	"syscall"
	"testing"
)

// reportCPUTime reports the process's CPU time per iteration since start
// (from processCPU) as cpu-ms/op: on a machine shared with other work the
// wall time of a single-threaded benchmark includes waiting for a core,
// its CPU time does not.
func reportCPUTime(b *testing.B, start int64) {
	b.ReportMetric(float64(processCPU()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

// processCPU is the user and system time this process has used, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
