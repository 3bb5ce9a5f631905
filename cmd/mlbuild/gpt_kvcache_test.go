package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGPTKVCache: the small GPT's program generates with a KV cache
// (planner.DeriveDecode): its selftest compares the cache's logits with
// the full forward pass's at every length through a window slide (within
// 1e-4; in bf16 within 3e-2), generate writes the same text with the cache as without it for
// a fixed seed, greedy and sampled, past the window's end, and the same
// with the cache on 1 and 3 threads as on all cores, in f32 and with
// --precision bf16 (which --kv-cache=false refuses, exit 2); and, with the
// spec's context made 8× longer, 30 tokens after a one-token prompt (no
// window slides) cost about what they did with the cache (a token's work
// is one position's), while without it they cost more (a forward pass
// over the whole context a token): the ratios of the two programs'
// median times a token, each the least of three runs.
func TestGPTKVCache(t *testing.T) {
	data := dataDir(t, "MLBUILD_TEXT_DIR", "text", "moby-dick.txt", "make data-text")
	tmp := t.TempDir()
	src, err := os.ReadFile("../../testdata/text/gpt_moby.cue")
	if err != nil {
		t.Fatal(err)
	}
	build := func(context string) (bin, weights string) {
		dir := filepath.Join(tmp, "ctx"+context)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(src), "_context: 32", "_context: "+context, 1)
		spec := filepath.Join(dir, "gpt.cue")
		if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		bin, weights = filepath.Join(dir, "gpt"), filepath.Join(dir, "w.safetensors")
		if code, out, errOut := mlbuild(t, "compile", spec, "-o", bin, "--cache-dir", filepath.Join(tmp, "cache")); code != 0 {
			t.Fatalf("compile: exit %d\n%s%s", code, out, errOut)
		}
		if out, err := exec.Command(bin, "train", "--data", data, "--limit", "64", "--epochs", "1", "--threads", "1", "--out", weights, "--quiet").CombinedOutput(); err != nil {
			t.Fatalf("train: %v\n%s", err, out)
		}
		return bin, weights
	}
	generate := func(bin, weights string, tokens int, kv bool, args ...string) string {
		a := append([]string{"generate", "--weights", weights, "--prompt", "C", "--tokens", strconv.Itoa(tokens), "--seed", "4", "--kv-cache=" + strconv.FormatBool(kv)}, args...)
		out, err := exec.Command(bin, a...).Output()
		if err != nil {
			t.Fatalf("%s %v: %v", bin, a, err)
		}
		return string(out)
	}

	bin, weights := build("32")
	out, err := exec.Command(bin, "selftest").CombinedOutput()
	if err != nil {
		t.Fatalf("selftest: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`KV cache against the full forward pass +pass`).Match(out) {
		t.Errorf("selftest has no passing KV cache check:\n%s", out)
	}
	if !regexp.MustCompile(`KV cache in bf16 against the f32 forward pass +pass`).Match(out) {
		t.Errorf("selftest has no passing bf16 KV cache check:\n%s", out)
	}
	for _, args := range [][]string{{"--temperature", "0"}, {"--temperature", "0.8", "--top-k", "20"}} {
		with := generate(bin, weights, 80, true, args...) // 81 positions: the window of 32 slides
		without := generate(bin, weights, 80, false, args...)
		if with != without {
			t.Errorf("generate %v: with the cache %q, without %q", args, with, without)
		}
		// the decode's kernels split their work over the threads with
		// each output summed by one thread: the same draws on any count
		for _, n := range []string{"1", "3"} {
			if threaded := generate(bin, weights, 80, true, append(args, "--threads", n)...); threaded != with {
				t.Errorf("generate %v --threads %s: %q, on all cores %q", args, n, threaded, with)
			}
		}
		bf16 := generate(bin, weights, 80, true, append(args, "--precision", "bf16")...)
		for _, n := range []string{"1", "3"} {
			if threaded := generate(bin, weights, 80, true, append(args, "--precision", "bf16", "--threads", n)...); threaded != bf16 {
				t.Errorf("generate %v --precision bf16 --threads %s: %q, on all cores %q", args, n, threaded, bf16)
			}
		}
		same := 0
		for same < min(len(bf16), len(with)) && bf16[same] == with[same] {
			same++
		}
		t.Logf("generate %v: bf16 and f32 agree on the first %d of %d bytes", args, same, len(with))
	}
	cmd := exec.Command(bin, "generate", "--weights", weights, "--prompt", "C", "--kv-cache=false", "--precision", "bf16")
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "--precision bf16: this program generates in f32 only") {
		t.Errorf("--kv-cache=false --precision bf16: %v, %s; want exit 2 and why", err, out)
	}

	long, longWeights := build("256")
	// a token's time is the median of the 29 after the prompt that
	// generate's MLBUILD_DECODE_STATS line reports, measured in the
	// process: whole-process times (a few ms here) are mostly start-up,
	// and on a loaded 2-core machine their ratio was noise (2.03×)
	median := regexp.MustCompile(`median ([0-9.]+),`)
	least := func(bin, weights string, kv bool) time.Duration {
		best := time.Duration(1 << 62)
		for range 3 {
			a := []string{"generate", "--weights", weights, "--prompt", "C", "--tokens", "30", "--seed", "4", "--kv-cache=" + strconv.FormatBool(kv)}
			cmd := exec.Command(bin, a...)
			cmd.Env = append(os.Environ(), "MLBUILD_DECODE_STATS=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s %v: %v\n%s", bin, a, err, stderr.String())
			}
			m := median.FindStringSubmatch(stderr.String())
			if m == nil {
				t.Fatalf("%s %v: no decode stats median in\n%s", bin, a, stderr.String())
			}
			us, err := strconv.ParseFloat(m[1], 64)
			if err != nil || us <= 0 {
				t.Fatalf("%s %v: decode stats median %q", bin, a, m[1])
			}
			best = min(best, time.Duration(us*1e3))
		}
		return best
	}
	cached := float64(least(long, longWeights, true)) / float64(least(bin, weights, true))
	full := float64(least(long, longWeights, false)) / float64(least(bin, weights, false))
	t.Logf("median time a token (of 30), context 256 over context 32: %.2f× with the cache, %.2f× without", cached, full)
	if cached > 2 {
		t.Errorf("with the cache, a token took %.2f× as long with a context of 256 as with 32; want under 2× (one position's work a token)", cached)
	}
	if full < 3 {
		t.Errorf("without the cache, a token took only %.2f× as long with a context of 256 as with 32; the measure cannot tell the cache's cost apart", full)
	}
}
