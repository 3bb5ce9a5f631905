// Package mlbuild is the root of mlbuild's module. It holds no code of its
// own beyond embedded files that the emitter copies into generated programs
// and that //go:embed can only reach from here: the runtime (rt/), the
// device packages (mps/, cuda/), the carried third-party modules (third_party/)
// and the module's go.sum.
package mlbuild

import "embed"

// RuntimeSources is the source of every package a produced program may
// link: the runtime packages rt/* (Go, assembly and the assembly's
// #include headers) and the GPU device packages with their fakes (tests
// included; the emitter copies only the non-test files a
// program needs, rewriting their imports to the program's module).
//
//go:embed rt/*/*.go rt/*/*.s rt/*/*.h mps/*.go mps/*/*.go cuda/*.go cuda/*/*.go cuda/*/*.h
var RuntimeSources embed.FS

// GoSum is mlbuild's own go.sum. emit's tests check the module zips that
// mlbuild carries for generated programs (third_party/) against it.
//
//go:embed go.sum
var GoSum []byte
