//go:build !linux

package app

// systemMemory is unknown off Linux: there is no cheap, dependable figure
// of the memory a process may still take (macOS and Windows grow swap on
// demand), and a guess could refuse a model that would run. MemoryEnv
// still sets one.
func systemMemory() (int64, string, bool) { return 0, "", false }

// peakRSS is not reported off Linux (ru_maxrss's unit differs between
// the BSDs and macOS, and Windows has none).
func peakRSS() (int64, bool) { return 0, false }
