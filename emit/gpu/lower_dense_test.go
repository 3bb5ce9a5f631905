package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/cpu"
)

// TestBatchedMatMulIsOneGemm: a batched matrix product whose operands are
// distinct matrices (attention's [B, H, T, ·] products) lowers to one
// strided batched GEMM for the forward and one for each gradient, where
// it lowered to a GEMM per matrix; an operand broadcast along a leading
// axis keeps a GEMM per matrix, its gradient summed matrix by matrix.
// Both give rt/cpu's MatMulFwd and MatMulBwd within float32 rounding.
func TestBatchedMatMulIsOneGemm(t *testing.T) {
	for _, c := range []struct {
		name         string
		a, b         []int
		gemms, batch int // per phase: the GEMMs, and the batch of each
	}{
		{"distinct", []int{2, 3, 4, 5}, []int{2, 3, 5, 6}, 1, 6},
		{"broadcast", []int{2, 3, 4, 5}, []int{1, 3, 5, 6}, 6, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := append(append([]int{}, c.a[:3]...), c.b[3])
			p := &planner.Plan{Model: "matmul", Batch: 2, Training: true}
			a := testBuffer(p, "a", planner.KindActivation, c.a...)
			b := testBuffer(p, "b", planner.KindActivation, c.b...)
			out := testBuffer(p, "y", planner.KindActivation, y...)
			dy := testBuffer(p, "y.grad", planner.KindGrad, y...)
			da := testBuffer(p, "a.grad", planner.KindGrad, c.a...)
			db := testBuffer(p, "b.grad", planner.KindGrad, c.b...)
			p.Forward = planner.Phase{{Kernel: planner.KMatMul, Layer: "mm", In: []planner.BufID{a, b}, Out: []planner.BufID{out}}}
			p.Backward = planner.Phase{{Kernel: planner.KMatMulBwd, Layer: "mm", In: []planner.BufID{a, b, dy}, Out: []planner.BufID{da, db}}}
			for _, d := range []*Dialect{CUDA, Metal} {
				prog, err := Lower(p, d)
				if err != nil {
					t.Fatalf("%s: %v", d.Name, err)
				}
				for _, ph := range []struct {
					name string
					ops  []Op
					want int
				}{{"forward", prog.Forward, c.gemms}, {"backward", prog.Backward, 2 * c.gemms}} {
					if len(ph.ops) != ph.want {
						t.Errorf("%s %s: %d ops, want %d GEMMs", d.Name, ph.name, len(ph.ops), ph.want)
					}
					for _, op := range ph.ops {
						if op.Gemm == nil || op.Gemm.Batch != c.batch {
							t.Errorf("%s %s: op %s, want GEMMs of batch %d", d.Name, ph.name, fmt.Sprint(op.Gemm), c.batch)
						}
					}
				}
				r := rand.New(rand.NewPCG(5, 6))
				arena := make([][]float32, len(p.Buffers))
				for i, buf := range p.Buffers {
					arena[i] = randVec(r, buf.Size, -1, 1)
				}
				want := make([][]float32, len(arena))
				for i := range arena {
					want[i] = append([]float32(nil), arena[i]...)
				}
				cpu.MatMulFwd(want[a], want[b], want[out], c.a, c.b, y)
				cpu.MatMulBwd(want[a], want[b], want[dy], want[da], want[db], c.a, c.b, y)
				var s *kernelServer // GEMMs only: no kernels to serve
				s.run(t, prog.Forward, arena, nil)
				s.run(t, prog.Backward, arena, nil)
				for _, id := range []planner.BufID{out, da, db} {
					for i, w := range want[id] {
						if g := arena[id][i]; math.Abs(float64(g-w)) > 1e-5*(1+math.Abs(float64(w))) {
							t.Fatalf("%s: %s[%d] = %g, rt/cpu has %g", d.Name, p.Buffers[id].Name, i, g, w)
						}
					}
				}
			}
		})
	}
}

// TestDenseBwdAddsIntoDx: a dense layer's backward with Attr.AccumulateDx
// (planner/fuse_accumulate_gemm.go) lowers its dx GEMM with Beta 1, so dx
// ends as what it held plus dy·W, and without the flag with Beta 0 (dx
// overwritten); dW is the same either way. Both against rt/cpu's GemmBwd.
func TestDenseBwdAddsIntoDx(t *testing.T) {
	const batch, in, out = 5, 7, 3
	for _, adds := range []bool{false, true} {
		p := &planner.Plan{Model: "dense", Batch: batch, Training: true}
		x := testBuffer(p, "x", planner.KindActivation, batch, in)
		w := testBuffer(p, "w", planner.KindParam, out, in)
		y := testBuffer(p, "y", planner.KindActivation, batch, out)
		dy := testBuffer(p, "y.grad", planner.KindGrad, batch, out)
		dx := testBuffer(p, "x.grad", planner.KindGrad, batch, in)
		dw := testBuffer(p, "w.grad", planner.KindParamGrad, out, in)
		p.Backward = planner.Phase{{Kernel: planner.KGemmBwd, Layer: "fc", In: []planner.BufID{x, w, y, dy},
			Out: []planner.BufID{dx, dw, planner.NoBuf}, Attr: planner.Attr{AccumulateDx: adds}}}
		for _, d := range []*Dialect{CUDA, Metal} {
			prog, err := Lower(p, d)
			if err != nil {
				t.Fatalf("%s: %v", d.Name, err)
			}
			var betas []float32
			for _, op := range prog.Backward {
				if op.Gemm == nil {
					t.Fatalf("%s: op %v, want GEMMs only", d.Name, op)
				}
				betas = append(betas, op.Gemm.Beta)
			}
			want := []float32{0, 0} // dW, then dx
			if adds {
				want[1] = 1
			}
			if fmt.Sprint(betas) != fmt.Sprint(want) {
				t.Errorf("%s, adds %v: GEMMs of beta %v, want %v", d.Name, adds, betas, want)
			}
			r := rand.New(rand.NewPCG(7, 8))
			arena := make([][]float32, len(p.Buffers))
			for i, buf := range p.Buffers {
				arena[i] = randVec(r, buf.Size, -1, 1)
			}
			ref := make([][]float32, len(arena))
			for i := range arena {
				ref[i] = append([]float32(nil), arena[i]...)
			}
			part := make([]float32, batch*in)
			cpu.GemmBwd(ref[x], ref[w], ref[y], ref[dy], part, ref[dw], nil, batch, in, out, cpu.ActNone, 0)
			for i := range part {
				if adds {
					ref[dx][i] += part[i]
				} else {
					ref[dx][i] = part[i]
				}
			}
			var s *kernelServer // GEMMs only: no kernels to serve
			s.run(t, prog.Backward, arena, nil)
			for _, id := range []planner.BufID{dx, dw} {
				for i, v := range ref[id] {
					if g := arena[id][i]; math.Abs(float64(g-v)) > 1e-5*(1+math.Abs(float64(v))) {
						t.Fatalf("%s, adds %v: %s[%d] = %g, want %g", d.Name, adds, p.Buffers[id].Name, i, g, v)
					}
				}
			}
		}
	}
}
