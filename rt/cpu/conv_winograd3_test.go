package cpu

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// winograd3Geoms are awkward 3×3 geometries for F(4×4,3×3), as
// winogradGeoms are for 5×5: output sizes that leave a tile part outside
// (7×7: 4×4 tiles of 8×8), sizes below one tile, padding 0, 1 and 2, one
// tile column, channels that fill no vector, several rounds with a short
// last one, more input channels than one block of the GEMM's shared
// dimension holds (kc: U packed in blocks), and more output channels than
// the generic path's nc.
var winograd3Geoms = []winogradGeom{
	{"resnet 64 pad1 14x14", convCase(2, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1)},
	{"rows of 16 pixels", convCase(2, 24, 5, 16, 40, 3, 3, 1, 1, 1, 1)},
	{"7x7 pad1", convCase(2, 33, 7, 7, 40, 3, 3, 1, 1, 1, 1)},
	{"odd 9x7 pad1", convCase(2, 3, 9, 7, 5, 3, 3, 1, 1, 1, 1)},
	{"pad0 11x8", convCase(1, 17, 11, 8, 19, 3, 3, 1, 0, 1, 1)},
	{"pad2 6x13", convCase(2, 1, 6, 13, 2, 3, 3, 1, 2, 1, 1)},
	{"smaller than a tile", convCase(1, 2, 3, 3, 3, 3, 3, 1, 0, 1, 1)},
	{"one tile column", convCase(2, 3, 9, 5, 4, 3, 3, 1, 0, 1, 1)},
	{"several rounds", convCase(9, 5, 14, 14, 7, 3, 3, 1, 1, 1, 1)},
	{"first layer 28x28", convCase(5, 1, 28, 28, 33, 3, 3, 1, 1, 1, 1)},
	{"channels past the GEMM's kc", convCase(2, 260, 6, 5, 3, 3, 3, 1, 1, 1, 1)},
	{"output channels past the generic path's nc", convCase(1, 2, 4, 4, 1030, 3, 3, 1, 1, 1, 1)},
}

// winogradBT is Bᵀ of F(2×2,5×5) and F(4×4,3×3) (conv_winograd.go's
// comment), for the tests' float64 checks.
var winogradBT = [][]float64{
	{4, 0, -5, 0, 1, 0},
	{0, -4, -4, 1, 1, 0},
	{0, 4, -4, -1, 1, 0},
	{0, -2, -1, 2, 1, 0},
	{0, 2, -1, -2, 1, 0},
	{0, 4, 0, -5, 0, 1},
}

// TestConvWinograd3Matrices: in float64, Aᵀ[(G g) ⊙ (Bᵀ d)] is the
// correlation of d (6 taps) with g (3) at the 4 outputs, and A2ᵀ[(G2 g) ⊙
// (Bᵀ d)] with a 4-tap g at 3 outputs, G2 being diag(winogradScale)·E,
// for random d and g. The 2-D algorithms are these applied along both
// axes, which the convolution tests check.
func TestConvWinograd3Matrices(t *testing.T) {
	r := newTestRand(70)
	check := func(what string, g [][]float64, at [][]float64, taps int) {
		t.Helper()
		for trial := 0; trial < 5; trial++ {
			d, f := make([]float64, 6), make([]float64, taps)
			for i := range d {
				d[i] = r.Float64()*2 - 1
			}
			for i := range f {
				f[i] = r.Float64()*2 - 1
			}
			prod := make([]float64, 6)
			for xi := range prod {
				var gf, bd float64
				for k := range taps {
					gf += g[xi][k] * f[k]
				}
				for j := range 6 {
					bd += winogradBT[xi][j] * d[j]
				}
				prod[xi] = gf * bd
			}
			for i := range at {
				var got, want float64
				for xi := range prod {
					got += at[i][xi] * prod[xi]
				}
				for k := range taps {
					want += d[i+k] * f[k]
				}
				if math.Abs(got-want) > 1e-12 {
					t.Errorf("%s output %d: %v, want the correlation %v", what, i, got, want)
				}
			}
		}
	}
	check("F(4x4,3x3)", winoF3G, winoF3AT, 3)
	g2 := make([][]float64, len(winoF3E))
	for i, row := range winoF3E {
		for _, e := range row {
			g2[i] = append(g2[i], winogradScale[i]*e)
		}
	}
	check("F(3x3,4x4)", g2, winoF3AW, 4)
}

