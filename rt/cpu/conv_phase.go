package cpu

import "fmt"

// This file holds the phase method: a strided convolution computed by the
// direct kernels (conv_direct.go) over the stride phases of its input.
// With strides (SH, SW), phase (a, b) of a zero-padded input plane is the
// plane of its pixels (SH·i + a, SW·j + b), and
//
//	y[oh][ow] = Σ_c Σ_kh Σ_kw w[c][kh][kw] · xpad[SH·oh + kh][SW·ow + kw]
//	          = Σ_c Σ_kh Σ_kw w[c][kh][kw] · P_(c, kh mod SH, kw mod SW)[oh + ⌊kh/SH⌋][ow + ⌊kw/SW⌋]
//
// so every tap is a phase plane shifted by a constant, as in the direct
// method's flat layout: the phase planes are written once, each in a flat
// plane of rows ⌈(W+2·PW)/SW⌉ wide, and the direct kernels run the
// filters' taps where they are, each tap's offset naming its phase plane
// and shift. The phase method once ran the stride-1 convolution of all
// SH·SW·C phase planes with ⌈KH/SH⌉×⌈KW/SW⌉ taps each, those past the
// filter's edge zero: 64 products where im2col does 49 for a 7×7 stride-2
// filter, 16 for 9 for a 3×3 one; now it does 49 and 9. It pays where
// im2col's gathering is dear: ResNet's stem (3 channels, 7×7, stride 2),
// whose im2col matrix has 147 rows gathered a value at a time for 64
// output channels (BenchmarkConvPhaseStem), and the 3×3 and 1×1 stride-2
// layers at batch 1 (BenchmarkConvBatch1). planner/target.go's cpuConv
// says where.

// phaseOK reports whether the phase method takes normalised g: a strided,
// undilated, ungrouped convolution.
func phaseOK(g Conv) bool {
	return (g.SH > 1 || g.SW > 1) && g.DH == 1 && g.DW == 1 && g.Groups == 1
}

// phaseConv returns the stride-1 convolution over the phase planes of
// normalised g: C·SH·SW input channels of OH+⌈KH/SH⌉−1 rows and
// OW+⌈KW/SW⌉−1 columns, ⌈KH/SH⌉×⌈KW/SW⌉ taps, no padding. Its flat
// layout (newConvDirectGeom) is the phase planes'.
func phaseConv(g Conv) Conv {
	ku, kv := (g.KH+g.SH-1)/g.SH, (g.KW+g.SW-1)/g.SW
	return Conv{N: g.N, C: g.C * g.SH * g.SW, H: g.OH + ku - 1, W: g.OW + kv - 1,
		OC: g.OC, OH: g.OH, OW: g.OW, KH: ku, KW: kv, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1}
}

// Conv2DPhaseFwd computes y = act(conv(x, w) + b) for a strided,
// undilated, ungrouped convolution by the phase method (above); it panics
// for other geometry (the planner chooses it only then). Its work buffer
// holds the phase planes of the whole batch (4·N·C·SH·SW bytes a phase
// pixel, less the phases no tap reads), kept between calls.
func Conv2DPhaseFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !phaseOK(g) {
		panic(fmt.Sprintf("cpu.Conv2DPhaseFwd: stride %dx%d, dilation %dx%d, %d groups; the phase method needs a stride above 1, no dilation and one group",
			g.SH, g.SW, g.DH, g.DW, g.Groups))
	}
	if g.KH == 1 && g.KW == 1 && g.PH == 0 && g.PW == 0 {
		phasePointwise(x, w, b, y, g, act, alpha)
		return
	}
	k := convDirectFor(activeGemmPath.Load())
	p := phaseConv(g)
	d := newConvDirectGeom(p, k)
	taps, ohw, phases := g.colRows(), g.OH*g.OW, g.SH*g.SW
	lead := convWorkers.Get()
	lead.offs = growInts(lead.offs, taps)
	offs := lead.offs
	for c, t := 0, 0; c < g.C; c++ {
		for kh := 0; kh < g.KH; kh++ {
			for kw := 0; kw < g.KW; kw++ {
				offs[t] = ((c*g.SH+kh%g.SH)*g.SW+kw%g.SW)*d.xlen + kh/g.SH*d.wp + kw/g.SW
				t++
			}
		}
	}
	lead.panel = grow(lead.panel, g.N*p.C*d.xlen)
	xp := lead.panel
	ParallelFor(g.N*g.C, 1, func(lo, hi int) {
		for nc := lo; nc < hi; nc++ {
			phasePlanes(x[nc*g.H*g.W:(nc+1)*g.H*g.W], xp[nc*phases*d.xlen:(nc+1)*phases*d.xlen], g, p, d.xlen)
		}
	})
	// The kernels read the filters in place, fwdOC rows of taps; the last
	// block, where OC is not a multiple of fwdOC, reads a copy whose rows
	// past OC are zero.
	ocp := gemmRoundUp(g.OC, k.fwdOC)
	last := ocp - k.fwdOC
	if ocp > g.OC {
		lead.a = grow(lead.a, k.fwdOC*taps)
		clear(lead.a)
		copy(lead.a, w[last*taps:g.OC*taps])
	}
	// With fewer images than threads (batch-1 inference) each image's
	// blocks of output channels are split over the threads too.
	blocks, splits := ocp/k.fwdOC, 1
	if g.N < Threads() {
		splits = max(1, min(Threads()/g.N, blocks))
	}
	workers := convParallel(g.N*splits, func(cw *convWorker) {
		cw.cols = grow(cw.cols, ocp*d.n)
	}, func(cw *convWorker, task int) {
		n, s := task/splits, task%splits
		ob0, ob1 := blocks*s/splits*k.fwdOC, blocks*(s+1)/splits*k.fwdOC
		planes, yf := xp[n*p.C*d.xlen:(n+1)*p.C*d.xlen], cw.cols
		for ob := ob0; ob < ob1; ob += k.fwdOC {
			if ob+4 <= min(ob1, g.OC) && k.forwardPlane4(taps, offs, w[ob*taps:(ob+4)*taps], planes, yf[ob*d.n:], d.n, g.OH*d.wp) {
				ob += 4 - k.fwdOC
				continue
			}
			wb := lead.a
			if ob != last || ocp == g.OC {
				wb = w[ob*taps : (ob+k.fwdOC)*taps]
			}
			k.forwardPlane(taps, offs, wb, planes, yf[ob*d.n:], taps, d.n)
		}
		for oc := ob0; oc < min(ob1, g.OC); oc++ {
			bv := float32(0)
			if b != nil {
				bv = b[oc]
			}
			k.convDirectStore(yf[oc*d.n:], y[(n*g.OC+oc)*ohw:(n*g.OC+oc+1)*ohw], g, d.wp, bv, act, alpha)
		}
	})
	releaseConvWorkers(workers)
	convWorkers.Put(lead)
}

