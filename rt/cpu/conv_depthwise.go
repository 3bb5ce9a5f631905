package cpu

//go:generate go run conv_depthwise_gen.go

import (
	"fmt"
	"unsafe"
)

// The depthwise method: a convolution whose every group is one input
// channel and one output channel (Groups = C = OC, MobileNet's and
// EfficientNet's 3×3 and 5×5 layers) convolves each plane with its own
// filter. im2col + GEMM runs that as a product of one filter row by KH·KW
// rows of gathered columns a channel, a product with almost no arithmetic
// that fills one row of a register tile; the direct method computes two
// output channels at a time from one shared input, one of them wasted.
//
// Here each plane is rearranged once into zero-padded phase planes: for
// stride SH×SW, phase (qr, qc) holds the padded rows qr, qr+SH, … and
// columns qc, qc+SW, …, wq floats a row. Output (oh, ow) then lies at the
// flat position j = oh·wq + ow, and tap (kh, kw) reads the flat position
// j + off_t of one phase plane, off_t a constant: every tap is a shifted
// contiguous vector at any stride and dilation. The kernel keeps a block
// of up to 128 flat outputs in vector registers while the taps stream
// through them (a broadcast weight and one fused multiply-add per vector
// a tap), and writes the block once; positions with ow ≥ OW are computed
// and dropped. With AVX-512 a kernel walks the output rows instead and
// writes each straight into y (its last vector masked), bias and ReLU
// applied in registers, where rows are wide enough to fill the lanes.

// depthwiseKernels is one instruction set's depthwise kernel.
type depthwiseKernels struct {
	// fwd sets y[j] = Σ_t w[t]·x[offs[t]+j] for j < n, n a multiple of
	// lanes, the taps summed in order.
	fwd   func(taps int, offs *int, w, x, y *float32, n int)
	lanes int
	// rows, when set, writes output rows straight into y: for r < rows,
	// y[r·ow+j] = bias + Σ_t w[t]·x[r·wq+offs[t]+j] for j < ow, then
	// ReLU when relu is 1 and ReLU6 (applyAct's bits) when it is 2
	// (rowsRelu), reading x up to the end of the
	// vector of lanes that holds each row's last output. It replaces fwd
	// and the store of its flat outputs where rows are at least
	// rowsMinOW wide (narrower ones would leave most lanes empty).
	rows func(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)
	// dw, for each group q < groups of 4 taps, sets acc[(4q+k)·lanes+l]
	// to the lane-wise partial sum Σ_i dy[i·lanes+l]·x[offs[4q+k]+
	// i·lanes+l] over i < n/lanes (n a multiple of lanes): the weight
	// gradient's dot products, summed across lanes by the caller.
	dw func(groups int, offs *int, x, dy *float32, n int, acc *float32)
	// deal, when set, is dealPairsGo in vector registers: split2's
	// scatter of a row's pixel pairs to its two column phases.
	deal func(src, even, odd []float32)
	// dealRows, when set, is dealRowsGo in vector registers: deal over
	// every row of a row phase in one call.
	dealRows func(src, even, odd []float32, rows, pairs, srcStride, dstStride int)
	// copyRows, when set, is copyRowsGo in vector registers: splitAny's
	// copies of the rows of a stride-1 plane in one call.
	copyRows func(src, dst []float32, rows, n, srcStride, dstStride int)
	// filterRows, when set, is rows for r filters over the same input
	// rows (the grouped method's output channels of one group): for f <
	// r, the plane at y + f·ldy gets filter f, whose tap t weighs
	// w[t·r+f], started at bias[f]. maxFilters(ow) is the most filters it
	// takes for rows ow wide (0: none).
	filterRows func(r, taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)
	maxFilters func(ow int) int
	// rows3x3, when set, is rows for a 3×3 filter of stride 1 undilated
	// (the taps at kh·wq + kw) and rows of at most 128 outputs, the same
	// bits: several output rows share the loads of their input rows.
	rows3x3 func(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)
}

// dealRowsGo sets even[r·dstStride+j] = src[r·srcStride+2j] and
// odd[r·dstStride+j] = src[r·srcStride+2j+1] for r < rows and j < pairs.
func dealRowsGo(deal func(src, even, odd []float32), src, even, odd []float32, rows, pairs, srcStride, dstStride int) {
	for r := range rows {
		deal(src[r*srcStride:r*srcStride+2*pairs], even[r*dstStride:r*dstStride+pairs], odd[r*dstStride:r*dstStride+pairs])
	}
}

