package app

import (
	"bytes"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/idx"
)

// linearModel is a Model written by hand for the runtime's tests: a
// softmax regression (one dense layer) on 4×4 images of 4 classes, trained
// with plain SGD. It runs the command line and the training loop in
// microseconds, without compiling a program.
type linearModel struct {
	meta  Meta
	state []float32 // weight [4,16] at 0, bias [4] at 64, their gradients at 68 and 132
	x, y  []float32 // training batch
	out   []float32 // training logits
	ix    []float32 // inference batch
	ix1   []float32 // inference row
	iout  []float32
	iout1 []float32
	// interruptAt sends the process SIGINT during that training step, as
	// Ctrl-C would.
	interruptAt int
	// before is the state at the start of the latest TrainStep.
	before []float32
}

const (
	lmIn, lmClasses, lmBatch = 16, 4, 4
	lmW, lmB                 = 0, lmIn * lmClasses
	lmGW, lmGB               = lmB + lmClasses, lmB + lmClasses + lmIn*lmClasses
	lmState                  = lmGB + lmClasses
)

func newLinearModel() *linearModel {
	m := &linearModel{
		state: make([]float32, lmState),
		x:     make([]float32, lmBatch*lmIn), y: make([]float32, lmBatch*lmClasses), out: make([]float32, lmBatch*lmClasses),
		ix: make([]float32, lmBatch*lmIn), ix1: make([]float32, lmIn),
		iout: make([]float32, lmBatch*lmClasses), iout1: make([]float32, lmClasses),
	}
	m.meta = Meta{
		Name: "lin", SpecFile: "lin.cue", Backend: "cpu", BuildKey: "test", Version: "v0.0.0-test",
		InputShape: []int{1, 4, 4}, Classes: lmClasses, Batch: lmBatch, Readers: allReaders,
		Params: []ParamMeta{
			{Name: "dense1.weight", Shape: []int{lmClasses, lmIn}, Offset: lmW, Size: lmIn * lmClasses, Trainable: true, Init: "uniform", Bound: 0.25, Grad: lmGW},
			{Name: "dense1.bias", Shape: []int{lmClasses}, Offset: lmB, Size: lmClasses, Trainable: true, Init: "uniform", Bound: 0.25, Grad: lmGB},
		},
		Layers: []LayerMeta{{Name: "input", Op: "input", OutShape: []int{1, 4, 4}}, {Name: "flatten1", Op: "flatten", OutShape: []int{16}},
			{Name: "dense1", Op: "dense", OutShape: []int{4}, Params: 68}},
		Defaults: Defaults{Loss: "softmax_cross_entropy", Optimizer: "sgd", LR: 0.5, Schedule: "cosine", MinLR: 0.01,
			Epochs: 3, Seed: 7, TrainImages: "train-images", TrainLabels: "train-labels", TestImages: "test-images", TestLabels: "test-labels"},
	}
	return m
}

func (m *linearModel) Meta() *Meta             { return &m.meta }
func (m *linearModel) State() []float32        { return m.state }
func (m *linearModel) TrainInput() []float32   { return m.x }
func (m *linearModel) TrainLabels() []float32  { return m.y }
func (m *linearModel) TrainOutput() []float32  { return m.out }
func (m *linearModel) SetRand(uint64)          {}
func (m *linearModel) SelfTest() []SelfTestRow { return nil }
func (m *linearModel) InferInput(one bool) []float32 {
	if one {
		return m.ix1
	}
	return m.ix
}

// forward computes logits = W x + b for each row of x.
func (m *linearModel) forward(x, out []float32) {
	w, b := m.state[lmW:lmB], m.state[lmB:lmGW]
	for r := 0; r*lmIn < len(x); r++ {
		for c := 0; c < lmClasses; c++ {
			s := b[c]
			for i := 0; i < lmIn; i++ {
				s += w[c*lmIn+i] * x[r*lmIn+i]
			}
			out[r*lmClasses+c] = s
		}
	}
}

func (m *linearModel) Infer(one bool) []float32 {
	if one {
		m.forward(m.ix1, m.iout1)
		return m.iout1
	}
	m.forward(m.ix, m.iout)
	return m.iout
}

func (m *linearModel) Gradients() float32 {
	m.forward(m.x, m.out)
	gw, gb := m.state[lmGW:lmGB], m.state[lmGB:lmState]
	clear(gw)
	clear(gb)
	var loss float64
	for r := 0; r < lmBatch; r++ {
		p := softmax64(m.out[r*lmClasses : (r+1)*lmClasses])
		for c := 0; c < lmClasses; c++ {
			t := float64(m.y[r*lmClasses+c])
			if t > 0 {
				loss -= t * math.Log(p[c])
			}
			d := float32((p[c] - t) / lmBatch)
			gb[c] += d
			for i := 0; i < lmIn; i++ {
				gw[c*lmIn+i] += d * m.x[r*lmIn+i]
			}
		}
	}
	return float32(loss / lmBatch)
}

func (m *linearModel) TrainStep(lr float32, step int) float32 {
	if step == m.interruptAt {
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(20 * time.Millisecond) // let the signal reach the loop's channel
	}
	m.before = append(m.before[:0], m.state...)
	loss := m.Gradients()
	for i := 0; i < lmGW; i++ {
		m.state[i] -= lr * m.state[lmGW+i]
	}
	return loss
}

func (m *linearModel) TraceTrainForward(visit func(string, []float32) bool) {
	m.forward(m.x, m.out)
	visit("dense1", m.out)
}

