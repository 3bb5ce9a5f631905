// Package rt holds the runtime libraries that programs produced by mlbuild
// link: cpu (kernels), app (the command line and training loop), idx,
// safetensors, imageio, progress and atomicfile. mlbuild embeds their source
// and writes it into each generated program's module, so an installed
// mlbuild builds models offline with only a Go toolchain.
package rt

import "embed"

// Sources is the source of the runtime packages (tests included; the
// emitter copies only what a program needs).
//
//go:embed */*.go */*.s
var Sources embed.FS
