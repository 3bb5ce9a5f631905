package cpu

import (
	"sync"
)

// This file holds the convolution's own matrix-multiply driver, which now
// runs only what the direct kernels (conv_direct.go) do not: strided
// convolutions, and dx where the padding exceeds the filter's reach. Sgemm would
// need the im2col matrix built first and then copied again into its packed
// B panels, and its parallel split does not fit the conv products (6 to 32
// output channels, so one row tile): here the columns are gathered from the
// image straight into the microkernel's packed B layout, one panel of nr
// output positions at a time, and the work is split over images (or, for a
// batch smaller than the thread count, over panels of one image), each
// goroutine with its own panel buffers. The microkernels, packA, packB and
// mergeTile are Sgemm's, so every instruction set Sgemm has (and its pure-Go
// fallback) runs the convolutions too.

// convWorker is one goroutine's workspace: a packed B panel, a spare tile
// for edge tiles, and accumulators for the weight and bias gradients.
// Workers are recycled through convWorkers so that steady-state calls do not
// allocate (a free list rather than a sync.Pool, which the garbage
// collector empties and which hands a goroutine on another P a new, empty
// workspace).
type convWorker struct {
	panel, tile, a []float32
	dw, db, rows   []float32
	cols           []float32
	offs           []int
}

var convWorkers convWorkerList

// convWorkerList is a free list of workspaces.
type convWorkerList struct {
	mu   sync.Mutex
	free []*convWorker
}

// Get returns a free workspace, or a new one.
func (l *convWorkerList) Get() *convWorker {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.free); n > 0 {
		w := l.free[n-1]
		l.free = l.free[:n-1]
		return w
	}
	return new(convWorker)
}

// Put returns w to the list.
func (l *convWorkerList) Put(w *convWorker) {
	l.mu.Lock()
	l.free = append(l.free, w)
	l.mu.Unlock()
}

// grow returns s with length n, reusing its storage when it is big enough.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return Floats(n)
	}
	return s[:n]
}

// convMaxWorkers bounds the goroutines of one convolution call.
const convMaxWorkers = 64

// convParallel runs fn(w, task) for every task in [0, tasks) over up to
// Threads() goroutines (the caller's among them, through ParallelFor). Worker i takes the
// contiguous tasks [i·tasks/n, (i+1)·tasks/n): a fixed partition, so that
// the per-worker accumulators the caller reduces (in worker order) hold the
// same sums in the same order on every run, and training with a seed is
// reproducible. It returns the workers used, for the caller to reduce their
// accumulators and then release with releaseConvWorkers; prepare runs on
// each worker before its first task.
func convParallel(tasks int, prepare func(w *convWorker), fn func(w *convWorker, task int)) []*convWorker {
	n := max(1, min(Threads(), tasks, convMaxWorkers))
	workers := make([]*convWorker, n)
	for i := range workers {
		workers[i] = convWorkers.Get()
	}
	body := func(i int) {
		w := workers[i]
		prepare(w)
		for t := i * tasks / n; t < (i+1)*tasks/n; t++ {
			fn(w, t)
		}
	}
	// One item per chunk: ParallelFor's pool runs them, so a core that
	// another process holds delays no more than the chunks it started.
	ParallelFor(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			body(i)
		}
	})
	return workers
}

func releaseConvWorkers(workers []*convWorker) {
	for _, w := range workers {
		convWorkers.Put(w)
	}
}

// convTiles runs the register tiles of rows [0, m) of C against one packed
// B panel of kb steps holding cols (≤ nr) columns: C = Ap·Bp + beta·C with
// C's rows ldc apart. ap holds the packed A micro-panels of mr rows, kb
// steps each, one after another. Edge tiles go through tile and mergeTile,
// so C is never written outside its m×cols block.
func convTiles(p *gemmPath, m, kb int, ap, bp []float32, cols int, c []float32, ldc int, beta float32, tile []float32) {
	mr, nr := p.mr, p.nr
	for ir := 0; ir < m; ir += mr {
		rows := min(mr, m-ir)
		a := ap[ir*kb : ir*kb+mr*kb]
		if rows == mr && cols == nr {
			cc := c[ir*ldc : ir*ldc+(mr-1)*ldc+nr]
			p.kernel(kb, &a[0], &bp[0], &cc[0], ldc, 1, beta)
			continue
		}
		p.kernel(kb, &a[0], &bp[0], &tile[0], nr, 1, 0)
		mergeTile(tile, nr, rows, cols, c[ir*ldc:], ldc, 1, beta)
	}
}

