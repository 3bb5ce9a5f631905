package app

import (
	"runtime"
	"testing"
)

// TestSystemMemoryOnLinux: on Linux the check finds a figure (MemAvailable
// at least), and a plausible one.
func TestSystemMemoryOnLinux(t *testing.T) {
	n, src, ok := systemMemory()
	if !ok {
		t.Fatal("systemMemory found no figure: /proc/meminfo has no MemAvailable?")
	}
	if n <= 0 || n > 1<<50 || src == "" {
		t.Errorf("systemMemory() = %d from %q", n, src)
	}
}

// TestPeakRSS: the peak resident memory bench reports grows past a buffer
// the process has touched.
func TestPeakRSS(t *testing.T) {
	before, ok := peakRSS()
	if !ok || before <= 0 {
		t.Fatalf("peakRSS() = %d, %v", before, ok)
	}
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = byte(i)
	}
	after, _ := peakRSS()
	if after < 64<<20 || after < before {
		t.Errorf("peak RSS %d bytes after touching 64 MiB (before: %d)", after, before)
	}
	runtime.KeepAlive(b)
}
