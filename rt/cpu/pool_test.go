package cpu

import (
	"fmt"
	"math"
	"testing"
)

// TestMaxPool2x2PathsAgree checks the 2×2 stride-2 max pool of every path
// (the assembly kernels of the GEMM paths that have them, the Go loops
// otherwise) against the Go loops applied plane by plane, element for
// element: data with many ties, NaNs, infinities and negative zeros, odd
// and even planes, rows of one, several and partial vectors, and batches
// split over threads both within and across planes. dx starts as NaN
// garbage, so every element must be written.
func TestMaxPool2x2PathsAgree(t *testing.T) {
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1))}
	forEachPathAndThreads(t, func(t *testing.T) {
		r := newTestRand(11)
		for _, s := range [][4]int{{3, 2, 28, 28}, {2, 3, 10, 10}, {5, 4, 14, 14}, {2, 1, 7, 9}, {1, 2, 6, 35}, {2, 1, 5, 33}, {4, 2, 2, 2}, {1, 1, 3, 3}, {300, 1, 4, 4}} {
			g := convCase(s[0], s[1], s[2], s[3], s[1], 2, 2, 2, 0, 1, 1).norm()
			name := fmt.Sprintf("%dx%dx%dx%d", s[0], s[1], s[2], s[3])
			x := make([]float32, g.N*g.C*g.H*g.W)
			for i := range x {
				x[i] = float32(r.IntN(4)) // ties in most windows
				if r.IntN(40) == 0 {
					x[i] = specials[r.IntN(len(specials))]
				}
			}
			hw, ohw := g.H*g.W, g.OH*g.OW
			wantY := make([]float32, g.N*g.C*ohw)
			for p := 0; p < g.N*g.C; p++ {
				maxPool2x2Plane(x[p*hw:(p+1)*hw], wantY[p*ohw:(p+1)*ohw], g.W, g.OH, g.OW)
			}
			// Outputs are followed by guard elements that must stay 7.
			const guard = 32
			yg := make([]float32, len(wantY)+guard)
			for i := range yg {
				yg[i] = 7
			}
			y := yg[:len(wantY)]
			MaxPool2DFwd(x, y, g)
			for _, v := range yg[len(y):] {
				if v != 7 {
					t.Fatalf("%s forward wrote past y", name)
				}
			}
			if msg := sameFloats(y, wantY); msg != "" {
				t.Fatalf("%s forward: %s", name, msg)
			}
			dy := randSlice(r, len(y), 1)
			wantDx := make([]float32, len(x))
			for p := 0; p < g.N*g.C; p++ {
				maxPool2x2BwdPlane(x[p*hw:(p+1)*hw], wantY[p*ohw:(p+1)*ohw], dy[p*ohw:(p+1)*ohw], wantDx[p*hw:(p+1)*hw], g.W, g.H, g.OH, g.OW)
			}
			dxg := make([]float32, len(x)+guard)
			for i := range dxg {
				dxg[i] = float32(math.NaN())
			}
			dx := dxg[:len(x)]
			MaxPool2DBwd(x, y, dy, dx, g)
			for _, v := range dxg[len(x):] {
				if v == v {
					t.Fatalf("%s backward wrote past dx", name)
				}
			}
			if msg := sameFloats(dx, wantDx); msg != "" {
				t.Fatalf("%s backward: %s", name, msg)
			}
		}
	})
}

// sameFloats reports the first element where got and want differ (NaN
// equals NaN, -0 equals 0), as an error message, or "".
func sameFloats(got, want []float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i, w := range want {
		if g := got[i]; g != w && !(g != g && w != w) {
			return fmt.Sprintf("element %d = %v, want %v", i, g, w)
		}
	}
	return ""
}

