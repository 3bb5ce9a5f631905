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
// in the precision prec, which multiplies as path does.
func pointwiseForward(prec *Precision, path *gemmPath, x, w, b, y []float32, g Conv, act Act, alpha float32) {
	G, hw := g.Groups, g.H*g.W
	if hw == 1 && G == 1 {
		// 1×1 images (squeeze-and-excitation's layers): x [N,C] and y
		// [N,OC] are a dense layer's, one product for the batch
		// instead of a matrix-vector product an image.
		prec.GemmFwd(x, w, b, y, g.N, g.C, g.OC, act, alpha)
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
