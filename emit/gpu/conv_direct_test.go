package gpu

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// TestDirectConvChannelsLast runs the direct convolution's forward and
// weight-gradient kernels with x, y (and dy) channels last, in both
// dialects through the CPU shims, against the same kernels on NCHW
// tensors (which TestLoweredConvMatchesCPU checks against rt/cpu): y is
// the NCHW y transposed, and the weight gradient's partial sums, which
// add the same products in the same order, are the NCHW ones. The
// geometries are a CIFAR stem in small (3 channels, 16 outputs, two
// pixels and eight channels a thread), groups with dilation and stride,
// a ragged row, and a 64-output stem whose channels-last y is staged
// through threadgroup memory; with and without bias and activation.
func TestDirectConvChannelsLast(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	geoms := []struct {
		name string
		g    planner.ConvGeom
		bias bool
		act  string
	}{
		{"stem", withOutputSize(planner.ConvGeom{N: 3, C: 3, H: 10, W: 10, OC: 16, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}), false, ""},
		{"grouped", withOutputSize(planner.ConvGeom{N: 2, C: 4, H: 9, W: 8, OC: 6, KH: 3, KW: 2, SH: 2, SW: 2, PH: 1, PW: 1, DH: 2, DW: 1, Groups: 2}), true, "relu"},
		{"ragged", withOutputSize(planner.ConvGeom{N: 2, C: 2, H: 11, W: 11, OC: 3, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}), true, "tanh"},
		// 64 outputs in 512 threads: y channels last is staged through
		// threadgroup memory (the CIFAR stem's case)
		{"staged", withOutputSize(planner.ConvGeom{N: 2, C: 3, H: 8, W: 8, OC: 64, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}), true, "relu"},
	}
	for _, d := range []*Dialect{CUDA, Metal} {
		t.Run(d.Name, func(t *testing.T) {
			var plain, last []gpuCase
			for _, gc := range geoms {
				g := gc.g
				x := randVec(r, g.N*g.C*g.H*g.W, -1, 1)
				w := randVec(r, g.OC*g.C/g.Groups*g.KH*g.KW, -0.5, 0.5)
				b := randVec(r, g.OC, -0.2, 0.2)
				dy := randVec(r, g.N*g.OC*g.OH*g.OW, -1, 1)
				yv := randVec(r, g.N*g.OC*g.OH*g.OW, 0.1, 0.9) // y for the activation's derivative
				ny := g.N * g.OC * g.OH * g.OW
				for _, lay := range []directLayouts{{x: true}, {y: true}, {x: true, y: true}} {
					xin := toLayout(x, g.N, g.C, g.H*g.W, lay.x)
					fwdIn := func(xs []float32) [][]float32 {
						in := [][]float32{xs, w, zeros(ny)}
						if gc.bias {
							in = append(in, b)
						}
						return in
					}
					k0, err := convDirectKernel(g, nil, gc.bias, gc.act, 0, false, directLayouts{})
					if err != nil {
						t.Fatal(err)
					}
					k1, err := convDirectKernel(g, nil, gc.bias, gc.act, 0, false, lay)
					if err != nil {
						t.Fatal(err)
					}
					if staged := strings.Contains(k1.Doc, "staged"); staged != (gc.name == "staged" && lay.y) {
						t.Fatalf("%s %+v: staged %v (%s)", gc.name, lay, staged, k1.Doc)
					}
					name := fmt.Sprintf("%s_%s", gc.name, map[bool]string{true: "xNHWC", false: "xNCHW"}[lay.x]+map[bool]string{true: "_yNHWC", false: "_yNCHW"}[lay.y])
					plain = append(plain, gpuCase{name: "fwd_" + name + "_ref", k: k0, in: fwdIn(x)})
					last = append(last, gpuCase{name: "fwd_" + name, k: k1, in: fwdIn(xin), tol: 1e-6})
					bwdIn := func(xs, dys, ys []float32) [][]float32 {
						in := [][]float32{xs, dys}
						if gc.act != "" {
							in = append(in, ys)
						}
						return append(in, zeros(DirectBwdScratch(g)))
					}
					b0, err := convDirectBwdKernel(g, gc.act, 0, directLayouts{})
					if err != nil {
						t.Fatal(err)
					}
					b1, err := convDirectBwdKernel(g, gc.act, 0, lay)
					if err != nil {
						t.Fatal(err)
					}
					inner := g.OH * g.OW
					plain = append(plain, gpuCase{name: "bwd_" + name + "_ref", k: b0, in: bwdIn(x, dy, yv)})
					last = append(last, gpuCase{name: "bwd_" + name, k: b1, in: bwdIn(xin, toLayout(dy, g.N, g.OC, inner, lay.y), toLayout(yv, g.N, g.OC, inner, lay.y)), tol: 1e-6})
				}
			}
			ref := runCases(t, d, plain)
			for i := range last {
				g := geoms[i/6].g
				want := ref[i][len(ref[i])-1] // the partial sums, the weight gradient's last parameter
				j := len(last[i].k.Params) - 1
				if i%2 == 0 { // a forward: y, its third parameter, in its layout
					j = 2
					want = toLayout(ref[i][2], g.N, g.OC, g.OH*g.OW, (i/2)%3 != 0)
				}
				last[i].want = map[int][]float32{j: want}
			}
			checkCases(t, d, last, runCases(t, d, last))
		})
	}
	if _, err := convDirectKernel(geoms[0].g, &planner.ConvGeom{KH: 2, KW: 2, SH: 2, SW: 2, OH: 5, OW: 5}, false, "", 0, false, directLayouts{y: true}); err == nil {
		t.Errorf("a pooled direct convolution accepted a channels-last y")
	}
}
