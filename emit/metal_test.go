package emit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/spec"
)

// metalInputFor loads a spec and plans it as `mlbuild compile --backend
// metal` does: GPU-sized convolution scratch.
func metalInputFor(t testing.TB, file string, fusion bool) *Input {
	return metalInputBatch(t, file, fusion, 0)
}

// metalInputBatch is metalInputFor with the training and inference plans at
// batch (0: the spec's), for host-code tests that need small plans.
func metalInputBatch(t testing.TB, file string, fusion bool, batch int) *Input {
	t.Helper()
	return backendInput(t, Metal, file, fusion, batch)
}

// backendInput loads a spec and plans it as `mlbuild compile --backend b`
// does, with the plans at batch (0: the spec's).
func backendInput(t testing.TB, b *Backend, file string, fusion bool, batch int) *Input {
	t.Helper()
	m, err := spec.Load(file)
	if err != nil {
		t.Fatalf("loading %s: %v", file, err)
	}
	var plans []*planner.Plan
	for _, o := range []planner.Options{{Training: true, Fusion: fusion, Batch: batch}, {Fusion: fusion, Batch: batch}, {Fusion: fusion, Batch: 1}} {
		p, err := planner.Build(m, b.PlanOptions(o))
		if err != nil {
			t.Fatalf("planning %s: %v", file, err)
		}
		plans = append(plans, p)
	}
	return &Input{Model: m, Train: plans[0], Infer: plans[1], Infer1: plans[2], Backend: b.Name, Version: "golden"}
}

// checkGolden compares got with a golden file of a backend's folder in
// testdata; MLBUILD_UPDATE=1 rewrites it.
func checkGolden(t *testing.T, backend, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", backend, name)
	if os.Getenv("MLBUILD_UPDATE") != "" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("generated %s differs from %s; review the diff and rerun with MLBUILD_UPDATE=1", name, golden)
	}
}

// TestGPUMNISTGolden keeps each GPU backend's main.go and kernel source for
// the flagship spec as golden files, reviewed like code. The two main.go
// differ only in the device package and the header comment.
func TestGPUMNISTGolden(t *testing.T) {
	for _, b := range []*Backend{Metal, CUDA} {
		src, err := b.RenderGPU(backendInput(t, b, "../models/mnist.cue", true, 0))
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, b.Name, "mnist.main.go.golden", src.Main)
		checkGolden(t, b.Name, "mnist."+map[string]string{"metal": "metal", "cuda": "cu"}[b.Name]+".golden", []byte(src.KernelSource))
	}
}

// writeModule writes generated files under dir.
func writeModule(t testing.TB, dir string, files []File) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
