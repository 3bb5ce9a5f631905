package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// specCLI runs mlbuild in-process with args and returns its exit code and
// output, for the spec commands (validate, shapes, init, version).
func specCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestShapesGolden compares `mlbuild shapes` on every valid spec and the
// flagship model with its golden file (NAME.shapes.golden beside the
// spec). MLBUILD_UPDATE=1 rewrites the goldens; review them in the diff.
func TestShapesGolden(t *testing.T) {
	t.Chdir("../..") // so that the file names printed are the repository's
	files, _ := filepath.Glob("testdata/specs/valid/*.cue")
	if len(files) < 20 {
		t.Fatalf("only %d valid specs; want at least 20", len(files))
	}
	files = append(files, "models/mnist.cue")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			code, stdout, stderr := specCLI("shapes", f)
			if code != ExitOK || stderr != "" {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			golden := strings.TrimSuffix(f, ".cue") + ".shapes.golden"
			if os.Getenv("MLBUILD_UPDATE") == "1" {
				if err := os.WriteFile(golden, []byte(stdout), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
			}
			if stdout != string(want) {
				t.Errorf("shapes output differs from %s:\n--- got\n%s--- want\n%s", golden, stdout, want)
			}
		})
	}
}

// TestShapesMNISTTotals pins the flagship's parameter and FLOP totals,
// computed by hand: conv1 32·1·25+32 = 832 params, conv2 64·32·25+64 =
// 51,264, dense1 3136·128+128 = 401,536, dense2 128·10+10 = 1,290.
func TestShapesMNISTTotals(t *testing.T) {
	code, stdout, stderr := specCLI("shapes", "../../models/mnist.cue")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	const params = 832 + 51264 + 401536 + 1290
	// conv FLOPs: out elements × (2·inC·k·k + 1 for the bias)
	const flops = 32*28*28*(2*25+1) + 32*28*28 + 32*14*14*4 +
		64*14*14*(2*32*25+1) + 64*14*14 + 64*7*7*4 +
		(2*3136*128 + 128) + 128 + (2*128*10 + 10)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	total := strings.Fields(lines[len(lines)-1])
	if len(total) != 3 || total[0] != "total" || total[1] != group(params) || total[2] != group(flops) {
		t.Errorf("total line %q; want total %s %s", lines[len(lines)-1], group(params), group(flops))
	}
	if !strings.Contains(stdout, "flatten1") || !strings.Contains(stdout, "3136") {
		t.Errorf("no flatten1 of 3136 in:\n%s", stdout)
	}
}

// TestShapesInvalid checks that shapes on an illegal spec prints the
// positioned errors and exits 1.
func TestShapesInvalid(t *testing.T) {
	code, stdout, stderr := specCLI("shapes", "../../testdata/specs/invalid/dense_infeatures.cue")
	if code != ExitInvalid || stdout != "" || !strings.Contains(stderr, "dense_infeatures.cue:12:42: layer fc1: input features 800 do not match the output of flatten1 (64×3×3 = 576)") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