// packConvPanel gathers, for one image x [C,H,W], filter taps [k0, k0+kb)
// of the group whose first channel is c0, at output positions [j0, j0+cols),
// into dst in packed B layout: tap k's values for the nr positions at
// dst[k·nr:], zero past cols and in the padding. It is im2col and packB in
// one pass.
func packConvPanel(x []float32, g Conv, c0, k0, kb, j0, cols, nr int, dst []float32) {
	kw, kh, c := k0%g.KW, k0/g.KW%g.KH, c0+k0/(g.KW*g.KH)
	hw := g.H * g.W
	for k := 0; k < kb; k++ {
		row := dst[k*nr : k*nr+nr]
		plane := x[c*hw : (c+1)*hw]
		oh, ow := j0/g.OW, j0%g.OW
		for jj := 0; jj < cols; {
			n := min(cols-jj, g.OW-ow)
			out := row[jj : jj+n]
			ih := oh*g.SH - g.PH + kh*g.DH
			if ih < 0 || ih >= g.H {
				clear(out)
			} else {
				src := plane[ih*g.W : (ih+1)*g.W]
				iw0 := ow*g.SW - g.PW + kw*g.DW
				gatherRow(out, src, iw0, g.SW)
			}
			jj += n
			oh, ow = oh+1, 0
		}
		clear(row[cols:])
		if kw++; kw == g.KW {
			kw = 0
			if kh++; kh == g.KH {
				kh = 0
				c++
			}
		}
	}
}

// gatherRow sets out[j] = src[iw0+j·sw], or 0 where that is outside src.
func gatherRow(out, src []float32, iw0, sw int) {
	if sw == 1 {
		lo := max(0, -iw0)
		hi := min(len(out), len(src)-iw0)
		if hi <= lo {
			clear(out)
			return
		}
		for j := range out[:lo] {
			out[j] = 0
		}
		copy(out[lo:hi], src[lo+iw0:hi+iw0])
		for j := hi; j < len(out); j++ {
			out[j] = 0
		}
		return
	}
	for j := range out {
		iw := iw0 + j*sw
		if iw >= 0 && iw < len(src) {
			out[j] = src[iw]
		} else {
			out[j] = 0
		}
	}
}

// packConvPanelT gathers the transpose of packConvPanel's block, the packed
// B panel of the weight-gradient product dW = dY·colsᵀ: for output
// positions [p0, p0+kb) (the shared dimension) and filter taps [t0,
// t0+cols) of the group starting at channel c0, dst[p·nr + t] is the input
// pixel tap t sees at position p (0 in the padding), zero for t ≥ cols. It
// gathers tap-major rows into rows (cols·kb floats of scratch), the fast
// contiguous way packConvPanel does, then transposes them in 8×8 blocks
// with the path's transpose8 when it has one.
func packConvPanelT(p *gemmPath, x []float32, g Conv, c0, t0, cols, p0, kb int, dst, rows []float32) {
	nr := p.nr
	dst = dst[:kb*nr]
	packConvPanel(x, g, c0, t0, cols, p0, kb, kb, rows)
	t := 0
	if p.transpose8 != nil {
		for ; t+8 <= cols; t += 8 {
			q := 0
			for ; q+8 <= kb; q += 8 {
				p.transpose8(&rows[t*kb+q], kb, &dst[q*nr+t], nr)
			}
			for ; q < kb; q++ {
				for r := t; r < t+8; r++ {
					dst[q*nr+r] = rows[r*kb+q]
				}
			}
		}
	}
	for ; t < cols; t++ {
		for q, v := range rows[t*kb : t*kb+kb] {
			dst[q*nr+t] = v
		}
	}
	if cols < nr {
		for q := 0; q < kb; q++ {
			clear(dst[q*nr+cols : q*nr+nr])
		}
	}
}

