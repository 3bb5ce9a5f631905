package cpu

import "fmt"

// The pointwise method: a 1×1 convolution of stride 1 without padding
// (ResNet's bottleneck projections, MobileNet's and EfficientNet's
// expansions and projections) is, image by image and group by group, the
// matrix product Y[OC/G, H·W] = W[OC/G, C/G] · X[C/G, H·W] of the tensors
// as they lie in memory (NCHW): no columns to gather and no padded planes
// to copy, only Sgemm on the caller's slices (or, for BF16, the same
// products on the bfloat16 path). Its backward is two more products a
// group, dX = Wᵀ·dY and dW += dY·Xᵀ.

// pointwiseOK reports whether normalised g is a 1×1 convolution of stride
// 1 without padding (its dilation changes nothing).
func pointwiseOK(g Conv) bool {
	return g.KH == 1 && g.KW == 1 && g.SH == 1 && g.SW == 1 && g.PH == 0 && g.PW == 0
}

// pointwiseRefusal says why the pointwise method does not take g.
func pointwiseRefusal(fn string, g Conv) string {
	return fmt.Sprintf("cpu.%s: a %dx%d filter of stride %dx%d and padding %dx%d; the pointwise method needs a 1x1 filter, stride 1 and no padding",
		fn, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW)
}

// Conv2DPointwiseFwd computes y = act(conv(x, w) + b) for a 1×1
// convolution of stride 1 without padding, as one matrix product per
// image and group on x, w and y in place; it panics on any other geometry
// (the planner chooses it only for these).
func Conv2DPointwiseFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !pointwiseOK(g) {
		panic(pointwiseRefusal("Conv2DPointwiseFwd", g))
	}
	pointwiseForward(FP32, activeGemmPath.Load(), x, w, b, y, g, act, alpha)
}

// pointwiseForward is Conv2DPointwiseFwd's body for normalised g, its
// products on path (Sgemm's, or a bfloat16 path) and those of 1×1 images
// in the precision prec, which multiplies as path does. On a float32 path
// with in-place tiles the products run in pointwiseBlocks; elsewhere each
// image's output is filled with the bias, multiplied into by Sgemm and
// passed over once more for the activation.
func pointwiseForward(prec *Precision, path *gemmPath, x, w, b, y []float32, g Conv, act Act, alpha float32) {
	G, hw := g.Groups, g.H*g.W
	if hw == 1 && G == 1 {
		// 1×1 images (squeeze-and-excitation's layers): x [N,C] and y
		// [N,OC] are a dense layer's, one product for the batch
		// instead of a matrix-vector product an image.
		prec.GemmFwd(x, w, b, y, g.N, g.C, g.OC, act, alpha)
		return
	}
	if path.direct != nil && path.pairs == nil {
		pointwiseBlocked(path, x, w, b, y, g, act, alpha)
		return
	}
	ocg, cg := g.OC/G, g.C/G
	image := func(n, threads int) {
		yn := y[n*g.OC*hw : (n+1)*g.OC*hw]
		beta := float32(0)
		if b != nil {
			// The bias first, so that the product adds to it (beta 1)
			// and the output is written in one pass of the product.
			beta = 1
			for oc := 0; oc < g.OC; oc++ {
				fillFloats(yn[oc*hw:(oc+1)*hw], b[oc])
			}
		}
		for gi := 0; gi < G; gi++ {
			gemmOn(path, threads, false, false, ocg, hw, cg, 1, w[gi*ocg*cg:], cg, x[(n*g.C+gi*cg)*hw:], hw, beta, yn[gi*ocg*hw:], hw)
		}
		if act != ActNone {
			applyAct(yn, act, alpha)
		}
	}
	if g.N >= Threads() {
		// Enough images for every thread: one image a task, each product
		// on its own thread.
		ParallelFor(g.N, 1, func(lo, hi int) {
			for n := lo; n < hi; n++ {
				image(n, 1)
			}
		})
		return
	}
	for n := 0; n < g.N; n++ {
		image(n, Threads())
	}
}

// Blocks of pointwiseBlocked's products: pointwiseBlockA floats of the
// weights (rows × a kc block of the shared dimension) stay in L2 while
// the columns of a block stream past them, and the output block (rows ×
// columns), pointwiseBlockC floats, stays in L2 between the kc blocks
// and for the bias and activation epilogue.
const (
	pointwiseBlockA = 256 * 256
	pointwiseBlockC = 256 * 128
)

