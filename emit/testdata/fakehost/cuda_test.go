package main

// This file is copied next to the main.go of generated CUDA programs by
// emit's tests (TestCUDAPrograms): it runs the program's own tables through
// rt/gpuhost on cuda/fakecuda, which computes every kernel (built by g++)
// and every GEMM, so the GPU program is checked against the CPU backend's
// kernels step by step and over whole training steps.

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"mlbuildprog/cuda"
	"mlbuildprog/cuda/fakecuda"
	"mlbuildprog/rt/app"
	"mlbuildprog/rt/cpu"
	"mlbuildprog/rt/gpuhost"
)

func newFakeModel(t *testing.T) (*fakecuda.Fake, *gpuhost.Model) {
	t.Helper()
	f := fakecuda.New(fakecuda.Options{WorkDir: os.Getenv("MLBUILD_FAKECUDA_DIR")})
	d, err := cuda.OpenDevice(cuda.Options{Libraries: f.Libraries(), KernelCacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpuhost.New(d, &program)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		if faults := f.Faults(); len(faults) > 0 {
			t.Errorf("the fake GPU saw faults: %v", faults)
		}
	})
	return f, m
}

// TestSelftestOnFakeCUDA: every plan step of the CUDA program, run on the
// fake (kernels by g++ from the program's CUDA source), agrees with its CPU
// reference, and so does every GEMM shape.
func TestSelftestOnFakeCUDA(t *testing.T) {
	f, m := newFakeModel(t)
	before := f.Stats().BytesOut
	rows := m.SelfTest()
	out := f.Stats().BytesOut - before
	worst := 0.0
	for _, row := range rows {
		if row.Err != nil || !(row.MaxError <= row.Tol) {
			t.Errorf("%s: error %v, max error %g, tolerance %g", row.Name, row.Err, row.MaxError, row.Tol)
		}
		if row.Tol > 0 {
			worst = max(worst, row.MaxError/row.Tol)
		}
	}
	t.Logf("%d selftest rows pass; the largest error is %.3g of its tolerance", len(rows), worst)
	// What selftest copies back: before each step the bytes its ops touch,
	// after it the regions it compares, and the GEMM rows' products.
	// Copying the state, the plan's work arena and the training batch at
	// every step (what it did before) is several times that for a model
	// of any size.
	whole := 0
	for _, ph := range []struct {
		steps int
		work  int
	}{
		{len(program.TrainForward) + len(program.TrainBackward) + len(program.TrainUpdate), program.TrainWorkSize},
		{len(program.EvalInfer), program.EvalWorkSize}, {len(program.OneInfer), program.OneWorkSize},
	} {
		whole += 4 * ph.steps * (program.StateSize + ph.work + program.TrainInputSize + program.TrainLabelsSize)
	}
	t.Logf("selftest copied %d bytes from the device, %.2f of copying the arenas at every step", out, float64(out)/float64(whole))
	if out <= 0 || 2*out > whole {
		t.Errorf("selftest copied %d bytes from the device, over half of copying the arenas at every step (%d)", out, whole)
	}
}

// seeded fills the state as training starts (the params' init rules) and
// returns a batch of inputs and labels (token ids and a one-hot row per
// token for a model of token ids). Of the token ids, sample 1 ends in
// three ids vocab−1 and sample 2 starts with two: the padding of a model
// whose attention masks that id (testdata/specs/valid/gpt_tiny_pad.cue),
// at the right and at the left, where a causal query sees no key.
func seeded(m *gpuhost.Model, rows int) (x, y []float32) {
	rng := cpu.NewRand(42)
	state := m.State()
	clear(state)
	for _, p := range program.Meta.Params {
		w := state[p.Offset : p.Offset+p.Size]
		switch p.Init {
		case "uniform":
			cpu.FillUniform(w, p.Bound, rng)
		case "ones":
			cpu.Fill(w, 1)
		}
	}
	B := program.Meta.Batch
	inW, labW := program.TrainInputSize/B, program.TrainLabelsSize/B
	x = make([]float32, rows*inW)
	for i := range x {
		x[i] = rng.Float32()
		if v := program.Meta.Vocab; v > 0 {
			x[i] = float32(rng.Intn(v)) // token ids
			if r, t := i/inW, i%inW; r == 1 && t >= inW-3 || r == 2 && t < 2 {
				x[i] = float32(v - 1)
			}
		}
	}
	y = make([]float32, rows*labW)
	classes := program.Meta.Classes
	for r := 0; r < rows; r++ {
		if out := program.Meta.OutputShape; program.Meta.Vocab > 0 && len(out) == 2 && out[0]*out[1] == labW {
			for t := 0; t < out[0]; t++ { // one-hot per token
				y[r*labW+t*out[1]+rng.Intn(out[1])] = 1
			}
			continue
		}
		if classes == labW && classes > 1 {
			y[r*labW+rng.Intn(classes)] = 1
			continue
		}
		for j := 0; j < labW; j++ {
			y[r*labW+j] = rng.Float32()*2 - 1
		}
	}
	return x, y
}

