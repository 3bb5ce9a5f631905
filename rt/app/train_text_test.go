package app

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// bigramLM is a language model written by hand for the runtime's tests:
// a table of V×V logits (row: the current token, column: the next), the
// simplest model whose input is token ids and whose output is [T, V]. It
// trains through the same loop, eval and generate as a generated GPT.
type bigramLM struct {
	meta        Meta
	T, V, B     int
	state       []float32 // table [V,V] at 0, its gradient at V·V
	x, y, out   []float32
	ix, ix1     []float32
	iout, iout1 []float32
}

func newBigramLM(T, V, B int, files ...string) *bigramLM {
	m := &bigramLM{T: T, V: V, B: B, state: make([]float32, 2*V*V),
		x: make([]float32, B*T), y: make([]float32, B*T*V), out: make([]float32, B*T*V),
		ix: make([]float32, B*T), ix1: make([]float32, T), iout: make([]float32, B*T*V), iout1: make([]float32, T*V)}
	m.meta = Meta{Name: "bigram", SpecFile: "bigram.cue", Backend: "cpu", BuildKey: "test", Version: "v0.0.0-test",
		InputShape: []int{T}, OutputShape: []int{T, V}, Classes: T * V, Batch: B, Readers: []*Reader{Text},
		Params:   []ParamMeta{{Name: "table.weight", Shape: []int{V, V}, Offset: 0, Size: V * V, Trainable: true, Init: "zeros", Grad: V * V}},
		Layers:   []LayerMeta{{Name: "input", Op: "input", OutShape: []int{T}}, {Name: "table", Op: "embedding", OutShape: []int{T, V}, Params: V * V}},
		Defaults: Defaults{Loss: "softmax_cross_entropy", Optimizer: "sgd", LR: 20, Schedule: "constant", Epochs: 3, Seed: 5},
		Data:     DataSpec{Format: "text", Task: "classification", Files: files, Tokens: "char", TestSplit: 0.1}}
	return m
}

func (m *bigramLM) Meta() *Meta             { return &m.meta }
func (m *bigramLM) State() []float32        { return m.state }
func (m *bigramLM) TrainInput() []float32   { return m.x }
func (m *bigramLM) TrainLabels() []float32  { return m.y }
func (m *bigramLM) TrainOutput() []float32  { return m.out }
func (m *bigramLM) SetRand(uint64)          {}
func (m *bigramLM) SelfTest() []SelfTestRow { return nil }
func (m *bigramLM) InferInput(one bool) []float32 {
	if one {
		return m.ix1
	}
	return m.ix
}

func (m *bigramLM) forward(x, out []float32) {
	for p, id := range x {
		copy(out[p*m.V:(p+1)*m.V], m.state[int(id)*m.V:(int(id)+1)*m.V])
	}
}

func (m *bigramLM) Infer(one bool) []float32 {
	if one {
		m.forward(m.ix1, m.iout1)
		return m.iout1
	}
	m.forward(m.ix, m.iout)
	return m.iout
}

func (m *bigramLM) Gradients() float32 {
	m.forward(m.x, m.out)
	g := m.state[m.V*m.V:]
	clear(g)
	n := float64(len(m.x))
	var loss float64
	for p, id := range m.x {
		prob := softmax64(m.out[p*m.V : (p+1)*m.V])
		target := m.y[p*m.V : (p+1)*m.V] // one-hot (bench and gradcheck: any weights)
		var mass float64
		for c, w := range target {
			if w != 0 {
				loss -= float64(w) * math.Log(prob[c])
				mass += float64(w)
			}
		}
		for c := range prob {
			g[int(id)*m.V+c] += float32((prob[c]*mass - float64(target[c])) / n)
		}
	}
	return float32(loss / n)
}

func (m *bigramLM) TrainStep(lr float32, step int) float32 {
	loss := m.Gradients()
	for i := range m.V * m.V {
		m.state[i] -= lr * m.state[m.V*m.V+i]
	}
	return loss
}

func (m *bigramLM) TraceTrainForward(visit func(string, []float32) bool) {
	m.forward(m.x, m.out)
	visit("table", m.out)
}

func (m *bigramLM) Context() int { return m.T }

func (m *bigramLM) NextLogits(ctx []int32, _ int) []float32 {
	id := int(ctx[len(ctx)-1])
	return m.state[id*m.V : (id+1)*m.V]
}

