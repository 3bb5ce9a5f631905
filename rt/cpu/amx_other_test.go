//go:build !amd64 || purego

package cpu

// twinTiles returns nil: off amd64 there are no packers for the tiles' Go
// twin.
func twinTiles() *amxLocal { return nil }