// fold is rt/gpuhost's 32-bit dropout seed of a step seed.
func fold(s uint64) uint32 { return uint32(s) ^ uint32(s>>32) }

func near(a, b float32, tol float64) bool {
	return math.Abs(float64(a)-float64(b)) <= tol*math.Max(1, math.Abs(float64(b)))
}

// lossTol is how near a training step's loss on the fake GPU must be to
// the CPU kernels': 1e-4 when every GEMM is f32; a program whose GEMMs
// round their operands (bf16: 8 bits, tf32: 11 bits of precision) against
// the float32 CPU references moves each layer's outputs by up to about
// 2^-8 (2^-11) of their size, so the loss by a few times that: 1e-2 for
// bf16, 2e-3 for tf32 (also for kernels on tensor tiles, whose operands
// are TF32: PlanStep.Precision).
func lossTol() float64 {
	tol := 1e-4
	for _, ph := range [][]gpuhost.PlanStep{program.TrainForward, program.TrainBackward} {
		for _, st := range ph {
			if st.Precision == gpuhost.PrecisionTF32 { // kernels on tensor tiles (the fused attention's)
				tol = max(tol, 2e-3)
			}
			for _, op := range st.Ops {
				if op.Conv != nil && op.Conv.Precision == gpuhost.PrecisionTF32 {
					tol = max(tol, 2e-3)
				}
				if op.Conv != nil && op.Conv.Precision == gpuhost.PrecisionBF16 {
					tol = max(tol, 1e-2)
				}
				switch {
				case op.Gemm == nil:
				case op.Gemm.Shape.Precision == gpuhost.PrecisionBF16:
					tol = max(tol, 1e-2)
				case op.Gemm.Shape.Precision == gpuhost.PrecisionTF32:
					tol = max(tol, 2e-3)
				}
			}
		}
	}
	return tol
}

// TestTrainingMatchesCPU runs three training steps on the fake GPU and the
// same three through the CPU backend's kernels (each step's reference, on
// host copies of the arenas): the losses agree (within lossTol), and so
// do the weights; the library convolutions ran on the fake cuDNN.
func TestTrainingMatchesCPU(t *testing.T) {
	f, m := newFakeModel(t)
	// The training step's library convolutions (cuDNN's, where the plan
	// lowered a convolution to them) run on the fake cuDNN.
	convs := 0
	for _, ph := range [][]gpuhost.PlanStep{program.TrainForward, program.TrainBackward} {
		for _, st := range ph {
			for _, op := range st.Ops {
				if op.Conv != nil {
					convs++
				}
			}
		}
	}
	defer func() {
		if runs := f.Stats().ConvRuns; runs < 3*convs {
			t.Errorf("3 training steps of %d library convolutions each ran %d on the fake cuDNN, want at least %d", convs, runs, 3*convs)
		}
		t.Logf("%d library convolutions a training step", convs)
	}()
	B := program.Meta.Batch
	x, y := seeded(m, B)
	sa := append([]float32(nil), m.State()...)
	wa := make([]float32, max(program.TrainWorkSize, 1))
	const lr = 1e-3
	for step := 1; step <= 3; step++ {
		seed := uint64(step) * 0x9E3779B97F4A7C15
		copy(m.TrainInput(), x)
		copy(m.TrainLabels(), y)
		m.SetRand(seed)
		got := m.TrainStep(lr, step)
		var want float32
		for _, ph := range [][]gpuhost.PlanStep{program.TrainForward, program.TrainBackward, program.TrainUpdate} {
			for _, st := range ph {
				if l := st.Ref(sa, wa, x, y, lr, step, fold(seed)); l != 0 {
					want = l
				}
			}
		}
		if !near(got, want, lossTol()) {
			t.Errorf("step %d: loss %v on the fake GPU, %v on the CPU kernels", step, got, want)
		}
	}
	// Adam moves each weight by about lr a step whatever the gradient's
	// size, so a gradient near zero whose sign rounding flips moves it the
	// other way: weights agree within 2·lr·steps, and 95% within 1e-4;
	// 75% in a bf16 program, whose products round every operand to 8 bits
	// against the float32 references (testdata/specs/bf16/gpt_tiny_bf16's
	// 12-wide layers had up to 15% beyond 1e-4, the same with its twins
	// as with cuBLAS's rounding of float32 operands).
	farShare := 20
	if lossTol() >= 1e-2 {
		farShare = 4
	}
	// A program that stores activations in bfloat16 rounds every batch
	// norm's input on both sides, from products of operands rounded
	// differently (the GPU's convolutions read the weights' bfloat16
	// twins, the CPU references the float32 weights), so the running
	// statistics, averages of those inputs, agree within a bfloat16 step
	// of their size rather than 1e-4.
	stored := false
	for _, ph := range [][]gpuhost.PlanStep{program.TrainForward, program.TrainBackward} {
		for _, st := range ph {
			stored = stored || len(st.CheckBF16) > 0
		}
	}
	state := m.State()
	for _, p := range program.Meta.Params {
		far := 0
		for i := p.Offset; i < p.Offset+p.Size; i++ {
			d := math.Abs(float64(state[i] - sa[i]))
			if stored && !p.Trainable {
				d = max(0, d-0x1p-7*math.Abs(float64(sa[i])))
			}
			if d > 2*lr*3 {
				t.Errorf("after 3 steps %s[%d] is %v on the fake GPU, %v on the CPU kernels", p.Name, i-p.Offset, state[i], sa[i])
				break
			}
			if d > 1e-4 {
				far++
			}
		}
		if far > p.Size/farShare+1 {
			t.Errorf("after 3 steps %d of the %d weights of %s differ by more than 1e-4 between the fake GPU and the CPU kernels", far, p.Size, p.Name)
		}
	}
}

