// Package mlbuild is the root of mlbuild's module. It holds no code of its
// own beyond embedded files that the emitter copies into generated programs
// and that //go:embed can only reach from here: the Metal runtime (mps/),
// the carried third-party modules (third_party/) and the module's go.sum.
package mlbuild

import "embed"

// MPSSources is the source of the Metal runtime package mps and its
// subpackages (tests included; the emitter copies what a program needs),
// written into every generated Metal program's module as mlbuildprog/mps.
//
//go:embed mps/*.go mps/*/*.go
var MPSSources embed.FS

// GoSum is mlbuild's own go.sum. emit's tests check the module zips that
// mlbuild carries for generated programs (third_party/) against it.
//
//go:embed go.sum
var GoSum []byte
