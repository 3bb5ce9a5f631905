package cpu

// The bfloat16 convolutions: im2col + GEMM and the pointwise method with
// BF16's products (every operand of a product rounded to bfloat16, the
// sums in float32), on a bfloat16 path (gemm_bf16.go: its packers write
// pairs of bfloat16 along the shared dimension and its kernel multiplies
// them with VDPBF16PS). The im2col backward is conv_packed.go's
// (convBackwardOn on the bfloat16 path); the forward here is
// conv_packed.go's convForward with two changes: B panels are gathered
// in float32 as there (packConvPanel), several at once, and then rounded
// into pairs, and its tiles (pairTiles) count the shared dimension in
// pairs and carry edge tiles' sums through a spare tile as gemmCall.tiles
// does. The forward's tap blocks are the path's kc (even), so that every
// output is one float32 chain over its taps' pairs, as gemm_bf16.go's
// products are: the same bits for any thread count.

// bf16ConvGather is the most float32s of columns convForwardPairs
// gathers at once, 384 KiB: within a Zen 4 core's 1 MiB L2 beside the
// packed filters.
const bf16ConvGather = 96 << 10

// convForwardPairs is Conv2DIm2colFwd's body for normalised geometry g on
// the bfloat16 path p (p.pairs set, p.kc even).
func convForwardPairs(p *gemmPath, x, w, b, y []float32, g Conv, act Act, alpha float32) {
	G, ohw, krows := g.Groups, g.OH*g.OW, g.colRows()
	ocg, chw, cg := g.OC/G, g.C*g.H*g.W, g.C/G
	mPad := gemmRoundUp(ocg, p.mr)
	kSteps := p.steps(krows) // of a group's filters; kc is even, so each block's start is pc/2
	panels := gemmCeilDiv(ohw, p.nr)
	chunks := 1
	if t := Threads(); g.N < 2*t {
		chunks = min(panels, gemmCeilDiv(2*t, g.N))
	}
	// The filters in pairs, packed once per call: group gi's block of
	// taps at pc starts at gi·mPad·kSteps + pc/2·mPad.
	lead := convWorkers.Get()
	lead.a = grow(lead.a, G*mPad*kSteps)
	for gi := 0; gi < G; gi++ {
		for pc := 0; pc < krows; pc += p.kc {
			kb := min(p.kc, krows-pc)
			p.pairs.packA(p, false, w[gi*ocg*krows:], krows, 0, pc, ocg, kb, lead.a[gi*mPad*kSteps+pc/2*mPad:])
		}
	}
	wp := lead.a
	kc := min(p.kc, krows)
	// The columns are gathered for up to span panels at once (within
	// bf16ConvGather floats), in runs as long as an output row where
	// one panel's would be cut into two or three, then paired panel by
	// panel.
	span := max(1, min(8, bf16ConvGather/(kc*p.nr)))
	workers := convParallel(g.N*chunks, func(cw *convWorker) {
		cw.rows = grow(cw.rows, kc*span*p.nr)
		cw.panel = grow(cw.panel, p.steps(kc)*p.nr)
		cw.tile = grow(cw.tile, p.mr*p.nr)
	}, func(cw *convWorker, task int) {
		n, chunk := task/chunks, task%chunks
		xn, yn := x[n*chw:(n+1)*chw], y[n*g.OC*ohw:(n+1)*g.OC*ohw]
		last := panels * (chunk + 1) / chunks
		for jr := panels * chunk / chunks; jr < last; jr += span {
			j0, ld := jr*p.nr, min(span, last-jr)*p.nr
			width := min(ld, ohw-j0)
			for gi := 0; gi < G; gi++ {
				for pc := 0; pc < krows; pc += p.kc {
					kb := min(p.kc, krows-pc)
					packConvPanel(xn, g, gi*cg, pc, kb, j0, width, ld, cw.rows)
					beta := float32(0)
					if pc > 0 {
						beta = 1
					}
					for q := 0; q < width; q += p.nr {
						pairRows(p.pairs, pairsOf(cw.panel), p.nr, cw.rows[q:], ld, p.nr, kb)
						pairTiles(p, ocg, p.steps(kb), wp[gi*mPad*kSteps+pc/2*mPad:], cw.panel, min(p.nr, width-q),
							yn[gi*ocg*ohw+j0+q:], ohw, beta, cw.tile)
					}
				}
			}
			for oc := 0; oc < g.OC; oc++ {
				row := yn[oc*ohw+j0 : oc*ohw+j0+width]
				if b != nil {
					bv := b[oc]
					for j := range row {
						row[j] += bv
					}
				}
				applyAct(row, act, alpha)
			}
		}
	})
	releaseConvWorkers(workers)
	convWorkers.Put(lead)
}

