package cpu

import "unsafe"

// This file holds the direct convolution for stride-1 layers. A GEMM over
// im2col columns fits MNIST-sized layers badly: the first layer's shared
// dimension is only KH·KW (25 for a 5×5 filter), the columns cost as much
// to gather as the product costs to run, and 6 to 32 output channels leave
// a 12-row tile partly empty. Here there are no columns at all.
//
// Each input plane is copied once per image into a zero-padded plane of
// row stride Wp = W + PW (a row's right padding is the next row's left
// padding). With stride 1, the output at flat position j = oh·Wp + ow is
// then Σ_t w[t]·xp[j + off_t], off_t = c·plane + kh·DH·Wp + kw·DW: every
// tap is a padded plane shifted by a constant, so one output channel is
// C·KH·KW multiply-adds of long contiguous vectors. Positions with ow ≥ OW
// are computed too and dropped (they wrap into the next row), the price of
// unmasked full-width vectors. The weight gradient is the same sum turned
// around, dW[oc][t] = Σ_j dy[oc][j]·xp[j + off_t], one dot product per
// output channel and tap over the image, with dy laid out in the same
// flat, zero-padded way.

// convDirectKernels is one instruction set's pair of direct-convolution
// kernels and their block shapes.
type convDirectKernels struct {
	// fwd computes fwdOC output channels at fwdPos flat positions: y[r][j]
	// = Σ_t w[r·ldw + t]·x[offs[t] + j], rows ldy floats apart. Each
	// channel's weights are a row of taps, ldw floats after the one
	// before, so the forward pass reads a layer's filters where they are
	// (ldw = taps) and packs nothing.
	fwd           func(taps int, offs *int, w, x, y *float32, ldw, ldy int)
	fwdOC, fwdPos int
	// fwdTail, when set, is fwd for fwdTailPos positions (a divisor of
	// fwdPos): planes are rounded up to fwdTailPos positions and the last
	// part of each runs fwdTail.
	fwdTail    func(taps int, offs *int, w, x, y *float32, ldw, ldy int)
	fwdTailPos int
	// fwdTail2 and fwdTail3, when set, are fwd for 2·fwdTailPos and
	// 3·fwdTailPos positions, run instead of two or three calls of fwdTail,
	// each of which would load every weight again.
	fwdTail2, fwdTail3 func(taps int, offs *int, w, x, y *float32, ldw, ldy int)
	// fwd4Plane, when set, is fwdTail2 for 4 output channels, run where a
	// plane is 2·fwdTailPos positions in all (a 7×7 image padded by 1:
	// 56 of 64): each input load then feeds 4 channels, not 2. ResNet's
	// 512 channels at 7², batch 1, one thread, CPU ms forward
	// (BenchmarkConvBatch1, least of 5 alternating): 2.78 against 2.93.
	fwd4Plane func(taps int, offs *int, w, x, y *float32, ldw, ldy int)
	// fwd4Plane56, when set, is fwd4Plane for the first 56 positions
	// only, run where a plane's rows end there (7×7 padded by 1): its
	// last vector a channel is half as wide. ResNet-18's 512 channels at
	// 7², batch 1, one thread, on Zen 4 (a loop of the whole inference,
	// each layer timed, alternating): 2.65-2.74 against 2.34-2.40 ms.
	fwd4Plane56 func(taps int, offs *int, w, x, y *float32, ldw, ldy int)
	// fwd4, when set, is fwd for 4 output channels and fwd4Pos
	// positions, run over the other planes' whole fwd4Pos blocks where 4
	// channels are left (forwardPlane4), the two-channel tails after
	// them.
	fwd4    func(taps int, offs *int, w, x, y *float32, ldw, ldy int)
	fwd4Pos int
	// dw adds to acc[(r·dwTaps + t)·dwLanes + lane] the lane-wise partial
	// sums Σ_i dy[r·lddy + i·dwLanes + lane]·x[offs[t] + i·dwLanes + lane]
	// over i < n, for dwOC rows of dy and dwTaps offsets.
	dw                    func(n int, offs *int, x, dy *float32, lddy int, acc *float32)
	dwOC, dwTaps, dwLanes int
	// store and grad, when set, are the vector forms of convDirectStore
	// and convDirectGrad (one pass instead of a copy, a bias pass and an
	// activation pass).
	store func(src, dst *float32, rows, ow, wp int, bias float32, relu int)
	grad  func(dy, y, dyf *float32, rows, ow, wp, relu int, sums *float32)
}

