package emit

import (
	"regexp"
	"strings"
	"testing"
)

// TestCUDABF16Twins: the CUDA program of a bf16 spec whose dense layers
// read layer norms' outputs (the tiny GPT) runs those layers' forward
// GEMMs on bfloat16 twins (gemmOp's Elem: q, k, v, fc and the head, 9 a
// plan, in the three plans and the two replicas'), its layer norm kernels write them (unsigned short
// buffers), its multi-tensor Adam writes the weights' twins, and the
// program lists the weights' twins for the host (9 weights). Metal's
// program of the same spec has none: its GEMMs read float32 only.
func TestCUDABF16Twins(t *testing.T) {
	src, err := CUDA.RenderGPU(backendInput(t, CUDA, "../testdata/specs/bf16/gpt_tiny_bf16.cue", true, 0))
	if err != nil {
		t.Fatal(err)
	}
	main := string(src.Main)
	// Evaluation and one-sample plans: 11 GEMMs each; the training plan
	// and those of 2 and 4 GPUs (batch 4) 21: 10 more in the backward
	// (fc's and mlp's dW and dx, proj's dx, in 2 blocks).
	if n := strings.Count(main, "Elem: gpuhost.ElemBF16}}"); n != 85 {
		t.Errorf("%d GEMMs read bfloat16 operands, want 85 (11 in each of 2 inference plans, 21 in each of 3 training plans)", n)
	}
	if n := regexp.MustCompile(`\{Of: region\{arenaState, \d+, \d+\}, Offset: \d+\},\s+// \S+\.weight\.bf16`).FindAllString(main, -1); len(n) != 13 {
		t.Errorf("%d weight twins listed for the host, want 13", len(n))
	}
	for _, want := range []string{"layer norm of", "and y in bfloat16", "unsigned short* __restrict__ yb", "element-wise gelu", "dropout backward", "unsigned short* __restrict__ dxb", "unsigned short* __restrict__ p_0b"} {
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
