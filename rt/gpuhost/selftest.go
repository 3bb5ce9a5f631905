package gpuhost

import (
	"fmt"
	"math"

	"github.com/mlbuild/mlbuild/rt/app"
	"github.com/mlbuild/mlbuild/rt/cpu"
)

// Selftest settings: the step arguments of the checked steps.
const (
	selftestLR   = 1e-3
	selftestStep = 3
)

// SelfTest runs every plan step on the GPU, alone in a sequence, and
// compares what it wrote with the step's CPU reference run on copies of the
// same inputs; then every GEMM shape against cpu.Sgemm. The plans run in
// order on seeded random weights and inputs, so each step sees realistic
// values.
//
// The CPU reference keeps one copy of the arenas for the whole run. Before
// a step it takes from the GPU only the bytes the step's ops touch
// (PlanStep.spans), so each step starts from what the GPU's earlier steps
// wrote, as a fresh copy of every arena would, while a model whose work
// arena is gigabytes (models/gpt.cue: 3.6 GB) copies megabytes a step, not
// the arena.
func (m *Model) SelfTest() []app.SelfTestRow {
	m.selftestInit()
	ref := map[int][]float32{}
	for _, a := range []int{ArenaState, ArenaTrainWork, ArenaEvalWork, ArenaOneWork, ArenaTrainInput, ArenaTrainLabels} {
		ref[a] = append([]float32(nil), m.hostView(a, false)...)
	}
	var rows []app.SelfTestRow
	phases := []struct {
		plan  string
		work  int
		steps []PlanStep
	}{
		{"train", ArenaTrainWork, m.p.TrainForward}, {"train", ArenaTrainWork, m.p.TrainBackward},
		{"train", ArenaTrainWork, m.p.TrainUpdate},
		{"eval", ArenaEvalWork, m.p.EvalInfer}, {"eval-1", ArenaOneWork, m.p.OneInfer},
	}
	for _, ph := range phases {
		for i := range ph.steps {
			rows = append(rows, m.checkStep(ph.plan, ph.work, &ph.steps[i], ref))
		}
	}
	return append(rows, m.checkGemms()...)
}

// selftestInit fills the state with seeded weights (positive where a
// parameter must be: batch-norm scales and variances, Adam's second
// moment) and the work arenas and batches with random values.
func (m *Model) selftestInit() {
	rng := cpu.NewRand(20240607)
	uniform := func(v []float32, lo, hi float32) {
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float32()
		}
	}
	meta := m.p.Meta
	state := m.hostView(ArenaState, true)
	uniform(state, -0.5, 0.5)
	for _, p := range meta.Params {
		if p.Init == "ones" {
			uniform(state[p.Offset:p.Offset+p.Size], 0.5, 1.5)
		}
		for k, off := range p.State {
			if k == 1 {
				uniform(state[off:off+p.Size], 0, 0.1)
			}
		}
	}
	for _, a := range []int{ArenaTrainWork, ArenaEvalWork, ArenaOneWork, ArenaTrainInput} {
		uniform(m.hostView(a, true), -1, 1)
	}
	// A program that reads token ids gets ids, in the training batch and
	// in the inference plans' inputs (regions of their work arenas).
	m.tokenIDs(m.hostView(ArenaTrainInput, true), rng)
	for _, r := range []Region{m.p.EvalInput, m.p.OneInput} {
		m.tokenIDs(m.host[r.Arena][r.Offset:r.Offset+r.Size], rng)
	}
	labels := m.hostView(ArenaTrainLabels, true)
	if meta.Classes == 0 || len(labels) != meta.Batch*meta.Classes {
		uniform(labels, -1, 1) // regression targets
		return
	}
	// One-hot rows: one a sample, or, for a model of token ids with logits
	// per token (OutputShape [T, classes], Classes T·classes), one a token,
	// as rt/app's randomLabels draws them.
	rows, classes := meta.Batch, meta.Classes
	if meta.Vocab > 0 && len(meta.OutputShape) == 2 && meta.OutputShape[0]*meta.OutputShape[1] == meta.Classes {
		rows, classes = meta.Batch*meta.OutputShape[0], meta.OutputShape[1]
	}
	clear(labels)
	for r := 0; r < rows; r++ {
		labels[r*classes+rng.Intn(classes)] = 1
	}
}