// forwardPlane4 runs fwd4Plane, or fwd4Plane56 where the plane's rows end
// by position 56 (used, OH·wp), for the 4 output channels whose rows of
// taps are w (ldw = taps), and reports whether it did: only where the
// plane is 2·fwdTailPos positions in all and the kernels exist.
func (k *convDirectKernels) forwardPlane4(taps int, offs []int, w, x, y []float32, n, used int) bool {
	if k.fwd4Plane != nil && n == 2*k.fwdTailPos {
		_ = w[4*taps-1] // the assembly does no bounds checks
		_ = y[3*n+n-1]
		if k.fwd4Plane56 != nil && used <= 56 {
			k.fwd4Plane56(taps, &offs[0], &w[0], &x[0], &y[0], taps, n)
			return true
		}
		k.fwd4Plane(taps, &offs[0], &w[0], &x[0], &y[0], taps, n)
		return true
	}
	if k.fwd4 == nil || k.fwdOC != 2 || n < k.fwd4Pos {
		return false
	}
	_ = w[4*taps-1]
	_ = y[3*n+n-1]
	j0 := 0
	for ; j0+k.fwd4Pos <= n; j0 += k.fwd4Pos {
		k.fwd4(taps, &offs[0], &w[0], &x[j0], &y[j0], taps, n)
	}
	if j0 < n {
		for c := 0; c < 4; c += 2 {
			k.forwardRest(taps, offs, w[c*taps:], x, y[c*n:], taps, j0, n)
		}
	}
	return true
}

// forwardRest is forwardPlane over positions [j0, n) only, where j0 is a
// multiple of fwdTailPos.
func (k *convDirectKernels) forwardRest(taps int, offs []int, w, x, y []float32, ldw, j0, n int) {
	switch rest := n - j0; {
	case rest == 3*k.fwdTailPos && k.fwdTail3 != nil:
		k.fwdTail3(taps, &offs[0], &w[0], &x[j0], &y[j0], ldw, n)
		return
	case rest == 2*k.fwdTailPos && k.fwdTail2 != nil:
		k.fwdTail2(taps, &offs[0], &w[0], &x[j0], &y[j0], ldw, n)
		return
	}
	for ; j0+k.fwdPos <= n; j0 += k.fwdPos {
		k.fwd(taps, &offs[0], &w[0], &x[j0], &y[j0], ldw, n)
	}
	for ; j0 < n; j0 += k.fwdTailPos {
		k.fwdTail(taps, &offs[0], &w[0], &x[j0], &y[j0], ldw, n)
	}
}

// forwardPlane runs fwd over the n flat positions of one block of fwdOC
// output channels (rows n apart in y; their weights rows ldw apart in w),
// and fwdTail over what is left past the last whole fwdPos block.
func (k *convDirectKernels) forwardPlane(taps int, offs []int, w, x, y []float32, ldw, n int) {
	_ = w[(k.fwdOC-1)*ldw+taps-1] // the assembly does no bounds checks
	j0 := 0
	for ; j0+k.fwdPos <= n; j0 += k.fwdPos {
		k.fwd(taps, &offs[0], &w[0], &x[j0], &y[j0], ldw, n)
	}
	switch rest := n - j0; {
	case rest == 3*k.fwdTailPos && k.fwdTail3 != nil:
		k.fwdTail3(taps, &offs[0], &w[0], &x[j0], &y[j0], ldw, n)
		return
	case rest == 2*k.fwdTailPos && k.fwdTail2 != nil:
		k.fwdTail2(taps, &offs[0], &w[0], &x[j0], &y[j0], ldw, n)
		return
	}
	for ; j0 < n; j0 += k.fwdTailPos {
		k.fwdTail(taps, &offs[0], &w[0], &x[j0], &y[j0], ldw, n)
	}
}