// copyRowsGo sets dst[r·dstStride+j] = src[r·srcStride+j] for r < rows
// and j < n.
func copyRowsGo(src, dst []float32, rows, n, srcStride, dstStride int) {
	for r := range rows {
		copy(dst[r*dstStride:r*dstStride+n], src[r*srcStride:r*srcStride+n])
	}
}

// dealPairsGo sets even[j] = src[2j] and odd[j] = src[2j+1] for j <
// len(even) (odd as long, src twice as long).
func dealPairsGo(src, even, odd []float32) {
	odd = odd[:len(even)]
	for j := range even {
		p := src[2*j : 2*j+2 : 2*j+2]
		even[j], odd[j] = p[0], p[1]
	}
}

// rowsRelu is the rows kernel's relu argument for act: 0 for none, 1
// for ReLU, 2 for ReLU6, and −1 for the activations it leaves to the
// caller (which applies act after it, over the rows it wrote).
func rowsRelu(act Act) int {
	switch act {
	case ActNone:
		return 0
	case ActReLU:
		return 1
	case ActReLU6:
		return 2
	}
	return -1
}

// rowsMinOW is the narrowest output row the rows kernel takes: a 7-wide
// row fills 7 of 16 lanes, where the flat outputs fill all but the
// padding's.
const rowsMinOW = 9

// depthwiseGo is the pure-Go kernel, which every GOARCH has.
var depthwiseGo = &depthwiseKernels{fwd: depthwiseFwdGo, lanes: 16, dw: depthwiseDWGo}

// depthwiseFor returns the depthwise kernel that goes with GEMM path p,
// so that forcing a path in tests forces the matching kernel.
func depthwiseFor(p *gemmPath) *depthwiseKernels {
	if k := archDepthwise(p.name); k != nil {
		return k
	}
	return depthwiseGo
}

// depthwiseFwdGo is depthwiseKernels.fwd in Go: the same sums in the same
// order, each product rounded before it is added (the assembly fuses the
// multiply and the add, so the two differ in the last bits).
func depthwiseFwdGo(taps int, offs *int, w, x, y *float32, n int) {
	os := unsafe.Slice(offs, taps)
	ws := unsafe.Slice(w, taps)
	ys := unsafe.Slice(y, n)
	var acc [16]float32
	for j0 := 0; j0 < n; j0 += 16 {
		acc = [16]float32{}
		for t, o := range os {
			xs := (*[16]float32)(unsafe.Add(unsafe.Pointer(x), (o+j0)*4))
			wt := ws[t]
			for i, v := range xs {
				acc[i] += wt * v
			}
		}
		copy(ys[j0:], acc[:min(16, n-j0)])
	}
}

// depthwiseDWGo is depthwiseKernels.dw in Go, in 16 lanes.
func depthwiseDWGo(groups int, offs *int, x, dy *float32, n int, acc *float32) {
	os := unsafe.Slice(offs, 4*groups)
	as := unsafe.Slice(acc, 4*groups*16)
	dys := unsafe.Slice(dy, n)
	for t, o := range os {
		xs := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(x), o*4)), n)
		var a [16]float32
		for i := 0; i < n; i += 16 {
			d, v := (*[16]float32)(dys[i:i+16]), (*[16]float32)(xs[i:i+16])
			for l := range a {
				a[l] += d[l] * v[l]
			}
		}
		copy(as[t*16:], a[:])
	}
}

// depthwiseOK reports whether normalised g is a depthwise convolution:
// one input and one output channel a group.
func depthwiseOK(g Conv) bool { return g.C > 0 && g.Groups == g.C && g.OC == g.C }

// depthwiseRefusal says why the depthwise method does not take g.
func depthwiseRefusal(fn string, g Conv) string {
	return fmt.Sprintf("cpu.%s: %d groups of %d input and %d output channels; the depthwise method needs one input and one output channel a group",
		fn, g.Groups, g.C, g.OC)
}