// checkStep runs one plan step on the GPU and on the CPU from the same
// inputs and returns the largest difference over the step's outputs. ref
// is the CPU's copy of the arenas: the bytes the step touches are first
// copied into it from the GPU.
func (m *Model) checkStep(plan string, work int, st *PlanStep, ref map[int][]float32) app.SelfTestRow {
	row := app.SelfTestRow{Name: plan + " " + st.Name}
	for _, b := range st.spans() {
		to := ref[b.Arena]
		if to == nil { // the step arguments: the host writes them below
			continue
		}
		lo, hi := b.Offset/4, min(len(to), (b.Offset+b.Bytes+3)/4)
		if lo >= hi {
			continue
		}
		copy(to[lo:hi], m.slice(Region{Arena: b.Arena, Offset: lo, Size: hi - lo}))
	}
	m.setArgs(selftestLR, selftestStep)
	seq, err := m.record("selftest "+row.Name, []PlanStep{*st})
	if err == nil {
		err = m.run(seq)
	}
	if err != nil {
		row.Err = err
		return row
	}
	st.Ref(ref[ArenaState], ref[work], ref[ArenaTrainInput], ref[ArenaTrainLabels], selftestLR, selftestStep, m.seed)
	var maxErr, scale float64
	for k, r := range append(st.Check, st.CheckBF16...) {
		var got, want []float32
		if k < len(st.Check) {
			got, want = m.slice(r), ref[r.Arena][r.Offset:r.Offset+r.Size]
		} else {
			places := Region{Arena: r.Arena, Offset: r.Offset, Size: (r.Size + 1) / 2}
			got, want = WidenBF16(m.slice(places), r.Size), WidenBF16(ref[r.Arena][places.Offset:places.Offset+places.Size], r.Size)
		}
		for i := range want {
			maxErr = math.Max(maxErr, absDiff(got[i], want[i]))
			if w := math.Abs(float64(want[i])); !math.IsInf(w, 0) {
				scale = math.Max(scale, w) // not ∞: a masked row's lse would void the tolerance
			}
		}
	}
	row.MaxError = maxErr
	row.Tol = tolerance(st.Reduce, scale, stepPrecision(st))
	if len(st.CheckBF16) > 0 {
		// Both sides round what they store to bfloat16: values that
		// differ in float32's last bits may round to neighbours, one
		// bfloat16 step apart (2^-7 of the value at most).
		row.Tol = math.Max(row.Tol, 2*PrecisionBF16.unitRoundoff()*math.Max(1, scale))
	}
	return row
}

// stepPrecision is the coarsest precision of a step's GEMMs, library
// convolutions and of its
// kernels' tile products (PlanStep.Precision; f32 when it has none): the
// CPU reference of every step multiplies in float32, so a step whose
// products round their operands needs the wider tolerance.
func stepPrecision(st *PlanStep) Precision {
	p := PrecisionF32
	if st.Precision.unitRoundoff() > p.unitRoundoff() {
		p = st.Precision
	}
	for _, op := range st.Ops {
		if op.Gemm != nil && op.Gemm.Shape.Precision.unitRoundoff() > p.unitRoundoff() {
			p = op.Gemm.Shape.Precision
		}
		if op.Conv != nil && op.Conv.Precision.unitRoundoff() > p.unitRoundoff() {
			p = op.Conv.Precision
		}
	}
	return p
}

// absDiff is |a-b|, 0 when both are NaN (the reference made one too) or
// the same infinity (a fused attention's log-sum-exp of a query that sees
// no key is +Inf), and +Inf when only one is NaN.
func absDiff(a, b float32) float64 {
	an, bn := a != a, b != b
	switch {
	case an && bn, a == b:
		return 0
	case an || bn:
		return math.Inf(1)
	}
	return math.Abs(float64(a) - float64(b))
}

// tolerance allows float32 rounding that grows with the length of the sums
// behind an output (GEMMs: K) and with the outputs' magnitude; fast math
// adds a little to element-wise functions.
//
// A step whose GEMMs run in a fast precision p is compared with a float32
// reference, so its products carry p's rounding of both operands: a
// relative error of up to 2u each (u = p.unitRoundoff(): 2^-8 for bf16,
// 2^-11 for tf32), which adds up over a K-long sum like a random walk,
// to about u·sqrt(K) of the sum's magnitude (rounding errors of random
// sign; data of one sign cancels nothing and stays within the same bound
// relative to its larger output). The tolerance is then u·sqrt(K) times
// the outputs' scale, or float32's when that is larger: for ResNet-18's
// longest sums (K = 4608) 0.27 for bf16 against float32's 0.018, still
// far below the error of a wrong operand or layout (order 1).
func tolerance(reduce int, scale float64, p Precision) float64 {
	f32 := math.Max(1e-4, 4e-6*float64(reduce))
	return math.Max(f32, p.unitRoundoff()*math.Sqrt(float64(reduce))) * math.Max(1, scale)
}