// convDirectStore writes one output plane from its flat form src (rows wp
// apart) into dst [OH,OW], adding bias and applying act.
func (k *convDirectKernels) convDirectStore(src, dst []float32, g Conv, wp int, bias float32, act Act, alpha float32) {
	if k.store != nil && (act == ActNone || act == ActReLU || act == ActReLU6) {
		relu := 0
		switch act {
		case ActReLU:
			relu = 1
		case ActReLU6:
			relu = 2
		}
		src = src[:(g.OH-1)*wp+g.OW]
		dst = dst[:g.OH*g.OW]
		k.store(&src[0], &dst[0], g.OH, g.OW, wp, bias, relu)
		return
	}
	for oh := 0; oh < g.OH; oh++ {
		d := dst[oh*g.OW : (oh+1)*g.OW]
		for i, v := range src[oh*wp : oh*wp+g.OW] {
			d[i] = v + bias
		}
	}
	applyAct(dst, act, alpha)
}

// convDirectGrad spreads one output-gradient plane dy [OH,OW] into its flat
// form dyf (rows wp apart; the gaps are left as they are), multiplied by
// the derivative of act taken from y, and returns its sum (the plane's bias
// gradient). dy itself is only changed on the Go path (actBackward in
// place), which Conv2DDirectBwd's contract allows.
//
// sums is 16 floats of scratch: the kernels are called through function
// values, so escape analysis cannot see that they keep no pointer, and a
// local array would be allocated on every call.
func (k *convDirectKernels) convDirectGrad(dy, y, dyf []float32, g Conv, wp int, act Act, alpha float32, sums []float32) float32 {
	ohw := g.OH * g.OW
	dy, y = dy[:ohw], y[:ohw]
	if k.grad != nil && (act == ActNone || act == ActReLU) {
		relu := 0
		if act == ActReLU {
			relu = 1
		}
		sums = sums[:16]
		dyf = dyf[:(g.OH-1)*wp+g.OW]
		k.grad(&dy[0], &y[0], &dyf[0], g.OH, g.OW, wp, relu, &sums[0])
		var s float32
		for _, v := range sums {
			s += v
		}
		return s
	}
	if act != ActNone {
		actBackward(y, dy, act, alpha)
	}
	var s float32
	for oh := 0; oh < g.OH; oh++ {
		src := dy[oh*g.OW : (oh+1)*g.OW]
		copy(dyf[oh*wp:oh*wp+g.OW], src)
		for _, v := range src {
			s += v
		}
	}
	return s
}

// convDirectGo is the pure-Go pair, which every GOARCH has.
var convDirectGo = &convDirectKernels{
	fwd: convDirectFwdGo, fwdOC: 2, fwdPos: 16,
	dw: convDirectDWGo, dwOC: 4, dwTaps: 4, dwLanes: 1,
}

// convDirectFor returns the direct kernels that go with GEMM path p, so
// that forcing a path in tests forces the matching convolution kernels.
func convDirectFor(p *gemmPath) *convDirectKernels {
	if k := archConvDirect(p.name); k != nil {
		return k
	}
	return convDirectGo
}

// convDirectFwdGo is convDirectKernels.fwd for 2 channels × 16 positions.
func convDirectFwdGo(taps int, offs *int, w, x, y *float32, ldw, ldy int) {
	os := unsafe.Slice(offs, taps)
	ws := unsafe.Slice(w, ldw+taps)
	var a0, a1 [16]float32
	for t, o := range os {
		xs := (*[16]float32)(unsafe.Add(unsafe.Pointer(x), o*4))
		w0, w1 := ws[t], ws[ldw+t]
		for j, v := range xs {
			a0[j] += w0 * v
			a1[j] += w1 * v
		}
	}
	ys := unsafe.Slice(y, ldy+16)
	copy(ys[:16], a0[:])
	copy(ys[ldy:ldy+16], a1[:])
}

// convDirectDWGo is convDirectKernels.dw for 4 rows × 4 taps, one lane.
func convDirectDWGo(n int, offs *int, x, dy *float32, lddy int, acc *float32) {
	os := unsafe.Slice(offs, 4)
	as := unsafe.Slice(acc, 16)
	dys := unsafe.Slice(dy, 3*lddy+n)
	for t, o := range os {
		xs := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(x), o*4)), n)
		for r := 0; r < 4; r++ {
			var s float64
			for i, v := range dys[r*lddy : r*lddy+n] {
				s += float64(v * xs[i])
			}
			as[r*4+t] += float32(s)
		}
	}
}

