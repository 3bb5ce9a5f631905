package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// gpuLike is a target with every rewrite a GPU backend makes: pools in the
// convolutions' epilogues with their argmax, the activation's derivative in
// the pool's backward, multi-tensor Adam and SGD steps and fused attention.
var gpuLike = Target{
	Name: "gpu-like", Conv: poolTarget.Conv, PoolEpilogue: poolTarget.PoolEpilogue,
	PoolArgmax: true, PoolBwdAct: true, UpdateTensors: 3, Attention: true,
}

// TestEveryKernelHasAShapeRule builds every model in every mode for the
// CPU and a GPU-like target, with every loss, so that every kernel's shape
// rule (verify_*.go) passes a well-formed step of the kernel at least once.
func TestEveryKernelHasAShapeRule(t *testing.T) {
	seen := map[Kernel]bool{}
	for _, tc := range allModels {
		for _, target := range []Target{CPU, cpuUnfused, gpuLike} {
			for _, loss := range []string{"", "mse", "mae", "huber"} {
				m := tc.model()
				if loss != "" {
					m.Training.Loss = loss
				}
				if loss == "mse" { // and log-softmax for softmax
					for i := range m.Nodes {
						if m.Nodes[i].Op == spec.OpSoftmax && !m.Nodes[i].Causal {
							m.Nodes[i].Op = spec.OpLogSoftmax
						}
					}
				}
				for _, training := range []bool{true, false} {
					p := mustBuild(t, m, Options{Batch: 2, Training: training, Fusion: true, Target: target})
					for _, s := range p.allSteps() {
						seen[s.Kernel] = true
					}
				}
			}
		}
	}
	// the cast of a bf16 plan's input, for a target whose library
	// convolutions read it (cast_input.go)
	for _, st := range castPlan(t, PrecisionBF16, true, castTarget(KBatchNorm, KBatchNormBwd, KUnary, KUnaryBwd, KBinary, KBinaryBwd, KAccumulate, KGlobalAvgPool, KGlobalAvgPoolBwd, KCast)).allSteps() {
		seen[st.Kernel] = true
	}
	for k := range kernelPhase {
		if !seen[k] {
			t.Errorf("no test plan has a %s step, so its shape rule never ran on a good one", k)
		}
	}
}