// checkGemms runs each GEMM shape of the plans alone, on random matrices,
// against cpu.Sgemm. The operands live in three buffers of their own,
// sized for the largest shape and kept until the device closes (a recorded
// sequence may name a buffer until then).
func (m *Model) checkGemms() []app.SelfTestRow {
	var rows []app.SelfTestRow
	if len(m.p.GemmShapes) == 0 {
		return nil
	}
	var most [3]int
	for _, g := range m.p.GemmShapes {
		for i, n := range []int{g.M * g.K, g.K * g.N, g.M * g.N} {
			most[i] = max(most[i], n*max(g.Batch, 1))
		}
	}
	var bufs [3]Buffer
	var err error
	for i, n := range most {
		if bufs[i], err = m.d.Alloc(fmt.Sprintf("selftest GEMM operand %d", i), 4*n); err != nil {
			return []app.SelfTestRow{{Name: "GEMM operands", Err: err}}
		}
	}
	rng := cpu.NewRand(7)
	for _, g := range m.p.GemmShapes {
		row := app.SelfTestRow{Name: fmt.Sprintf("GEMM %dx%dx%d transA=%v transB=%v beta=%g", g.M, g.N, g.K, g.TransA, g.TransB, g.Beta)}
		if g.Batch > 1 {
			row.Name = fmt.Sprintf("GEMM %d x %dx%dx%d transA=%v transB=%v beta=%g", g.Batch, g.M, g.N, g.K, g.TransA, g.TransB, g.Beta)
		}
		if g.Precision != PrecisionF32 {
			row.Name += " " + g.Precision.String()
		}
		row.MaxError, row.Tol, row.Err = m.checkGemm(g, bufs, rng)
		rows = append(rows, row)
	}
	return rows
}

func (m *Model) checkGemm(g GemmShape, bufs [3]Buffer, rng *cpu.Rand) (maxErr, tol float64, err error) {
	aCols, bCols := g.K, g.N
	if g.TransA {
		aCols = g.M
	}
	if g.TransB {
		bCols = g.K
	}
	batch := max(g.Batch, 1)
	sizes := [3]int{g.M * g.K, g.K * g.N, g.M * g.N}
	var host [3][]float32
	for i, n := range sizes {
		host[i] = make([]float32, n*batch)
		for j := range host[i] {
			host[i][j] = rng.Float32()*2 - 1
		}
		if err = m.d.Upload(bufs[i], 0, bytesOf(host[i])); err != nil {
			return 0, 0, err
		}
	}
	seq, err := m.d.Record("selftest GEMM", func(enc Encoder) error {
		return enc.Gemm(Gemm{TransA: g.TransA, TransB: g.TransB, M: g.M, N: g.N, K: g.K, Batch: g.Batch, Alpha: g.Alpha, Beta: g.Beta,
			A: Operand{Buf: bufs[0], MatrixBytes: 4 * sizes[0]}, B: Operand{Buf: bufs[1], MatrixBytes: 4 * sizes[1]},
			C: Operand{Buf: bufs[2], MatrixBytes: 4 * sizes[2]}, Precision: g.Precision})
	})
	if err == nil {
		err = seq.Launch()
	}
	if err == nil {
		err = m.d.Sync()
	}
	if err != nil {
		return 0, 0, err
	}
	got := make([]float32, g.M*g.N*batch)
	if err = m.d.Download(bytesOf(got), bufs[2], 0); err != nil {
		return 0, 0, err
	}
	// The reference is the float32 product. A fast precision promises no
	// more than its rounding of the operands: cuBLAS's FAST_16BF and
	// FAST_TF32 may round them or not, by shape (on an H200 a 128×512×10
	// bf16 GEMM differed from the product of the rounded operands by 3× the
	// float32 tolerance, and a 5×7×3 one was float32 exact), so the row
	// allows the precision's tolerance around the exact product.
	want := host[2]
	for b := range batch {
		cpu.Sgemm(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, host[0][b*sizes[0]:], aCols, host[1][b*sizes[1]:], bCols, g.Beta, want[b*sizes[2]:], g.N)
	}
	var scale float64
	for i, v := range got {
		maxErr = math.Max(maxErr, absDiff(v, want[i]))
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	return maxErr, tolerance(g.K, scale, g.Precision), nil
}
