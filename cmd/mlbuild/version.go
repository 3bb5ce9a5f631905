package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// version is mlbuild's version, set at build time with
// -ldflags "-X main.version=v1.2.3"; "devel" for a plain go build.
var version = "devel"

// mlbuildVersion is the version written into generated programs and build
// keys: the one `mlbuild version` prints.
func mlbuildVersion() string { return version }

func init() { subcommands = append(subcommands, newVersionCmd) }

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mlbuild's version and the Go version it was built with",
		Long: `Version prints mlbuild's version (set with -ldflags "-X main.version=...")
and the Go toolchain that built it.

Examples:
  mlbuild version
`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(g.stdout, "mlbuild %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
