package emit

import (
	"strings"
	"testing"
)

// TestFoldBatchNormCalls: a program whose inference plans fold a batch
// norm into its convolution (residual_graph.cue: conv1, bn1, relu1) runs
// each plan's fold steps in eFold and oFold, into the folded arena both
// plans share, which Infer calls only while weightsFolded is false, and
// every method through which the weights or the running statistics may
// change clears it: State
// (its caller may write the arena), TrainStep, Gradients and
// TraceTrainForward (the training forward pass moves the running
// statistics). The training plan keeps its batch norm. A program without
// batch norms has no flag.
func TestFoldBatchNormCalls(t *testing.T) {
	in := inputFor(t, "../testdata/specs/valid/residual_graph.cue", true)
	src, err := ModelSource(in)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	if n := strings.Count(s, "cpu.FoldBatchNorm("); n != 2 {
		t.Errorf("%d cpu.FoldBatchNorm calls, want 2 (one per inference plan)", n)
	}
	if n := strings.Count(s, "cpu.BatchNormFwd("); n != 1 {
		t.Errorf("%d cpu.BatchNormFwd calls, want 1 (the training plan's)", n)
	}
	body := func(sig string) string {
		i := strings.Index(s, sig)
		if i < 0 {
			t.Fatalf("the program has no %q", sig)
		}
		j := strings.Index(s[i:], "\n}\n")
		return s[i : i+j]
	}
	const clear = "weightsFolded = false"
	for _, sig := range []string{"func (model) State()", "func (model) TrainStep(", "func (model) Gradients()", "func (model) TraceTrainForward("} {
		if !strings.Contains(body(sig), clear) {
			t.Errorf("%s does not mark the folded weights stale:\n%s", sig, body(sig))
		}
	}
	infer := strings.ReplaceAll(body("func (model) Infer("), "\t", "")
	for _, p := range []string{"e", "o"} {
		guard := "if !weightsFolded {\n" + p + "Fold()\nweightsFolded = true\n}\n" + p + "Forward()"
		if !strings.Contains(infer, guard) {
			t.Errorf("Infer does not run %sFold when weightsFolded is false before %sForward:\n%s", p, p, infer)
		}
		if fold := body("func " + p + "Fold()"); strings.Count(fold, "\n") != 1 {
			t.Errorf("%sFold runs %d steps, want 1:\n%s", p, strings.Count(fold, "\n"), fold)
		}
		if strings.Contains(body("func "+p+"Forward()"), p+"Fwd0(") {
			t.Errorf("%sForward runs the fold step (%sFwd0) on every batch", p, p)
		}
	}

	plain, err := ModelSource(inputFor(t, "../models/mnist.cue", true))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "Folded") || strings.Contains(string(plain), "Fold()") || strings.Contains(string(plain), "folded") {
		t.Errorf("a program without batch norms has a fold flag, functions or arena")
	}
	// One folded arena, made by whichever inference plan runs first.
	for _, use := range []string{"func useInfer()", "func useOne()"} {
		if b := body(use); !strings.Contains(b, `app.Arena{Name: "folded weights", Size: foldedSize, Data: &folded}`) || !strings.Contains(b, "f0 = (*[") {
			t.Errorf("%s does not make the shared folded arena and point f0 into it:\n%s", use, b)
		}
	}
}
