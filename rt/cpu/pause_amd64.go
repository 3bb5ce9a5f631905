//go:build !purego

package cpu

// spinPause is one PAUSE instruction: a polling loop's wait that tells the
// core (and its hyperthread sibling) that it spins, and saves power.
func spinPause()
