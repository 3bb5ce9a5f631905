// Package mlbuild is the root of mlbuild's module. It holds no code of its
// own beyond embedded files that the emitter copies into generated programs
// and that //go:embed can only reach from here: the Metal runtime (mps/)
// and the module's go.sum.
package mlbuild

import "embed"

// MPSSources is the source of the Metal runtime package mps and its
// subpackages (tests included; the emitter copies what a program needs),
// written into every generated Metal program's module as mlbuildprog/mps.
//
//go:embed mps/*.go mps/*/*.go
var MPSSources embed.FS

// GoSum is mlbuild's own go.sum. The emitter copies the lines of the
// modules a generated program requires (purego for Metal), so the program
// builds offline (GOPROXY=off) against the checksums mlbuild was built with.
//
//go:embed go.sum
var GoSum []byte