// TestTrainTextEndToEnd trains the bigram language model on a text
// dataset through train, then eval and generate: the validation loss
// falls well below that of uniform guessing (ln V), progress counts
// tokens/s and the text's bytes read (MB/s), the weights carry the vocabulary, greedy generation follows
// the text's most frequent bigrams, training from the weights on their
// text is accepted, and eval, train --init and train --resume on another
// text are refused.
func TestTrainTextEndToEnd(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "moby.txt"), []byte(strings.Repeat(whaleText, 30)), 0o644)
	m := newBigramLM(16, 48, 8, "moby.txt")
	w := filepath.Join(dir, "w.safetensors")
	var out, errs bytes.Buffer
	if code := Run(m, []string{"train", "--data", dir, "--out", w}, &out, &errs); code != 0 {
		t.Fatalf("train: exit %d\n%s\n%s", code, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "tokens/s") {
		t.Errorf("progress counts no tokens/s:\n%s", out.String())
	}
	if !regexp.MustCompile(`data [0-9.]+ MB/s waiting [0-9.]+%`).MatchString(out.String()) {
		t.Errorf("progress shows no data rate (the text's bytes read):\n%s", out.String())
	}
	out.Reset()
	if code := Run(m, []string{"eval", "--data", dir, "--weights", w, "--json"}, &out, &errs); code != 0 {
		t.Fatalf("eval: exit %d\n%s", code, errs.String())
	}
	loss, acc := evalLossAccuracy(out.String())
	if !(loss > 0 && loss < 0.6*math.Log(48)) || !(acc > 0.3) {
		t.Errorf("eval after training: loss %v (uniform: %.2f), accuracy %v\n%s", loss, math.Log(48), acc, out.String())
	}
	out.Reset()
	if code := Run(m, []string{"generate", "--weights", w, "--prompt", "Call me", "--tokens", "40", "--temperature", "0"}, &out, &errs); code != 0 {
		t.Fatalf("generate: exit %d\n%s", code, errs.String())
	}
	g := []rune("e" + strings.TrimSuffix(out.String(), "\n"))
	if len(g) != 41 {
		t.Fatalf("generated %d tokens, want 40: %q", len(g)-1, string(g))
	}
	for i := 1; i < len(g); i++ {
		if !strings.Contains(whaleText, string(g[i-1:i+1])) {
			t.Errorf("greedy text %q has %q, a pair the training text never has", string(g), string(g[i-1:i+1]))
		}
	}
	t.Logf("generated %q", out.String())
	// Training again from the weights, on their text: accepted.
	w2 := filepath.Join(dir, "w2.safetensors")
	if code := Run(m, []string{"train", "--data", dir, "--init", w, "--epochs", "1", "--out", w2, "--quiet"}, &out, &errs); code != 0 {
		t.Fatalf("train --init on the same text: exit %d\n%s", code, errs.String())
	}
	os.WriteFile(filepath.Join(dir, "moby.txt"), []byte(strings.Repeat(strings.ToUpper(whaleText), 30)), 0o644)
	errs.Reset()
	if code := Run(m, []string{"eval", "--data", dir, "--weights", w}, &out, &errs); code != exitFailure || !strings.Contains(errs.String(), "does not match this text's training split") {
		t.Errorf("eval on another text: exit %d, %s", code, errs.String())
	}
	// Training from them (or resuming their checkpoint) on another text
	// is refused, and writes nothing.
	ckpt := filepath.Join(dir, "w.ckpt.safetensors")
	// (--epochs past the checkpoint's: a finished run's resume does nothing)
	for _, from := range [][]string{{"--init", w}, {"--resume", ckpt, "--epochs", "50"}} {
		errs.Reset()
		w3 := filepath.Join(dir, "w3.safetensors")
		args := append([]string{"train", "--data", dir, "--out", w3, "--checkpoint", filepath.Join(dir, "w3.ckpt.safetensors"), "--quiet"}, from...)
		if code := Run(m, args, &out, &errs); code != exitFailure || !strings.Contains(errs.String(), "the weights' vocabulary is not this text's") {
			t.Errorf("train %s on another text: exit %d, %s", from[0], code, errs.String())
		}
		if _, err := os.Stat(w3); err == nil {
			t.Errorf("train %s on another text wrote %s", from[0], w3)
		}
	}
}

