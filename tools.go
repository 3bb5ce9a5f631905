//go:build tools

package mlbuild

import (
	_ "cuelang.org/go/cue"
	_ "github.com/ebitengine/purego"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
)
