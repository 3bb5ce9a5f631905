package cuda_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/cuda/fakecuda"
)

// TestProfileTimesEveryOp: with Options.Profile a sequence's ops run one
// by one and Close writes one line per kind of op with its calls over
// every launch but the first (a kernel launched twice a step over three
// steps: 4), the GEMM by its sizes, and the sequence's total; without it
// nothing is written. MLBUILD_CUDA_PROFILE takes only 0 or 1.
func TestProfileTimesEveryOp(t *testing.T) {
	for _, on := range []bool{true, false} {
		var out strings.Builder
		d, f, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{Blocking: on, Profile: on, ProfileOut: &out})
		if err != nil {
			t.Fatal(err)
		}
		seq := gemmAndTwoKernels(t, d)
		for range 3 {
			if err := seq.Launch(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		if !on {
			if text != "" || f.Stats().GraphLaunches == 0 {
				t.Errorf("without the profile: %d graph launches and the output %q", f.Stats().GraphLaunches, text)
			}
			continue
		}
		for _, re := range []string{
			`(?m)^  sequence "training step" +[0-9.]+ ms$`,
			`(?m)^ +[0-9.]+ +[0-9.]+% +4 +[0-9.]+  kernel conf_accumulate$`,
			`(?m)^ +[0-9.]+ +[0-9.]+% +2 +[0-9.]+  16x16x16 GEMM$`,
			`(?m)^ +[0-9.]+ +100.0% in all$`,
		} {
			if !regexp.MustCompile(re).MatchString(text) {
				t.Errorf("the profile does not match %s:\n%s", re, text)
			}
		}
	}
	t.Setenv("MLBUILD_CUDA_PROFILE", "yes")
	if _, err := cuda.OpenHostDevice(); err == nil || !strings.Contains(err.Error(), `MLBUILD_CUDA_PROFILE="yes"`) {
		t.Errorf("MLBUILD_CUDA_PROFILE=yes: %v, want an error naming the variable", err)
	}
}
