// Command models measures three MNIST models compiled by mlbuild against the
// same architectures in PyTorch CPU, in one run on one machine: training
// epoch time (batch 250, Adam lr 1e-3, training loop only), inference time at
// batch 250 and latency at batch 1, on one thread and on all cores.
//
// The mlbuild side is the compiled binaries' own `train` (epoch time from the
// metrics file's images_per_sec, so compiling and loading are not counted) and
// `bench --json`; the PyTorch side is torch_models.py. Runs alternate between
// the two, so that drift of a shared machine hits both alike, and the table
// shows medians and ratios mlbuild/PyTorch of times (at most 1.0: mlbuild is
// faster). The parameter counts of both sides must agree, or it fails: that
// is the check that the two sides run the same architecture.
// bench/models.sh builds the binaries and runs it.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchModels names the models in table order (-models): a binary of that
// name in -bin, and the same name in torch_models.py, where a name ending in
// _bf16 is the model under torch.autocast to bfloat16 (the counterpart of a
// spec with precision: "bf16", such as bench/models/mlp_bf16.cue).
var benchModels = []string{"mlp", "lenet5", "mnist"}

type config struct {
	binDir, torch, data, waitPolicy string
	threads                         []int
	reps, epochReps, iters, limit   int
}

func main() {
	var c config
	var threads string
	flag.StringVar(&c.binDir, "bin", "", "folder holding the compiled binaries mlp, lenet5 and mnist")
	flag.StringVar(&c.torch, "torch", "/usr/bin/python3 bench/models/torch_models.py", "PyTorch worker command (space-separated)")
	flag.StringVar(&c.data, "data", "data/mnist", "MNIST IDX folder")
	flag.StringVar(&threads, "thread-counts", fmt.Sprintf("1,%d", runtime.NumCPU()), "thread counts to compare")
	flag.IntVar(&c.reps, "reps", 3, "alternating repetitions of the inference measurements")
	flag.IntVar(&c.epochReps, "epoch-reps", 2, "alternating repetitions of the training epoch")
	flag.IntVar(&c.iters, "iters", 20, "timed iterations per inference measurement (each side reports its median)")
	flag.IntVar(&c.limit, "limit", 0, "train on only the first N images (quick checks of this harness; 0: all 60000)")
	models := flag.String("models", strings.Join(benchModels, ","), "models to compare, in table order (e.g. mlp,mlp_bf16)")
	flag.StringVar(&c.waitPolicy, "omp-wait-policy", "", "OMP_WAIT_POLICY for PyTorch (empty: try active and passive, keep the faster)")
	flag.Parse()
	benchModels = strings.Split(*models, ",")
	var err error
	if c.binDir == "" {
		err = fmt.Errorf("-bin is required")
	} else if c.threads, err = parseInts(threads); err == nil {
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/models:", err)
		os.Exit(1)
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("thread count %q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// sample holds one side's numbers for one model and thread count.
type sample struct {
	epochS, batchMS, oneMS []float64
}

// result is what either side's JSON may hold.
type result struct {
	Params       int     `json:"params"`
	Threads      int     `json:"threads"`
	InferBatchMS float64 `json:"infer_batch_ms"`
	InferOneMS   float64 `json:"infer_batch1_ms"`
	EpochS       float64 `json:"epoch_s"`
}

func run(c config) error {
	maxT := slices.Max(c.threads)
	fmt.Printf("machine: %s, %d CPUs (runtime.NumCPU), %s/%s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	if c.waitPolicy == "" {
		p, err := pickWaitPolicy(c, maxT)
		if err != nil {
			return err
		}
		c.waitPolicy = p
	}
	var info struct {
		Torch   string   `json:"torch"`
		Python  string   `json:"python"`
		MKLDNN  bool     `json:"mkldnn"`
		MKL     bool     `json:"mkl"`
		Threads int      `json:"threads"`
		BLAS    []string `json:"blas"`
	}
	if err := torchJSON(c, maxT, &info, "info"); err != nil {
		return err
	}
	fmt.Printf("pytorch: torch %s (%s), %d threads, oneDNN %v, MKL %v, OMP_WAIT_POLICY=%s, loaded: %s\n",
		info.Torch, info.Python, info.Threads, info.MKLDNN, info.MKL, c.waitPolicy, strings.Join(info.BLAS, " "))

	fmt.Println("\nparameters (must be equal):")
	for _, m := range benchModels {
		ours, err := mlbuildParams(c, m)
		if err != nil {
			return err
		}
		var theirs result
		if err := torchJSON(c, 1, &theirs, "params", m); err != nil {
			return err
		}
		fmt.Printf("  %-7s mlbuild %9d  pytorch %9d\n", m, ours, theirs.Params)
		if ours != theirs.Params {
			return fmt.Errorf("%s: mlbuild has %d parameters and PyTorch %d: the architectures differ", m, ours, theirs.Params)
		}
	}

	ours := map[string]*sample{}
	theirs := map[string]*sample{}
	key := func(m string, t int) string { return fmt.Sprintf("%s/%d", m, t) }
	start := time.Now()
	for _, t := range c.threads {
		for _, m := range benchModels {
			o, p := &sample{}, &sample{}
			ours[key(m, t)], theirs[key(m, t)] = o, p
			for r := 0; r < c.reps; r++ {
				// Alternate which side goes first, so that neither always
				// runs just after the other's warm caches or heat.
				sides := []func() error{
					func() error { return mlbuildInfer(c, m, t, o) },
					func() error { return torchInfer(c, m, t, p) },
				}
				if r%2 == 1 {
					slices.Reverse(sides)
				}
				for _, f := range sides {
					if err := f(); err != nil {
						return err
					}
				}
			}
			fmt.Printf("[%s] %s %d threads inference: mlbuild %s ms, pytorch %s ms (batch 250)\n",
				since(start), m, t, list(o.batchMS), list(p.batchMS))
			for r := 0; r < c.epochReps; r++ {
				sides := []func() error{
					func() error { return mlbuildEpoch(c, m, t, o) },
					func() error { return torchEpoch(c, m, t, p) },
				}
				if r%2 == 1 {
					slices.Reverse(sides)
				}
				for _, f := range sides {
					if err := f(); err != nil {
						return err
					}
				}
			}
			fmt.Printf("[%s] %s %d threads epoch: mlbuild %s s, pytorch %s s\n",
				since(start), m, t, list(o.epochS), list(p.epochS))
		}
	}

	images := 60000
	if c.limit > 0 {
		images = c.limit / 250 * 250
	}
	fmt.Printf("\nmedians of %d alternating runs (inference, each itself a median of %d iterations) and %d (training epoch of %d images);\n",
		c.reps, c.iters, c.epochReps, images)
	fmt.Println("ratio = mlbuild / PyTorch time: at most 1.0 means mlbuild is faster.")
	fmt.Println()
	fmt.Println("| model | threads | epoch s mlbuild | epoch s PyTorch | ratio | batch-250 ms mlbuild | batch-250 ms PyTorch | ratio | images/s mlbuild | images/s PyTorch | batch-1 ms mlbuild | batch-1 ms PyTorch | ratio |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, t := range c.threads {
		for _, m := range benchModels {
			o, p := ours[key(m, t)], theirs[key(m, t)]
			oe, pe := median(o.epochS), median(p.epochS)
			ob, pb := median(o.batchMS), median(p.batchMS)
			o1, p1 := median(o.oneMS), median(p.oneMS)
			fmt.Printf("| %s | %d | %.2f | %.2f | %.2f | %.3f | %.3f | %.2f | %.0f | %.0f | %.3f | %.3f | %.2f |\n",
				m, t, oe, pe, oe/pe, ob, pb, ob/pb, 250e3/ob, 250e3/pb, o1, p1, o1/p1)
		}
	}
	return nil
}

// pickWaitPolicy times PyTorch's batch-250 LeNet-5 inference with OpenMP
// threads spinning (active) and sleeping (passive) while they wait: on a
// quiet machine spinning is faster, on a busy shared one spinning threads
// wait for descheduled ones and passive can be ten times faster. PyTorch
// gets the better of the two for the whole run.
func pickWaitPolicy(c config, threads int) (string, error) {
	best, bestMS := "", 0.0
	for _, p := range []string{"active", "passive", "active", "passive"} {
		c.waitPolicy = p
		var r result
		if err := torchJSON(c, threads, &r, "infer", "lenet5", "--iters", "10"); err != nil {
			return "", err
		}
		fmt.Printf("calibration: pytorch lenet5 batch-250 inference on %d threads with OMP_WAIT_POLICY=%s: %.3f ms\n", threads, p, r.InferBatchMS)
		if best == "" || r.InferBatchMS < bestMS {
			best, bestMS = p, r.InferBatchMS
		}
	}
	return best, nil
}

func mlbuildInfer(c config, m string, t int, s *sample) error {
	out, err := exec.Command(filepath.Join(c.binDir, m), "bench", "--json", "--threads", strconv.Itoa(t), "--iters", strconv.Itoa(c.iters)).Output()
	if err != nil {
		return fmt.Errorf("mlbuild %s bench: %v", m, exitDetail(err))
	}
	var r result
	if err := json.Unmarshal(out, &r); err != nil {
		return fmt.Errorf("mlbuild %s bench printed %q: %v", m, out, err)
	}
	s.batchMS = append(s.batchMS, r.InferBatchMS)
	s.oneMS = append(s.oneMS, r.InferOneMS)
	return nil
}

// mlbuildEpoch trains one epoch without validation and reads its time from
// the metrics file: the epoch event's images_per_sec covers the first step's
// start to the last step's end, so start-up, data loading and the checkpoint
// written after the epoch are not counted.
func mlbuildEpoch(c config, m string, t int, s *sample) error {
	dir, err := os.MkdirTemp("", "bench-models-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	metrics := filepath.Join(dir, "metrics.jsonl")
	args := []string{"train", "--data", c.data, "--epochs", "1", "--validation-split", "0", "--quiet",
		"--threads", strconv.Itoa(t), "--metrics", metrics, "--out", filepath.Join(dir, "w.safetensors")}
	if c.limit > 0 {
		args = append(args, "--limit", strconv.Itoa(c.limit))
	}
	if out, err := exec.Command(filepath.Join(c.binDir, m), args...).CombinedOutput(); err != nil {
		return fmt.Errorf("mlbuild %s train: %v\n%s", m, err, out)
	}
	f, err := os.Open(metrics)
	if err != nil {
		return err
	}
	defer f.Close()
	in := bufio.NewScanner(f)
	for in.Scan() {
		var ev struct {
			Event        string  `json:"event"`
			Step         int     `json:"step"`
			ImagesPerSec float64 `json:"images_per_sec"`
		}
		if err := json.Unmarshal(in.Bytes(), &ev); err != nil {
			return fmt.Errorf("%s: %v", metrics, err)
		}
		if ev.Event == "epoch" && ev.ImagesPerSec > 0 {
			s.epochS = append(s.epochS, float64(ev.Step*250)/ev.ImagesPerSec)
			return nil
		}
	}
	return fmt.Errorf("mlbuild %s train: no epoch event with images_per_sec in %s", m, metrics)
}

func mlbuildParams(c config, m string) (int, error) {
	out, err := exec.Command(filepath.Join(c.binDir, m), "info").Output()
	if err != nil {
		return 0, fmt.Errorf("mlbuild %s info: %v", m, exitDetail(err))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "total" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("mlbuild %s info: no total parameter line in\n%s", m, out)
}

func torchInfer(c config, m string, t int, s *sample) error {
	var r result
	if err := torchJSON(c, t, &r, "infer", m, "--iters", strconv.Itoa(c.iters)); err != nil {
		return err
	}
	s.batchMS = append(s.batchMS, r.InferBatchMS)
	s.oneMS = append(s.oneMS, r.InferOneMS)
	return nil
}

func torchEpoch(c config, m string, t int, s *sample) error {
	args := []string{"train", m, "--data", c.data}
	if c.limit > 0 {
		args = append(args, "--limit", strconv.Itoa(c.limit))
	}
	var r result
	if err := torchJSON(c, t, &r, args...); err != nil {
		return err
	}
	s.epochS = append(s.epochS, r.EpochS)
	return nil
}

// torchJSON runs the PyTorch worker with t threads (torch.set_num_threads
// and OpenMP's pool alike) and decodes the JSON line it prints into v.
func torchJSON(c config, t int, v any, args ...string) error {
	argv := append(strings.Fields(c.torch), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "BENCH_THREADS="+strconv.Itoa(t), "OMP_NUM_THREADS="+strconv.Itoa(t))
	if c.waitPolicy != "" {
		cmd.Env = append(cmd.Env, "OMP_WAIT_POLICY="+c.waitPolicy)
	}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("pytorch %s: %v", strings.Join(args, " "), exitDetail(err))
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("pytorch %s printed %q: %v", strings.Join(args, " "), out, err)
	}
	return nil
}

// exitDetail adds a failed command's standard error to its error.
func exitDetail(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err.Error()
}

// cpuModel is lscpu's "Model name", read from /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func list(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strings.Join(parts, " ")
}

func since(t time.Time) string { return time.Since(t).Round(time.Second).String() }