// TestBenchAndGradCheckText: bench and the gradient check feed a language
// model token ids and next-token ids (a one-hot row of V per sample would
// run past its T labels), and the bigram's gradient matches finite
// differences.
func TestBenchAndGradCheckText(t *testing.T) {
	m := newBigramLM(4, 40, 2, "x.txt")
	var out bytes.Buffer
	if code := Run(m, []string{"bench", "--iters", "1"}, &out, &out); code != 0 {
		t.Fatalf("bench: exit %d\n%s", code, out.String())
	}
	for _, id := range m.x {
		if id != float32(int(id)) || id < 0 || id >= 40 {
			t.Fatalf("bench's input %v is not a token id", id)
		}
	}
	rows := GradCheck(m)
	if len(rows) == 0 {
		t.Fatal("no gradient checked")
	}
	for _, r := range rows {
		if r.Err != nil || r.MaxError > r.Tol {
			t.Errorf("%s: error %g (tolerance %g) %v", r.Name, r.MaxError, r.Tol, r.Err)
		}
	}
}

// skewedLM is a bigramLM whose backward pass is wrong by a third: every
// gradient it leaves in the state is scaled by 4/3.
type skewedLM struct{ *bigramLM }

func (m skewedLM) Gradients() float32 {
	loss := m.bigramLM.Gradients()
	state := m.State()
	for _, p := range m.Meta().Params {
		if p.Grad >= 0 {
			for i := range state[p.Grad : p.Grad+p.Size] {
				state[p.Grad+i] *= 4.0 / 3
			}
		}
	}
	return loss
}

// TestGradCheckFailsAWrongBackward: the gradient check, which measures a
// probe again at a wider step when the first is off (rounding), still
// fails a backward pass that is wrong at every step.
func TestGradCheckFailsAWrongBackward(t *testing.T) {
	rows := GradCheck(skewedLM{newBigramLM(4, 40, 2, "x.txt")})
	if len(rows) == 0 {
		t.Fatal("no gradient checked")
	}
	for _, r := range rows {
		if !(r.MaxError > r.Tol) {
			t.Errorf("%s: error %g within tolerance %g for gradients a third too large", r.Name, r.MaxError, r.Tol)
		}
	}
}

// plainLM is a bigramLM seen only as a Model: generate then runs it
// through causalWindow, its inference plan, instead of its NextLogits.
type plainLM struct{ Model }

// TestGenerateThroughInference: generate on a model that is not a
// TokenModel (a generated GPT's program) runs its batch-1 inference plan
// per token, and draws the same text as from the model's own NextLogits
// (the bigram's logits at the last position are its table's row).
func TestGenerateThroughInference(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "moby.txt"), []byte(strings.Repeat(whaleText, 30)), 0o644)
	m := newBigramLM(16, 48, 8, "moby.txt")
	w := filepath.Join(dir, "w.safetensors")
	var out, errs bytes.Buffer
	if code := Run(m, []string{"train", "--data", dir, "--out", w, "--quiet"}, &out, &errs); code != 0 {
		t.Fatalf("train: exit %d\n%s", code, errs.String())
	}
	gen := func(model Model) string {
		var o, e bytes.Buffer
		args := []string{"generate", "--weights", w, "--prompt", "Call me Ishmael. Some", "--tokens", "50", "--seed", "9", "--top-k", "5"}
		if code := Run(model, args, &o, &e); code != 0 {
			t.Fatalf("generate: exit %d\n%s", code, e.String())
		}
		return o.String()
	}
	direct, viaInfer := gen(m), gen(plainLM{m})
	if direct != viaInfer || len(direct) < 50 {
		t.Errorf("NextLogits wrote %q, the inference plan %q", direct, viaInfer)
	}
	if _, ok := Model(plainLM{m}).(TokenModel); ok {
		t.Fatal("plainLM is a TokenModel: the test runs nothing new")
	}
}

// evalLossAccuracy is the loss and accuracy of eval --json's object (0
// for a field it lacks).
func evalLossAccuracy(js string) (loss, acc float64) {
	for _, field := range strings.Split(strings.Trim(js, "{}\n"), ",") {
		k, v, _ := strings.Cut(field, ":")
		f, _ := strconv.ParseFloat(v, 64)
		switch k {
		case `"loss"`:
			loss = f
		case `"accuracy"`:
			acc = f
		}
	}
	return loss, acc
}