// pairTiles is convTiles on a bfloat16 path: rows [0, m) of C = Ap·Bp +
// beta·C against one packed B panel of steps pairs holding cols (≤ nr)
// columns. An edge tile starts from beta·C's part in tile, so that the
// kernel's chains carry on from C's sums there as in a whole tile.
func pairTiles(p *gemmPath, m, steps int, ap, bp []float32, cols int, c []float32, ldc int, beta float32, tile []float32) {
	mr, nr := p.mr, p.nr
	for ir := 0; ir < m; ir += mr {
		rows := min(mr, m-ir)
		a := ap[ir*steps : ir*steps+mr*steps]
		if rows == mr && cols == nr {
			cc := c[ir*ldc : ir*ldc+(mr-1)*ldc+nr]
			p.kernel(steps, &a[0], &bp[0], &cc[0], ldc, 1, beta)
			continue
		}
		clear(tile[:mr*nr])
		if beta != 0 {
			mergeTile(c[ir*ldc:], ldc, rows, cols, tile, nr, beta, 0)
		}
		p.kernel(steps, &a[0], &bp[0], &tile[0], nr, 1, 1)
		mergeTile(tile, nr, rows, cols, c[ir*ldc:], ldc, 1, 0)
	}
}

// Conv2DIm2colFwd is the package's Conv2DIm2colFwd in this precision. In
// BF16 it runs on the bfloat16 path where the CPU has AVX512-BF16 (the
// VDPBF16PS kernel; AMX's tiles are the dense layers'), elsewhere on
// copies of x and w rounded to bfloat16, which gives the same products at
// float32's speed.
func (p *Precision) Conv2DIm2colFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	if !p.bf16 {
		Conv2DIm2colFwd(x, w, b, y, g, act, alpha)
		return
	}
	im2colFwdBF16(bf16Path(), x, w, b, y, g.norm(), act, alpha)
}

// Conv2DIm2colBwd is the package's Conv2DIm2colBwd in this precision: in
// BF16 the products read x, w and the pre-activation gradient rounded to
// bfloat16, and db sums the gradient unrounded.
func (p *Precision) Conv2DIm2colBwd(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	if !p.bf16 {
		Conv2DIm2colBwd(x, w, y, dy, dx, dw, db, g, act, alpha)
		return
	}
	im2colBwdBF16(bf16Path(), x, w, y, dy, dx, dw, db, g.norm(), act, alpha)
}

// Conv2DPointwiseFwd is the package's Conv2DPointwiseFwd in this
// precision; in BF16 on the bfloat16 path or emulated, as
// Conv2DIm2colFwd, and 1×1 images as this precision's dense layer.
func (p *Precision) Conv2DPointwiseFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	if !p.bf16 {
		Conv2DPointwiseFwd(x, w, b, y, g, act, alpha)
		return
	}
	g = g.norm()
	if !pointwiseOK(g) {
		panic(pointwiseRefusal("Conv2DPointwiseFwd", g))
	}
	pointwiseFwdBF16(p, bf16Path(), x, w, b, y, g, act, alpha)
}