// TestAccumulationMatchesCPU, for a program whose optimizer steps
// accumulate gradients over micro-batches (training.accumulate), runs
// three optimizer steps as the training loop does, Gradients on each
// micro-batch but the last and TrainStep on the last, on the fake GPU and
// through the CPU backend's kernels: every micro-batch's loss and
// prediction agree, and so do the weights. A program without
// accumulation skips it.
func TestAccumulationMatchesCPU(t *testing.T) {
	micro := program.Meta.Defaults.Accumulate
	if micro < 2 {
		t.Skip("the program does not accumulate gradients")
	}
	_, m := newFakeModel(t)
	B := program.Meta.Batch
	x, y := seeded(m, B*micro)
	inW, labW := program.TrainInputSize/B, program.TrainLabelsSize/B
	sa := append([]float32(nil), m.State()...)
	wa := make([]float32, max(program.TrainWorkSize, 1))
	const lr = 1e-2
	for step := 1; step <= 3; step++ {
		seed := uint64(step) * 0x9E3779B97F4A7C15
		m.SetRand(seed)
		for k := range micro {
			xk, yk := x[k*B*inW:(k+1)*B*inW], y[k*B*labW:(k+1)*B*labW]
			copy(m.TrainInput(), xk)
			copy(m.TrainLabels(), yk)
			var got float32
			phases := [][]gpuhost.PlanStep{program.TrainForward, program.TrainBackward}
			if k < micro-1 {
				got = m.Gradients()
			} else {
				got = m.TrainStep(lr, step)
				phases = append(phases, program.TrainUpdate)
			}
			var want float32
			for _, ph := range phases {
				for _, st := range ph {
					if l := st.Ref(sa, wa, xk, yk, lr, step, fold(seed)); l != 0 {
						want = l
					}
				}
			}
			if !near(got, want, lossTol()) {
				t.Errorf("step %d, micro-batch %d: loss %v on the fake GPU, %v on the CPU kernels", step, k+1, got, want)
			}
			if r := program.TrainOutput; r.Arena == gpuhost.ArenaTrainWork {
				out := m.TrainOutput()
				for i, v := range wa[r.Offset : r.Offset+r.Size] {
					if !near(out[i], v, lossTol()) {
						t.Errorf("step %d, micro-batch %d: prediction %d is %v on the fake GPU, %v on the CPU kernels", step, k+1, i, out[i], v)
						break
					}
				}
			}
		}
	}
	state := m.State()
	for _, p := range program.Meta.Params {
		for i := p.Offset; i < p.Offset+p.Size; i++ {
			if !near(state[i], sa[i], 1e-4) {
				t.Errorf("after 3 steps of %d micro-batches %s[%d] is %v on the fake GPU, %v on the CPU kernels", micro, p.Name, i-p.Offset, state[i], sa[i])
				break
			}
		}
	}
}