// TestMaxPool2DArgmax: the argmax of each window and the backward from it
// give MaxPool2DBwd's dx exactly, for data with many ties and NaNs, for
// tiling 2×2 windows (an odd last row and column in no window) and for
// overlapping, padded and dilated ones; the argmax is a position within
// the window, and dx starts as NaN garbage.
func TestMaxPool2DArgmax(t *testing.T) {
	r := newTestRand(5)
	for _, g := range []Conv{
		convCase(2, 3, 8, 8, 3, 2, 2, 2, 0, 1, 1),
		convCase(2, 2, 7, 9, 2, 2, 2, 2, 0, 1, 1),
		convCase(1, 2, 9, 9, 2, 3, 3, 2, 1, 1, 1),
		convCase(1, 1, 9, 10, 1, 3, 2, 1, 0, 2, 1),
	} {
		g = g.norm()
		name := fmt.Sprintf("%+v", g)
		x := make([]float32, g.N*g.C*g.H*g.W)
		for i := range x {
			x[i] = float32(r.IntN(3)) // ties in most windows
			if r.IntN(30) == 0 {
				x[i] = float32(math.NaN())
			}
		}
		n := g.N * g.C * g.OH * g.OW
		y, arg, dy := make([]float32, n), make([]float32, n), randSlice(r, n, 1)
		MaxPool2DFwd(x, y, g)
		MaxPool2DArgmax(x, arg, g)
		ties := 0
		for i, a := range arg {
			if a != float32(int(a)) || a < 0 || int(a) >= g.KH*g.KW {
				t.Fatalf("%s: argmax %d is %v, not a position in a %dx%d window", name, i, a, g.KH, g.KW)
			}
			if a > 0 {
				ties++
			}
		}
		if ties == 0 {
			t.Fatalf("%s: every argmax is 0: the case tests nothing", name)
		}
		want, got := make([]float32, len(x)), make([]float32, len(x))
		for i := range got {
			got[i] = float32(math.NaN())
		}
		MaxPool2DBwd(x, y, dy, want, g)
		MaxPool2DArgmaxBwd(arg, dy, got, g)
		if msg := sameFloats(got, want); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
	}
}

// ceilPoolCase is a square pool window over [n,c,h,w] with the output size
// rounded up as PyTorch's ceil_mode does: a partial last window is kept
// unless it would start in the trailing padding or beyond.
func ceilPoolCase(n, c, h, w, k, s, p int) Conv {
	size := func(in int) int {
		out := (in+2*p-k+s-1)/s + 1
		if (out-1)*s >= in+p {
			out--
		}
		return out
	}
	return Conv{N: n, C: c, H: h, W: w, OC: c, OH: size(h), OW: size(w), KH: k, KW: k,
		SH: s, SW: s, PH: p, PW: p, DH: 1, DW: 1, Groups: 1}
}

// TestMaxPoolCeilMatchesNaive runs max pools whose last windows reach past
// the input (ceil rounding: GoogLeNet's and SqueezeNet's 3×3/2 and 2×2/2
// pools on odd sizes) on every path, against the plain reference, and the
// backward against finite differences. The 2×2 stride-2 fast paths read
// two full rows per output row and must not run on them.
func TestMaxPoolCeilMatchesNaive(t *testing.T) {
	geoms := []Conv{
		ceilPoolCase(2, 3, 7, 5, 2, 2, 0),   // 2×2/2 on odd sizes: 4×3
		ceilPoolCase(1, 2, 3, 3, 2, 2, 0),   // 2×2
		ceilPoolCase(2, 2, 8, 10, 3, 2, 0),  // 3×3/2: 4×5
		ceilPoolCase(1, 2, 14, 13, 3, 2, 1), // padded: 8×7
		ceilPoolCase(1, 1, 6, 7, 3, 3, 1),   // stride 3
	}
	for _, g := range geoms {
		if (g.OH-1)*g.SH-g.PH+g.KH <= g.H+g.PH && (g.OW-1)*g.SW-g.PW+g.KW <= g.W+g.PW {
			t.Fatalf("geometry %+v has no partial window", g)
		}
	}
	forEachPathAndThreads(t, func(t *testing.T) {
		r := newTestRand(17)
		for _, g := range geoms {
			name := fmt.Sprintf("%dx%d k%d s%d p%d -> %dx%d", g.H, g.W, g.KH, g.SH, g.PH, g.OH, g.OW)
			x := randSlice(r, g.N*g.C*g.H*g.W, 1)
			y := make([]float32, g.N*g.C*g.OH*g.OW)
			MaxPool2DFwd(x, y, g)
			if msg := closeTo(y, poolRef(x, g, true), 0); msg != "" {
				t.Fatalf("forward %s: %s", name, msg)
			}
			proj := randSlice(r, len(y), 1)
			dx := randSlice(r, len(x), 9)
			MaxPool2DBwd(x, y, cloneF(proj), dx, g)
			kinkyCheck.run(t, "ceil maxpool "+name, proj, func() []float32 { MaxPool2DFwd(x, y, g); return y }, gradInput{"x", x, dx})
		}
	})
}