// convDirectTransposed returns the geometry of dx's computation as a
// forward convolution, and its flat layout: its input is dy (OC channels,
// OH×OW) padded by (KH-1)·DH-PH rows and (KW-1)·DW-PW columns, its filters
// the transposed and flipped w, its output dx (C channels, H×W).
func convDirectTransposed(g Conv, k *convDirectKernels) (Conv, convDirectGeom) {
	gt := Conv{N: g.N, C: g.OC, H: g.OH, W: g.OW, OC: g.C, OH: g.H, OW: g.W,
		KH: g.KH, KW: g.KW, SH: 1, SW: 1, PH: (g.KH-1)*g.DH - g.PH, PW: (g.KW-1)*g.DW - g.PW,
		DH: g.DH, DW: g.DW, Groups: g.Groups}
	return gt, newConvDirectGeom(gt, k)
}

// convDirectOK reports whether the direct kernels handle normalised
// geometry g: stride 1 and padding within the filter's reach ((KH-1)·DH
// rows, (KW-1)·DW columns), any channels, groups and dilation. The flat
// layout needs that reach: an output row, OW = W + 2·PW - (KW-1)·DW wide,
// must fit in the padded row stride W + PW (or the last row reads past
// the plane), and dx's transposed convolution pads dy by the reach less
// the padding, which must not be negative. With
// several input channels per group the taps run over every channel's
// padded plane (t = (c·KH + kh)·KW + kw, as in the filter), which beats
// the packed im2col path as well: MNIST conv2 (16->32 5x5 pad 2, 14x14)
// forward 37.7 -> 15.3 ms, LeNet-5 conv2 (6->16 5x5, 14x14) 7.6 -> 3.0 ms
// at batch 250 on one Zen 4 core, though the flat rows waste up to half the
// lanes on such small planes.
func convDirectOK(g Conv) bool {
	return g.SH == 1 && g.SW == 1 && g.PH <= (g.KH-1)*g.DH && g.PW <= (g.KW-1)*g.DW
}

// convDirectGeom is the flat layout of one padded input plane.
type convDirectGeom struct {
	wp   int // padded row stride, W + PW
	n    int // flat output positions computed, OH·Wp rounded up to the blocks
	xlen int // padded plane length and stride, room for every shifted read
}

func newConvDirectGeom(g Conv, k *convDirectKernels) convDirectGeom {
	// A row's right padding is the next row's left padding: reads past
	// column W-1 (at most PW of them) land on the next row's zeros.
	wp := g.W + g.PW
	grain := k.fwdPos
	if k.fwdTail != nil {
		grain = k.fwdTailPos
	}
	block := grain
	for block%k.dwLanes != 0 {
		block += grain
	}
	n := gemmRoundUp(g.OH*wp, block)
	maxOff := (g.KH-1)*g.DH*wp + (g.KW-1)*g.DW
	return convDirectGeom{wp: wp, n: n, xlen: max(n+maxOff, (g.H+2*g.PH)*wp+g.PW)}
}

// offsets fills offs[t] with tap t's shift in a group's padded planes
// (xlen apart, one per input channel of the group), t = (c·KH + kh)·KW +
// kw as in the filter, and zero (a harmless read of the first plane) past
// the taps.
func (d convDirectGeom) offsets(g Conv, offs []int) {
	clear(offs)
	t := 0
	for c := 0; c < g.C/g.Groups; c++ {
		for kh := 0; kh < g.KH; kh++ {
			for kw := 0; kw < g.KW; kw++ {
				offs[t] = c*d.xlen + kh*g.DH*d.wp + kw*g.DW
				t++
			}
		}
	}
}

// pad copies planes [cg,H,W] into the interiors of xp's padded planes;
// the borders stay as they were (zero: the callers clear them once per
// call).
func (d convDirectGeom) pad(planes, xp []float32, g Conv) {
	hw := g.H * g.W
	for c := 0; c*hw < len(planes); c++ {
		for ih := 0; ih < g.H; ih++ {
			copy(xp[c*d.xlen+(ih+g.PH)*d.wp+g.PW:], planes[c*hw+ih*g.W:c*hw+(ih+1)*g.W])
		}
	}
}