// TestResidentMatchesHostFed trains two steps with the training set on the
// device (gathered by the advance, gather and record kernels, one graph
// launch a step) and the same two steps fed from the host: the losses are
// identical, and a restore and replay gives them again.
//
// A program of a text dataset gathers windows of one stream of tokens
// instead (residentWindowsMatchHostFed).
func TestResidentMatchesHostFed(t *testing.T) {
	if program.Resident != nil && program.Resident.Windows > 0 {
		residentWindowsMatchHostFed(t)
		return
	}
	f, m := newFakeModel(t)
	B := program.Meta.Batch
	rows := 2*B + 3
	x, y := seeded(m, rows)
	initial := append([]float32(nil), m.State()...)
	inW, labW := program.TrainInputSize/B, program.TrainLabelsSize/B
	order := make([]int, 2*B)
	for i := range order {
		order[i] = (i*7 + 3) % rows
	}
	seeds := []uint64{0xABCDEF12345, 0x1234}
	const lr = 2e-3
	if ok, err := m.LoadTrainSet(x, y, rows); err != nil || !ok {
		t.Fatalf("LoadTrainSet: %v, %v", ok, err)
	}
	if err := m.StartEpoch(order, seeds, []float32{lr, lr}, 5, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.SaveState(); err != nil {
		t.Fatal(err)
	}
	before := f.Stats()
	if err := m.QueueSteps(2); err != nil {
		t.Fatal(err)
	}
	loss, correct, err := m.StepResults()
	if err != nil {
		t.Fatal(err)
	}
	after := f.Stats()
	if d := after.GraphLaunches - before.GraphLaunches; d != 2 {
		t.Errorf("two device-resident steps made %d graph launches, want 2", d)
	}
	if d := after.Allocs - before.Allocs; d != 0 {
		t.Errorf("two device-resident steps allocated %d times, want 0", d)
	}
	if d := after.Launches + after.Gemms - before.Launches - before.Gemms; d != 0 {
		t.Errorf("two device-resident steps launched %d kernels or GEMMs outside their graphs", d)
	}

	// Replay: restore the state saved before the steps and run them again.
	if err := m.RestoreState(); err != nil {
		t.Fatal(err)
	}
	if err := m.SetBatch(0); err != nil {
		t.Fatal(err)
	}
	if err := m.QueueSteps(2); err != nil {
		t.Fatal(err)
	}
	again, _, err := m.StepResults()
	if err != nil {
		t.Fatal(err)
	}

	// The host-fed run from the same initial state.
	copy(m.State(), initial)
	for b := 0; b < 2; b++ {
		in, lab := m.TrainInput(), m.TrainLabels()
		for r := 0; r < B; r++ {
			row := order[b*B+r]
			copy(in[r*inW:(r+1)*inW], x[row*inW:(row+1)*inW])
			copy(lab[r*labW:(r+1)*labW], y[row*labW:(row+1)*labW])
		}
		m.SetRand(seeds[b])
		want := m.TrainStep(lr, 5+b)
		if loss[b] != want || again[b] != want {
			t.Errorf("step %d: loss %v device-resident, %v replayed, %v fed from the host", b+1, loss[b], again[b], want)
		}
		if classes := program.Meta.Classes; classes == labW && classes > 1 {
			n := 0
			out, lab := m.TrainOutput(), m.TrainLabels()
			for r := 0; r < B; r++ {
				if cpu.Argmax(out[r*classes:(r+1)*classes]) == cpu.Argmax(lab[r*classes:(r+1)*classes]) {
					n++
				}
			}
			if correct[b] != n {
				t.Errorf("step %d: %d rows correct device-resident, %d fed from the host", b+1, correct[b], n)
			}
		}
	}
}

// residentWindowsMatchHostFed trains three steps of a language model on
// windows of a token stream kept on the device (gathered and made one-hot
// there, a learning rate for each step) and the same three steps fed from
// the host: the losses and the positions predicted right are identical,
// and a stream with an id outside the vocabulary is refused.
func residentWindowsMatchHostFed(t *testing.T) {
	_, m := newFakeModel(t)
	B, T, V := program.Meta.Batch, program.Resident.Windows, program.Meta.Vocab
	labW := program.TrainLabelsSize / B
	if program.TrainInputSize != B*T || labW%T != 0 || V <= 1 {
		t.Fatalf("a text program of input %d and labels %d for windows of %d tokens, vocabulary %d", program.TrainInputSize, program.TrainLabelsSize, T, V)
	}
	C := labW / T // the logits a position
	seeded(m, 1)
	initial := append([]float32(nil), m.State()...)
	rng := cpu.NewRand(7)
	ids := make([]float32, 3*B*T+7)
	for i := range ids {
		ids[i] = float32(rng.Intn(V))
	}
	windows := len(ids) - T
	const steps = 3
	order := make([]int, steps*B)
	for i := range order {
		order[i] = rng.Intn(windows)
	}
	order[1] = windows - 1 // the last window: its last label is the stream's last id
	seeds := []uint64{0xABCDEF12345, 0x1234, 99}
	lrs := []float32{3e-3, 1e-2, 2e-3}
	if ok, err := m.LoadTrainWindows(ids, windows); err != nil || !ok {
		t.Fatalf("LoadTrainWindows: %v, %v", ok, err)
	}
	if err := m.StartEpoch(order, seeds, lrs, 5, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.QueueSteps(steps); err != nil {
		t.Fatal(err)
	}
	loss, correct, err := m.StepResults()
	if err != nil {
		t.Fatal(err)
	}
	copy(m.State(), initial)
	for b := range steps {
		in, lab := m.TrainInput(), m.TrainLabels()
		clear(lab)
		for r := range B {
			s := order[b*B+r]
			for j := range T {
				in[r*T+j] = ids[s+j]
				lab[r*labW+j*C+int(ids[s+j+1])] = 1
			}
		}
		m.SetRand(seeds[b])
		want := m.TrainStep(lrs[b], 5+b)
		n := 0
		out, lab := m.TrainOutput(), m.TrainLabels()
		for p := 0; p < B*T; p++ {
			if cpu.Argmax(out[p*C:(p+1)*C]) == cpu.Argmax(lab[p*C:(p+1)*C]) {
				n++
			}
		}
		if loss[b] != want || correct[b] != n {
			t.Errorf("step %d: loss %v and %d positions right on the device's windows, %v and %d fed from the host", b+1, loss[b], correct[b], want, n)
		}
	}
	ids[3] = float32(V)
	if ok, err := m.LoadTrainWindows(ids, windows); ok || err == nil || !strings.Contains(err.Error(), "training text") {
		t.Errorf("a stream with id %d of a vocabulary of %d: %v, %v", V, V, ok, err)
	}
}

// plainDevice hides the CUDA device's Call (and Pin), so that a Model on it
// runs an inference as Upload, Launch, Sync and Download.
type plainDevice struct{ gpuhost.Device }

// TestInferenceIsOneCall: an inference on the CUDA device is one call (one
// graph launch, its two copies, one wait) and gives what the same
// inference gives through separate uploads, launches and downloads.
func TestInferenceIsOneCall(t *testing.T) {
	f, m := newFakeModel(t)
	plain, err := gpuhost.New(plainDevice{m.Device()}, &program)
	if err != nil {
		t.Fatal(err)
	}
	B := program.Meta.Batch
	x, _ := seeded(m, 2*B)
	copy(plain.State(), m.State())
	inW := program.TrainInputSize / B
	for _, one := range []bool{false, true} {
		for i := range 2 {
			in := m.InferInput(one)
			copy(in, x[i*inW:i*inW+len(in)])
			copy(plain.InferInput(one), in)
			before := f.Stats()
			got := append([]float32(nil), m.Infer(one)...)
			after := f.Stats()
			if i == 1 && (after.GraphLaunches-before.GraphLaunches != 1 || after.Syncs-before.Syncs != 1 || after.Copies-before.Copies != 2) {
				t.Errorf("one=%v: an inference made %d graph launches, %d waits and %d copies, want 1, 1 and 2",
					one, after.GraphLaunches-before.GraphLaunches, after.Syncs-before.Syncs, after.Copies-before.Copies)
			}
			want := plain.Infer(one)
			if len(got) != len(want) || len(got) == 0 {
				t.Fatalf("one=%v: %d outputs through Call, %d without", one, len(got), len(want))
			}
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("one=%v, batch %d: output %d is %v through Call, %v without", one, i, j, got[j], want[j])
				}
			}
		}
	}
}