// pointwiseBlocked runs pointwiseForward's products Y = W·X on path's
// in-place tiles (path.direct), which read the weights and the image in
// place: each image and group's output is cut into blocks of rows ×
// columns, and each block is multiplied kc steps of the shared dimension
// at a time and passed through the bias and activation while it is in
// cache, where Sgemm wrote the whole image after the bias and the
// activation pass read it from memory again. With at
// least as many images as threads each thread takes whole images; with
// fewer, the blocks of all images are split over the threads.
func pointwiseBlocked(p *gemmPath, x, w, b, y []float32, g Conv, act Act, alpha float32) {
	G, hw := g.Groups, g.H*g.W
	m, k := g.OC/G, g.C/G
	kc := min(k, p.kc)
	mc := min(gemmRoundUp(m, p.mr), max(p.mr, pointwiseBlockA/kc/p.mr*p.mr))
	nb := min(gemmRoundUp(hw, p.nr), max(p.nr, pointwiseBlockC/mc/p.nr*p.nr))
	threads := Threads()
	if g.N < threads {
		// Enough blocks for every thread: fewer rows a block, down to one
		// register tile, until there are four blocks a thread.
		for mc > p.mr && g.N*G*gemmCeilDiv(m, mc)*gemmCeilDiv(hw, nb) < 4*threads {
			mc = gemmRoundUp(mc/2, p.mr)
		}
	}
	rowBlocks, colBlocks := gemmCeilDiv(m, mc), gemmCeilDiv(hw, nb)
	perImage := G * rowBlocks * colBlocks
	block := func(wa *gemmArena, cw *convWorker, t int) {
		n, t := t/perImage, t%perImage
		gi, t := t/(rowBlocks*colBlocks), t%(rowBlocks*colBlocks)
		i0, j0 := t/colBlocks*mc, t%colBlocks*nb
		pointwiseBlock(p, wa, cw, x[(n*g.C+gi*k)*hw:], w[gi*m*k:], b, y[(n*g.OC+gi*m)*hw:], gi*m, m, k, hw, i0, min(i0+mc, m), j0, min(j0+nb, hw), kc, act, alpha)
	}
	tasks, per := g.N*perImage, 1
	if g.N >= threads {
		per = perImage // whole images a thread
	}
	ParallelFor(tasks/per, 1, func(lo, hi int) {
		wa := gemmArenas.Get().(*gemmArena)
		wa.fit(p)
		cw := convWorkers.Get()
		for t := lo * per; t < hi*per; t++ {
			block(wa, cw, t)
		}
		convWorkers.Put(cw)
		gemmArenas.Put(wa)
	})
}

// pointwiseDotCols is the most columns past a block's last whole half
// panel (nr/2 columns) that pointwiseBlock computes as dot products: a
// 7×7 plane's 49 columns are a panel of 32, a half panel of 16 and one
// column, where a packed panel of 32 computed 17 (64 lanes for 49).
// Batch 1, one thread, CPU ms, 2-3 runs (BenchmarkConvMobile), before and
// after: mobilenet_v2's 7² layers 320→1280 0.53-0.54 and 0.43-0.45,
// 960→320 0.38-0.39 and 0.31, 160→960 0.20 and 0.17; regnet_y_400mf's
// 440→440 at 7² 0.24-0.25 and 0.20, 208→208 at 14² (196 = 192 + 4)
// 0.169-0.170 and 0.160-0.162.
const pointwiseDotCols = 4

// pointwiseBlock computes rows [i0, i1) and columns [j0, j1) of one
// product y[m, hw] = act(w[m, k]·x[k, hw] + bias), the bias of row i
// being b[b0+i] (none when b is nil): kc steps of k at a time, each over
// the block's panels of nr columns (read in place, or a last narrower
// one packed into wa) and its rows in the path's tiles, then the bias and
// the activation in one pass over the block (rowBiasAct). Where the
// block ends at most pointwiseDotCols columns past a whole half panel,
// those columns are dot products of w's rows with the column of x,
// gathered into cw's buffer.
func pointwiseBlock(p *gemmPath, wa *gemmArena, cw *convWorker, x, w, b, y []float32, b0, m, k, hw, i0, i1, j0, j1, kc int, act Act, alpha float32) {
	jt := j1 // the columns the tiles compute: [j0, jt)
	if half := p.nr / 2; p.directHalf != nil && (j1-j0)%half <= pointwiseDotCols {
		jt = j1 - (j1-j0)%half
	}
	beta := float32(0)
	for pc := 0; pc < k; pc += kc {
		kb := min(kc, k-pc)
		for jr := j0; jr < jt; jr += p.nr {
			cols := min(p.nr, jt-jr)
			nr, tiles := p.nr, p.direct
			if cols <= p.nr/2 && p.directHalf != nil {
				nr, tiles = p.nr/2, p.directHalf
			}
			bp, ldb := &x[pc*hw+jr], hw
			if cols < nr {
				packB(false, x, hw, pc, jr, kb, cols, nr, wa.b, nil)
				bp, ldb = &wa.b[0], nr
			}
			i := i0
			for _, t := range tiles {
				for ; i1-i >= t.rows; i += t.rows {
					a := &w[i*k+pc]
					if cols == nr {
						t.kernel(kb, a, k, 1, bp, ldb, &y[i*hw+jr], hw, 1, beta)
						continue
					}
					t.kernel(kb, a, k, 1, bp, ldb, &wa.tile[0], nr, 1, 0)
					mergeTile(wa.tile, nr, t.rows, cols, y[i*hw+jr:], hw, 1, beta)
				}
			}
		}
		beta = 1
	}
	if jt < j1 {
		cw.cols = grow(cw.cols, k+i1-i0)
		col, dots := cw.cols[:k], cw.cols[k:k+i1-i0]
		for j := jt; j < j1; j++ {
			for pc := range col {
				col[pc] = x[pc*hw+j]
			}
			dotRows(col, w[i0*k:], k, dots)
			for i, v := range dots {
				y[(i0+i)*hw+j] = v
			}
		}
	}
	if b != nil {
		b = b[b0+i0 : b0+i1]
	}
	if b != nil || act != ActNone {
		rowBiasAct(y[i0*hw+j0:], b, i1-i0, j1-j0, hw, act, alpha)
	}
}

