package main

import (
	"strings"
	"testing"
)

// TestUnknownSubcommand: a misspelt command is a usage error (exit 2) that
// names the nearest command, below the root too: `mlbuild cache trm` used
// to print cache's help and exit 0, as if it had worked.
func TestUnknownSubcommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compil", "x.cue"}, "Did you mean this?\n\tcompile"},
		{[]string{"cache", "trm"}, `unknown command "trm" for "mlbuild cache"; did you mean "trim"? (its commands: clean, dir, ls, trim)`},
		{[]string{"completion", "bsh"}, `did you mean "bash"?`},
		{[]string{"cache", "zzz"}, `unknown command "zzz" for "mlbuild cache" (its commands: clean, dir, ls, trim)`},
	} {
		code, stdout, stderr := mlbuild(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("mlbuild %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(c.args, " "), code, stdout, stderr, ExitUsage, c.want)
		}
	}
	// the group alone still prints its help
	if code, stdout, _ := mlbuild(t, "cache"); code != ExitOK || !strings.Contains(stdout, "Available Commands") {
		t.Errorf("mlbuild cache: exit %d, %s", code, stdout)
	}
}
