package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestExitCodesMatchTheREADME: a spec that cannot be read exits 4 (a file
// could not be read) from every command that reads specs, an illegal one
// 1, and a panic in mlbuild 70 with a request to report it, as the
// README's table says.
func TestExitCodesMatchTheREADME(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nosuch.cue")
	good := filepath.Join(dir, "good.cue")
	bad := filepath.Join(dir, "bad.cue")
	os.WriteFile(good, []byte(hardSpecSource), 0o644)
	os.WriteFile(bad, []byte(strings.Replace(hardSpecSource, "units: 256", "units: 0", 1)), 0o644)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"validate", missing}, ExitIO},
		{[]string{"validate", dir}, ExitIO},
		{[]string{"validate", good, missing}, ExitIO},
		{[]string{"validate", bad, missing}, ExitIO},
		{[]string{"validate", "--format", "json", missing}, ExitIO},
		{[]string{"shapes", missing}, ExitIO},
		{[]string{"plan", missing}, ExitIO},
		{[]string{"compile", missing, "--cache-dir", filepath.Join(dir, "cache")}, ExitIO},
		{[]string{"validate", bad}, ExitInvalid},
		{[]string{"shapes", bad}, ExitInvalid},
		{[]string{"plan", bad}, ExitInvalid},
		{[]string{"validate", good}, ExitOK},
	} {
		code, out, errOut := hardCLI(c.args...)
		if code != c.code {
			t.Errorf("mlbuild %s: exit %d, want %d\n%s%s", strings.Join(c.args, " "), code, c.code, out, errOut)
		}
	}

	// A panic is a bug in mlbuild: 70, never Go's 2 (a usage error).
	saved := subcommands
	defer func() { subcommands = saved }()
	subcommands = append(subcommands, func(*globalOptions) *cobra.Command {
		return &cobra.Command{Use: "exitcodes-panic", RunE: func(*cobra.Command, []string) error {
			var m map[string]int
			m["x"] = 1 // a nil map: the kind of slip a bug is
			return nil
		}}
	})
	code, _, errOut := hardCLI("exitcodes-panic")
	if code != ExitInternal || !strings.Contains(errOut, "a bug in mlbuild; please report it") || !strings.Contains(errOut, "assignment to entry in nil map") {
		t.Errorf("a panic: exit %d (want %d), stderr:\n%s", code, ExitInternal, errOut)
	}
}
