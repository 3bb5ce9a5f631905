package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/onnx"
)

// TestImportSequenceExports imports the models of
// testdata/onnx/seq/export.py (Debian's python3-torch 1.13): a 1-D
// convolutional classifier (Conv1d with stride, padding, dilation and
// groups, MaxPool1d, a padded AvgPool1d, adaptive average pooling) with a
// dynamic batch, and transformer blocks (nn.TransformerEncoderLayer, a
// nanoGPT-like block) exported with the batch fixed at 1. Each spec is
// compiled for the CPU and run by predict on four samples, which must
// match PyTorch's outputs for them within 1e-5: for the fixed-batch
// exports, the importer must have found the batch axis that the graph
// writes as the number 1.
func TestImportSequenceExports(t *testing.T) {
	dir := "../../testdata/onnx/seq"
	manifest, readF32 := exportManifest(t, dir, 7)
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
			if strings.HasPrefix(c.Model, "seq1d") {
				// the 1-D layers (and the batchnorm over [C, L]) are
				// written as such, with no reshapes around them
				var ops []string
				for _, l := range im.Layers {
					ops = append(ops, l.Op)
				}
				if slices.Contains(ops, "reshape") {
					t.Errorf("layers %v: a reshape around a 1-D layer", ops)
				}
				for _, op := range []string{"conv1d", "maxpool1d", "avgpool1d", "batchnorm"} {
					if !slices.Contains(ops, op) {
						t.Errorf("layers %v have no %s", ops, op)
					}
				}
				if slices.Contains(ops, "conv2d") {
					t.Errorf("layers %v: a 1-D convolution was written as conv2d", ops)
				}
			}
			runImportedWithin(t, im, readF32(c.Input, c.InputShape), readF32(c.Output, c.OutputShape), c.OutputShape, 1e-5)
		})
	}
}
