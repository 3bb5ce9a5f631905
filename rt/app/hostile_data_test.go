package app

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// rewriteTensor rewrites the safetensors file at path with edit applied to
// its tensors (metadata kept).
func rewriteTensor(t *testing.T, path string, edit func(ts []safetensors.Tensor)) {
	t.Helper()
	f, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(f.Tensors)
	if err := safetensors.Write(path, f.Tensors, f.Metadata); err != nil {
		t.Fatal(err)
	}
}

// TestNonFiniteWeightsRefused: weights with a NaN or Inf are refused by
// predict, eval and train --init (and a checkpoint with an Inf weight by
// --resume), naming the tensor; predict printed
// "class 0 (p=NaN)" and exited 0.
func TestNonFiniteWeightsRefused(t *testing.T) {
	dir := trainedLin(t)
	bad := filepath.Join(dir, "nan.safetensors")
	data, err := os.ReadFile(filepath.Join(dir, "lin.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rewriteTensor(t, bad, func(ts []safetensors.Tensor) {
		for i := range ts {
			if ts[i].Name == "dense1.bias" {
				ts[i].Data[2] = float32(math.NaN())
			}
		}
	})
	for _, args := range [][]string{
		{"predict", "--weights", bad, "digit.pgm"},
		{"eval", "--weights", bad, "--data", "data"},
		{"train", "--init", bad, "--data", "data", "--epochs", "1", "--out", "new.safetensors", "--quiet"},
	} {
		code, out, errOut := runLin(t, dir, args...)
		if code != exitFailure || !strings.Contains(errOut, `tensor "dense1.bias" holds NaN at element 2`) {
			t.Errorf("%q: exit %d (want %d), stderr lacks the tensor:\n%s%s", args, code, exitFailure, out, errOut)
		}
	}
	ckpt := filepath.Join(dir, "lin.ckpt.safetensors")
	rewriteTensor(t, ckpt, func(ts []safetensors.Tensor) {
		for i := range ts {
			if ts[i].Name == "dense1.weight" {
				ts[i].Data[0] = float32(math.Inf(1))
			}
		}
	})
	code, out, errOut := runLin(t, dir, "train", "--resume", ckpt, "--epochs", "3", "--quiet")
	if code != exitFailure || !strings.Contains(errOut, `holds +Inf at element 0`) || !strings.Contains(errOut, `tensor "dense1.weight"`) {
		t.Errorf("--resume of a checkpoint with an Inf moment: exit %d\n%s%s", code, out, errOut)
	}
}
