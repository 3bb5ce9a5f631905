package cuda_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/cuda/fakecuda"
)

// TestProfileTimesEveryOp: with Options.Profile a sequence's ops are
// launched back to back between timing events, with one event wait a
// launch and no stream wait, and Close writes one line per kind of op
// with its calls over every launch but the first (a kernel launched twice
// a step over three steps: 4) and a mean GPU time above zero, the GEMM by
// its sizes, and the sequence's total and time a launch; the events are
// destroyed. Blocking alone waits after every op and writes nothing;
// without either, one graph launch a step. MLBUILD_CUDA_PROFILE takes
// only 0 or 1.
func TestProfileTimesEveryOp(t *testing.T) {
	for _, mode := range []string{"profile", "blocking", "graph"} {
		var out strings.Builder
		opts := cuda.Options{Blocking: mode != "graph", Profile: mode == "profile", ProfileOut: &out}
		d, f, err := openFakeWith(t, fakecuda.Options{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		seq := gemmAndTwoKernels(t, d)
		before := f.Stats()
		for range 3 {
			if err := seq.Launch(); err != nil {
				t.Fatal(err)
			}
		}
		after := f.Stats()
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		syncs, eventSyncs := after.Syncs-before.Syncs, after.EventSyncs-before.EventSyncs
		text := out.String()
		switch mode {
		case "graph":
			if text != "" || after.GraphLaunches-before.GraphLaunches != 3 {
				t.Errorf("without the profile: %d graph launches and the output %q", after.GraphLaunches-before.GraphLaunches, text)
			}
			continue
		case "blocking":
			if text != "" || syncs != 9 || eventSyncs != 0 {
				t.Errorf("blocking, 3 launches of 3 ops: %d stream waits, %d event waits and the output %q; want 9, 0 and none", syncs, eventSyncs, text)
			}
			continue
		}
		if syncs != 0 || eventSyncs != 3 || after.GraphLaunches != 0 || after.Launches-before.Launches != 6 || after.GemmRuns-before.GemmRuns != 3 {
			t.Errorf("profile, 3 launches of 3 ops: %d stream waits, %d event waits, %d graph launches, %d kernel launches, %d GEMMs; want 0, 3, 0, 6, 3",
				syncs, eventSyncs, after.GraphLaunches, after.Launches-before.Launches, after.GemmRuns-before.GemmRuns)
		}
		if leaks := f.Leaks(); len(leaks) > 0 {
			t.Errorf("after Close the fake still holds %v", leaks)
		}
		for _, re := range []string{
			`(?m)^profile of fakecuda simulated GPU \(MLBUILD_CUDA_PROFILE: GPU time between events recorded around each op, the ops launched back to back; the first launch of each sequence not counted\)$`,
			`(?m)^  sequence "training step" +[0-9.]+ ms in 2 launches, [0-9.]+ ms of GPU time a launch$`,
			`(?m)^  +total ms +share +calls +mean µs  op$`,
			`(?m)^ +[0-9.]+ +[0-9.]+% +4 +[0-9.]+  kernel conf_accumulate$`,
			`(?m)^ +[0-9.]+ +[0-9.]+% +2 +[0-9.]+  16x16x16 GEMM$`,
			`(?m)^ +[0-9.]+ +100.0% in all$`,
			// the sequence's families, a launch: two kernels and a GEMM
			`(?m)^  sequence "training step" by family, a launch:$`,
			`(?m)^ +[0-9.]+ +[0-9.]+% +2  kernel conf_accumulate$`,
			`(?m)^ +[0-9.]+ +[0-9.]+% +1  GEMM$`,
		} {
			if !regexp.MustCompile(re).MatchString(text) {
				t.Errorf("the profile does not match %s:\n%s", re, text)
			}
		}
		// Each op's mean is GPU time between its events, above zero on the
		// fake (its kernels run on the CPU between the two records).
		for _, m := range regexp.MustCompile(`(?m)^ +[0-9.]+ +[0-9.]+% +[0-9]+ +([0-9.]+)  (.*)$`).FindAllStringSubmatch(text, -1) {
			if us, err := strconv.ParseFloat(m[1], 64); err != nil || us <= 0 {
				t.Errorf("op %s: mean %s µs, want a time above zero", m[2], m[1])
			}
		}
	}
	t.Setenv("MLBUILD_CUDA_PROFILE", "yes")
	if _, err := cuda.OpenHostDevice(); err == nil || !strings.Contains(err.Error(), `MLBUILD_CUDA_PROFILE="yes"`) {
		t.Errorf("MLBUILD_CUDA_PROFILE=yes: %v, want an error naming the variable", err)
	}
}

// TestProfileFaultNamesSequence: a kernel fault in a timed launch shows
// at its one wait, naming the sequence and its ops' range and saying how
// to name the op; the next launch fails at its first op, naming it.
func TestProfileFaultNamesSequence(t *testing.T) {
	d, f, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{Blocking: true, Profile: true, ProfileOut: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	seq := gemmAndTwoKernels(t, d)
	if err := seq.Launch(); err != nil {
		t.Fatal(err)
	}
	f.FailKernel("conf_accumulate", cuda.ErrorIllegalAddress)
	err = seq.Launch()
	if err == nil {
		t.Fatal("a kernel fault in a timed launch gave no error")
	}
	for _, w := range []string{`sequence "training step"`, "one of its 3 ops, op 0 (16x16x16 GEMM) to op 2 (kernel conf_accumulate)",
		"cuEventSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS", "MLBUILD_CUDA_BLOCKING=1 and without MLBUILD_CUDA_PROFILE"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the fault's error does not say %q: %v", w, err)
		}
	}
	err = seq.Launch()
	if err == nil || !strings.Contains(err.Error(), `sequence "training step" at op 0 (16x16x16 GEMM) (of its 3 ops`) ||
		!strings.Contains(err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Errorf("a launch after the fault: %v, want the sticky fault at op 0", err)
	}
}
