//go:build race

package cpu

// gemmRaceEnabled is set under the race detector, whose sync.Pool drops items
// on purpose, so allocation counts mean nothing there.
const gemmRaceEnabled = true