// convForward is Conv2DIm2colFwd's body for normalised geometry g.
func convForward(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	p := activeGemmPath.Load()
	G, ohw, krows := g.Groups, g.OH*g.OW, g.colRows()
	ocg, chw, cg := g.OC/G, g.C*g.H*g.W, g.C/G
	mPad := gemmRoundUp(ocg, p.mr)
	panels := gemmCeilDiv(ohw, p.nr)
	// Split an image's panels over threads only when the batch alone
	// cannot keep them busy (inference on a few images).
	chunks := 1
	if t := Threads(); g.N < 2*t {
		chunks = min(panels, gemmCeilDiv(2*t, g.N))
	}
	// The filters, packed once per call into mr-row micro-panels, per
	// group and per kc block of taps: group gi's block at tap pc starts at
	// gi·mPad·krows + pc·mPad.
	lead := convWorkers.Get()
	lead.a = grow(lead.a, G*mPad*krows)
	for gi := 0; gi < G; gi++ {
		for pc := 0; pc < krows; pc += p.kc {
			kb := min(p.kc, krows-pc)
			packA(p, false, w[gi*ocg*krows:], krows, 0, pc, ocg, kb, lead.a[gi*mPad*krows+pc*mPad:])
		}
	}
	wp := lead.a
	workers := convParallel(g.N*chunks, func(cw *convWorker) {
		cw.panel = grow(cw.panel, min(p.kc, krows)*p.nr)
		cw.tile = grow(cw.tile, p.mr*p.nr)
	}, func(cw *convWorker, task int) {
		n, chunk := task/chunks, task%chunks
		xn, yn := x[n*chw:(n+1)*chw], y[n*g.OC*ohw:(n+1)*g.OC*ohw]
		for jr := panels * chunk / chunks; jr < panels*(chunk+1)/chunks; jr++ {
			j0 := jr * p.nr
			cols := min(p.nr, ohw-j0)
			for gi := 0; gi < G; gi++ {
				for pc := 0; pc < krows; pc += p.kc {
					kb := min(p.kc, krows-pc)
					packConvPanel(xn, g, gi*cg, pc, kb, j0, cols, p.nr, cw.panel)
					beta := float32(0)
					if pc > 0 {
						beta = 1
					}
					convTiles(p, ocg, kb, wp[gi*mPad*krows+pc*mPad:], cw.panel, cols,
						yn[gi*ocg*ohw+j0:], ohw, beta, cw.tile)
				}
			}
			for oc := 0; oc < g.OC; oc++ {
				row := yn[oc*ohw+j0 : oc*ohw+j0+cols]
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

// convBackward is Conv2DIm2colBwd's body for normalised geometry g. Each task is
// one image: its dy becomes the pre-activation gradient, is summed into the
// worker's db, multiplied with the image's columns (gathered straight into
// packed panels) into the worker's dw, and multiplied with the filters into
// the image's column gradient, which col2im scatters into dx. The workers'
// dw and db are summed at the end.
func convBackward(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	convBackwardOn(activeGemmPath.Load(), x, w, y, dy, dx, dw, db, g, act, alpha)
}

// convBackwardOn is convBackward on GEMM path p: float32 panels, or on a
// bfloat16 path (p.pairs set: BF16's im2col backward, conv_bf16.go) pairs
// along each product's shared dimension, packed by the path's packers
// (packAPanels, packBPanels, convTapPanel) and multiplied by its tiles
// (convTileRows). On a bfloat16 path the products read dY as the
// pre-activation gradient rounded to bfloat16; db sums it unrounded.
func convBackwardOn(p *gemmPath, x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	G, ohw, krows := g.Groups, g.OH*g.OW, g.colRows()
	ocg, chw, cg := g.OC/G, g.C*g.H*g.W, g.C/G
	yimg := g.OC * ohw
	kmPad, oSteps := gemmRoundUp(krows, p.mr), p.steps(ocg)
	// For dx: the filters transposed ([krows, ocg] per group), packed once.
	lead := convWorkers.Get()
	var wt []float32
	if dx != nil {
		lead.a = grow(lead.a, G*kmPad*oSteps)
		for gi := 0; gi < G; gi++ {
			p.packAPanels(true, w[gi*ocg*krows:], krows, 0, 0, krows, ocg, lead.a[gi*kmPad*oSteps:])
		}
		wt = lead.a
	}
	tapPanels := gemmCeilDiv(krows, p.nr)
	kc := min(p.kc, ohw)
	workers := convParallel(g.N, func(cw *convWorker) {
		cw.panel = grow(cw.panel, max(p.steps(kc), oSteps)*p.nr)
		cw.tile = grow(cw.tile, max(p.mr*p.nr, kc))
		cw.a = grow(cw.a, gemmRoundUp(ocg, p.mr)*p.steps(kc))
		cw.rows = grow(cw.rows, p.nr*kc)
		cw.dw = grow(cw.dw, g.OC*krows)
		clear(cw.dw)
		cw.db = grow(cw.db, g.OC)
		clear(cw.db)
		if dx != nil {
			cw.cols = grow(cw.cols, g.C*g.KH*g.KW*ohw)
		}
	}, func(cw *convWorker, n int) {
		xn, dyn := x[n*chw:(n+1)*chw], dy[n*yimg:(n+1)*yimg]
		if act != ActNone {
			actBackward(y[n*yimg:(n+1)*yimg], dyn, act, alpha)
		}
		for oc := 0; oc < g.OC; oc++ {
			var s float32
			for _, v := range dyn[oc*ohw : (oc+1)*ohw] {
				s += v
			}
			cw.db[oc] += s
		}
		for gi := 0; gi < G; gi++ {
			dyg := dyn[gi*ocg*ohw:]
			dwg := cw.dw[gi*ocg*krows:]
			// dW_g += dY_g·cols_gᵀ: shared dimension = positions.
			for pc := 0; pc < ohw; pc += kc {
				kb := min(kc, ohw-pc)
				p.packAPanels(false, dyg, ohw, 0, pc, ocg, kb, cw.a)
				for tp := 0; tp < tapPanels; tp++ {
					t0 := tp * p.nr
					cols := min(p.nr, krows-t0)
					p.convTapPanel(xn, g, gi*cg, t0, cols, pc, kb, cw.panel, cw.rows)
					p.convTileRows(ocg, p.steps(kb), cw.a, cw.panel, cols, dwg[t0:], krows, 1, cw.tile)
				}
			}
			if dx == nil {
				continue
			}
			// cols_g = W_gᵀ·dY_g, panel by panel of positions.
			cgrad := cw.cols[gi*krows*ohw:]
			for j0 := 0; j0 < ohw; j0 += p.nr {
				cols := min(p.nr, ohw-j0)
				p.packBPanels(false, dyg, ohw, 0, j0, ocg, cols, cw.panel)
				p.convTileRows(krows, oSteps, wt[gi*kmPad*oSteps:], cw.panel, cols, cgrad[j0:], ohw, 0, cw.tile)
			}
		}
		if dx != nil {
			dxn := dx[n*chw : (n+1)*chw]
			clear(dxn)
			col2im(cw.cols, ohw, dxn, g)
		}
	})
	clear(dw[:g.OC*krows])
	if db != nil {
		clear(db[:g.OC])
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

// convTapPanel writes a B panel of the weight gradient's product dW +=
// dY·colsᵀ (positions [p0, p0+kb) shared, filter taps [t0, t0+cols) of the
// group starting at channel c0) into dst: packConvPanelT's float32 panel,
// or on a bfloat16 path the taps' rows gathered into rows and paired along
// the positions.
func (p *gemmPath) convTapPanel(x []float32, g Conv, c0, t0, cols, p0, kb int, dst, rows []float32) {
	if p.pairs != nil {
		packConvPanel(x, g, c0, t0, cols, p0, kb, kb, rows)
		pairColumns(p.pairs, pairsOf(dst), p.nr, rows, kb, cols, kb)
		return
	}
	packConvPanelT(p, x, g, c0, t0, cols, p0, kb, dst, rows)
}

// convTileRows is convTiles, or on a bfloat16 path pairTiles (steps
// counting pairs).
func (p *gemmPath) convTileRows(m, steps int, ap, bp []float32, cols int, c []float32, ldc int, beta float32, tile []float32) {
	if p.pairs != nil {
		pairTiles(p, m, steps, ap, bp, cols, c, ldc, beta, tile)
		return
	}
	convTiles(p, m, steps, ap, bp, cols, c, ldc, beta, tile)
}
