package main

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/onnx"
)

// TestImportGPTExports imports the nanoGPT-style language models of
// testdata/onnx/gpt/export.py (Debian's python3-torch 1.13, issue #31):
// nn.Embedding on int64 token ids, a learned position table gathered at
// torch.arange(T), pre-norm blocks whose attention masks its scores with
// masked_fill of a tril buffer, a final LayerNorm and a head, untied (two
// blocks) and tied to the token embedding (one block), at opsets 13 and
// 17, the untied one exported with the batch fixed at 1 (the importer
// must find the batch axis, and run the spec on four sequences), and the
// tied one with nanoGPT's inference forward, whose head reads the last
// token only (x[:, [-1], :], a Gather: a slice layer), and gpt_pad, the
// untied one whose attention also masks the keys whose id is 12 (the
// vocabulary's last), with masked_fill of (idx == 12)[:, None, None, :]
// after the causal mask in its first block and of (idx == 12).view(B, 1,
// 1, T) before it in its second, run on ids right-padded with 0, 2, 5 and
// 7 twelves. Each spec must read token ids [T], hold one embedding with
// positions, one causal softmax per block, with pad: 12 exactly in
// gpt_pad, and (for the tied model) a head tied to the embedding with no
// weight of its own; compiled for the CPU, predict on four sequences of
// ids must match PyTorch's logits within 1e-4 (gpt_pad's spec with the
// pad fields left out misses by 0.55).
func TestImportGPTExports(t *testing.T) {
	dir := "../../testdata/onnx/gpt"
	manifest, readF32 := exportManifest(t, dir, 9)
	for _, c := range manifest {
		t.Run(c.Model, func(t *testing.T) {
			t.Parallel()
			m, err := onnx.ReadFile(filepath.Join(dir, c.Model))
			if err != nil {
				t.Fatal(err)
			}
			im, err := onnx.Import(m)
			if err != nil {
				t.Fatal(err)
			}
			fixed := strings.Contains(c.Model, "_b1_")
			if fixed != (len(im.Warnings) == 1) {
				t.Errorf("warnings %q; want one about the fixed batch exactly when the export fixed it", im.Warnings)
			}
			if !slices.Equal(im.Input, c.InputShape[1:]) {
				t.Errorf("input %v; want token ids %v", im.Input, c.InputShape[1:])
			}
			last := strings.HasPrefix(c.Model, "gpt_last")
			padded := strings.HasPrefix(c.Model, "gpt_pad")
			tied := strings.HasPrefix(c.Model, "gpt_tied") || last
			blocks := 2
			if tied {
				blocks = 1
			}
			var embeddings, causal, slices1 int
			for _, l := range im.Layers {
				switch {
				case l.Op == "embedding":
					embeddings++
					if !slices.Contains(l.Fields, onnx.Field{Name: "positions", Value: true}) || len(l.Params) != 2 || l.Params[1].Suffix != "pos" {
						t.Errorf("embedding %s: fields %v, params %d; want positions and a pos param", l.Name, l.Fields, len(l.Params))
					}
					if len(l.Inputs) != 1 || l.Inputs[0] != "input" {
						t.Errorf("embedding %s reads %v; want the input", l.Name, l.Inputs)
					}
				case l.Op == "softmax" && slices.Contains(l.Fields, onnx.Field{Name: "causal", Value: true}):
					causal++
					pad := slices.IndexFunc(l.Fields, func(f onnx.Field) bool { return f.Name == "pad" })
					if padded && (pad < 0 || l.Fields[pad].Value != 12) || !padded && pad >= 0 {
						t.Errorf("softmax %s: fields %v; want pad: 12 exactly when the export masks padding", l.Name, l.Fields)
					}
				case l.Op == "slice" && slices.Equal(l.OutShape, []int{1, 16}):
					slices1++
				case l.Name == im.Output:
					isTied := slices.Contains(l.Fields, onnx.Field{Name: "tie", Value: "wte"})
					if isTied != tied || tied && len(l.Params) != 0 {
						t.Errorf("head %s: fields %v, %d params; tied to wte: %v", l.Name, l.Fields, len(l.Params), tied)
					}
				}
			}
			if embeddings != 1 || causal != blocks {
				t.Errorf("%d embeddings and %d causal softmaxes; want 1 and %d", embeddings, causal, blocks)
			}
			if last != (slices1 == 1) {
				t.Errorf("%d slices of one token's features; want one exactly when the head reads the last token only", slices1)
			}
			if im.Loss() != "softmax_cross_entropy" {
				t.Errorf("loss %s; want cross-entropy per token", im.Loss())
			}
			runImportedWithin(t, im, readF32(c.Input, c.InputShape), readF32(c.Output, c.OutputShape), c.OutputShape, 1e-4)
		})
	}
}

// TestImportGPTDynamicSequence: token ids exported with a dynamic
// sequence axis are refused, naming the input and its axis and saying
// how to export at a fixed length; `mlbuild import` exits 1 and writes
// nothing.
func TestImportGPTDynamicSequence(t *testing.T) {
	m, err := onnx.ReadFile("../../testdata/onnx/gpt/gpt_dynseq_opset17.onnx")
	if err != nil {
		t.Fatal(err)
	}
	_, err = onnx.Import(m)
	var ie *onnx.ImportError
	if !errors.As(err, &ie) || len(ie.Problems) != 1 {
		t.Fatalf("got %v; want one problem with the input", err)
	}
	p := ie.Problems[0]
	for _, want := range []string{`input "idx" (token ids) has a dynamic sequence axis`, `axis 1 is symbolic ("tokens")`} {
		if !strings.Contains(p.Why, want) {
			t.Errorf("why %q lacks %q", p.Why, want)
		}
	}
	if !strings.Contains(p.Fix, `dynamic_axes={"idx": {0: "batch"}`) || !strings.Contains(p.Fix, "fixed context length") {
		t.Errorf("fix %q does not say how to export at a fixed length", p.Fix)
	}
	// the command exits 1 with the report and writes nothing
	out := t.TempDir()
	code, _, stderr := mlbuild(t, "import", "../../testdata/onnx/gpt/gpt_dynseq_opset17.onnx", "-o", out, "--name", "gpt")
	if code != ExitInvalid || !strings.Contains(stderr, "has a dynamic sequence axis") || !strings.Contains(stderr, "what to do: export at a fixed context length") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(out, "*")); len(files) != 0 {
		t.Errorf("the refused import wrote %v", files)
	}
}