// Conv2DPointwiseBwd is the package's Conv2DPointwiseBwd in this
// precision, its products reading rounded operands as Conv2DIm2colBwd's.
func (p *Precision) Conv2DPointwiseBwd(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	if !p.bf16 {
		Conv2DPointwiseBwd(x, w, y, dy, dx, dw, db, g, act, alpha)
		return
	}
	g = g.norm()
	if !pointwiseOK(g) {
		panic(pointwiseRefusal("Conv2DPointwiseBwd", g))
	}
	pointwiseBwdBF16(p, bf16Path(), x, w, y, dy, dx, dw, db, g, act, alpha)
}

// im2colFwdBF16 is BF16's Conv2DIm2colFwd on the bfloat16 path p, or
// emulated where p is nil.
func im2colFwdBF16(p *gemmPath, x, w, b, y []float32, g Conv, act Act, alpha float32) {
	if p != nil {
		convForwardPairs(p, x, w, b, y, g, act, alpha)
		return
	}
	convForward(roundedFloats(x), roundedFloats(w), b, y, g, act, alpha)
}

// im2colBwdBF16 is BF16's Conv2DIm2colBwd on the bfloat16 path p, or
// emulated where p is nil.
func im2colBwdBF16(p *gemmPath, x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	if p != nil {
		convBackwardOn(p, x, w, y, dy, dx, dw, db, g, act, alpha)
		return
	}
	preActGrad(y, dy, db, g, act, alpha)
	convBackward(roundedFloats(x), roundedFloats(w), nil, roundedFloats(dy), dx, dw, nil, g, ActNone, 0)
}

// pointwiseFwdBF16 is prec's (BF16's) Conv2DPointwiseFwd on the bfloat16
// path p, or emulated where p is nil.
func pointwiseFwdBF16(prec *Precision, p *gemmPath, x, w, b, y []float32, g Conv, act Act, alpha float32) {
	if p != nil {
		pointwiseForward(prec, p, x, w, b, y, g, act, alpha)
		return
	}
	pointwiseForward(prec, activeGemmPath.Load(), roundedFloats(x), roundedFloats(w), b, y, g, act, alpha)
}

// pointwiseBwdBF16 is prec's (BF16's) Conv2DPointwiseBwd on the bfloat16
// path p, or emulated where p is nil.
func pointwiseBwdBF16(prec *Precision, p *gemmPath, x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	if p != nil {
		pointwiseBackward(prec, p, x, w, y, dy, dx, dw, db, g, act, alpha)
		return
	}
	preActGrad(y, dy, db, g, act, alpha)
	pointwiseBackward(prec, activeGemmPath.Load(), roundedFloats(x), roundedFloats(w), nil, roundedFloats(dy), dx, dw, nil, g, ActNone, 0)
}

// preActGrad turns dy into the gradient of the pre-activation in place
// and writes its sums over images and positions into db (when not nil):
// the emulated backward's first part, before its products read dy
// rounded.
func preActGrad(y, dy, db []float32, g Conv, act Act, alpha float32) {
	size := g.N * g.OC * g.OH * g.OW
	if act != ActNone {
		actBackward(y[:size], dy[:size], act, alpha)
	}
	if db == nil {
		return
	}
	ohw := g.OH * g.OW
	clear(db[:g.OC])
	for n := 0; n < g.N; n++ {
		for oc := 0; oc < g.OC; oc++ {
			var s float32
			for _, v := range dy[(n*g.OC+oc)*ohw : (n*g.OC+oc+1)*ohw] {
				s += v
			}
			db[oc] += s
		}
	}
}

// roundedFloats is a new copy of x rounded to bfloat16 (RoundBF16), for
// the emulated products.
func roundedFloats(x []float32) []float32 {
	r := make([]float32, len(x))
	ParallelFor(len(x), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r[i] = RoundBF16(x[i])
		}
	})
	return r
}
