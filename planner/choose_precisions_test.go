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
// left at f32 in a bf16 plan is listed with its reason. The CPU's fused
// attention runs a bf16 plan's products in bf16, and a tf32 plan's in f32
// with the reason; an f32 plan's carry none.
func TestChoosePrecisions(t *testing.T) {
	gpu := Target{Name: "cuda", Conv: cpuConv} // a target with no Dense rule
	tests := []struct {
		name      string
		model     *spec.Model
		opts      Options
		want      map[string]string // "kernel layer" -> precision
		notes     int               // lines in Plan.Precisions
		noteWords string            // in every line
		attention string            // the fused attention steps' precision
	}{
		{"bf16 training, batch 250", withPrecision(mlp(), "bf16"), Options{Batch: 250, Training: true, Fusion: true},
			map[string]string{"gemm fc1": "bf16", "gemm fc2": "bf16", "gemm fc3": "bf16", "gemm_bwd fc1": "bf16", "gemm_bwd fc2": "bf16", "gemm_bwd fc3": "bf16"}, 0, "", ""},
		{"bf16 at 16 rows", withPrecision(mlp(), "bf16"), Options{Batch: 16, Training: false, Fusion: true},
			map[string]string{"gemm fc1": "bf16", "gemm fc2": "bf16", "gemm fc3": "bf16"}, 0, "", ""},
		{"bf16 at 15 rows", withPrecision(mlp(), "bf16"), Options{Batch: 15, Training: false, Fusion: true},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32"}, 3, "15 rows, fewer than the 16 of a bf16 tile", ""},
		{"bf16 inference, batch 1", withPrecision(mlp(), "bf16"), Options{Batch: 1, Training: false, Fusion: true},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32"}, 3, "f32, not bf16: 1 row, fewer than", ""},
		{"f32 spec", withPrecision(mlp(), "f32"), Options{Batch: 250, Training: true, Fusion: true},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32", "gemm_bwd fc1": "f32", "gemm_bwd fc2": "f32", "gemm_bwd fc3": "f32"}, 0, "", ""},
		{"no precision (f32)", mlp(), Options{Batch: 250, Training: false, Fusion: true},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32"}, 0, "", ""},
		{"bf16 on a GPU target", withPrecision(mlp(), "bf16"), Options{Batch: 250, Training: true, Fusion: true, Target: gpu},
			map[string]string{"gemm fc1": "f32", "gemm fc2": "f32", "gemm fc3": "f32", "gemm_bwd fc1": "f32", "gemm_bwd fc2": "f32", "gemm_bwd fc3": "f32"}, 6, "the cuda backend has no bf16 products for this step", ""},
		// 2 samples of 8 tokens: the token-wise layers have 16 rows, the
		// head (on the flattened tokens) 2.
		{"rows are tokens", withPrecision(attention(), "bf16"), Options{Batch: 2, Training: false, Fusion: true},
			map[string]string{"gemm q": "bf16", "gemm k": "bf16", "gemm v": "bf16", "gemm proj": "bf16", "gemm head": "f32"}, 1, "gemm head: f32, not bf16: 2 rows", "bf16"},
		{"attention in f32", withPrecision(attention(), "f32"), Options{Batch: 2, Training: true, Fusion: true},
			map[string]string{"gemm q": "f32", "gemm k": "f32", "gemm v": "f32", "gemm proj": "f32", "gemm head": "f32",
				"gemm_bwd q": "f32", "gemm_bwd k": "f32", "gemm_bwd v": "f32", "gemm_bwd proj": "f32", "gemm_bwd head": "f32"}, 0, "", ""},
		{"attention in tf32", withPrecision(attention(), "tf32"), Options{Batch: 2, Training: false, Fusion: true},
			map[string]string{"gemm q": "f32", "gemm k": "f32", "gemm v": "f32", "gemm proj": "f32", "gemm head": "f32"}, 6, "the CPU has no TF32 arithmetic", "f32"},
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
			// Only dense steps carry a precision, and the CPU's fused
			// attention in a plan that asks for another than f32: the
			// spec's.
			for _, ph := range []Phase{p.Forward, p.Backward, p.Update} {
				for _, s := range ph {
					switch {
					case s.Kernel == KGemm || s.Kernel == KGemmBwd:
					case s.Kernel == KAttention || s.Kernel == KAttentionBwd:
						if want := tc.attention; s.Attr.Precision != want {
							t.Errorf("%s %s has precision %q, want %q", s.Kernel, s.Layer, s.Attr.Precision, want)
						}
					case s.Attr.Precision != "":
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
		"\nprecision: 6 of 6 matrix-product steps in bf16\n",
	} {
		if !strings.Contains(bf, want) {
			t.Errorf("bf16 plan lacks %q:\n%s", want, bf)
		}
	}
	mixed := text(withPrecision(mlp(), "bf16"), 8)
	for _, want := range []string{"gemm(relu f32)", "precision: 0 of 6 matrix-product steps in bf16\n  gemm fc1: f32, not bf16: 8 rows"} {
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
	if err == nil || !strings.Contains(err.Error(), `layer fc1: the test backend gives its gemm step the precision "fp8"`) {
		t.Errorf("a target answering fp8: %v", err)
	}
}

// TestConvPrecisions: in a plan that asks for bf16 or tf32, a target with
// a ConvPrecision rule (as CUDA's: every method but the direct one runs
// GEMMs) gives each conv2d and conv2d_bwd step its choice, listing the
// steps left f32 with the reason; the CPU keeps its direct method's
// convolutions f32 and a tf32 plan wholly f32, saying why; an f32 plan records no precision on
// convolutions (the plans of f32 specs are as before precisions).
func TestConvPrecisions(t *testing.T) {
	gemmTarget := Target{Name: "gemmgpu", Conv: func(g ConvGeom, pass ConvPass) ConvChoice {
		if g.C == 1 { // the first layer: a method without GEMMs
			return ConvChoice{Method: "direct"}
		}
		return ConvChoice{Method: ConvIm2colGemm}
	}, Dense: func(_ int, want string) DenseChoice { return DenseChoice{Precision: want} },
		ConvPrecision: func(method, want string) DenseChoice {
			if method == "direct" {
				return DenseChoice{Precision: PrecisionF32, Why: "no GEMM"}
			}
			return DenseChoice{Precision: want}
		}}
	for _, want := range []string{PrecisionBF16, PrecisionTF32} {
		p := mustBuild(t, withPrecision(lenet5(), want), Options{Batch: 32, Training: true, Fusion: true, Target: gemmTarget})
		got := map[string]string{}
		for _, s := range stepsOf(p, KConv2D, KConv2DBwd, KGemm, KGemmBwd) {
			got[string(s.Kernel)+" "+s.Layer] = s.Attr.Precision
		}
		for k, v := range map[string]string{"conv2d conv1": "f32", "conv2d_bwd conv1": "f32", "conv2d conv2": want, "conv2d_bwd conv2": want,
			"gemm fc1": want, "gemm_bwd fc3": want} {
			if got[k] != v {
				t.Errorf("%s plan: %s in %q, want %q (all: %v)", want, k, got[k], v, got)
			}
		}
		if len(p.Precisions) != 2 || !strings.Contains(p.Precisions[0], "conv2d conv1: f32, not "+want+": no GEMM") {
			t.Errorf("%s plan's precision lines: %q", want, p.Precisions)
		}
		var b bytes.Buffer
		WriteText(&b, p)
		if !strings.Contains(b.String(), "precision: 8 of 10 matrix-product steps in "+want) || !strings.Contains(b.String(), "conv2d(relu k5x5 s1 p0 im2col+gemm "+want) {
			t.Errorf("%s plan text lacks the precision summary or a convolution's precision:\n%s", want, b.String())
		}
	}
	f32 := mustBuild(t, lenet5(), Options{Batch: 32, Training: true, Fusion: true, Target: gemmTarget})
	for _, s := range stepsOf(f32, KConv2D, KConv2DBwd) {
		if s.Attr.Precision != "" {
			t.Errorf("f32 plan: %s %s has precision %q, want none", s.Kernel, s.Layer, s.Attr.Precision)
		}
	}
	cpu := mustBuild(t, withPrecision(lenet5(), PrecisionTF32), Options{Batch: 32, Training: true, Fusion: true})
	for _, s := range stepsOf(cpu, KConv2D, KConv2DBwd, KGemm, KGemmBwd) {
		if s.Attr.Precision != PrecisionF32 {
			t.Errorf("CPU tf32 plan: %s %s in %q, want f32", s.Kernel, s.Layer, s.Attr.Precision)
		}
	}
	if len(cpu.Precisions) != 10 || !strings.Contains(cpu.Precisions[0], "the CPU has no TF32 arithmetic") {
		t.Errorf("CPU tf32 plan's precision lines: %q", cpu.Precisions)
	}
	cpuBF16 := mustBuild(t, withPrecision(lenet5(), PrecisionBF16), Options{Batch: 32, Training: true, Fusion: true})
	for _, l := range cpuBF16.Precisions {
		if !strings.HasPrefix(l, "conv2d") || !strings.Contains(l, "f32, not bf16: the direct method multiplies in float32") {
			t.Errorf("CPU bf16 plan: %q (only the direct method's convolutions stay f32)", l)
		}
	}
	if len(cpuBF16.Precisions) != 4 {
		t.Errorf("CPU bf16 plan of lenet5: %d steps left f32, want its 4 direct convolution steps: %q", len(cpuBF16.Precisions), cpuBF16.Precisions)
	}
}

// TestCPUConvPrecisions: in a CPU plan of testdata/specs/bf16/convnet_bf16.cue
// asking for bf16, the convolutions that the CPU computes by GEMMs (im2col
// for the strided layer) multiply in bf16 in both passes, and those of the
// direct method stay f32 with the reason; in inference too.
func TestCPUConvPrecisions(t *testing.T) {
	m, err := spec.Load("../testdata/specs/bf16/convnet_bf16.cue")
	if err != nil {
		t.Fatal(err)
	}
	for _, training := range []bool{true, false} {
		p := mustBuild(t, m, Options{Batch: 32, Training: training, Fusion: true})
		got := map[string]string{}
		for _, s := range stepsOf(p, KConv2D, KConv2DBwd) {
			got[string(s.Kernel)+" "+s.Layer] = s.Attr.Method + " " + s.Attr.Precision
		}
		want := map[string]string{"conv2d conv2d1": "direct f32", "conv2d conv2d2": "im2col+gemm bf16", "conv2d conv2d3": "direct f32"}
		if training {
			want["conv2d_bwd conv2d2"] = "im2col+gemm bf16"
			want["conv2d_bwd conv2d1"], want["conv2d_bwd conv2d3"] = "direct f32", "direct f32"
		}
		if len(got) != len(want) {
			t.Errorf("training %v: convolution steps %v, want %v", training, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("training %v: %s is %q, want %q", training, k, got[k], v)
			}
		}
		for _, l := range p.Precisions {
			if !strings.Contains(l, ": f32, not bf16: the direct method multiplies in float32") {
				t.Errorf("training %v: precision line %q", training, l)
			}
		}
	}
}

// TestConvPrecisionFiner: a target may give a convolution a finer
// precision than the plan's (tf32 in a bf16 plan, as CUDA does for cuDNN
// on float32 tensors), listed with its reason; a coarser one (bf16 in a
// tf32 plan) is a bug in the target, reported at the layer.
func TestConvPrecisionFiner(t *testing.T) {
	target := func(give string) Target {
		return Target{Name: "lib", Conv: func(g ConvGeom, pass ConvPass) ConvChoice { return ConvChoice{Method: "lib"} },
			Dense:         func(_ int, want string) DenseChoice { return DenseChoice{Precision: want} },
			ConvPrecision: func(method, want string) DenseChoice { return DenseChoice{Precision: give, Why: "the library's"} }}
	}
	p := mustBuild(t, withPrecision(lenet5(), PrecisionBF16), Options{Batch: 32, Training: true, Fusion: true, Target: target(PrecisionTF32)})
	for _, s := range stepsOf(p, KConv2D, KConv2DBwd) {
		if s.Attr.Precision != PrecisionTF32 {
			t.Errorf("bf16 plan: %s %s in %q, want tf32", s.Kernel, s.Layer, s.Attr.Precision)
		}
	}
	if len(p.Precisions) != 4 || p.Precisions[0] != "conv2d conv1: tf32, not bf16: the library's" {
		t.Errorf("bf16 plan's precision lines: %q", p.Precisions)
	}
	var b bytes.Buffer
	WriteText(&b, p)
	if !strings.Contains(b.String(), "conv2d(relu k5x5 s1 p0 lib tf32)") || !strings.Contains(b.String(), "precision: 6 of 10 matrix-product steps in bf16") {
		t.Errorf("bf16 plan text lacks a convolution's tf32 or the summary:\n%s", b.String())
	}
	_, err := Build(withPrecision(lenet5(), PrecisionTF32), Options{Batch: 32, Training: true, Target: target(PrecisionBF16)})
	if err == nil || !strings.Contains(err.Error(), `the lib backend gives its conv2d step the precision "bf16" in a tf32 plan (a bug in mlbuild)`) {
		t.Errorf("bf16 convolutions in a tf32 plan: %v", err)
	}
}

// TestAttentionPrecisions: a target with an AttentionPrecision rule gives
// the fused attention steps of a bf16 plan its choice for their head
// dimension (16 here), and a line in Plan.Precisions where that is f32;
// an f32 plan, and a target without the rule, leave them without one.
func TestAttentionPrecisions(t *testing.T) {
	var asked []int
	rule := func(min int) func(int, string) DenseChoice {
		return func(headDim int, want string) DenseChoice {
			asked = append(asked, headDim)
			if headDim < min {
				return DenseChoice{Precision: PrecisionF32, Why: "too narrow for the tiles"}
			}
			return DenseChoice{Precision: want}
		}
	}
	for _, tc := range []struct {
		name      string
		precision string
		rule      func(int, string) DenseChoice
		want      string
		notes     int
	}{
		{"bf16, tiles", "bf16", rule(8), "bf16", 0},
		{"tf32, tiles", "tf32", rule(8), "tf32", 0},
		{"bf16, too narrow", "bf16", rule(32), "f32", 2},
		{"f32", "f32", rule(8), "", 0},
		{"no rule", "bf16", nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			target := Target{Name: "cuda", Conv: cpuConv, Attention: true, AttentionPrecision: tc.rule}
			p := mustBuild(t, withPrecision(attention(), tc.precision), Options{Batch: 2, Training: true, Fusion: true, Target: target})
			steps := stepsOf(p, KAttention, KAttentionBwd)
			if len(steps) != 2 {
				t.Fatalf("%d fused attention steps, want 2", len(steps))
			}
			for _, s := range steps {
				if s.Attr.Precision != tc.want {
					t.Errorf("%s: precision %q, want %q", s.Kernel, s.Attr.Precision, tc.want)
				}
			}
			if tc.want != "" && (len(asked) != 2 || asked[0] != 16 || asked[1] != 16) {
				t.Errorf("the rule was asked for head dimensions %v, want [16 16]", asked)
			}
			var lines int
			for _, l := range p.Precisions {
				if strings.Contains(l, "attention") {
					lines++
					if !strings.Contains(l, "too narrow for the tiles") {
						t.Errorf("Precisions line %q does not give the rule's reason", l)
					}
				}
			}
			if lines != tc.notes {
				t.Errorf("Precisions %q: %d attention lines, want %d", p.Precisions, lines, tc.notes)
			}
		})
	}
}
