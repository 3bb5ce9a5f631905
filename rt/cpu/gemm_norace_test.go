//go:build !race

package cpu

// raceEnabled is set under the race detector, whose sync.Pool drops items
// on purpose, so allocation counts mean nothing there.
const raceEnabled = false
