// Command mlbuild is a build system for neural networks: it checks a model
// spec written in CUE, plans it, and compiles it to a standalone binary that
// trains, evaluates and runs that one model.
package main

import (
	"os"

	"github.com/mlbuild/mlbuild/spec"
)

func main() {
	exitAfter(os.Args[1:])
}

// exitAfter runs mlbuild as a process: with spec.OverMemory set, a spec
// whose evaluation passes spec.MaxEvalMemory ends the process at once with
// its positioned error and ExitInvalid, before CUE doubles it again
// (run alone, in-process, leaves it to spec.Load's return).
func exitAfter(args []string) {
	spec.OverMemory = func(err error) {
		reportSpecError(os.Stderr, err)
		os.Exit(ExitInvalid)
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}
