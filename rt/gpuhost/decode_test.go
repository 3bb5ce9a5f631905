package gpuhost

import (
	"math"
	"testing"
)

// TestDecodeTolerance: selftest's KV-cache row keeps app.KVCacheCheck's
// tolerance for a decode whose products are float32 and widens it by the
// unit roundoff of the widest fast precision among its GEMMs.
func TestDecodeTolerance(t *testing.T) {
	gemm := func(p Precision) Op { return Op{Gemm: &GemmOp{Shape: GemmShape{M: 1, N: 4, K: 4, Precision: p}}} }
	kernel := Op{Kernel: "attend_cached"}
	for _, c := range []struct {
		name       string
		step, last []Op
		want       float64
	}{
		{"f32", []Op{kernel, gemm(PrecisionF32)}, []Op{gemm(PrecisionF32)}, 0},
		{"tf32 head", []Op{kernel}, []Op{gemm(PrecisionTF32)}, 1e-4 + 8*0x1p-11},
		{"bf16 and tf32", []Op{gemm(PrecisionTF32), gemm(PrecisionBF16)}, nil, 1e-4 + 8*0x1p-8},
	} {
		dc := &Decode{Step: []PlanStep{{Ops: c.step}}, Last: []PlanStep{{Ops: c.last}}}
		if got := decodeTolerance(dc); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: tolerance %g, want %g", c.name, got, c.want)
		}
	}
}
