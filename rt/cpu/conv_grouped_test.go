package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestConvGroupedFwd runs the grouped method on every path against the
// plain convolution: groups of 1 to 16 input channels and 1 to 3 output
// channels each (a depthwise multiplier, and more outputs than inputs),
// one group of 1 to 4 input channels (a stem, its output channels shared
// out among tasks on two threads, an odd number of them),
// strides 1, 2 and 2×1, padding past the filter's reach, dilation, rows
// narrower and wider than rowsMinOW, every fused activation, with and
// without bias, on one and two threads. Every output element must be
// written (y starts as NaN), and x and w end at a guard page.
func TestConvGroupedFwd(t *testing.T) {
	defer SetGemmPath("")
	defer SetThreads(Threads())
	r := newTestRand(41)
	geoms := []Conv{
		convCase(2, 16, 9, 11, 16, 3, 3, 1, 1, 1, 2),
		convCase(1, 24, 13, 13, 24, 3, 3, 2, 1, 1, 3),
		convCase(3, 6, 6, 5, 12, 3, 3, 1, 2, 1, 3),
		convCase(1, 4, 10, 12, 12, 3, 3, 1, 2, 2, 4),
		convCase(1, 32, 8, 8, 32, 5, 5, 2, 2, 1, 2),
		{N: 2, C: 10, H: 7, W: 17, OC: 5, OH: 7, OW: 9, KH: 3, KW: 3, SH: 1, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 5},
		convCase(1, 3, 37, 35, 13, 3, 3, 2, 1, 1, 1),
		convCase(1, 3, 11, 9, 5, 3, 3, 2, 1, 1, 1),
		convCase(2, 4, 12, 13, 7, 5, 5, 2, 2, 1, 1),
		convCase(1, 1, 23, 21, 3, 3, 3, 1, 1, 1, 1),
		convCase(1, 6, 4, 9, 14, 3, 3, 1, 1, 1, 2),   // 7 output channels a group: filter blocks and a remainder
		convCase(1, 6, 3, 50, 14, 3, 3, 1, 1, 1, 2),  // rows of 4 vectors, the last partial
		convCase(1, 4, 6, 223, 22, 3, 3, 2, 1, 1, 2), // rows of 7 vectors at stride 2
		convCase(1, 2, 3, 128, 7, 3, 3, 1, 1, 1, 1),  // rows of 8 whole vectors
		convCase(1, 2, 3, 130, 5, 3, 3, 1, 1, 1, 1),  // rows past 8 vectors: a filter at a time
	}
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for _, g := range geoms {
			if !groupedOK(g.norm()) {
				t.Fatalf("%+v: not a grouped geometry", g)
			}
			x := guardedFloats(t, g.N*g.C*g.H*g.W)
			copy(x, randSlice(r, len(x), 1))
			w := guardedFloats(t, g.OC*g.C/g.Groups*g.KH*g.KW)
			copy(w, randSlice(r, len(w), 0.5))
			b := randSlice(r, g.OC, 1)
			for _, threads := range []int{1, 2} {
				SetThreads(threads)
				for _, bias := range [][]float32{nil, b} {
					for _, a := range allActs {
						y := make([]float32, g.N*g.OC*g.OH*g.OW)
						for i := range y {
							y[i] = float32(math.NaN())
						}
						Conv2DGroupedFwd(x, w, bias, y, g, a.act, 0.1)
						if msg := closeTo(y, convRef(x, w, bias, g, a.act, 0.1), 1e-5); msg != "" {
							t.Errorf("%s %d threads %+v bias %v act %s: %s", path, threads, g, bias != nil, a.name, msg)
						}
					}
				}
			}
		}
	}
}

// TestConvGroupedRefusesOtherGeometry: one group of more than
// groupedStemChannels channels, a depthwise layer and groups of more than
// groupedMaxChannels channels panic with the reason.
func TestConvGroupedRefusesOtherGeometry(t *testing.T) {
	for _, g := range []Conv{
		convCase(1, 8, 5, 5, 8, 3, 3, 1, 1, 1, 1),
		convCase(1, 5, 5, 5, 8, 3, 3, 2, 1, 1, 1),
		convCase(1, 8, 5, 5, 8, 3, 3, 1, 1, 1, 8),
		convCase(1, 34, 5, 5, 34, 3, 3, 1, 1, 1, 2),
	} {
		func() {
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.Contains(msg, "the grouped method needs") {
					t.Errorf("%+v: panic %q, want the grouped method's refusal", g, msg)
				}
			}()
			x := make([]float32, g.N*g.C*g.H*g.W)
			w := make([]float32, g.OC*g.C/g.Groups*g.KH*g.KW)
			Conv2DGroupedFwd(x, w, nil, make([]float32, g.N*g.OC*g.OH*g.OW), g, ActNone, 0)
		}()
	}
}