// fillFloats sets every element of s to v, by doubling copies (memmove's
// vector loop).
func fillFloats(s []float32, v float32) {
	if len(s) == 0 {
		return
	}
	s[0] = v
	for n := 1; n < len(s); n *= 2 {
		copy(s[n:], s[:n])
	}
}

// Conv2DPointwiseBwd is the backward pass of Conv2DPointwiseFwd, for the
// same geometry: it overwrites dy with the gradient of the pre-activation,
// then per image and group dX = Wᵀ·dY (when dx is not nil) and dW +=
// dY·Xᵀ, and db (when not nil) the sums of dy. With at least as many
// images as threads each worker sums its images' dW into its own
// accumulator and the workers' are added in worker order at the end (a
// fixed partition, so the same thread count gives the same sums); with
// fewer, images run one after another and each product is split over the
// threads.
func Conv2DPointwiseBwd(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !pointwiseOK(g) {
		panic(pointwiseRefusal("Conv2DPointwiseBwd", g))
	}
	pointwiseBackward(FP32, activeGemmPath.Load(), x, w, y, dy, dx, dw, db, g, act, alpha)
}

// pointwiseBackward is Conv2DPointwiseBwd's body for normalised g, its
// products on path and those of 1×1 images in prec, as pointwiseForward.
func pointwiseBackward(prec *Precision, path *gemmPath, x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	G, hw := g.Groups, g.H*g.W
	if hw == 1 && G == 1 {
		prec.GemmBwd(x, w, y, dy, dx, dw, db, g.N, g.C, g.OC, act, alpha)
		return
	}
	ocg, cg := g.OC/G, g.C/G
	yimg, wlen := g.OC*hw, g.OC*cg
	// image adds image n's dW into acc and its bias gradient into sums,
	// and writes its dx.
	image := func(n int, acc, sums []float32, threads int) {
		dyn := dy[n*yimg : (n+1)*yimg]
		if act != ActNone {
			actBackward(y[n*yimg:(n+1)*yimg], dyn, act, alpha)
		}
		for oc := 0; oc < g.OC; oc++ {
			var s float32
			for _, v := range dyn[oc*hw : (oc+1)*hw] {
				s += v
			}
			sums[oc] += s
		}
		for gi := 0; gi < G; gi++ {
			dyg, xg := dyn[gi*ocg*hw:], x[(n*g.C+gi*cg)*hw:]
			// dW_g += dY_g·X_gᵀ, the positions the shared dimension.
			gemmOn(path, threads, false, true, ocg, cg, hw, 1, dyg, hw, xg, hw, 1, acc[gi*ocg*cg:], cg)
			if dx == nil {
				continue
			}
			// dX_g = W_gᵀ·dY_g.
			gemmOn(path, threads, true, false, cg, hw, ocg, 1, w[gi*ocg*cg:], cg, dyg, hw, 0, dx[(n*g.C+gi*cg)*hw:], hw)
		}
	}
	dw = dw[:wlen]
	lead := convWorkers.Get() // its db holds the bias gradient
	defer convWorkers.Put(lead)
	lead.db = grow(lead.db, g.OC)
	sums := lead.db
	clear(sums)
	if g.N < Threads() {
		clear(dw)
		for n := 0; n < g.N; n++ {
			image(n, dw, sums, Threads())
		}
	} else {
		workers := convParallel(g.N, func(cw *convWorker) {
			cw.dw = grow(cw.dw, wlen)
			clear(cw.dw)
			cw.db = grow(cw.db, g.OC)
			clear(cw.db)
		}, func(cw *convWorker, n int) {
			image(n, cw.dw, cw.db, 1)
		})
		clear(dw)
		for _, cw := range workers {
			for i, v := range cw.dw {
				dw[i] += v
			}
			for i, v := range cw.db {
				sums[i] += v
			}
		}
		releaseConvWorkers(workers)
	}
	if db != nil {
		copy(db[:g.OC], sums)
	}
}
