package app

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/jsontext"
)

// preprocessingText says what the spec does to the data before the model
// sees it, for info: resampling, channel normalisation, standardisation.
func preprocessingText(meta *Meta) string {
	d := &meta.Data
	var parts []string
	if d.Resize {
		h, w := inputHW(meta)
		parts = append(parts, fmt.Sprintf("resize to %dx%d (triangle filter)", h, w))
	}
	if d.Normalize {
		if d.NormalizeFit {
			parts = append(parts, "per-channel normalisation fitted on the training split")
		} else {
			parts = append(parts, fmt.Sprintf("per-channel normalisation, mean %v std %v", d.NormalizeMean, d.NormalizeStd))
		}
	}
	if d.Standardize {
		parts = append(parts, "per-feature standardisation fitted on the training split")
	}
	if d.StandardizeTargets && meta.regression() {
		parts = append(parts, "standardised targets")
	}
	return strings.Join(parts, "; ")
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
	Model          string
	Backend        string
	Threads        int
	Batch          int
	InferBatchMS   float64
	InferImagesSec float64
	InferOneMS     float64
	TrainStepMS    float64
	TrainImagesSec float64
	Iterations     int
	// PeakRSS is the process's peak resident memory after the runs, in
	// bytes (0: the platform does not say); DeviceMemory the bytes of
	// device memory the program took (0: not on a device that says).
	PeakRSS, DeviceMemory int64
}

// writeJSON prints the result as `bench --json` does: one object on a line.
func (r *benchResult) writeJSON(w io.Writer) error {
	j := jsontext.NewWriter("")
	j.BeginObject()
	j.Key("model")
	j.String(r.Model)
	j.Key("backend")
	j.String(r.Backend)
	j.Key("threads")
	j.Int(int64(r.Threads))
	j.Key("batch")
	j.Int(int64(r.Batch))
	for _, f := range []struct {
		key string
		v   float64
	}{{"infer_batch_ms", r.InferBatchMS}, {"infer_images_per_sec", r.InferImagesSec}, {"infer_batch1_ms", r.InferOneMS},
		{"train_step_ms", r.TrainStepMS}, {"train_images_per_sec", r.TrainImagesSec}} {
		if f.v == 0 && strings.HasPrefix(f.key, "train_") {
			continue // bench --infer-only
		}
		j.Key(f.key)
		j.Float(f.v, 64)
	}
	j.Key("iterations")
	j.Int(int64(r.Iterations))
	if r.PeakRSS > 0 {
		j.Key("peak_rss_bytes")
		j.Int(r.PeakRSS)
	}
	if r.DeviceMemory > 0 {
		j.Key("device_memory_bytes")
		j.Int(r.DeviceMemory)
	}
	j.EndObject()
	_, err := w.Write(append(j.Bytes(), '\n'))
	return err
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
	sort.Sort(sort.Float64Slice(ts))
	return ts[len(ts)/2]
}

