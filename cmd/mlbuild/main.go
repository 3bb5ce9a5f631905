// Command mlbuild is a build system for neural networks: it checks a model
// spec written in CUE, plans it, and compiles it to a standalone binary that
// trains, evaluates and runs that one model.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