// TestConvWinograd3Transforms: F(4×4,3×3)'s transforms on every path
// against the matrices applied in float64: Bᵀ d B, Aᵀ m A + bias with and
// without ReLU, and E g Eᵀ, for channel counts of one and several vectors
// and strides that leave gaps. The bound is a few float32 roundings of
// the largest term; E's products are exact, so every path's dy transform
// must be the Go one's bits.
func TestConvWinograd3Transforms(t *testing.T) {
	checkWinoTransforms(t, winogradF3For, winoDyF3Go, winogradBT, winoF3E, winoF3AT, 71)
}

// TestConvWinograd3RefusesOtherGeometry: the kernels panic, naming the
// geometry, on one they do not compute (the planner never hands them one).
func TestConvWinograd3RefusesOtherGeometry(t *testing.T) {
	for _, g := range []Conv{convCase(1, 2, 6, 6, 2, 5, 5, 1, 1, 1, 1), convCase(1, 2, 9, 9, 2, 3, 3, 2, 1, 1, 1), convCase(1, 2, 9, 9, 2, 3, 3, 1, 2, 2, 1), convCase(1, 2, 9, 9, 2, 3, 3, 1, 3, 1, 1)} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "cpu.Conv2DWinograd3Bwd") || !strings.Contains(msg, "Winograd F(4x4,3x3) needs a 3x3 filter") {
					t.Errorf("%+v: panic %q, want the refusal", g, msg)
				}
			}()
			y := make([]float32, g.N*g.OC*g.OH*g.OW)
			Conv2DWinograd3Bwd(make([]float32, g.N*g.C*g.H*g.W), make([]float32, g.OC*g.C*g.KH*g.KW), y, y, nil, make([]float32, g.OC*g.C*g.KH*g.KW), nil, g, ActNone, 0)
		}()
	}
}

// BenchmarkConvWinograd3 times the 3×3 stride-1 layers of ResNet-18 at
// 224×224 (batch 32 and 1) and of CIFAR ResNet-18 (batch 128) by the
// direct method and F(4×4,3×3), forward and backward with dx, on one
// thread, and two layers of fewer channels: the layers the CPU rule
// (planner's cpuWinograd3Pays) was set on.
func BenchmarkConvWinograd3(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(1)
	type layer struct {
		name     string
		c, hw, n int
	}
	var layers []layer
	for _, l := range []layer{{"64 56²", 64, 56, 0}, {"128 28²", 128, 28, 0}, {"256 14²", 256, 14, 0}, {"512 7²", 512, 7, 0}} {
		for _, n := range []int{32, 1} {
			layers = append(layers, layer{"resnet18 " + l.name + " batch " + strconv.Itoa(n), l.c, l.hw, n})
		}
	}
	for _, l := range []layer{{"64 32²", 64, 32, 0}, {"128 16²", 128, 16, 0}, {"256 8²", 256, 8, 0}, {"512 4²", 512, 4, 0}} {
		layers = append(layers, layer{"cifar " + l.name + " batch 128", l.c, l.hw, 128})
	}
	// Fewer channels, for the rule's lower bound on them.
	layers = append(layers, layer{"32 56² batch 32", 32, 56, 32}, layer{"16 56² batch 32", 16, 56, 32})
	for _, l := range layers {
		g := convCase(l.n, l.c, l.hw, l.hw, l.c, 3, 3, 1, 1, 1, 1)
		r := newTestRand(72)
		x, w, bias := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C*9, 0.05), randSlice(r, g.OC, 0.05)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		dy, dx, dw, db := randSlice(r, len(y), 1), make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.OC)
		for _, m := range []struct {
			name string
			fwd  func(x, w, b, y []float32, g Conv, act Act, alpha float32)
			bwd  func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)
		}{{"direct", Conv2DDirectFwd, Conv2DDirectBwd}, {"winograd3", Conv2DWinograd3Fwd, Conv2DWinograd3Bwd}} {
			b.Run(l.name+"/"+m.name+" fwd", func(b *testing.B) {
				start := processCPU()
				for b.Loop() {
					m.fwd(x, w, bias, y, g, ActReLU, 0)
				}
				reportCPUTime(b, start)
			})
			b.Run(l.name+"/"+m.name+" bwd", func(b *testing.B) {
				start := processCPU()
				for b.Loop() {
					m.bwd(x, w, y, dy, dx, dw, db, g, ActReLU, 0)
				}
				reportCPUTime(b, start)
			})
		}
	}
}