// TestShapeRulesCatch breaks one step of each kernel family and checks
// that its rule, which checkShapes dispatches to, says what is wrong.
func TestShapeRulesCatch(t *testing.T) {
	tests := []struct {
		family  string
		target  Target
		kernel  Kernel
		breakIt func(p *Plan, s *Step)
		want    string
	}{
		{"dense", CPU, KGemm, func(p *Plan, s *Step) { s.In[0] = s.Out[0] }, "do not fit (want [B,K] and [N,K])"},
		{"dense", cpuUnfused, KMatMul, func(p *Plan, s *Step) { s.In[1] = s.Out[0] }, "do not fit (want [...,M,K] and [...,K,N] of one rank)"},
		{"conv", CPU, KConv2D, func(p *Plan, s *Step) { g := *s.Attr.Conv; g.OH++; s.Attr.Conv = &g }, "but the window rule gives"},
		{"conv", CPU, KConv2DBwd, func(p *Plan, s *Step) { s.Attr.Conv = nil }, "no convolution geometry"},
		{"conv", gpuLike, KConv2D, func(p *Plan, s *Step) { g := *s.Attr.Pool; g.C++; s.Attr.Pool = &g }, "epilogue pool"},
		{"pool", CPU, KMaxPool2D, func(p *Plan, s *Step) { g := *s.Attr.Conv; g.OC++; s.Attr.Conv = &g }, "pooling changes the channels"},
		{"pool", CPU, KAvgPool2DBwd, func(p *Plan, s *Step) { s.Attr.Act = "relu" }, "only the max pool backward steps apply one"},
		{"pool", CPU, KMaxPool2D, func(p *Plan, s *Step) { g := *s.Attr.Conv; g.ExcludePad = true; s.Attr.Conv = &g }, "only an average pool has a divisor"},
		{"conv", CPU, KConv2D, func(p *Plan, s *Step) { g := *s.Attr.Conv; g.Ceil = true; s.Attr.Conv = &g }, "a convolution cannot round its output size up"},
		{"pool", CPU, KGlobalAvgPool, func(p *Plan, s *Step) { s.Out[0] = s.In[0] }, "want"},
		{"pool", CPU, KResize, func(p *Plan, s *Step) { s.Attr.Mode = "bicubic" }, `mode "bicubic" is neither`},
		{"pool", CPU, KResize, func(p *Plan, s *Step) { s.Attr.Mode = ResizeNearest; s.Attr.AlignCorners = true }, "only bilinear aligns corners"},
		{"pool", CPU, KResizeBwd, func(p *Plan, s *Step) { s.Out[0] = p.Output }, "not [B,C,H,W] images of the same batch and channels"},
		{"elementwise", CPU, KUnary, func(p *Plan, s *Step) { s.Attr.Chain = []UnaryOp{{Op: "fourier"}} }, `unknown element-wise op "fourier"`},
		{"elementwise", CPU, KBinary, func(p *Plan, s *Step) { s.Attr.BinOp = "pow" }, `unknown binary op "pow"`},
		{"elementwise", CPU, KDropout, func(p *Plan, s *Step) { s.Attr.Rate = 1 }, "dropout rate 1 is not in [0, 1)"},
		{"elementwise", CPU, KAccumulate, func(p *Plan, s *Step) { s.In[1] = p.Loss }, "differ"},
		{"norm", cpuUnfused, KSoftmax, func(p *Plan, s *Step) { s.Attr.Axis = 0 }, "axis 0 is the batch axis"},
		{"norm", CPU, KBatchNorm, func(p *Plan, s *Step) { s.Attr.Eps = 0 }, "eps 0"},
		{"norm", CPU, KLayerNormBwd, func(p *Plan, s *Step) { s.In[1] = s.In[0] }, "gamma"},
		{"layout", CPU, KTranspose, func(p *Plan, s *Step) { s.Attr.Perm = slices.Clone(s.Attr.Perm); s.Attr.Perm[0] = 1 }, "must keep the batch axis first"},
		{"layout", CPU, KConcat, func(p *Plan, s *Step) { s.In = s.In[:1] }, "parts add up to"},
		{"layout", CPU, KReduceMean, func(p *Plan, s *Step) { s.Out[0] = p.Loss }, "do not fit (want one rank"},
		{"loss", CPU, KSoftmaxXent, func(p *Plan, s *Step) { s.In[1] = s.Out[1] }, "want [labels]"},
		{"update", CPU, KAdam, func(p *Plan, s *Step) { s.Out[1] = s.Out[2] }, "optimizer state 1 is read from"},
		{"update", gpuLike, KAdamMulti, func(p *Plan, s *Step) { s.Out[4] = s.Out[5] }, "param 2: optimizer state 1"},
		{"update", gpuLike, KSGDMulti, func(p *Plan, s *Step) { s.Out[3] = s.Out[1] }, "param 2: optimizer state 1"},
		{"update", gpuLike, KSGDMulti, func(p *Plan, s *Step) { s.Attr.Decays = []float64{0} }, "1 weight decays for"},
		{"attention", gpuLike, KAttention, func(p *Plan, s *Step) { s.In[2] = s.In[1] }, "do not fit (want [...,Tq,D], [...,D,Tk] and [...,Tk,D])"},
		{"attention", gpuLike, KAttention, func(p *Plan, s *Step) { s.Attr.Rate = 1 }, "dropout rate 1 outside [0, 1)"},
		{"attention", gpuLike, KAttention, func(p *Plan, s *Step) { s.Attr.Perm = []int{0, 2, 1} }, "in the layout [0 2 1]"},
		{"attention", gpuLike, KAttentionBwd, func(p *Plan, s *Step) { s.Out[3] = s.In[3] }, "delta"},
		{"attention", gpuLike, KAttentionBwd, func(p *Plan, s *Step) { s.Out[2] = s.In[1] }, "dv"},
	}
	for _, tc := range tests {
		t.Run(tc.family+"/"+string(tc.kernel), func(t *testing.T) {
			p, s := planWith(t, tc.kernel, tc.target)
			if err := checkShapes(p, s); err != nil {
				t.Fatalf("the unbroken step fails: %v", err)
			}
			tc.breakIt(p, s)
			err := checkShapes(p, s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkShapes says %v, want %q", err, tc.want)
			}
		})
	}
}

// planWith builds the first training plan of allModels (fused, for target)
// with a step of kernel k, and returns it with a copy of that step whose
// operand lists the test may change.
func planWith(t *testing.T, k Kernel, target Target) (*Plan, *Step) {
	t.Helper()
	for _, tc := range allModels {
		p := mustBuild(t, tc.model(), Options{Batch: 2, Training: true, Fusion: true, Target: target})
		for _, s := range p.allSteps() {
			if s.Kernel == k {
				c := *s
				c.In, c.Out = slices.Clone(s.In), slices.Clone(s.Out)
				return p, &c
			}
		}
	}
	t.Fatalf("no model has a %s step", k)
	return nil, nil
}

// TestCheckWindowCeil: a max pool with Ceil has the rounded-up output size
// (a partial last window), and only with Ceil.
func TestCheckWindowCeil(t *testing.T) {
	// 3×3 stride 2 over 8×9: floor 3×4, ceil 4×4 (GoogLeNet's pools).
	g := ConvGeom{N: 2, C: 3, H: 8, W: 9, OC: 3, OH: 4, OW: 4, KH: 3, KW: 3, SH: 2, SW: 2, DH: 1, DW: 1, Groups: 1}
	if err := checkWindow(&g, false); err == nil || !strings.Contains(err.Error(), "the window rule gives 3x4") {
		t.Errorf("without Ceil: %v", err)
	}
	g.Ceil = true
	if err := checkWindow(&g, false); err != nil {
		t.Errorf("with Ceil: %v", err)
	}
	g.OH = 3
	if err := checkWindow(&g, false); err == nil || !strings.Contains(err.Error(), "the window rule gives 4x4") {
		t.Errorf("with Ceil and the floor size: %v", err)
	}
}