// depthwiseGeom is the phase-plane layout of one input plane.
type depthwiseGeom struct {
	wq, hq   int // a phase plane's row stride and rows
	planeLen int // wq·hq
	phases   int // SH·SW phase planes
	n        int // flat outputs computed, OH·wq rounded up to the kernel's lanes
	xlen     int // the planes and room for every shifted read of n outputs
	// deal is the kernel's deal, or dealPairsGo.
	deal func(src, even, odd []float32)
	// dealRows and copyRows are the kernel's, or nil for the Go loops.
	dealRows func(src, even, odd []float32, rows, pairs, srcStride, dstStride int)
	copyRows func(src, dst []float32, rows, n, srcStride, dstStride int)
	// plain3x3: the filter is 3×3 at stride 1 undilated, its taps at
	// kh·wq + kw (rows3x3's).
	plain3x3 bool
}

// newDepthwiseGeom lays out normalised g's planes for kernel k, and fills
// offs (KH·KW ints) with each tap's flat shift.
func newDepthwiseGeom(g Conv, k *depthwiseKernels, offs []int) depthwiseGeom {
	ceil := func(a, b int) int { return (a + b - 1) / b }
	reachH, reachW := (g.KH-1)*g.DH/g.SH, (g.KW-1)*g.DW/g.SW
	wq := max(ceil(g.W+2*g.PW, g.SW), g.OW+reachW)
	hq := max(ceil(g.H+2*g.PH, g.SH), g.OH+reachH)
	d := depthwiseGeom{wq: wq, hq: hq, planeLen: wq * hq, phases: g.SH * g.SW, deal: k.deal, dealRows: k.dealRows, copyRows: k.copyRows}
	if d.deal == nil {
		d.deal = dealPairsGo
	}
	d.n = gemmRoundUp(g.OH*wq, k.lanes)
	d.plain3x3 = g.KH == 3 && g.KW == 3 && g.SH == 1 && g.SW == 1 && g.DH == 1 && g.DW == 1
	maxOff := 0
	for kh := 0; kh < g.KH; kh++ {
		for kw := 0; kw < g.KW; kw++ {
			rh, rw := kh*g.DH, kw*g.DW
			o := ((rh%g.SH)*g.SW+rw%g.SW)*d.planeLen + rh/g.SH*wq + rw/g.SW
			offs[kh*g.KW+kw] = o
			maxOff = max(maxOff, o)
		}
	}
	d.xlen = max(d.phases*d.planeLen, maxOff+d.n, maxOff+(g.OH-1)*wq+gemmRoundUp(g.OW, k.lanes))
	return d
}

// split writes plane [H,W] into the interiors of the phase planes at
// the front of xp; their padding is left as it is (zero: the caller
// clears xp once per call), which halved the time of 14×14 planes.
func (d depthwiseGeom) split(plane, xp []float32, g Conv) {
	if g.SW == 2 {
		d.split2(plane, xp, g)
		return
	}
	d.splitAny(plane, xp, g)
}

// splitAny is split for any stride, a phase plane at a time.
func (d depthwiseGeom) splitAny(plane, xp []float32, g Conv) {
	for qr := 0; qr < g.SH; qr++ {
		// The phase rows i whose input row i·SH + qr − PH is inside.
		i0 := max(0, (g.PH-qr+g.SH-1)/g.SH)
		i1 := min(d.hq, (g.H+g.PH-qr+g.SH-1)/g.SH)
		for qc := 0; qc < g.SW; qc++ {
			ph := xp[(qr*g.SW+qc)*d.planeLen : (qr*g.SW+qc+1)*d.planeLen]
			// The phase columns j whose input column j·SW + qc − PW
			// is inside, and the first of those columns.
			j0 := max(0, (g.PW-qc+g.SW-1)/g.SW)
			j1 := min(d.wq, (g.W+g.PW-qc+g.SW-1)/g.SW)
			if j1 <= j0 {
				continue
			}
			c0 := j0*g.SW + qc - g.PW
			if g.SW == 1 && i1 > i0 {
				src := plane[(i0*g.SH+qr-g.PH)*g.W+c0:]
				if d.copyRows != nil {
					d.copyRows(src, ph[i0*d.wq+j0:], i1-i0, j1-j0, g.SH*g.W, d.wq)
				} else {
					copyRowsGo(src, ph[i0*d.wq+j0:], i1-i0, j1-j0, g.SH*g.W, d.wq)
				}
				continue
			}
			for i := i0; i < i1; i++ {
				src := plane[(i*g.SH+qr-g.PH)*g.W:]
				dst := ph[i*d.wq+j0 : i*d.wq+j1]
				src = src[c0 : c0+(len(dst)-1)*g.SW+1]
				for j := range dst {
					dst[j] = src[j*g.SW]
				}
			}
		}
	}
}