// phasePointwise is Conv2DPhaseFwd for a 1×1 filter without padding,
// which reads phase (0, 0) alone: that phase of each image, the pixels
// (SH·i, SW·j), gathered into a worker's buffer, then the pointwise
// method's matrix products over it. It takes every such layer: batch 1
// (BenchmarkConvBatch1, one thread, CPU ms, 2 runs, against the direct
// kernels over the phase), regnet_y_400mf's 32→48 at 112² 0.16 against
// 0.19, 48→104 at 56² 0.10 against 0.11, 104→208 at 28² 0.10 against
// 0.12, 208→440 at 14² 0.12 against 0.14; ResNet's 64→128 at 56² 0.15
// against 0.18, 256→512 at 56² 2.08-2.13 against 2.07-2.12,
// 1024→2048 at 14² 3.16-3.23 against 3.81-3.84. (It once took only 256
// input channels and 196 outputs or more, before the pointwise method's
// products went in cache-sized blocks.)
func phasePointwise(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	ohw := g.OH * g.OW
	ws := convWorkers.Get()
	ws.panel = grow(ws.panel, g.N*g.C*ohw)
	sub := ws.panel
	// At stride 2 across, the depthwise split's row deal gathers the
	// even columns in vector registers (the odd ones go to a worker's
	// scratch), where the loop below went a pixel at a time (half of
	// regnet_y_400mf's 32→48 layer at 112², batch 1).
	dk := depthwiseFor(activeGemmPath.Load())
	pairs := min(g.OW, g.W/2)
	if g.SW == 2 && dk.dealRows != nil && pairs > 0 {
		ParallelFor(g.N*g.C, 1, func(lo, hi int) {
			cw := convWorkers.Get()
			cw.cols = grow(cw.cols, ohw)
			for nc := lo; nc < hi; nc++ {
				src, dst := x[nc*g.H*g.W:(nc+1)*g.H*g.W], sub[nc*ohw:(nc+1)*ohw]
				dk.dealRows(src, dst, cw.cols, g.OH, pairs, g.SH*g.W, g.OW)
				for oh := 0; oh < g.OH; oh++ {
					for ow := pairs; ow < g.OW; ow++ { // an odd width's last column
						dst[oh*g.OW+ow] = src[oh*g.SH*g.W+2*ow]
					}
				}
			}
			convWorkers.Put(cw)
		})
		Conv2DPointwiseFwd(sub, w, b, y, Conv{N: g.N, C: g.C, H: g.OH, W: g.OW, OC: g.OC, OH: g.OH, OW: g.OW,
			KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1}, act, alpha)
		convWorkers.Put(ws)
		return
	}
	ParallelFor(g.N*g.C, 1, func(lo, hi int) {
		for nc := lo; nc < hi; nc++ {
			src, dst := x[nc*g.H*g.W:(nc+1)*g.H*g.W], sub[nc*ohw:(nc+1)*ohw]
			for oh := 0; oh < g.OH; oh++ {
				row, d := src[oh*g.SH*g.W:], dst[oh*g.OW:(oh+1)*g.OW]
				for ow := range d {
					d[ow] = row[ow*g.SW]
				}
			}
		}
	})
	Conv2DPointwiseFwd(sub, w, b, y, Conv{N: g.N, C: g.C, H: g.OH, W: g.OW, OC: g.OC, OH: g.OH, OW: g.OW,
		KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1}, act, alpha)
	convWorkers.Put(ws)
}

// phasePlanes writes the SH·SW phase planes of one input plane [H,W] of
// g, each p.H rows of p.W in a flat plane of xlen floats: plane (a, b)
// holds the padded input's pixel (SH·i + a, SW·j + b) at (i, j), zero where
// that lies in the padding and past the rows. A phase that no tap reads (a
// ≥ KH or b ≥ KW: a 1×1 stride-2 filter reads one of four) is left as it
// is.
func phasePlanes(x, xp []float32, g, p Conv, xlen int) {
	for a := 0; a < min(g.SH, g.KH); a++ {
		for b := 0; b < min(g.SW, g.KW); b++ {
			ph := xp[(a*g.SW+b)*xlen : (a*g.SW+b+1)*xlen]
			clear(ph[p.H*p.W:])
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
