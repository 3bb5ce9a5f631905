package emit

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/spec"
)

// TestCUDABF16Twins: the CUDA program of a bf16 spec whose dense layers
// read layer norms' outputs (the tiny GPT) runs those layers' GEMMs on
// bfloat16 twins (gemmOp's Elem), in the three plans and the two
// replicas': in training every GEMM of every dense layer, forward and
// backward, proj's forward on the fused attention's output and the
// backward on the twins of the attention's dq, dk and dv and of the
// loss's gradient; its layer norm, GELU, dropout backward, attention and
// loss kernels write them (unsigned short buffers), its multi-tensor
// Adam writes the weights' twins, and the program lists the weights'
// twins for the host (13 weights). Metal's program of the same spec has
// none: its GEMMs read float32 only.
func TestCUDABF16Twins(t *testing.T) {
	src, err := CUDA.RenderGPU(backendInput(t, CUDA, "../testdata/specs/bf16/gpt_tiny_bf16.cue", true, 0))
	if err != nil {
		t.Fatal(err)
	}
	main := string(src.Main)
	// Evaluation and one-sample plans: 11 GEMMs each (not proj's, which
	// reads the transpose that merges the heads: inference plans keep
	// it); the training plan and those of 2 and 4 GPUs (batch 4) all 39:
	// 13 dense layers' forward, dW and dx.
	if n := strings.Count(main, "Elem: gpuhost.ElemBF16}}"); n != 139 {
		t.Errorf("%d GEMMs read bfloat16 operands, want 139 (11 in each of 2 inference plans, 39 in each of 3 training plans)", n)
	}
	// No GEMM of a training step reads a float32 operand.
	for _, pl := range []string{"t", "r2", "r4"} {
		for _, phase := range []string{"Forward", "Backward"} {
			steps := regexp.MustCompile(`(?s)\nvar ` + pl + phase + ` = \[\]step\{\n.*?\n\}\n`).FindString(main)
			if steps == "" {
				t.Fatalf("the program has no %s%s", pl, phase)
			}
			if n, bf := strings.Count(steps, "gemmOp{"), strings.Count(steps, "Elem: gpuhost.ElemBF16}}"); n != bf {
				t.Errorf("%s%s: %d of %d GEMMs read bfloat16 operands, want all", pl, phase, bf, n)
			}
		}
	}
	if n := regexp.MustCompile(`\{Of: region\{arenaState, \d+, \d+\}, Offset: \d+\},\s+// \S+\.weight\.bf16`).FindAllString(main, -1); len(n) != 13 {
		t.Errorf("%d weight twins listed for the host, want 13", len(n))
	}
	for _, want := range []string{"layer norm of", "and y in bfloat16", "unsigned short* __restrict__ yb", "element-wise gelu", "dropout backward", "unsigned short* __restrict__ dxb", "unsigned short* __restrict__ p_0b",
		"and o in bfloat16", "unsigned short* __restrict__ ob", "and dk, dv in bfloat16", "unsigned short* __restrict__ dkb", "unsigned short* __restrict__ dvb",
		"and dq in bfloat16", "unsigned short* __restrict__ dqb", "and dz in bfloat16", "unsigned short* __restrict__ dzb"} {
		if !strings.Contains(src.KernelSource, want) {
			t.Errorf("the kernel source has no %q", want)
		}
	}
	metal, err := Metal.RenderGPU(backendInput(t, Metal, "../testdata/specs/bf16/gpt_tiny_bf16.cue", true, 0))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(metal.Main), "BF16") || strings.Contains(metal.KernelSource, "ushort") {
		t.Errorf("the Metal program reads or writes bfloat16")
	}
}

// TestCUDAGPTGemmsReadBF16: in the bf16 training plan of models/gpt.cue
// as the CUDA backend plans it (the planner's TestTwinOperandsGPT with
// CUDA's own Target), every GEMM of the 74 dense steps, forward, dW and
// dx, has both operands' bfloat16 twins, which its lowering then reads
// (dense and denseBwd: no gemm_bwd of the GPT has a fused activation).
func TestCUDAGPTGemmsReadBF16(t *testing.T) {
	m, err := spec.Load("../models/gpt.cue")
	if err != nil {
		t.Fatal(err)
	}
	m.Precision = planner.PrecisionBF16
	p, err := planner.Build(m, CUDA.PlanOptions(planner.Options{Training: true, Fusion: true}))
	if err != nil {
		t.Fatal(err)
	}
	twinned := func(ids ...planner.BufID) bool {
		for _, id := range ids {
			if p.TwinOf(id) == planner.NoBuf {
				return false
			}
		}
		return true
	}
	steps, float := 0, map[string]int{}
	for _, ph := range []planner.Phase{p.Forward, p.Backward} {
		for _, st := range ph {
			switch {
			case st.Kernel == planner.KGemm:
				if !twinned(st.In[0], st.In[1]) {
					float["forward "+st.Layer]++
				}
			case st.Kernel == planner.KGemmBwd && st.Attr.Act != "":
				float["backward with an activation "+st.Layer]++
			case st.Kernel == planner.KGemmBwd:
				if st.Out[1] != planner.NoBuf && !twinned(st.In[3], st.In[0]) {
					float["dW "+st.Layer]++
				}
				if st.Out[0] != planner.NoBuf && !twinned(st.In[3], st.In[1]) {
					float["dx "+st.Layer]++
				}
			default:
				continue
			}
			if st.Attr.Precision != planner.PrecisionBF16 {
				t.Errorf("%s %s in %q, want bf16", st.Kernel, st.Layer, st.Attr.Precision)
			}
			steps++
		}
	}
	if steps != 74 || len(float) > 0 {
		t.Errorf("%d dense steps, want 74; GEMMs with a float32 operand: %v, want none", steps, float)
	}
}