// TestInferenceFollowsTraining: an inference after training steps uses
// the trained weights and running statistics. A program that folds its
// batch norms at inference (gpuhost's fold.go) must fold them again after
// each step: its outputs equal, bit for bit, those of a second model
// given the trained state, whose first inference folds it afresh, and
// differ from the inference before training.
func TestInferenceFollowsTraining(t *testing.T) {
	_, m := newFakeModel(t)
	_, fresh := newFakeModel(t)
	B := program.Meta.Batch
	x, y := seeded(m, 2*B)
	inW, labW := program.TrainInputSize/B, program.TrainLabelsSize/B
	for _, one := range []bool{false, true} {
		in := m.InferInput(one)
		copy(in, x[:len(in)])
		before := append([]float32(nil), m.Infer(one)...)
		for step := 1; step <= 2; step++ {
			copy(m.TrainInput(), x[(step-1)%2*B*inW:])
			copy(m.TrainLabels(), y[(step-1)%2*B*labW:])
			m.TrainStep(0.05, step)
		}
		copy(m.InferInput(one), x[:len(in)])
		got := append([]float32(nil), m.Infer(one)...)
		copy(fresh.State(), m.State())
		copy(fresh.InferInput(one), x[:len(in)])
		want := fresh.Infer(one)
		same := true
		for j := range got {
			if got[j] != want[j] {
				t.Fatalf("one=%v: after training, output %d is %v; a model given the trained state says %v (stale folded weights?)", one, j, got[j], want[j])
			}
			same = same && got[j] == before[j]
		}
		if same {
			t.Errorf("one=%v: the inference after two training steps is the one before them", one)
		}
	}
}

