package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is mlbuild's version, set at build time with
// -ldflags "-X main.version=v1.2.3" (make build sets it from git describe).
var version = "devel"

// mlbuildVersion is the version written into generated programs and build
// keys: the one `mlbuild version` prints. Without -X it is the module
// version the go command stamped (go install ...@v1.2.3, or a pseudo-version
// from the checkout's commit); when the module version is "(devel)" but the
// build recorded its commit (vcs.revision), "devel-" and that commit
// ("-dirty" when modified); and "devel" when the build recorded nothing
// (go build -buildvcs=false, or a copy of the sources outside git).
func mlbuildVersion() string {
	if version != "devel" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	return versionFromBuildInfo(bi)
}

// versionFromBuildInfo is mlbuildVersion's reading of the go command's stamp.
func versionFromBuildInfo(bi *debug.BuildInfo) string {
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		return "devel-" + rev + "-dirty"
	}
	return "devel-" + rev
}

// versionIsExact reports whether a version names one build of mlbuild's
// sources: not "devel", and not a build of a modified checkout.
func versionIsExact(v string) bool {
	return v != "devel" && !strings.Contains(v, "dirty")
}

// versionLine is what `mlbuild version` and `mlbuild --version` print.
func versionLine() string {
	return fmt.Sprintf("mlbuild %s %s %s/%s\n", mlbuildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func init() { subcommands = append(subcommands, newVersionCmd) }

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mlbuild's version and the Go version it was built with (also --version)",
		Long: `Version prints mlbuild's version (set with -ldflags "-X main.version=...")
and the Go toolchain that built it.

Examples:
  mlbuild version
`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(g.stdout, versionLine())
			return nil
		},
	}
}