// split2 is split for a stride of 2 along the rows (the stride-2
// depthwise layers of mobilenet and efficientnet): each input row goes to
// its row phase once, its pixels dealt in pairs to the two column phases
// in one pass, where split read every row twice, once a column phase, one
// strided pixel at a time (11% of mobilenet_v2's batch-1 inference): a
// 112² plane of its stride-2 3×3 layer in 5.2 µs against 15.5.
func (d depthwiseGeom) split2(plane, xp []float32, g Conv) {
	for qr := 0; qr < g.SH; qr++ {
		i0 := max(0, (g.PH-qr+g.SH-1)/g.SH)
		i1 := min(d.hq, (g.H+g.PH-qr+g.SH-1)/g.SH)
		// Input column c goes to phase (c+PW) mod 2, column (c+PW)/2:
		// from the first c with c+PW even, pairs (c, c+1) go to the same
		// column of phases 0 and 1; an odd first column and an odd last
		// one go alone.
		ph0 := xp[(qr*2)*d.planeLen : (qr*2+1)*d.planeLen]
		ph1 := xp[(qr*2+1)*d.planeLen : (qr*2+2)*d.planeLen]
		c0 := g.PW & 1 // the first column whose c+PW is even
		pairs := (g.W - c0) / 2
		j0 := (c0 + g.PW) / 2
		if i1 <= i0 {
			continue
		}
		// The pairs first: the deal streams the rows into cache, where
		// the lone columns, read first, missed it once a row (a quarter
		// of mobilenet_v2's stride-2 layer at 112², batch 1).
		if pairs > 0 {
			src := plane[(i0*g.SH+qr-g.PH)*g.W+c0:]
			even, odd := ph0[i0*d.wq+j0:], ph1[i0*d.wq+j0:]
			if d.dealRows != nil {
				d.dealRows(src, even, odd, i1-i0, pairs, g.SH*g.W, d.wq)
			} else {
				dealRowsGo(d.deal, src, even, odd, i1-i0, pairs, g.SH*g.W, d.wq)
			}
		}
		if c0 == 1 { // column 0 with PW odd: phase 1, column (PW−1)/2
			for i := i0; i < i1; i++ {
				ph1[i*d.wq+(g.PW-1)/2] = plane[(i*g.SH+qr-g.PH)*g.W]
			}
		}
		if c := c0 + 2*pairs; c < g.W { // a last column alone: phase 0
			for i := i0; i < i1; i++ {
				ph0[i*d.wq+(c+g.PW)/2] = plane[(i*g.SH+qr-g.PH)*g.W+c]
			}
		}
	}
}

// unsplit is split's adjoint: it writes the interiors of the phase
// planes at the front of xp into plane [H,W], each pixel from the one
// phase position split copies it to.
func (d depthwiseGeom) unsplit(xp, plane []float32, g Conv) {
	for qr := 0; qr < g.SH; qr++ {
		i0 := max(0, (g.PH-qr+g.SH-1)/g.SH)
		i1 := min(d.hq, (g.H+g.PH-qr+g.SH-1)/g.SH)
		for qc := 0; qc < g.SW; qc++ {
			ph := xp[(qr*g.SW+qc)*d.planeLen : (qr*g.SW+qc+1)*d.planeLen]
			j0 := max(0, (g.PW-qc+g.SW-1)/g.SW)
			j1 := min(d.wq, (g.W+g.PW-qc+g.SW-1)/g.SW)
			if j1 <= j0 {
				continue
			}
			c0 := j0*g.SW + qc - g.PW
			for i := i0; i < i1; i++ {
				dst := plane[(i*g.SH+qr-g.PH)*g.W:]
				src := ph[i*d.wq+j0 : i*d.wq+j1]
				if g.SW == 1 {
					copy(dst[c0:], src)
					continue
				}
				dst = dst[c0 : c0+(len(src)-1)*g.SW+1]
				for j, v := range src {
					dst[j*g.SW] = v
				}
			}
		}
	}
}

