package cpu

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBuildsForEveryTarget compiles this package for the systems mlbuild's
// --target offers beside the one testing it: files for one OS or CPU (the
// AMX permission request is Linux's, the assembly amd64's or arm64's) must
// leave every other combination complete.
func TestBuildsForEveryTarget(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	for _, target := range []string{"linux/amd64", "windows/amd64", "darwin/amd64", "darwin/arm64", "linux/arm64", "linux/amd64 purego"} {
		goos, rest, _ := strings.Cut(target, "/")
		goarch, tags, _ := strings.Cut(rest, " ")
		// -trimpath, as mlbuild compile builds programs: the standard
		// library compiled here for darwin/arm64 and linux/arm64 is then
		// the one emit's and cmd/mlbuild's cross-builds use (the go
		// command keys compiled packages on the flag).
		cmd := exec.Command(goCmd, "build", "-trimpath", "-tags", tags, "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", target, err, out)
		}
	}
}
