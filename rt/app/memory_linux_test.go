package app

import "testing"

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
