package emit

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
)

// TestCUDAConvChoice: CUDA's rules run an im2col convolution through cuDNN
// in tf32 and bf16 plans, a bf16 plan's in tf32 (cuDNN multiplies bf16
// only on bfloat16 tensors), and keep it on im2col and cuBLAS in f32
// plans, each with the H200's measurement as the reason; a direct
// convolution is never the library's.
func TestCUDAConvChoice(t *testing.T) {
	tg := CUDA.Target
	im2col := planner.ConvChoice{Method: cudaIm2col, Scratch: 1024}
	for _, c := range []struct {
		plan, method, precision, reason string
	}{
		{planner.PrecisionF32, cudaIm2col, planner.PrecisionF32, "15.0 ms on an H200, 19.08 ms with cuDNN"},
		{planner.PrecisionTF32, gpu.ConvLibraryMethod, planner.PrecisionTF32, "6.24 ms on an H200, 8.6 ms with tf32 im2col"},
		{planner.PrecisionBF16, gpu.ConvLibraryMethod, planner.PrecisionTF32, "6.24 ms on an H200, 7.58 ms with bf16 im2col"},
	} {
		got, why := tg.ConvLibrary(im2col, c.plan)
		if got.Method != c.method || why.Taken != (c.method == gpu.ConvLibraryMethod) || !strings.Contains(why.Reason, c.reason) {
			t.Errorf("%s plan: method %q, taken %v, reason %q; want %q and a reason with %q", c.plan, got.Method, why.Taken, why.Reason, c.method, c.reason)
		}
		if got.Method == gpu.ConvLibraryMethod && got.Scratch != 0 {
			t.Errorf("%s plan: cuDNN's choice asks %d float32s of scratch from the plan, want none", c.plan, got.Scratch)
		}
		if c.plan == planner.PrecisionF32 {
			continue // an f32 plan's convolutions keep no precision
		}
		if p := tg.ConvPrecision(got.Method, c.plan); p.Precision != c.precision {
			t.Errorf("%s plan: the %s convolution in %q (%s), want %q", c.plan, got.Method, p.Precision, p.Why, c.precision)
		}
	}
	direct := planner.ConvChoice{Method: gpu.ConvDirectMethod}
	for _, prec := range []string{planner.PrecisionF32, planner.PrecisionTF32, planner.PrecisionBF16} {
		if got, why := tg.ConvLibrary(direct, prec); got.Method != gpu.ConvDirectMethod || why != (planner.LibraryWhy{}) {
			t.Errorf("%s plan: the direct convolution became %q (%+v)", prec, got.Method, why)
		}
	}
}