// TestTrainingAfterLoad: a model given a trained model's state (as
// loading weights gives it: the host writes the state arena, and then
// the weights' bfloat16 twins from the weights, a convolution's in KRSC
// order) infers and trains as a model that went on after the same
// training, whose twins its update kernels wrote: the inferences, the
// next step's loss and the state after it, twins included, are the same
// bit for bit. (Reading a model's state marks it written by the host, so
// the state comes from a third model trained alike.)
func TestTrainingAfterLoad(t *testing.T) {
	_, m := newFakeModel(t)
	_, src := newFakeModel(t)
	_, loaded := newFakeModel(t)
	B := program.Meta.Batch
	x, y := seeded(m, 2*B)
	copy(src.State(), m.State())
	inW, labW := program.TrainInputSize/B, program.TrainLabelsSize/B
	step := func(mm *gpuhost.Model, k int) float32 {
		copy(mm.TrainInput(), x[(k-1)%2*B*inW:])
		copy(mm.TrainLabels(), y[(k-1)%2*B*labW:])
		mm.SetRand(uint64(k) * 0x9E3779B97F4A7C15)
		return mm.TrainStep(0.05, k)
	}
	for k := 1; k <= 2; k++ {
		step(m, k)
		step(src, k)
	}
	copy(loaded.State(), src.State())
	for _, one := range []bool{false, true} {
		in := m.InferInput(one)
		copy(in, x[:len(in)])
		copy(loaded.InferInput(one), in)
		got, want := append([]float32(nil), loaded.Infer(one)...), m.Infer(one)
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("one=%v: output %d is %v after loading the state, %v on the model that trained on", one, j, got[j], want[j])
			}
		}
	}
	if got, want := step(loaded, 3), step(m, 3); math.Float32bits(got) != math.Float32bits(want) {
		t.Errorf("step 3: loss %v after loading the state, %v on the model that trained on", got, want)
	}
	a, b := m.State(), loaded.State()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("after step 3 state place %d is %#x after loading the state, %#x on the model that trained on", i, math.Float32bits(b[i]), math.Float32bits(a[i]))
		}
	}
}

// TestDeviceMemoryUsed: what bench reports as the device memory the
// program took holds at least its arenas, on a fake GPU that counts its
// allocations.
func TestDeviceMemoryUsed(t *testing.T) {
	_, m := newFakeModel(t)
	m.TrainStep(1e-3, 1)
	used, ok := m.DeviceMemoryUsed()
	arenas := 4 * int64(program.StateSize+program.TrainWorkSize+program.EvalWorkSize+program.OneWorkSize+
		program.TrainInputSize+program.TrainLabelsSize+program.OutputSize)
	if !ok || used < arenas || used > 2*arenas+1<<20 {
		t.Errorf("DeviceMemoryUsed = %d, %v; the arenas take %d bytes", used, ok, arenas)
	}
}

// tokenIDPanic runs f and returns the *cpu.TokenIDError it panicked with,
// or nil when it returned.
func tokenIDPanic(t *testing.T, f func()) (te *cpu.TokenIDError) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			var ok bool
			if te, ok = r.(*cpu.TokenIDError); !ok {
				t.Fatalf("panicked with %v, want a *cpu.TokenIDError", r)
			}
		}
	}()
	f()
	return nil
}