// growInts is grow for ints.
func growInts(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}

// convDirectForward is Conv2DDirectFwd for geometry that convDirectOK accepts.
func convDirectForward(x, w, b, y []float32, g Conv, act Act, alpha float32, k *convDirectKernels) {
	G, taps, ohw := g.Groups, g.colRows(), g.OH*g.OW
	ocg, cg, hw := g.OC/G, g.C/g.Groups, g.H*g.W
	d := newConvDirectGeom(g, k)
	ocp := gemmRoundUp(ocg, k.fwdOC)
	// The kernels read the filters in place, fwdOC rows of taps; a
	// group's last block, where ocg is not a multiple of fwdOC, reads a
	// copy whose rows past ocg are zero.
	lead := convWorkers.Get()
	lead.offs = growInts(lead.offs, taps)
	d.offsets(g, lead.offs)
	last := ocp - k.fwdOC // the first channel of a group's last block
	if ocp > ocg {
		lead.a = grow(lead.a, G*k.fwdOC*taps)
		clear(lead.a)
		for gi := 0; gi < G; gi++ {
			copy(lead.a[gi*k.fwdOC*taps:], w[(gi*ocg+last)*taps:(gi+1)*ocg*taps])
		}
	}
	block := func(gi, ob int) []float32 {
		if ob == last && ocp > ocg {
			return lead.a[gi*k.fwdOC*taps : (gi+1)*k.fwdOC*taps]
		}
		return w[(gi*ocg+ob)*taps : (gi*ocg+ob+k.fwdOC)*taps]
	}
	offs := lead.offs
	// With fewer images than threads (batch-1 inference) each image's
	// blocks of output channels are split over the threads too; every
	// channel is still computed by one task, the same way.
	blocks, splits := ocp/k.fwdOC, 1
	if g.N < Threads() {
		splits = max(1, min(Threads()/g.N, blocks))
	}
	// An image whose blocks are split over several tasks is padded once,
	// into the lead's panel, which they all read: each task padding its
	// own copy cost 16 panels of a 64-channel 56×56 image on 16 threads,
	// most of the page faults of a one-sample predict's first call.
	var shared []float32
	if splits > 1 {
		shared = grow(lead.panel, g.N*g.C*d.xlen)
		lead.panel = shared
		clear(shared)
		for n := 0; n < g.N; n++ {
			for gi := 0; gi < G; gi++ {
				d.pad(x[(n*g.C+gi*cg)*hw:(n*g.C+(gi+1)*cg)*hw], shared[(n*g.C+gi*cg)*d.xlen:], g)
			}
		}
	}
	workers := convParallel(g.N*splits, func(cw *convWorker) {
		if shared == nil {
			cw.panel = grow(cw.panel, cg*d.xlen)
			clear(cw.panel)
		}
		cw.cols = grow(cw.cols, ocp*d.n)
	}, func(cw *convWorker, task int) {
		n, s := task/splits, task%splits
		ob0, ob1 := blocks*s/splits*k.fwdOC, blocks*(s+1)/splits*k.fwdOC
		xp, yf := cw.panel, cw.cols
		for gi := 0; gi < G; gi++ {
			if shared != nil {
				xp = shared[(n*g.C+gi*cg)*d.xlen : (n*g.C+(gi+1)*cg)*d.xlen]
			} else {
				d.pad(x[(n*g.C+gi*cg)*hw:(n*g.C+(gi+1)*cg)*hw], xp, g)
			}
			for ob := ob0; ob < ob1; {
				if ob+4 <= min(ob1, ocg) && k.forwardPlane4(taps, offs, w[(gi*ocg+ob)*taps:(gi*ocg+ob+4)*taps], xp, yf[ob*d.n:], d.n, g.OH*d.wp) {
					ob += 4
					continue
				}
				k.forwardPlane(taps, offs, block(gi, ob), xp, yf[ob*d.n:], taps, d.n)
				ob += k.fwdOC
			}
			for oc := ob0; oc < min(ob1, ocg); oc++ {
				c := gi*ocg + oc
				bv := float32(0)
				if b != nil {
					bv = b[c]
				}
				k.convDirectStore(yf[oc*d.n:], y[(n*g.OC+c)*ohw:(n*g.OC+c+1)*ohw], g, d.wp, bv, act, alpha)
			}
		}
	})
	releaseConvWorkers(workers)
	convWorkers.Put(lead)
}