// outPlane writes one output plane yp = act(Σ taps + bv) from the input
// panel a worker's split made, the filter's len(offs) taps at wc: by rows
// when byRows (the row kernel applies ReLU, applyAct any other
// activation after it), else into the worker's columns and out through
// the direct method's store.
func (d *depthwiseGeom) outPlane(k *depthwiseKernels, store *convDirectKernels, cw *convWorker, offs []int, wc, yp []float32, g Conv, bv float32, act Act, alpha float32, byRows bool) {
	taps := len(offs)
	if byRows {
		relu := rowsRelu(act)
		if k.rows3x3 != nil && d.plain3x3 && taps == 9 && g.OW <= 128 {
			k.rows3x3(&wc[0], &cw.panel[0], d.wq, &yp[0], g.OW, g.OH, bv, max(relu, 0))
		} else {
			k.rows(taps, &offs[0], &wc[0], &cw.panel[0], d.wq, &yp[0], g.OW, g.OH, bv, max(relu, 0))
		}
		if relu < 0 {
			applyAct(yp, act, alpha)
		}
		return
	}
	k.fwd(taps, &offs[0], &wc[0], &cw.panel[0], &cw.cols[0], d.n)
	store.convDirectStore(cw.cols, yp, g, d.wq, bv, act, alpha)
}

// Conv2DDepthwiseFwd computes y = act(conv(x, w) + b) for a depthwise g
// (Groups = C = OC) at any stride, padding and dilation: x [N,C,H,W], w
// [C,1,KH,KW], b [C] or nil, y [N,C,OH,OW]. It panics on any other
// geometry (the planner chooses it only for these).
func Conv2DDepthwiseFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !depthwiseOK(g) {
		panic(depthwiseRefusal("Conv2DDepthwiseFwd", g))
	}
	p := activeGemmPath.Load()
	k, store := depthwiseFor(p), convDirectFor(p)
	taps, hw, ohw := g.KH*g.KW, g.H*g.W, g.OH*g.OW
	lead := convWorkers.Get()
	lead.offs = growInts(lead.offs, taps)
	d := newDepthwiseGeom(g, k, lead.offs)
	offs := lead.offs
	byRows := k.rows != nil && g.OW >= rowsMinOW
	workers := convParallel(g.N*g.C, func(cw *convWorker) {
		cw.panel = grow(cw.panel, d.xlen)
		clear(cw.panel) // the padding, which split leaves as it is
		if !byRows {
			cw.cols = grow(cw.cols, d.n)
		}
	}, func(cw *convWorker, p int) {
		c := p % g.C
		d.split(x[p*hw:(p+1)*hw], cw.panel, g)
		bv := float32(0)
		if b != nil {
			bv = b[c]
		}
		d.outPlane(k, store, cw, offs, w[c*taps:], y[p*ohw:(p+1)*ohw], g, bv, act, alpha, byRows)
	})
	releaseConvWorkers(workers)
	convWorkers.Put(lead)
}