// TestBadTokenIDs: in a program that reads token ids, an id outside the
// vocabulary (or not an integer) in a training batch, an inference batch
// or a training set kept on the device is refused on the host before any
// copy or launch, with the *cpu.TokenIDError that rt/app reports with
// exit 1, as the CPU backend's embedding does; good ids then train.
func TestBadTokenIDs(t *testing.T) {
	V := program.Meta.Vocab
	if V == 0 {
		t.Skip("this program reads no token ids")
	}
	f, m := newFakeModel(t)
	B := program.Meta.Batch
	x, y := seeded(m, B)
	inW := program.TrainInputSize / B
	for _, bad := range []float32{float32(V), -1, 1.5} {
		x[inW+2] = bad
		copy(m.TrainInput(), x)
		copy(m.TrainLabels(), y)
		before := f.Stats()
		te := tokenIDPanic(t, func() { m.TrainStep(1e-3, 1) })
		if te == nil || te.ID != bad || te.Position != inW+2 || te.Vocab != V || te.Layer != program.TokenLayer || program.TokenLayer == "" {
			t.Errorf("training on id %v: %#v, want the error of position %d, vocabulary %d, layer %q", bad, te, inW+2, V, program.TokenLayer)
		}
		if after := f.Stats(); after.Copies != before.Copies || after.GraphLaunches != before.GraphLaunches || after.Launches != before.Launches {
			t.Errorf("training on id %v: the host copied or launched before refusing it (%+v, then %+v)", bad, before, after)
		}
		in := m.InferInput(false)
		copy(in, x[:len(in)])
		if te := tokenIDPanic(t, func() { m.Infer(false) }); te == nil || te.ID != bad {
			t.Errorf("inference on id %v: %#v, want its error", bad, te)
		}
		before = f.Stats()
		var ok bool
		var err error
		where := "row 1 "
		if rk := program.Resident; rk != nil && rk.Windows > 0 { // a text: one stream of ids
			ok, err = m.LoadTrainWindows(x, len(x)-rk.Windows)
			where = "the training text: "
		} else {
			ok, err = m.LoadTrainSet(x, y, B)
		}
		var se *cpu.TokenIDError
		if ok || !errors.As(err, &se) || se.ID != bad || !strings.Contains(err.Error(), where) {
			t.Errorf("a training set with id %v: %v, %v, want its error naming %q", bad, ok, err, where)
		}
		if after := f.Stats(); after.Copies != before.Copies {
			t.Errorf("a training set with id %v was copied to the device before it was refused", bad)
		}
	}
	x[inW+2] = float32(V - 1)
	copy(m.TrainInput(), x)
	if te := tokenIDPanic(t, func() {
		if l := m.TrainStep(1e-3, 1); !(l > 0) {
			t.Errorf("loss %v on good ids", l)
		}
	}); te != nil {
		t.Errorf("good ids refused: %v", te)
	}
}

