package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run the test binary as the mlbuild command, so
// that the scripts in testdata/script exercise the real command line
// (flags, exit codes, stdout and stderr) without building a binary.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"mlbuild": func() { exitAfter(os.Args[1:]) },
	})
}

// TestScript runs every testdata/script/*.txtar: each holds the specs a
// case needs and the mlbuild commands to run, with their expected output.
// The folder holds the cases for validate, shapes, init and version.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "../../testdata/script",
		Setup: func(env *testscript.Env) error {
			// keep a user's mlbuild.yaml out of the scripts
			env.Setenv("XDG_CONFIG_HOME", env.WorkDir+"/.config")
			return nil
		},
	})
}