// Conv2DDepthwiseBwd is the backward pass of Conv2DDepthwiseFwd, for the
// same geometry; it overwrites dy with the gradient of the pre-activation.
// Plane by plane, dy is spread into the flat layout of the forward's
// outputs (zero at the positions the forward drops); dW's taps are its
// dot products with the phase planes at each tap's shift, and dx, when
// wanted, is the forward's gather turned around, dxp[j] = Σ_t
// w[t]·dyf[j − off_t], which is the forward kernel run over each phase
// plane with that phase's taps, reading dyf (placed maxOff floats in) at
// reversed shifts, followed by unsplit. Each worker sums its planes' dw and db; the
// workers' are added in worker order at the end.
func Conv2DDepthwiseBwd(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !depthwiseOK(g) {
		panic(depthwiseRefusal("Conv2DDepthwiseBwd", g))
	}
	k := depthwiseFor(activeGemmPath.Load())
	taps, hw, ohw := g.KH*g.KW, g.H*g.W, g.OH*g.OW
	taps4 := gemmRoundUp(taps, 4)
	lead := convWorkers.Get()
	lead.offs = growInts(lead.offs, 3*taps4+2*g.SH*g.SW+1)
	clear(lead.offs) // the dot products' shifts past the taps read at 0
	offs, offsT, order := lead.offs[:taps4], lead.offs[taps4:2*taps4], lead.offs[2*taps4:3*taps4]
	d := newDepthwiseGeom(g, k, offs[:taps])
	// A phase plane of dx gets nothing from the taps that read another
	// phase (their shifts land dy's values in other planes, or on the
	// zeros the forward drops): dx runs phase by phase over that phase's
	// taps only, order[start[q]:start[q+1]], a quarter of them at stride
	// 2. Within a phase, tap t reads dy at the shift reach − within_t,
	// within_t its shift inside the phase plane.
	start := lead.offs[3*taps4 : 3*taps4+d.phases+1]
	maxOff, reach := 0, 0
	for _, o := range offs[:taps] {
		maxOff, reach = max(maxOff, o), max(reach, o%d.planeLen)
	}
	j := 0
	for q := 0; q < d.phases; q++ {
		start[q] = j
		for t, o := range offs[:taps] {
			if o/d.planeLen == q {
				order[j], offsT[j] = t, reach-o%d.planeLen
				j++
			}
		}
	}
	start[d.phases] = j
	planeN := gemmRoundUp(d.planeLen, k.lanes) // one phase plane's flat positions
	nx := gemmRoundUp(d.phases*d.planeLen, k.lanes)
	dyLen := maxOff + nx
	workers := convParallel(g.N*g.C, func(cw *convWorker) {
		cw.panel = grow(cw.panel, d.xlen)
		clear(cw.panel)
		cw.cols = grow(cw.cols, dyLen)
		clear(cw.cols) // the dropped positions, which stay zero
		if dx != nil {
			cw.tile = grow(cw.tile, (d.phases-1)*d.planeLen+planeN)
			cw.rows = grow(cw.rows, taps)
		}
		cw.a = grow(cw.a, taps4*k.lanes)
		cw.dw = grow(cw.dw, g.C*taps)
		clear(cw.dw)
		cw.db = grow(cw.db, g.C)
		clear(cw.db)
	}, func(cw *convWorker, p int) {
		c := p % g.C
		dyp := dy[p*ohw : (p+1)*ohw]
		if act != ActNone {
			actBackward(y[p*ohw:(p+1)*ohw], dyp, act, alpha)
		}
		var s float32
		for oh := 0; oh < g.OH; oh++ {
			row := dyp[oh*g.OW : (oh+1)*g.OW]
			copy(cw.cols[maxOff+oh*d.wq:], row)
			for _, v := range row {
				s += v
			}
		}
		cw.db[c] += s
		d.split(x[p*hw:(p+1)*hw], cw.panel, g)
		k.dw(taps4/4, &offs[0], &cw.panel[0], &cw.cols[maxOff], d.n, &cw.a[0])
		dwc := cw.dw[c*taps : (c+1)*taps]
		for t := range dwc {
			var v float32
			for _, a := range cw.a[t*k.lanes : (t+1)*k.lanes] {
				v += a
			}
			dwc[t] += v
		}
		if dx == nil {
			return
		}
		wc := cw.rows[:taps]
		for j, t := range order[:taps] {
			wc[j] = w[c*taps+t]
		}
		// In phase order: each phase's last vector runs into the next
		// phase plane, which that phase then overwrites.
		for q := 0; q < d.phases; q++ {
			j0, j1 := start[q], start[q+1]
			if j0 == j1 {
				clear(cw.tile[q*d.planeLen : (q+1)*d.planeLen])
				continue
			}
			k.fwd(j1-j0, &offsT[j0], &wc[j0], &cw.cols[maxOff-reach], &cw.tile[q*d.planeLen], planeN)
		}
		d.unsplit(cw.tile, dx[p*hw:(p+1)*hw], g)
	})
	dw = dw[:g.C*taps]
	clear(dw)
	if db != nil {
		clear(db[:g.C])
	}
	for _, cw := range workers {
		for i, v := range cw.dw {
			dw[i] += v
		}
		if db != nil {
			for i, v := range cw.db {
				db[i] += v
			}
		}
	}
	releaseConvWorkers(workers)
	convWorkers.Put(lead)
}
