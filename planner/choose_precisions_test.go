package planner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// denseSteps returns the gemm and gemm_bwd steps of p in phase order.
func denseSteps(p *Plan) []Step { return stepsOf(p, KGemm, KGemmBwd) }

// withPrecision returns m asking for precision.
func withPrecision(m *spec.Model, precision string) *spec.Model {
	m.Precision = precision
	return m
}

// TestChoosePrecisions: the CPU runs a dense step in bf16 where the spec
// asks for it and the step has at least 16 rows (the batch times any
// leading axes); a step of fewer rows, a spec asking for f32 and a target
// without a Dense rule (the GPU backends) keep f32, and every dense step
// left at f32 in a bf16 plan is listed with its reason.
func TestChoosePrecisions(t *testing.T) {
	gpu := Target{Name: "cuda", Conv: cpuConv} // a target with no Dense rule
	tests := []struct {
		name      string
		model     *spec.Model
		opts      Options
		want      map[string]string // "kernel layer" -> precision
		notes     int               // lines in Plan.Precisions
		noteWords string            // in every line
	}{
		{"bf16 training, batch 250", withPrecision(mlp(), "bf16"), Options{Batch: 250, Training: true, Fusion: true},
			map[string]string{"gemm fc1": "bf16", "gemm fc2": "bf16", "gemm fc3": "bf16", "gemm_bwd fc1": "bf16", "gemm_bwd fc2": "bf16", "gemm_bwd fc3": "bf16"}, 0, ""},
		{"bf16 at 16 rows", withPrecision(mlp(), "bf16"), Options{Batch: 16, Training: false, Fusion: true},
			map[string]string{"gemm fc1": "bf16", "gemm fc2": "bf16", "gemm fc3": "bf16"}, 0, ""},
		{"bf16 at 15 rows", withPrecision(mlp(), "bf16"), Options{Batch: 15, Training: false, Fusion: true},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32"}, 3, "15 rows, fewer than the 16 of a bf16 tile"},
		{"bf16 inference, batch 1", withPrecision(mlp(), "bf16"), Options{Batch: 1, Training: false, Fusion: true},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32"}, 3, "f32, not bf16: 1 row, fewer than"},
		{"f32 spec", withPrecision(mlp(), "f32"), Options{Batch: 250, Training: true, Fusion: true},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32", "gemm_bwd fc1": "f32", "gemm_bwd fc2": "f32", "gemm_bwd fc3": "f32"}, 0, ""},
		{"no precision (f32)", mlp(), Options{Batch: 250, Training: false, Fusion: true},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32"}, 0, ""},
		{"bf16 on a GPU target", withPrecision(mlp(), "bf16"), Options{Batch: 250, Training: true, Fusion: true, Target: gpu},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32", "gemm_bwd fc1": "f32", "gemm_bwd fc2": "f32", "gemm_bwd fc3": "f32"}, 6, "the cuda backend has no bf16 products yet"},
		// 2 samples of 8 tokens: the token-wise layers have 16 rows, the
		// head (on the flattened tokens) 2.
		{"rows are tokens", withPrecision(attention(), "bf16"), Options{Batch: 2, Training: false, Fusion: true},
			map[string]string{"gemm q": "bf16", "gemm k": "bf16", "gemm v": "bf16", "gemm proj": "bf16", "gemm head": "f32"}, 1, "gemm head: f32, not bf16: 2 rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustBuild(t, tc.model, tc.opts)
			got := map[string]string{}
			for _, s := range denseSteps(p) {
				got[string(s.Kernel)+" "+s.Layer] = s.Attr.Precision
			}
			if len(got) != len(tc.want) {
				t.Errorf("dense steps %v; want %v", got, tc.want)
			}
			for k, w := range tc.want {
				if got[k] != w {
					t.Errorf("%s: precision %q, want %q", k, got[k], w)
				}
			}
			if len(p.Precisions) != tc.notes {
				t.Errorf("Precisions %q: %d lines, want %d", p.Precisions, len(p.Precisions), tc.notes)
			}
			for _, l := range p.Precisions {
				if !strings.Contains(l, tc.noteWords) {
					t.Errorf("Precisions line %q does not say %q", l, tc.noteWords)
				}
			}
			// Only dense steps carry a precision.
			for _, ph := range []Phase{p.Forward, p.Backward, p.Update} {
				for _, s := range ph {
					if s.Kernel != KGemm && s.Kernel != KGemmBwd && s.Attr.Precision != "" {
						t.Errorf("%s %s has precision %q", s.Kernel, s.Layer, s.Attr.Precision)
					}
				}
			}
		})
	}
}

// TestPrecisionText: a bf16 plan names its precision in the header, on
// every dense step and in a summary with the steps left at f32; an f32
// plan prints none of it (its goldens are unchanged).
func TestPrecisionText(t *testing.T) {
	text := func(m *spec.Model, batch int) string {
		var b bytes.Buffer
		if err := WriteText(&b, mustBuild(t, m, Options{Batch: batch, Training: true, Fusion: true})); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	bf := text(withPrecision(mlp(), "bf16"), 32)
	for _, want := range []string{
		"plan mlp: batch 32, training, fusion on, precision bf16\n",
		"gemm(relu bf16)  fc1+relu1",
		"gemm_bwd(bf16)       fc3",
		"\nprecision: 6 of 6 dense steps in bf16\n",
	} {
		if !strings.Contains(bf, want) {
			t.Errorf("bf16 plan lacks %q:\n%s", want, bf)
		}
	}
	mixed := text(withPrecision(mlp(), "bf16"), 8)
	for _, want := range []string{"gemm(relu f32)", "precision: 0 of 6 dense steps in bf16\n  gemm fc1: f32, not bf16: 8 rows"} {
		if !strings.Contains(mixed, want) {
			t.Errorf("bf16 plan at batch 8 lacks %q:\n%s", want, mixed)
		}
	}
	if f := text(withPrecision(mlp(), "f32"), 32); strings.Contains(f, "precision") || strings.Contains(f, "f32") {
		t.Errorf("f32 plan mentions its precision:\n%s", f)
	}
}

// TestPrecisionErrors: an unknown precision is an error (the schema rules
// it out first), and a Target that answers an unknown precision is a bug
// reported at the layer.
func TestPrecisionErrors(t *testing.T) {
	if _, err := Build(withPrecision(mlp(), "f16"), Options{Batch: 32}); err == nil || !strings.Contains(err.Error(), `no precision "f16"`) {
		t.Errorf("precision f16: %v", err)
	}
	bad := Target{Name: "test", Conv: cpuConv, Dense: func(int, string) DenseChoice { return DenseChoice{Precision: "fp8"} }}
	_, err := Build(withPrecision(mlp(), "bf16"), Options{Batch: 32, Target: bad})
	if err == nil || !strings.Contains(err.Error(), `layer fc1: the test backend gives its dense step the precision "fp8"`) {
		t.Errorf("a target answering fp8: %v", err)
	}
}
