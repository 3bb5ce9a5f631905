package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/idx"
	"github.com/mlbuild/mlbuild/rt/imageio"
)

func predictCmd(m Model, args []string, stdout, stderr io.Writer) error {
	meta := m.Meta()
	fs := newFlags(meta, "predict")
	weights := fs.String("weights", "", "the trained weights `FILE` (safetensors)")
	limit := fs.Int("limit", 10, "predict the first `N` images of an IDX file")
	resize := fs.Bool("resize", false, "resize images whose size differs from the model's input")
	top := fs.Int("top", 1, "print the `N` most probable classes of each input")
	inputs, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if *weights == "" || len(inputs) == 0 {
		return usageError{"predict needs --weights FILE and at least one INPUT (PNG, PGM or IDX images)"}
	}
	if *limit < 1 {
		return usageError{fmt.Sprintf("--limit must be at least 1, got %d", *limit)}
	}
	if *top < 1 || *top > meta.Classes {
		return usageError{fmt.Sprintf("--top must be between 1 and %d", meta.Classes)}
	}
	if err := loadWeights(m, *weights); err != nil {
		return err
	}
	x := m.InferInput(true)
	if len(meta.InputShape) < 2 && len(x) != meta.InputShape[0] {
		return fmt.Errorf("internal: input buffer size %d", len(x))
	}
	h, w := inputHW(meta)
	for _, path := range inputs {
		head := make([]byte, 4)
		if f, err := os.Open(path); err == nil {
			io.ReadFull(f, head)
			f.Close()
		}
		if bytes.HasPrefix(head, []byte("\x89PNG")) || bytes.HasPrefix(head, []byte("P2")) || bytes.HasPrefix(head, []byte("P5")) {
			pix, ih, iw, err := imageio.Load(path)
			if err != nil {
				return err
			}
			pix, err = imageio.Fit(pix, ih, iw, h, w, *resize)
			if err != nil {
				return fmt.Errorf("%s: %v", path, err)
			}
			copy(x, pix)
			printPrediction(stdout, path, m.Infer(true), *top)
			continue
		}
		im, err := idx.OpenImages(path)
		if err != nil {
			return fmt.Errorf("%v (predict takes PNG or PGM images, or an IDX images file)", err)
		}
		if im.Rows*im.Cols != len(x) {
			im.Close()
			return fmt.Errorf("%s: images are %d×%d but the model's input is %s", path, im.Rows, im.Cols, joinShape(meta.InputShape))
		}
		for i := 0; i < min(im.N, *limit); i++ {
			im.Batch(x, []int{i})
			printPrediction(stdout, fmt.Sprintf("%s[%d]", path, i), m.Infer(true), *top)
		}
		im.Close()
	}
	return nil
}

// inputHW is the image size the model reads: the last two axes of its input.
func inputHW(meta *Meta) (int, int) {
	s := meta.InputShape
	switch len(s) {
	case 0:
		return 1, 1
	case 1:
		r := int(math.Sqrt(float64(s[0])))
		if r*r == s[0] {
			return r, r
		}
		return 1, s[0]
	}
	return s[len(s)-2], s[len(s)-1]
}

// printPrediction prints the most probable classes of one output row.
func printPrediction(w io.Writer, name string, logits []float32, top int) {
	probs := softmax64(logits)
	order := make([]int, len(probs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case probs[a] > probs[b]:
			return -1
		case probs[a] < probs[b]:
			return 1
		}
		return 0
	})
	fmt.Fprintf(w, "%s: class %d (p=%.3f)", name, order[0], probs[order[0]])
	for _, c := range order[1:top] {
		fmt.Fprintf(w, ", %d (p=%.3f)", c, probs[c])
	}
	fmt.Fprintln(w)
}