// TestDecodeMatchesCPU, for a program with a KV-cache decode (a language
// model's), generates greedily as rt/app's generate does (the window
// jumping by half the context when it is full) through the
// model's TokenModel on the fake GPU and through the CPU program's decode
// (each decode step's CPU reference, the CPU backend's call, at the same
// positions): the logits agree within 1e-4 at every token and so does
// the greedy choice, where the CPU's two largest logits are apart; a
// token is one graph launch with three copies (the position, the id and
// the logits) and one wait, and the window after a jump one forward
// pass that fills the caches (the prefill), whose logits and caches the
// tokens after it check. The ids stay below the last, which the padded
// test GPTs (testdata/specs/*/gpt_tiny_pad*.cue) pad with: a generating
// program never feeds the padding id (planner.Decode.Padded), and a
// prefill, the full plan, would mask it where the decode's steps do not.
func TestDecodeMatchesCPU(t *testing.T) {
	dc := program.Decode
	if dc == nil {
		t.Skip("the program has no KV-cache decode")
	}
	f, m := newFakeModel(t)
	tm := m.TokenModel()
	seeded(m, 1)
	sa := append([]float32(nil), m.State()...)
	wa := make([]float32, program.DecodeWorkSize)
	T, V := dc.Context, dc.Output.Size
	if tm.Context() != T {
		t.Fatalf("Context() = %d, want %d", tm.Context(), T)
	}
	if v := program.Meta.Vocab; v > 0 {
		V = min(V, v)
	}
	cached := 0
	cpuNext := func(ctx []int32, keep int) []float32 {
		for p := min(keep, cached, len(ctx)-1); p < len(ctx); p++ {
			wa[dc.Input.Offset] = float32(ctx[p])
			for _, st := range dc.Step {
				st.Ref(sa, wa, nil, nil, 0, p, 0)
			}
		}
		cached = len(ctx)
		for _, st := range dc.Last {
			st.Ref(sa, wa, nil, nil, 0, len(ctx)-1, 0)
		}
		return wa[dc.Output.Offset : dc.Output.Offset+V]
	}
	argmax := func(v []float32) (best int, gap float64) {
		v = v[:len(v)-1] // not the last id
		for i, x := range v {
			if x > v[best] {
				best = i
			}
		}
		gap = math.Inf(1)
		for i, x := range v {
			if i != best {
				gap = math.Min(gap, float64(v[best]-x))
			}
		}
		return best, gap
	}
	ids := []int32{1, int32(V - 2), 0}
	start, prev, jumps, clear := 0, 0, 0, 0
	n := T - len(ids) + 4 // the window jumps at the (T-len(ids)+2)-th token, then one more with the cache
	if T < len(ids) {
		t.Fatalf("a context of %d", T)
	}
	for tok := range n {
		keep := prev
		if len(ids)-start > T { // generate's window rule (rt/app's contextJump)
			start, keep = len(ids)-max(1, T/2), 0
			jumps++
		}
		ctx := ids[start:]
		before := f.Stats()
		got := tm.NextLogits(ctx, keep)[:V]
		after := f.Stats()
		launches, copies, syncs := after.GraphLaunches-before.GraphLaunches, after.Copies-before.Copies, after.Syncs-before.Syncs
		if keep == len(ctx)-1 && (launches != 1 || copies != 3 || syncs != 1) {
			t.Errorf("token %d: %d graph launches, %d copies and %d waits, want 1, 3 and 1", tok, launches, copies, syncs)
		}
		// A window of 4 ids or more is one forward pass (the prefill):
		// its ids up, the last position's logits down.
		if keep == 0 && len(ctx) >= 4 && (launches != 1 || copies != 2 || syncs != 1) {
			t.Errorf("token %d, a window of %d: %d graph launches, %d copies and %d waits, want 1, 2 and 1", tok, len(ctx), launches, copies, syncs)
		}
		want := cpuNext(ctx, keep)
		for i := range want {
			if !near(got[i], want[i], lossTol()) { // 1e-4 in f32; 1e-2 where the products round to bfloat16
				t.Fatalf("token %d (context of %d, keep %d): logit %d is %v on the fake GPU, %v in the CPU program's decode", tok, len(ctx), keep, i, got[i], want[i])
			}
		}
		id, gap := argmax(want)
		if g, _ := argmax(got); gap > 1e-3 {
			clear++
			if g != id {
				t.Errorf("token %d: greedy id %d on the fake GPU, %d in the CPU program's decode", tok, g, id)
			}
		}
		prev = len(ctx)
		ids = append(ids, int32(id))
	}
	if jumps < 1 || clear < n/2 {
		t.Errorf("%d window jumps and %d tokens with a clear greedy choice of %d: the test shows too little", jumps, clear, n)
	}
	// Without the device's Call (uploads, a launch, a wait and a download),
	// the same context from scratch gives the same bits.
	plain, err := gpuhost.New(plainDevice{m.Device()}, &program)
	if err != nil {
		t.Fatal(err)
	}
	copy(plain.State(), sa)
	ctx := ids[start:]
	want := append([]float32(nil), tm.NextLogits(ctx, 0)...)
	for i, v := range plain.TokenModel().NextLogits(ctx, 0) {
		if v != want[i] {
			t.Fatalf("logit %d of a context of %d is %v through Call, %v without", i, len(ctx), want[i], v)
		}
	}
	// What the command line runs: generate takes it as a TokenModel and
	// selftest adds its KV-cache row (not run here: its full passes take
	// the fake GPU many seconds).
	if _, ok := m.App().(app.TokenModel); !ok {
		t.Error("the model the command line runs is no app.TokenModel")
	}
	if _, ok := m.App().(interface{ KVCacheCheck() app.SelfTestRow }); !ok {
		t.Error("the model the command line runs has no KV-cache selftest row")
	}
}

// TestWithoutCuDNN: on a machine without cuDNN, a program whose plans run
// library convolutions fails to start with the missing-library message
// (how to install cuDNN, the variable that names its file, that it is
// the GPU that cannot run the program), not a panic; a program without
// them starts, as it never loads cuDNN.
func TestWithoutCuDNN(t *testing.T) {
	convs := 0
	for _, ph := range [][]gpuhost.PlanStep{program.TrainForward, program.TrainBackward, program.EvalInfer, program.OneInfer} {
		for _, st := range ph {
			for _, op := range st.Ops {
				if op.Conv != nil {
					convs++
				}
			}
		}
	}
	f := fakecuda.New(fakecuda.Options{WorkDir: os.Getenv("MLBUILD_FAKECUDA_DIR"), NoDNN: true})
	d, err := cuda.OpenDevice(cuda.Options{Libraries: f.Libraries(), KernelCacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, err = gpuhost.New(d, &program)
	if convs == 0 {
		if err != nil {
			t.Fatalf("a program without library convolutions on a machine without cuDNN: %v", err)
		}
		return
	}
	var missing *cuda.MissingLibraryError
	if !errors.As(err, &missing) || !errors.Is(err, gpuhost.ErrNoDevice) {
		t.Fatalf("a program of %d library convolutions without cuDNN: %v, want the missing-library error", convs, err)
	}
	for _, want := range []string{"cuDNN: not found", "pip install nvidia-cudnn-cu13", "MLBUILD_CUDNN_LIB", "--backend cpu"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the message lacks %q:\n%v", want, err)
		}
	}
}