// TestMaxPoolPlaneMatchesArg: the general max pool forward (maxPoolPlane,
// row by row over the columns whose windows lie inside the input, by the
// path's vector kernel for 3×3 windows of stride 2 across) writes
// the value at the index maxPoolArg picks, window by window (NaN where
// that is NaN; a tie of -0 and +0 may read either):
// strides, paddings and dilations that leave edge columns on both sides or
// none, a window wider than the padded input's interior, rounded-up (ceil)
// output sizes whose last window hangs past the input, and data with ties,
// NaNs, infinities and both zeros.
func TestMaxPoolPlaneMatchesArg(t *testing.T) {
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0}
	r := newTestRand(5)
	cases := []Conv{
		convCase(1, 1, 112, 112, 1, 3, 3, 2, 1, 1, 1), // ResNet's stem pool
		convCase(1, 2, 9, 11, 2, 3, 3, 1, 1, 1, 1),
		convCase(1, 1, 7, 7, 1, 3, 3, 1, 0, 1, 1),
		convCase(1, 1, 10, 13, 1, 5, 3, 2, 2, 1, 1),
		convCase(1, 1, 12, 12, 1, 3, 3, 1, 2, 2, 1),                                      // dilated
		convCase(1, 1, 4, 4, 1, 3, 3, 1, 1, 1, 1),                                        // every column at an edge
		convCase(1, 1, 3, 5, 1, 3, 5, 3, 2, 1, 1),                                        // no interior column
		{N: 1, C: 1, H: 1, W: 9, OC: 1, OH: 1, OW: 3, KH: 1, KW: 4, SH: 1, SW: 3, PW: 1}, // one row, padded at its ends only
	}
	// 3×3 windows of stride 2 across (the vector kernel's, where the
	// path has one): interiors of every length mod 8, padding 0 to 2,
	// stride 1 and 3 down.
	for w := 5; w <= 40; w += 3 {
		cases = append(cases, convCase(1, 1, 7, w, 1, 3, 3, 2, w%3, 1, 1))
	}
	cases = append(cases, Conv{N: 1, C: 1, H: 6, W: 21, OC: 1, OH: 6, OW: 11, KH: 3, KW: 3, SH: 1, SW: 2, PH: 1, PW: 1},
		Conv{N: 1, C: 1, H: 9, W: 23, OC: 1, OH: 3, OW: 11, KH: 3, KW: 3, SH: 3, SW: 2, PH: 0, PW: 1})
	ceil := convCase(1, 1, 8, 8, 1, 3, 3, 2, 0, 1, 1)
	ceil.OH, ceil.OW = 4, 4 // ceil mode: the last window starts at 6 and reads 6 and 7
	cases = append(cases, ceil)
	for _, g := range cases {
		g = g.norm()
		name := fmt.Sprintf("%dx%d k%dx%d s%d p%d d%d -> %dx%d", g.H, g.W, g.KH, g.KW, g.SH, g.PH, g.DH, g.OH, g.OW)
		for trial := range 3 {
			x := make([]float32, g.H*g.W)
			for i := range x {
				x[i] = float32(r.IntN(3)) - 1
				if trial > 0 && r.IntN(6) == 0 {
					x[i] = specials[r.IntN(len(specials))]
				}
			}
			y := make([]float32, g.OH*g.OW)
			for i := range y {
				y[i] = 42
			}
			maxPoolPlane(x, y, g)
			for oh := range g.OH {
				for ow := range g.OW {
					want := x[maxPoolArg(x, g, oh, ow)]
					if got := y[oh*g.OW+ow]; got != want && !(got != got && want != want) {
						t.Fatalf("%s trial %d: y[%d,%d] = %v (%#x), maxPoolArg's %v (%#x)", name, trial, oh, ow, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		}
	}
}

// TestMaxPool3s2RowAgrees: each path's kernel of the 3×3 stride-2 max
// pool's rows gives its Go twin's values (NaN for NaN; a tie of -0 and
// +0 may read either) for every length
// from 0 to 40 (whole steps and every tail), on data with ties, NaNs,
// infinities and both zeros, writing nothing past its outputs.
func TestMaxPool3s2RowAgrees(t *testing.T) {
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0}
	r := newTestRand(12)
	kernels := 0
	for _, name := range GemmPaths() {
		k := archMaxPool3s2Row(name)
		if k == nil {
			continue
		}
		kernels++
		for n := 0; n <= 40; n++ {
			var rows [3][]float32
			for i := range rows {
				rows[i] = make([]float32, 2*n+2)
				for j := range rows[i] {
					rows[i][j] = float32(r.IntN(5)) - 2
					if r.IntN(8) == 0 {
						rows[i][j] = specials[r.IntN(len(specials))]
					}
				}
			}
			want := make([]float32, n)
			maxPool3s2RowGo(rows[0], rows[1], rows[2], want)
			got := make([]float32, n+16)
			for i := range got {
				got[i] = 42
			}
			if n > 0 {
				k(&rows[0][1], &rows[1][1], &rows[2][1], &got[0], n)
			}
			for i, v := range got[n:] {
				if v != 42 {
					t.Fatalf("%s, %d outputs: wrote %v past them at %d", name, n, v, n+i)
				}
			}
			for i, w := range want {
				if g := got[i]; g != w && !(g != g && w != w) {
					t.Fatalf("%s, %d outputs: y[%d] = %v, the Go loop's %v", name, n, i, g, w)
				}
			}
		}
	}
	t.Logf("%d vector kernels checked", kernels)
}

// BenchmarkMaxPoolStem: ResNet's 3×3 stride-2 stem pool, 64 planes of
// 112² at batch 1.
func BenchmarkMaxPoolStem(b *testing.B) {
	g := convCase(1, 64, 112, 112, 64, 3, 3, 2, 1, 1, 1).norm()
	x := randSlice(newTestRand(1), g.N*g.C*g.H*g.W, 1)
	y := make([]float32, g.N*g.C*g.OH*g.OW)
	b.Run("plane", func(b *testing.B) {
		for range b.N {
			for p := range g.C {
				maxPoolPlane(x[p*g.H*g.W:(p+1)*g.H*g.W], y[p*g.OH*g.OW:(p+1)*g.OH*g.OW], g)
			}
		}
	})
	b.Run("arg", func(b *testing.B) {
		for range b.N {
			for p := range g.C {
				xp, yp := x[p*g.H*g.W:(p+1)*g.H*g.W], y[p*g.OH*g.OW:(p+1)*g.OH*g.OW]
				for oh := range g.OH {
					for ow := range g.OW {
						yp[oh*g.OW+ow] = xp[maxPoolArg(xp, g, oh, ow)]
					}
				}
			}
		}
	})
}

// TestSum32: sum32 (GlobalAvgPoolFwd's row sums) adds every element once,
// whatever the length's remainder mod 8: exactly on small integers, and
// within 1e-6 of Σ|x| of the float64 sum on random values.
func TestSum32(t *testing.T) {
	r := newTestRand(8)
	for n := 0; n <= 67; n++ {
		x := make([]float32, n)
		want := 0
		for i := range x {
			x[i] = float32(i%7 - 3)
			want += i%7 - 3
		}
		if got := sum32(x); got != float32(want) {
			t.Fatalf("sum32 of %d small integers = %v, want %d", n, got, want)
		}
		x = randSlice(r, n, 1)
		var s, abs float64
		for _, v := range x {
			s += float64(v)
			abs += math.Abs(float64(v))
		}
		if got := float64(sum32(x)); math.Abs(got-s) > 1e-6*max(abs, 1) {
			t.Fatalf("sum32 of %d values = %v, float64 sum %v", n, got, s)
		}
	}
}

// TestGlobalAvgPoolPlaneMeans: GlobalAvgPoolFwd on every GEMM path and on
// 1 and 2 threads adds every element of each plane once, whatever the
// plane's length mod 64 and 16: exactly on small integers (times the
// mean's scale), and within 1e-6 of Σ|x| of the float64 mean on random
// values; a NaN reaches its plane's mean only; nothing is written past y.
func TestGlobalAvgPoolPlaneMeans(t *testing.T) {
	defer SetGemmPath("")
	defer SetThreads(Threads())
	r := newTestRand(9)
	spatials := []int{196, 3136}
	for n := 1; n <= 140; n += 3 {
		spatials = append(spatials, n)
	}
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			for _, sp := range spatials {
				const n, c = 2, 3
				x := guardedFloats(t, n*c*sp)
				for i := range x {
					x[i] = float32(i%7 - 3)
				}
				y := make([]float32, n*c+1)
				y[n*c] = 42
				GlobalAvgPoolFwd(x, y, n, c, sp)
				for p := range n * c {
					want := 0
					for i := p * sp; i < (p+1)*sp; i++ {
						want += i%7 - 3
					}
					if y[p] != float32(want)*(1/float32(sp)) {
						t.Fatalf("%s %d threads, %d positions: plane %d of small integers = %v, want %v", path, threads, sp, p, y[p], float32(want)/float32(sp))
					}
				}
				copy(x, randSlice(r, len(x), 1))
				x[len(x)-1] = float32(math.NaN())
				GlobalAvgPoolFwd(x, y, n, c, sp)
				for p := range n * c {
					var s, abs float64
					for _, v := range x[p*sp : (p+1)*sp] {
						s += float64(v)
						abs += math.Abs(float64(v))
					}
					if p == n*c-1 {
						if !math.IsNaN(float64(y[p])) {
							t.Fatalf("%s, %d positions: the last plane's mean %v, want NaN", path, sp, y[p])
						}
						continue
					}
					if got := float64(y[p]) * float64(sp); math.Abs(got-s) > 1e-6*max(abs, 1) {
						t.Fatalf("%s %d threads, %d positions: plane %d sum %v, float64 sum %v", path, threads, sp, p, got, s)
					}
				}
				if y[n*c] != 42 {
					t.Fatalf("%s, %d positions: wrote past y", path, sp)
				}
			}
		}
	}
}