// writeQuadrants writes an IDX set of 4×4 images whose class is the
// bright quadrant, as hardening_test.go's tiny model reads.
func writeQuadrants(t *testing.T, dir string, nTrain, nTest int) {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	set := func(n int) (pix, labels []byte) {
		for i := 0; i < n; i++ {
			c := i % 4
			labels = append(labels, byte(c))
			for y := 0; y < 4; y++ {
				for x := 0; x < 4; x++ {
					v := rng.Intn(60)
					if (y/2)*2+x/2 == c {
						v += 180
					}
					pix = append(pix, byte(v))
				}
			}
		}
		return pix, labels
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pix, lab := set(nTrain)
	files := map[string][]byte{"train-images": idx.EncodeImages(4, 4, pix), "train-labels": idx.EncodeLabels(lab)}
	pix, lab = set(nTest)
	files["test-images"], files["test-labels"] = idx.EncodeImages(4, 4, pix), idx.EncodeLabels(lab)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runLin runs the command line of a fresh linearModel in dir.
func runLin(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runModel(t, dir, newLinearModel(), args...)
}

// runModel runs m's command line in dir.
func runModel(t *testing.T, dir string, m Model, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var o, e bytes.Buffer
	code = Run(m, args, &o, &e)
	return code, o.String(), e.String()
}

// TestLinearModelLearns checks the test model itself: two epochs of
// training reach high accuracy on its data, so the tests built on it test
// a training run and not noise.
func TestLinearModelLearns(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "3", "--quiet")
	if code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runLin(t, dir, "eval", "--data", "data", "--weights", "lin.safetensors", "--json")
	if code != 0 || !bytes.Contains([]byte(out), []byte(`"accuracy":1`)) {
		t.Fatalf("eval: exit %d, want accuracy 1:\n%s%s", code, out, errOut)
	}
}

// guardedLinearModel is linearModel with the CPU backend's TrainStep
// contract: no update when the loss is not finite (UpdateGuard).
type guardedLinearModel struct{ *linearModel }

func (m guardedLinearModel) SkipsUpdateOnNonFiniteLoss() {}

func (m guardedLinearModel) TrainStep(lr float32, step int) float32 {
	m.before = append(m.before[:0], m.state...)
	loss := m.Gradients()
	if cpu.Finite(loss) {
		for i := 0; i < lmGW; i++ {
			m.state[i] -= lr * m.state[lmGW+i]
		}
	}
	return loss
}

// TestDivergenceWithAndWithoutGuard checks that a diverging run names the
// same step and the same first non-finite value whether the training loop
// restores its own copy of the weights or the model kept them (UpdateGuard),
// and that either way the weights left are those the failing step started
// from.
func TestDivergenceWithAndWithoutGuard(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	var msgs []string
	for _, lm := range []*linearModel{newLinearModel(), newLinearModel()} {
		var m Model = lm
		if len(msgs) == 1 {
			m = guardedLinearModel{lm}
		}
		code, out, errOut := runModel(t, dir, m, "train", "--data", "data", "--epochs", "3", "--lr", "1e30", "--quiet", "--force")
		if code != 3 || !strings.Contains(errOut, "training diverged at epoch") {
			t.Fatalf("%T: exit %d, want 3 and a divergence message:\n%s%s", m, code, out, errOut)
		}
		for i, v := range lm.state[:lmGW] {
			if v != lm.before[i] {
				t.Fatalf("%T: weight %d is %v after the divergence, %v before the failing step", m, i, v, lm.before[i])
			}
		}
		msgs = append(msgs, errOut)
	}
	if _, guarded := Model(guardedLinearModel{}).(UpdateGuard); !guarded {
		t.Fatal("guardedLinearModel does not implement UpdateGuard")
	}
	t.Logf("report: %s", msgs[0])
	if msgs[0] != msgs[1] {
		t.Fatalf("the divergence reports differ:\nunguarded: %s\nguarded:   %s", msgs[0], msgs[1])
	}
}

// costlyLinearModel is linearModel whose state is far away
// (CostlySnapshot), as a discrete GPU's: it counts the reads of State().
type costlyLinearModel struct {
	*linearModel
	reads *int
}

func (costlyLinearModel) CostlySnapshot() bool { return true }

func (c costlyLinearModel) State() []float32 {
	*c.reads++
	return c.linearModel.State()
}

// TestDivergenceWithoutSnapshot: a model whose state is costly to read is
// not read before every step (a run of 3 epochs reads it fewer times
// than it has steps), and a divergence is still reported; a weight found
// non-finite is named as made by this step's update or one before.
func TestDivergenceWithoutSnapshot(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	reads := 0
	m := costlyLinearModel{newLinearModel(), &reads}
	code, out, errOut := runModel(t, dir, m, "train", "--data", "data", "--epochs", "3", "--quiet", "--force")
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	steps := 3 * 64 / m.Meta().Batch
	if reads >= steps {
		t.Errorf("State() read %d times in %d steps: the loop copied it every step", reads, steps)
	}
	code, out, errOut = runModel(t, dir, m, "train", "--data", "data", "--epochs", "3", "--lr", "1e30", "--quiet", "--force")
	if code != 3 || !strings.Contains(errOut, "training diverged at epoch") {
		t.Fatalf("exit %d, want 3 and a divergence:\n%s%s", code, out, errOut)
	}
	// A weight the failing step's update made non-finite is named as
	// this step's (or an earlier one's), not the step before's.
	m.state[1] = float32(math.NaN())
	err := divergence(m, nil, true, trainState{step: 7}, "", 0, 6, float32(math.NaN()))
	if err == nil || !strings.Contains(err.Error(), "element 1 = NaN), made by this step's update or one before") {
		t.Errorf("divergence after the update: %v", err)
	}
}