func benchCmd(m Model, args []string, stdout, stderr io.Writer) error {
	meta := m.Meta()
	fs := newFlags(meta, "bench")
	iters := fs.Int("iters", 20, "time `N` iterations per measurement and report the median")
	threads := fs.Int("threads", 0, "use `N` CPU threads (0: all)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	inferOnly := fs.Bool("infer-only", false, "time inference alone: no training step, and no training memory made")
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
	for _, buf := range [][]float32{m.InferInput(false), m.InferInput(true)} {
		randomInputs(meta, rng, buf)
	}
	if !*inferOnly {
		randomInputs(meta, rng, m.TrainInput())
		randomLabels(meta, rng, m.TrainLabels())
	}
	r := benchResult{Model: meta.Name, Backend: meta.Backend, Threads: cpu.Threads(), Batch: meta.Batch, Iterations: *iters}
	r.InferBatchMS = median(*iters, func() { m.Infer(false) })
	r.InferOneMS = median(*iters, func() { m.Infer(true) })
	r.InferImagesSec = float64(meta.Batch) / (r.InferBatchMS / 1000)
	if !*inferOnly {
		step := 0
		r.TrainStepMS = median(*iters, func() { step++; m.TrainStep(1e-4, step) })
		r.TrainImagesSec = float64(meta.Batch) / (r.TrainStepMS / 1000)
	}
	r.PeakRSS, _ = peakRSS()
	if dm, ok := m.(DeviceMemory); ok {
		r.DeviceMemory, _ = dm.DeviceMemoryUsed()
	}
	if *asJSON {
		return r.writeJSON(stdout)
	}
	tw := newColumns(stdout, false)
	fmt.Fprintf(tw, "model\t%s (backend %s, %d threads, %s/%s)\n", meta.Name, meta.Backend, r.Threads, runtime.GOOS, runtime.GOARCH)
	unit := meta.sampleNoun() + "/s"
	if unit == "img/s" {
		unit = "images/s"
	}
	fmt.Fprintf(tw, "inference, batch %d\t%.3f ms\t%.0f %s\n", meta.Batch, r.InferBatchMS, r.InferImagesSec, unit)
	fmt.Fprintf(tw, "inference, batch 1\t%.3f ms\t%.0f %s\n", r.InferOneMS, 1000/r.InferOneMS, unit)
	if r.TrainStepMS > 0 {
		fmt.Fprintf(tw, "training step, batch %d\t%.3f ms\t%.0f %s\n", meta.Batch, r.TrainStepMS, r.TrainImagesSec, unit)
	}
	if r.PeakRSS > 0 {
		fmt.Fprintf(tw, "peak resident memory\t%s\n", bytesString(r.PeakRSS))
	}
	if r.DeviceMemory > 0 {
		fmt.Fprintf(tw, "device memory taken\t%s\n", bytesString(r.DeviceMemory))
	}
	fmt.Fprintf(tw, "(median of %d runs)\n", *iters)
	return tw.Flush()
}

// DeviceMemory is a Model on a device that can say how many bytes of the
// device's memory the program took; bench reports it.
type DeviceMemory interface {
	DeviceMemoryUsed() (int64, bool)
}

// DeviceInfo is a Model that runs on a device with facts worth showing in
// `info`: its name, memory, the libraries it loaded.
type DeviceInfo interface {
	DeviceFacts() [][2]string
}

func infoCmd(m Model, args []string, w io.Writer) error {
	meta := m.Meta()
	fs := newFlags(meta, "info")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := noOperands(fs, args, w); err != nil {
		return err
	}
	if *asJSON {
		return writeInfoJSON(m, w)
	}
	tw := newColumns(w, false)
	fmt.Fprintf(tw, "model:\t%s\nspec:\t%s\nbackend:\t%s\nbuild key:\t%s\nmlbuild:\t%s\ngo:\t%s %s/%s\n",
		meta.Name, meta.SpecFile, meta.Backend, meta.BuildKey, meta.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if meta.regression() {
		fmt.Fprintf(tw, "input:\t%s\ntask:\tregression\ntargets:\t%d\nbatch:\t%d\n", joinShape(meta.InputShape), meta.Classes, meta.Batch)
	} else {
		fmt.Fprintf(tw, "input:\t%s\nclasses:\t%d\nbatch:\t%d\n", joinShape(meta.InputShape), meta.Classes, meta.Batch)
	}
	if a := meta.Defaults.Accumulate; a > 1 {
		fmt.Fprintf(tw, "accumulate:\t%d micro-batches of %d a training step, a batch of %d\n", a, meta.Batch, a*meta.Batch)
	}
	if meta.format() != "idx" {
		fmt.Fprintf(tw, "data:\t%s (%s)\n", meta.format(), dataFiles(meta, true))
	}
	if p := preprocessingText(meta); p != "" {
		fmt.Fprintf(tw, "preprocessing:\t%s\n", p)
	}
	if e := meta.Embedded; e != nil {
		fmt.Fprintf(tw, "weights:\tembedded: %s, %s, sha256 %s\n", e.Source, bytesString(int64(len(e.Data))), e.SHA256)
	} else {
		fmt.Fprintf(tw, "weights:\tnone embedded (eval and predict need --weights FILE)\n")
	}
	fmt.Fprintf(tw, "memory:\tstate %s, training work %s, inference work %s\n",
		bytesString(meta.StateBytes), bytesString(meta.TrainWorkBytes), bytesString(meta.InferWorkBytes))
	for _, u := range meta.Memory {
		fmt.Fprintf(tw, "memory, %s:\t%s\n", u.Phase, u.memoryText())
	}
	fmt.Fprintf(tw, "cpu:\t%s kernels (this machine: %s; %s picks one)\n", cpu.GemmPath(), strings.Join(cpu.GemmPaths(), ", "), KernelsEnv)
	if d, ok := m.(DeviceInfo); ok {
		for _, f := range d.DeviceFacts() {
			fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = newColumns(w, false)
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
	if c, ok := m.(interface{ KVCacheCheck() SelfTestRow }); ok {
		rows = append(rows, c.KVCacheCheck()) // a method, so that programs without a cache do not link the check
	}
	if c, ok := m.(interface{ KVCacheBF16Check() SelfTestRow }); ok {
		rows = append(rows, c.KVCacheBF16Check())
	}
	tw := newColumns(w, false)
	fmt.Fprintln(tw, "check\tresult\tmax error\ttolerance")
	failed, checks := 0, 0
	var notes []string
	for _, r := range rows {
		if r.Note != "" {
			notes = append(notes, r.Note)
			continue
		}
		checks++
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
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", checks-failed, failed)
	if failed > 0 {
		return fmt.Errorf("selftest: %d of %d checks failed", failed, checks)
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

// DenseCheck runs a dense layer's forward and backward in precision p (a
// plan's bf16 steps: cpu.BF16, whose operands round reads) on random data
// for up to 64 rows of its shape, and compares y = x·wᵀ, dw = dyᵀ·x and
// dx = dy·w with float64 sums of the operands as p rounds them, for the
// CPU backend's selftest. A product of unrounded operands is off by about
// a hundred times the tolerance.
func DenseCheck(name string, p *cpu.Precision, round func(float32) float32, batch, in, out int) SelfTestRow {
	batch = min(batch, 64)
	rng := cpu.NewRand(uint64(batch*131 + in*17 + out))
	rnd := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	x, w, dy := rnd(batch*in), rnd(out*in), rnd(batch*out)
	y, dx, dw := make([]float32, batch*out), make([]float32, batch*in), make([]float32, out*in)
	p.GemmFwd(x, w, nil, y, batch, in, out, cpu.ActNone, 0)
	p.GemmBwd(x, w, nil, slices.Clone(dy), dx, dw, nil, batch, in, out, cpu.ActNone, 0)
	r := func(v float32) float64 { return float64(round(v)) }
	var maxErr float64
	for b := 0; b < batch; b++ {
		for o := 0; o < out; o++ {
			s := 0.0
			for i := 0; i < in; i++ {
				s += r(x[b*in+i]) * r(w[o*in+i])
			}
			maxErr = math.Max(maxErr, math.Abs(float64(y[b*out+o])-s))
		}
		for i := 0; i < in; i++ {
			s := 0.0
			for o := 0; o < out; o++ {
				s += r(dy[b*out+o]) * r(w[o*in+i])
			}
			maxErr = math.Max(maxErr, math.Abs(float64(dx[b*in+i])-s))
		}
	}
	for o := 0; o < out; o++ {
		for i := 0; i < in; i++ {
			s := 0.0
			for b := 0; b < batch; b++ {
				s += r(dy[b*out+o]) * r(x[b*in+i])
			}
			maxErr = math.Max(maxErr, math.Abs(float64(dw[o*in+i])-s))
		}
	}
	return SelfTestRow{Name: fmt.Sprintf("%s %s forward and backward %dx%dx%d", name, p, batch, in, out), MaxError: maxErr, Tol: 1e-6 * float64(max(batch, in, out))}
}

// ConvCheck runs one convolution step's kernel (the method the plan chose
// for it) on random data for up to 4 images of its geometry and compares
// the output with a float64 convolution, for the CPU backend's selftest.
// The error is relative to the output's scale (its largest magnitude):
// Winograd's is a few times the direct sum's, still below 1e-5 there.
func ConvCheck(name string, fwd func(x, w, b, y []float32, g cpu.Conv, act cpu.Act, alpha float32), g cpu.Conv) SelfTestRow {
	g.N = min(g.N, 4)
	groups := max(g.Groups, 1)
	sh, sw, dh, dw := max(g.SH, 1), max(g.SW, 1), max(g.DH, 1), max(g.DW, 1)
	cg, ocg := g.C/groups, g.OC/groups
	rng := cpu.NewRand(uint64(g.C*131 + g.OC*17 + g.H))
	rnd := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	x, w, b := rnd(g.N*g.C*g.H*g.W), rnd(g.OC*cg*g.KH*g.KW), rnd(g.OC)
	y := make([]float32, g.N*g.OC*g.OH*g.OW)
	fwd(x, w, b, y, g, cpu.ActNone, 0)
	var maxErr, scale float64
	for n := 0; n < g.N; n++ {
		for oc := 0; oc < g.OC; oc++ {
			grp := oc / ocg
			for oh := 0; oh < g.OH; oh++ {
				for ow := 0; ow < g.OW; ow++ {
					s := float64(b[oc])
					for ci := 0; ci < cg; ci++ {
						for kh := 0; kh < g.KH; kh++ {
							for kw := 0; kw < g.KW; kw++ {
								ih, iw := oh*sh-g.PH+kh*dh, ow*sw-g.PW+kw*dw
								if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
									continue
								}
								s += float64(x[((n*g.C+grp*cg+ci)*g.H+ih)*g.W+iw]) * float64(w[((oc*cg+ci)*g.KH+kh)*g.KW+kw])
							}
						}
					}
					got := float64(y[((n*g.OC+oc)*g.OH+oh)*g.OW+ow])
					maxErr = math.Max(maxErr, math.Abs(got-s))
					scale = math.Max(scale, math.Abs(s))
				}
			}
		}
	}
	return SelfTestRow{Name: fmt.Sprintf("%s conv %dx%dx%dx%d (error relative to the output scale)", name, g.N, g.C, g.H, g.W), MaxError: maxErr / max(scale, 1e-30), Tol: 2e-5}
}

// ConvBwdCheck runs one convolution step's backward kernel (the plan's
// method, without activation) on random data for up to 4 images of its
// geometry and compares dx, dw and db with float64 sums, for the CPU
// backend's selftest. The error is the largest of the three, each relative
// to its own scale.
func ConvBwdCheck(name string, bwd func(x, w, y, dy, dx, dw, db []float32, g cpu.Conv, act cpu.Act, alpha float32), g cpu.Conv) SelfTestRow {
	g.N = min(g.N, 4)
	groups := max(g.Groups, 1)
	sh, sw, dh, dwl := max(g.SH, 1), max(g.SW, 1), max(g.DH, 1), max(g.DW, 1)
	cg, ocg := g.C/groups, g.OC/groups
	rng := cpu.NewRand(uint64(g.C*137 + g.OC*19 + g.H))
	rnd := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	x, w, dy := rnd(g.N*g.C*g.H*g.W), rnd(g.OC*cg*g.KH*g.KW), rnd(g.N*g.OC*g.OH*g.OW)
	dx, dw, db := make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.OC)
	bwd(x, w, nil, slices.Clone(dy), dx, dw, db, g, cpu.ActNone, 0)
	rx, rw, rb := make([]float64, len(x)), make([]float64, len(w)), make([]float64, g.OC)
	for n := 0; n < g.N; n++ {
		for oc := 0; oc < g.OC; oc++ {
			grp := oc / ocg
			for oh := 0; oh < g.OH; oh++ {
				for ow := 0; ow < g.OW; ow++ {
					d := float64(dy[((n*g.OC+oc)*g.OH+oh)*g.OW+ow])
					rb[oc] += d
					for ci := 0; ci < cg; ci++ {
						for kh := 0; kh < g.KH; kh++ {
							for kw := 0; kw < g.KW; kw++ {
								ih, iw := oh*sh-g.PH+kh*dh, ow*sw-g.PW+kw*dwl
								if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
									continue
								}
								xi := ((n*g.C+grp*cg+ci)*g.H+ih)*g.W + iw
								wi := ((oc*cg+ci)*g.KH+kh)*g.KW + kw
								rx[xi] += d * float64(w[wi])
								rw[wi] += d * float64(x[xi])
							}
						}
					}
				}
			}
		}
	}
	rel := func(got []float32, want []float64) float64 {
		var e, s float64
		for i, v := range want {
			e = math.Max(e, math.Abs(float64(got[i])-v))
			s = math.Max(s, math.Abs(v))
		}
		return e / max(s, 1e-30)
	}
	worst := max(rel(dx, rx), rel(dw, rw), rel(db, rb))
	return SelfTestRow{Name: fmt.Sprintf("%s conv backward %dx%dx%dx%d (largest of dx, dw, db errors relative to their scales)", name, g.N, g.C, g.H, g.W), MaxError: worst, Tol: 5e-5}
}
