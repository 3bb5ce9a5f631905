//go:build !linux

package app

// systemMemory is unknown off Linux: there is no cheap, dependable figure
// of the memory a process may still take (macOS and Windows grow swap on
// demand), and a guess could refuse a model that would run. MemoryEnv
// still sets one.
func systemMemory() (int64, string, bool) { return 0, "", false }