func softmax64(v []float32) []float64 {
	mx := math.Inf(-1)
	for _, x := range v {
		mx = math.Max(mx, float64(x))
	}
	out := make([]float64, len(v))
	var s float64
	for i, x := range v {
		out[i] = math.Exp(float64(x) - mx)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// benchResult is what `bench --json` prints.
type benchResult struct {
	Model          string  `json:"model"`
	Backend        string  `json:"backend"`
	Threads        int     `json:"threads"`
	Batch          int     `json:"batch"`
	InferBatchMS   float64 `json:"infer_batch_ms"`
	InferImagesSec float64 `json:"infer_images_per_sec"`
	InferOneMS     float64 `json:"infer_batch1_ms"`
	TrainStepMS    float64 `json:"train_step_ms"`
	TrainImagesSec float64 `json:"train_images_per_sec"`
	Iterations     int     `json:"iterations"`
}

// median times fn over iters runs after one warm-up run, in milliseconds.
func median(iters int, fn func()) float64 {
	fn()
	ts := make([]float64, iters)
	for i := range ts {
		t := time.Now()
		fn()
		ts[i] = float64(time.Since(t).Nanoseconds()) / 1e6
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

func benchCmd(m Model, args []string, stdout, stderr io.Writer) error {
	meta := m.Meta()
	fs := newFlags(meta, "bench")
	iters := fs.Int("iters", 20, "time `N` iterations per measurement and report the median")
	threads := fs.Int("threads", 0, "use `N` CPU threads (0: all)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := noOperands(fs, args, stdout); err != nil {
		return err
	}
	if *iters < 1 {
		return usageError{"--iters must be at least 1"}
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	cpu.SetThreads(*threads)
	initParams(m, 1)
	rng := cpu.NewRand(7)
	for _, buf := range [][]float32{m.InferInput(false), m.InferInput(true), m.TrainInput()} {
		for i := range buf {
			buf[i] = rng.Float32()
		}
	}
	labels := m.TrainLabels()
	clear(labels)
	for r := 0; r < meta.Batch; r++ {
		labels[r*meta.Classes+rng.Intn(meta.Classes)] = 1
	}
	r := benchResult{Model: meta.Name, Backend: meta.Backend, Threads: cpu.Threads(), Batch: meta.Batch, Iterations: *iters}
	r.InferBatchMS = median(*iters, func() { m.Infer(false) })
	r.InferOneMS = median(*iters, func() { m.Infer(true) })
	step := 0
	r.TrainStepMS = median(*iters, func() { step++; m.TrainStep(1e-4, step) })
	r.InferImagesSec = float64(meta.Batch) / (r.InferBatchMS / 1000)
	r.TrainImagesSec = float64(meta.Batch) / (r.TrainStepMS / 1000)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s (backend %s, %d threads, %s/%s)\n", meta.Name, meta.Backend, r.Threads, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(tw, "inference, batch %d\t%.3f ms\t%.0f images/s\n", meta.Batch, r.InferBatchMS, r.InferImagesSec)
	fmt.Fprintf(tw, "inference, batch 1\t%.3f ms\t%.0f images/s\n", r.InferOneMS, 1000/r.InferOneMS)
	fmt.Fprintf(tw, "training step, batch %d\t%.3f ms\t%.0f images/s\n", meta.Batch, r.TrainStepMS, r.TrainImagesSec)
	fmt.Fprintf(tw, "(median of %d runs)\n", *iters)
	return tw.Flush()
}

// DeviceInfo is a Model that runs on a device with facts worth showing in
// `info`: its name, memory, the libraries it loaded.
type DeviceInfo interface {
	DeviceFacts() [][2]string
}

func infoCmd(m Model, args []string, w io.Writer) error {
	meta := m.Meta()
	if err := noOperands(newFlags(meta, "info"), args, w); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "model:\t%s\nspec:\t%s\nbackend:\t%s\nbuild key:\t%s\nmlbuild:\t%s\ngo:\t%s %s/%s\n",
		meta.Name, meta.SpecFile, meta.Backend, meta.BuildKey, meta.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(tw, "input:\t%s\nclasses:\t%d\nbatch:\t%d\n", joinShape(meta.InputShape), meta.Classes, meta.Batch)
	fmt.Fprintf(tw, "memory:\tstate %s, training work %s, inference work %s\n",
		bytesString(meta.StateBytes), bytesString(meta.TrainWorkBytes), bytesString(meta.InferWorkBytes))
	if d, ok := m.(DeviceInfo); ok {
		for _, f := range d.DeviceFacts() {
			fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "layer\top\toutput\tparams")
	total := 0
	for _, l := range meta.Layers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", l.Name, l.Op, joinShape(l.OutShape), l.Params)
		total += l.Params
	}
	fmt.Fprintf(tw, "total\t\t\t%d\n", total)
	return tw.Flush()
}

func bytesString(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func selftestCmd(m Model, args []string, w io.Writer) error {
	if err := noOperands(newFlags(m.Meta(), "selftest"), args, w); err != nil {
		return err
	}
	rows := m.SelfTest()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tresult\tmax error\ttolerance")
	failed := 0
	for _, r := range rows {
		res := "pass"
		switch {
		case r.Err != nil:
			res = "FAIL: " + r.Err.Error()
			failed++
		case !(r.MaxError <= r.Tol):
			res = "FAIL"
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3g\t%.3g\n", r.Name, res, r.MaxError, r.Tol)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d passed, %d failed\n", len(rows)-failed, failed)
	if failed > 0 {
		return fmt.Errorf("selftest: %d of %d checks failed", failed, len(rows))
	}
	return nil
}

// GemmCheck compares the fast Sgemm with the reference on one shape, for
// the CPU backend's selftest.
func GemmCheck(name string, m, n, k int, transA, transB bool) SelfTestRow {
	rng := cpu.NewRand(uint64(m*131 + n*17 + k))
	a := make([]float32, m*k)
	b := make([]float32, k*n)
	for i := range a {
		a[i] = rng.Float32()*2 - 1
	}
	for i := range b {
		b[i] = rng.Float32()*2 - 1
	}
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	got := make([]float32, m*n)
	want := make([]float32, m*n)
	cpu.Sgemm(transA, transB, m, n, k, 1, a, lda, b, ldb, 0, got, n)
	cpu.SgemmRef(transA, transB, m, n, k, 1, a, lda, b, ldb, 0, want, n)
	var maxErr float64
	for i := range got {
		maxErr = math.Max(maxErr, math.Abs(float64(got[i]-want[i])))
	}
	return SelfTestRow{Name: fmt.Sprintf("%s sgemm %dx%dx%d", name, m, n, k), MaxError: maxErr, Tol: 1e-4 * float64(k)}
}
