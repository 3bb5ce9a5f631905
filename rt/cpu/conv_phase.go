package cpu

import "fmt"

// This file holds the phase method: a strided convolution computed as a
// stride-1 direct convolution (conv_direct.go) over the stride phases of
// its input. With strides (SH, SW), phase (a, b) of a zero-padded input
// plane is the plane of its pixels (SH·i + a, SW·j + b), and
//
//	y[oh][ow] = Σ_c Σ_kh Σ_kw w[c][kh][kw] · xpad[SH·oh + kh][SW·ow + kw]
//	          = Σ_(c,a,b) Σ_u Σ_v w[c][SH·u + a][SW·v + b] · P_(c,a,b)[oh + u][ow + v]
//
// writing kh = SH·u + a and kw = SW·v + b: a stride-1 convolution without
// padding of the SH·SW·C phase planes P with filters of ⌈KH/SH⌉×⌈KW/SW⌉
// taps, those past the filter's edge zero. The zeros cost products: a
// 7×7 stride-2 filter becomes 4×4 taps over 4 phases, 64 products where
// im2col does 49 (1.31 times), a 3×3 one 16 for 9 (1.78). It pays where
// the direct kernel's rate makes up for them and im2col's gathering is
// dear: ResNet's stem (3 channels, 7×7, stride 2), whose im2col matrix has
// 147 rows gathered a value at a time for 64 output channels
// (BenchmarkConvPhaseStem). planner/target.go's cpuConv says where.

// phaseOK reports whether the phase method takes normalised g: a strided,
// undilated, ungrouped convolution.
func phaseOK(g Conv) bool {
	return (g.SH > 1 || g.SW > 1) && g.DH == 1 && g.DW == 1 && g.Groups == 1
}

// phaseConv returns the stride-1 convolution over the phase planes of
// normalised g: C·SH·SW input channels of OH+⌈KH/SH⌉−1 rows and
// OW+⌈KW/SW⌉−1 columns, ⌈KH/SH⌉×⌈KW/SW⌉ taps, no padding.
func phaseConv(g Conv) Conv {
	ku, kv := (g.KH+g.SH-1)/g.SH, (g.KW+g.SW-1)/g.SW
	return Conv{N: g.N, C: g.C * g.SH * g.SW, H: g.OH + ku - 1, W: g.OW + kv - 1,
		OC: g.OC, OH: g.OH, OW: g.OW, KH: ku, KW: kv, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1}
}

// Conv2DPhaseFwd computes y = act(conv(x, w) + b) for a strided,
// undilated, ungrouped convolution by the phase method (above); it panics
// for other geometry (the planner chooses it only then). Its work buffers
// hold the phase planes of the whole batch (4·N·C·SH·SW bytes a phase
// pixel) and the rearranged filters, kept between calls.
func Conv2DPhaseFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !phaseOK(g) {
		panic(fmt.Sprintf("cpu.Conv2DPhaseFwd: stride %dx%d, dilation %dx%d, %d groups; the phase method needs a stride above 1, no dilation and one group",
			g.SH, g.SW, g.DH, g.DW, g.Groups))
	}
	p := phaseConv(g)
	ws := convWorkers.Get()
	defer convWorkers.Put(ws)
	ws.a = grow(ws.a, p.OC*p.C*p.KH*p.KW)
	phaseFilters(w, ws.a, g, p)
	plane := p.H * p.W
	ws.panel = grow(ws.panel, g.N*p.C*plane)
	xp := ws.panel
	ParallelFor(g.N*g.C, 1, func(lo, hi int) {
		for nc := lo; nc < hi; nc++ {
			phasePlanes(x[nc*g.H*g.W:(nc+1)*g.H*g.W], xp[nc*g.SH*g.SW*plane:(nc+1)*g.SH*g.SW*plane], g, p)
		}
	})
	convDirectForward(xp, ws.a, b, y, p, act, alpha, convDirectFor(activeGemmPath.Load()))
}

// phaseFilters writes the filters of the phase convolution p of g:
// wp[oc][(c·SH + a)·SW + b][u][v] = w[oc][c][SH·u + a][SW·v + b], zero past
// the filter's edge.
func phaseFilters(w, wp []float32, g, p Conv) {
	for oc := 0; oc < g.OC; oc++ {
		for c := 0; c < g.C; c++ {
			src := w[(oc*g.C+c)*g.KH*g.KW : (oc*g.C+c+1)*g.KH*g.KW]
			for a := 0; a < g.SH; a++ {
				for b := 0; b < g.SW; b++ {
					dst := wp[((oc*p.C+(c*g.SH+a)*g.SW+b)*p.KH)*p.KW:][:p.KH*p.KW]
					for u := 0; u < p.KH; u++ {
						for v := 0; v < p.KW; v++ {
							kh, kw := g.SH*u+a, g.SW*v+b
							dst[u*p.KW+v] = 0
							if kh < g.KH && kw < g.KW {
								dst[u*p.KW+v] = src[kh*g.KW+kw]
							}
						}
					}
				}
			}
		}
	}
}

// phasePlanes writes the SH·SW phase planes of one input plane [H,W] of
// g, each p.H×p.W: plane (a, b) holds the padded input's pixel (SH·i + a,
// SW·j + b) at (i, j), zero where that lies in the padding.
func phasePlanes(x, xp []float32, g, p Conv) {
	for a := 0; a < g.SH; a++ {
		for b := 0; b < g.SW; b++ {
			ph := xp[(a*g.SW+b)*p.H*p.W : (a*g.SW+b+1)*p.H*p.W]
			// The columns j whose input column SW·j + b − PW is inside.
			j0 := min(p.W, max(0, (g.PW-b+g.SW-1)/g.SW))
			j1 := max(j0, min(p.W, (g.W+g.PW-b+g.SW-1)/g.SW))
			for i := 0; i < p.H; i++ {
				row := ph[i*p.W : (i+1)*p.W]
				ih := g.SH*i + a - g.PH
				if ih < 0 || ih >= g.H || j0 == j1 {
					clear(row)
					continue
				}
				clear(row[:j0])
				clear(row[j1:])
				src := x[ih*g.W : (ih+1)*g.W]
				c := g.SW*j0 + b - g.PW
				for j := j0; j < j1; j, c = j+1, c+g.SW {
					row[j] = src[c]
				}
			}
		}
	}
}