// BenchmarkConvGrouped times regnet_y_400mf's grouped 3×3 layers (8
// input channels a group, batch 1) by the grouped method, the direct one
// (stride 1) and im2col + GEMM, forward, on one thread (-convthreads), in
// CPU time: the numbers behind planner.cpuConv's choice of the grouped
// method.
func BenchmarkConvGrouped(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(*benchConvThreads)
	r := newTestRand(7)
	for _, c := range []struct {
		name string
		g    Conv
	}{
		{"stem 3 224 s2", convCase(1, 3, 224, 224, 32, 3, 3, 2, 1, 1, 1)},
		{"stem 3 224 s2 b8", convCase(8, 3, 224, 224, 32, 3, 3, 2, 1, 1, 1)},
		{"rgy s2 48 112 g6", convCase(1, 48, 112, 112, 48, 3, 3, 2, 1, 1, 6)},
		{"rgy 104 28 g13", convCase(1, 104, 28, 28, 104, 3, 3, 1, 1, 1, 13)},
		{"rgy s2 104 56 g13", convCase(1, 104, 56, 56, 104, 3, 3, 2, 1, 1, 13)},
		{"rgy 208 14 g26", convCase(1, 208, 14, 14, 208, 3, 3, 1, 1, 1, 26)},
		{"rgy s2 440 14 g55", convCase(1, 440, 14, 14, 440, 3, 3, 2, 1, 1, 55)},
		{"rgy 440 7 g55", convCase(1, 440, 7, 7, 440, 3, 3, 1, 1, 1, 55)},
	} {
		g := c.g
		x := randSlice(r, g.N*g.C*g.H*g.W, 1)
		w := randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 1)
		bias := randSlice(r, g.OC, 1)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		methods := []struct {
			name string
			fwd  func(x, w, b, y []float32, g Conv, act Act, alpha float32)
		}{{"grouped", Conv2DGroupedFwd}, {"im2col", Conv2DIm2colFwd}}
		if convDirectOK(g.norm()) {
			methods = append(methods, struct {
				name string
				fwd  func(x, w, b, y []float32, g Conv, act Act, alpha float32)
			}{"direct", Conv2DDirectFwd})
		}
		if phaseOK(g.norm()) {
			methods = append(methods, struct {
				name string
				fwd  func(x, w, b, y []float32, g Conv, act Act, alpha float32)
			}{"phase", Conv2DPhaseFwd})
		}
		for _, m := range methods {
			b.Run(c.name+"/"+m.name, func(b *testing.B) {
				start := processCPU()
				for b.Loop() {
					m.fwd(x, w, bias, y, g, ActReLU, 0)
				}
				reportCPUTime(b, start)
			})
		}
	}
}

// TestGroupedFilterRowsMatchRows: on every path that has it, filterRows
// of r filters gives the bits of the depthwise row kernel run once a
// filter, for rows of 1 to 8 vectors (ow a whole number of vectors and
// not), every filter count up to maxFilters, 1 and 3 rows, with no
// activation, ReLU and ReLU6; nothing past the planes' outputs is
// written.
func TestGroupedFilterRowsMatchRows(t *testing.T) {
	r := newTestRand(43)
	for _, path := range gemmPathsSupported {
		k := depthwiseFor(path)
		if k.filterRows == nil {
			continue
		}
		if k.maxFilters(129) != 0 {
			t.Errorf("%s: maxFilters(129) = %d, want 0 (rows of 9 vectors)", path.name, k.maxFilters(129))
		}
		for v := 1; v <= 8; v++ {
			for _, ow := range []int{16*v - 3, 16 * v} {
				if ow < 1 {
					continue
				}
				wq := ow + 18
				taps := 5
				offs := []int{0, 1, 2, wq + 1, 2*wq + 17}
				for _, rows := range []int{1, 3} {
					x := randSlice(r, (rows+3)*wq+16*v, 2)
					ohw := rows * ow
					for nf := 1; nf <= k.maxFilters(ow); nf++ {
						w := randSlice(r, nf*taps, 1)
						bias := randSlice(r, nf, 1)
						wi := make([]float32, taps*nf)
						for f := range nf {
							for tp := range taps {
								wi[tp*nf+f] = w[f*taps+tp]
							}
						}
						for _, relu := range []int{0, 1, 2} {
							got := make([]float32, nf*ohw+1)
							got[nf*ohw] = 42
							k.filterRows(nf, taps, &offs[0], &wi[0], &x[0], wq, &got[0], ohw, ow, rows, &bias[0], relu)
							for f := range nf {
								want := make([]float32, ohw)
								k.rows(taps, &offs[0], &w[f*taps], &x[0], wq, &want[0], ow, rows, bias[f], relu)
								for i, wv := range want {
									if math.Float32bits(got[f*ohw+i]) != math.Float32bits(wv) {
										t.Fatalf("%s ow %d rows %d filters %d relu %d: filter %d output %d = %v, the row kernel's %v", path.name, ow, rows, nf, relu, f, i, got[f*ohw+i], wv)
									}
								}
							}
							if got[nf*ohw] != 42 {
								t.Fatalf("%s ow %d rows %d filters %d: wrote past the planes", path.name, ow, rows, nf)
							}
						}
					}
				}
			}
		}
	}
}