// convDirectAccBudget is the most float32s of lane-wise dw partial sums a
// worker of convDirectBackward keeps across its images (4 MiB).
var convDirectAccBudget = 1 << 20

// foldLanes adds the lane-wise partial sums of one block, acc (dwOC rows
// of dwTaps taps of dwLanes lanes), to dw: rows rows of dw taps apart,
// taps taps of each.
func foldLanes(acc, dw []float32, k *convDirectKernels, rows, taps, stride int) {
	for r := 0; r < rows; r++ {
		for t := 0; t < taps; t++ {
			var s float32
			for _, v := range acc[(r*k.dwTaps+t)*k.dwLanes : (r*k.dwTaps+t+1)*k.dwLanes] {
				s += v
			}
			dw[r*stride+t] += s
		}
	}
}

// convDirectBackward is Conv2DDirectBwd for geometry that convDirectOK
// accepts: each plane of dy times the
// activation's derivative is spread into the worker's flat gradient plane
// (dy itself is left as it is on the vector path), its sum goes to db
// (when not nil), and dw gets the direct dot products. Each worker keeps
// its lane-wise partial sums over its images; they are summed once at the
// end.
func convDirectBackward(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32, k *convDirectKernels) {
	G, taps, ohw := g.Groups, g.colRows(), g.OH*g.OW
	ocg, cg, hw := g.OC/G, g.C/g.Groups, g.H*g.W
	d := newConvDirectGeom(g, k)
	ocq, tq := gemmRoundUp(ocg, k.dwOC), gemmRoundUp(taps, k.dwTaps)
	blockLen := k.dwOC * k.dwTaps * k.dwLanes
	accLen := G * (ocq / k.dwOC) * (tq / k.dwTaps) * blockLen
	// Each worker keeps its lane-wise partial sums of dw over its images,
	// dwLanes floats per weight: 151 MB a worker for a 512-channel 3×3
	// layer with AVX-512, 2.4 GB on 16 threads (ResNet-18's last stage).
	// Past convDirectAccBudget a worker folds an image's lanes into one
	// sum per weight instead, keeping dw's size only.
	compact := accLen > convDirectAccBudget
	lead := convWorkers.Get()
	// dy's flat planes, stride planeLen, hold the gradient at shift off
	// within each plane: from there the weight-gradient dot products read
	// it in the input's flat layout, and from the plane's start the
	// transposed convolution for dx reads it as its padded input (the two
	// layouts have the same row stride, W + PW).
	gt, dt := convDirectTransposed(g, k)
	off := gt.PH*dt.wp + gt.PW
	planeLen := d.n + off
	tapsT, cgp := ocg*g.KH*g.KW, gemmRoundUp(cg, k.fwdOC)
	lead.offs = growInts(lead.offs, tq+tapsT)
	d.offsets(g, lead.offs[:tq])
	offs, offsT := lead.offs[:tq], lead.offs[tq:]
	if dx != nil {
		planeLen = max(planeLen, dt.xlen)
		dt.offsets(gt, offsT)
		for i := range offsT {
			offsT[i] += (offsT[i] / dt.xlen) * (planeLen - dt.xlen) // planes planeLen apart
		}
		// The filters transposed and flipped, a row of tapsT for each
		// input channel (zero past cg), as the forward pass reads its
		// own: wt[c][oc][kh][kw] = w[oc][c][KH-1-kh][KW-1-kw].
		lead.a = grow(lead.a, G*cgp*tapsT)
		for gi := 0; gi < G; gi++ {
			for c := 0; c < cgp; c++ {
				row := lead.a[(gi*cgp+c)*tapsT : (gi*cgp+c+1)*tapsT]
				if c >= cg {
					clear(row)
					continue
				}
				// Tap t = (oc·KH + kh)·KW + kw reads w[oc][c][KH-1-kh][KW-1-kw].
				i := 0
				for oc := 0; oc < ocg; oc++ {
					flt := w[((gi*ocg+oc)*cg+c)*g.KH*g.KW : ((gi*ocg+oc)*cg+c+1)*g.KH*g.KW]
					for j := len(flt) - 1; j >= 0; j-- {
						row[i] = flt[j]
						i++
					}
				}
			}
		}
	}
	wt := lead.a
	workers := convParallel(g.N, func(cw *convWorker) {
		cw.panel = grow(cw.panel, cg*d.xlen)
		clear(cw.panel)
		cw.cols = grow(cw.cols, ocq*planeLen)
		clear(cw.cols)
		if compact {
			cw.dw = grow(cw.dw, G*ocg*taps)
			cw.a = grow(cw.a, blockLen)
		} else {
			cw.dw = grow(cw.dw, accLen)
		}
		clear(cw.dw)
		cw.db = grow(cw.db, g.OC)
		clear(cw.db)
		cw.rows = grow(cw.rows, 16)
		if dx != nil {
			cw.tile = grow(cw.tile, cgp*dt.n)
		}
	}, func(cw *convWorker, n int) {
		xp, dyf := cw.panel, cw.cols
		blk := 0
		for gi := 0; gi < G; gi++ {
			d.pad(x[(n*g.C+gi*cg)*hw:(n*g.C+(gi+1)*cg)*hw], xp, g)
			for oc := 0; oc < ocg; oc++ {
				c := (n*g.OC + gi*ocg + oc) * ohw
				yc := dy[c : c+ohw] // y is read only with an activation
				if act != ActNone {
					yc = y[c : c+ohw]
				}
				cw.db[gi*ocg+oc] += k.convDirectGrad(dy[c:c+ohw], yc, dyf[oc*planeLen+off:], g, d.wp, act, alpha, cw.rows)
			}
			for ob := 0; ob < ocq; ob += k.dwOC {
				for tb := 0; tb < tq; tb += k.dwTaps {
					if !compact {
						k.dw(d.n/k.dwLanes, &offs[tb], &xp[0], &dyf[ob*planeLen+off], planeLen, &cw.dw[blk*blockLen])
						blk++
						continue
					}
					acc := cw.a[:blockLen]
					clear(acc)
					k.dw(d.n/k.dwLanes, &offs[tb], &xp[0], &dyf[ob*planeLen+off], planeLen, &acc[0])
					foldLanes(acc, cw.dw[(gi*ocg+ob)*taps+tb:], k, min(k.dwOC, ocg-ob), min(k.dwTaps, taps-tb), taps)
				}
			}
			if dx == nil {
				continue
			}
			dxf := cw.tile
			for cb := 0; cb < cgp; cb += k.fwdOC {
				wb := wt[(gi*cgp+cb)*tapsT:]
				k.forwardPlane(tapsT, offsT, wb, dyf, dxf[cb*dt.n:], tapsT, dt.n)
			}
			for c := 0; c < cg; c++ {
				p := (n*g.C + gi*cg + c) * hw
				k.convDirectStore(dxf[c*dt.n:], dx[p:p+hw], gt, dt.wp, 0, ActNone, 0)
			}
		}
	})
	clear(dw[:g.OC*taps])
	if db != nil {
		clear(db[:g.OC])
	}
	for _, cw := range workers {
		if compact {
			for i, v := range cw.dw[:G*ocg*taps] {
				dw[i] += v
			}
		}
		blk := 0
		for gi := 0; gi < G && !compact; gi++ {
			for ob := 0; ob < ocq; ob += k.dwOC {
				for tb := 0; tb < tq; tb += k.dwTaps {
					acc := cw.dw[blk*blockLen : (blk+1)*blockLen]
					blk++
					for r := 0; r < k.dwOC && ob+r < ocg; r++ {
						for t := 0; t < k.dwTaps && tb+t < taps; t++ {
							var s float32
							for _, v := range acc[(r*k.dwTaps+t)*k.dwLanes : (r*k.dwTaps+t+1)*k.dwLanes] {
								s += v
							}
							dw[(gi*ocg+ob+r)*taps+tb+t] += s
						}
					}
				}
			}
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