// TestAvgPoolInside: where every window lies inside the input
// (avgPoolInside) the average pool's forward gives, bit for bit, the sums
// of its general loop (from zero, row by row of taps) times 1/(KH·KW), and
// the float64 reference's values: 2×2 stride 2 on even and odd sizes
// (DenseNet's transitions, a last row and column in no window), 3×3
// stride 1, dilated, a 1×1 window, batches split over threads; geometries
// with padding or a window past the edge are not taken.
func TestAvgPoolInside(t *testing.T) {
	cases := []Conv{
		convCase(2, 3, 8, 8, 3, 2, 2, 2, 0, 1, 1),
		convCase(1, 5, 7, 9, 5, 2, 2, 2, 0, 1, 1),
		convCase(1, 2, 6, 5, 2, 3, 3, 1, 0, 1, 1),
		convCase(3, 2, 11, 10, 2, 3, 3, 2, 0, 2, 1),
		convCase(1, 4, 5, 5, 4, 1, 1, 2, 0, 1, 1),
	}
	for _, g := range cases {
		if !avgPoolInside(g.norm()) {
			t.Fatalf("%+v: every window lies inside, but avgPoolInside says not", g)
		}
	}
	for _, g := range []Conv{convCase(1, 1, 6, 6, 1, 3, 3, 2, 1, 1, 1), {N: 1, C: 1, H: 5, W: 7, OC: 1, OH: 3, OW: 4, KH: 2, KW: 2, SH: 2, SW: 2}} {
		if avgPoolInside(g.norm()) {
			t.Fatalf("%+v: padded or ceil, but avgPoolInside takes it", g)
		}
	}
	forEachPathAndThreads(t, func(t *testing.T) {
		r := newTestRand(31)
		for _, g := range cases {
			g = g.norm()
			x := randSlice(r, g.N*g.C*g.H*g.W, 1)
			y := randSlice(r, g.N*g.C*g.OH*g.OW, 100)
			AvgPool2DFwd(x, y, g)
			want := make([]float32, len(y))
			for p := 0; p < g.N*g.C; p++ {
				for oh := 0; oh < g.OH; oh++ {
					for ow := 0; ow < g.OW; ow++ {
						var s float32
						for kh := 0; kh < g.KH; kh++ {
							for kw := 0; kw < g.KW; kw++ {
								s += x[p*g.H*g.W+(oh*g.SH+kh*g.DH)*g.W+ow*g.SW+kw*g.DW]
							}
						}
						want[(p*g.OH+oh)*g.OW+ow] = s * (1 / float32(g.KH*g.KW))
					}
				}
			}
			if msg := closeTo(y, want, 0); msg != "" {
				t.Fatalf("%+v: %s", g, msg)
			}
			if msg := closeTo(y, poolRef(x, g, false), 1e-6); msg != "" {
				t.Fatalf("%+v against the float64 reference: %s", g, msg)
			}
		}
	})
}
