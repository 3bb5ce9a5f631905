package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// convScratchBudget bounds the scratch of one convolution step, in float32s
// (64 MiB): the columns and output rows of as many images as fit, so that a
// batch becomes a few large GEMMs instead of one small GEMM per image,
// while a large image or batch never asks for more than this.
const convScratchBudget = 1 << 24

// normConv returns g with zero strides, dilations and groups read as 1, as
// the planner and rt/cpu read them.
func normConv(g planner.ConvGeom) planner.ConvGeom {
	for _, v := range []*int{&g.SH, &g.SW, &g.DH, &g.DW, &g.Groups} {
		if *v < 1 {
			*v = 1
		}
	}
	return g
}

// convColsPerImage is the im2col columns of one image, all groups:
// C·KH·KW rows of OH·OW. It is all the scratch a convolution needs when
// it is lowered one image at a time (its GEMMs then write y directly).
func convColsPerImage(g planner.ConvGeom) int { return g.C * g.KH * g.KW * g.OH * g.OW }

// convScratchPerImage is the scratch one image of a round needs: its
// columns and its rows of the round's [OC, images·OH·OW] GEMM output (or
// gathered output gradient).
func convScratchPerImage(g planner.ConvGeom) int { return (g.C*g.KH*g.KW + g.OC) * g.OH * g.OW }

// ConvScratch is the number of float32s of scratch Lower wants for a
// convolution step with geometry g: rounds of as many images as fit in
// 64 MiB of columns and output rows (the whole batch when it fits), the
// rounds balanced so the last is not a small remainder, or one image's
// columns when not even two images fit. A GPU backend's planner.Target
// asks for it (emit's gpuTarget); Lower reads the round
// size back from the scratch buffer's size, so any size that holds one
// image's columns lowers correctly.
func ConvScratch(g planner.ConvGeom) int { return convScratchWithin(g, convScratchBudget, false) }

// ConvScratchWithin is ConvScratch with a budget of its own (float32s), for
// a discrete GPU with memory to spare: larger rounds make fewer, larger
// GEMMs and launches, and a whole batch's round gets room for its weight
// gradient's split-K partial sums (its device runs strided batched GEMMs
// as one launch).
func ConvScratchWithin(budget int) func(planner.ConvGeom) int {
	return func(g planner.ConvGeom) int { return convScratchWithin(g, budget, true) }
}

func convScratchWithin(g planner.ConvGeom, budget int, splitK bool) int {
	g = normConv(g)
	most := min(g.N, budget/max(1, convScratchPerImage(g)))
	if most < 2 {
		return convColsPerImage(g)
	}
	rounds := ceilDiv(g.N, most)
	s := ceilDiv(g.N, rounds) * convScratchPerImage(g)
	if rounds == 1 && splitK {
		// Room for the weight gradient's split-K partial sums after the
		// rows.
		s += convSplitKPartials(g)
	}
	return s
}

// splitKChunks is the number of equal chunks a GEMM's inner dimension k is
// cut into when its output is small (m·n ≤ 4096) and k long (≥ 16384),
// as the first layer's weight gradient is (32×25 outputs summed over
// 196,000 pixels of a batch of MNIST images): cuBLAS runs such a product on
// a few thread blocks (76 µs on an H100 for 0.3 GFLOP), while S chunks are
// S products of one batched GEMM that fill the GPU, and a small kernel adds
// their partial sums. 1: no split.
func splitKChunks(m, n, k int) int {
	if m*n > 4096 || k < 16384 {
		return 1
	}
	for s := min(128, k/1024); s >= 8; s-- {
		if k%s == 0 {
			return s
		}
	}
	return 1
}

// convSplitKPartials is the scratch, in float32s, of the split-K partial
// sums of a whole-batch convolution's weight gradient (0 when it is not
// split).
func convSplitKPartials(g planner.ConvGeom) int {
	ocg, ckk := g.OC/g.Groups, g.C/g.Groups*g.KH*g.KW
	s := splitKChunks(ocg, ckk, g.N*g.OH*g.OW)
	if s == 1 {
		return 0
	}
	return s * ocg * ckk
}

// splitKSumKernel adds chunks partial products of n values each into out.
func splitKSumKernel(chunks, n int) *Kernel {
	return elementwise(fmt.Sprintf("sum of %d split-K partial products of %d values", chunks, n), n,
		[]Param{in("p", chunks*n), out("c", n)}, func(i Expr) []Stmt {
			s := []Stmt{let("acc", Float, load("p", i))}
			for c := 1; c < chunks; c++ {
				s = append(s, set("acc", add(vr("acc"), load("p", add(i, i32(c*n))))))
			}
			return append(s, store("c", i, vr("acc")))
		})
}

// ConvOneRound reports whether scratch float32s hold the whole batch of a
// convolution with geometry g in one round, so that after the forward step
// they still hold the columns of every image (the backward can reuse them:
// planner.ConvChoice.SharesForward).
func ConvOneRound(g planner.ConvGeom, scratch int) bool {
	g = normConv(g)
	r, err := convRoundImages(g, scratch)
	return err == nil && r >= g.N
}

// convRoundImages is the number of images per round that scratch (in
// float32s) allows: as many as fit their columns and output rows, or 1
// (written straight into y, no output rows) when only one image's columns
// fit.
func convRoundImages(g planner.ConvGeom, scratch int) (int, error) {
	if r := min(g.N, scratch/max(1, convScratchPerImage(g))); r >= 2 {
		return r, nil
	}
	if scratch >= convColsPerImage(g) {
		return 1, nil
	}
	return 0, fmt.Errorf("convolution scratch of %d float32s is smaller than one image's columns (C·KH·KW·OH·OW = %d); plan with a Target whose convolution scratch is gpu.ConvScratch",
		scratch, convColsPerImage(g))
}

// conv lowers a convolution, forward or backward, in rounds of images (see
// ConvScratch for the round size). Each round writes the im2col columns of
// its images side by side into the scratch, [C/G·KH·KW, images·OH·OW] per
// group, so that each group is one GEMM per round.
//
// Forward: W_g · cols_g gives the round's output rows [OC/G, images·OH·OW]
// after the columns in the scratch, and an epilogue kernel moves them into
// place in y [N, OC, OH, OW] with the bias and activation applied.
//
// Backward: the activation's derivative is applied to dy and db summed over
// the whole batch first; then per round dy is gathered into output rows
// [OC, images·OH·OW] (the forward's layout), dW_g += rows_g · cols_gᵀ (Beta
// 0 in the first round, 1 after), cols_g = W_gᵀ · rows_g, and col2im gathers
// the columns back into the round's dx. When one round holds the batch, the
// derivative is applied as dy is gathered into the rows (convRowsKernel),
// and db sums the rows, so dy itself is left as it came.
//
// With room for one image only, the rows of an image are its own block of y
// (or dy), so the GEMMs read and write y and dy in place and the bias and
// activation run once over the batch at the end.
func (l *lowering) conv(st *planner.Step, bwd bool) error {
	a := st.Attr
	if a.Conv == nil {
		return fmt.Errorf("convolution without Attr.Conv")
	}
	if a.Pool != nil && bwd {
		return fmt.Errorf("a backward convolution with an epilogue pool (a planner bug: the pool belongs to the forward step)")
	}
	if wa := WinogradByMethod(a.Method); wa != nil {
		return l.winograd(st, bwd, wa)
	}
	if a.Method == ConvLibraryMethod {
		return l.convLibrary(st, bwd)
	}
	if a.Method == ConvDirectMethod {
		if bwd {
			return l.convDirectBwd(st)
		}
		return l.convDirect(st)
	}
	if _, err := epiloguePool(a); err != nil {
		return err
	}
	g := normConv(*a.Conv)
	if g.C%g.Groups != 0 || g.OC%g.Groups != 0 {
		return fmt.Errorf("%d input and %d output channels do not split into %d groups", g.C, g.OC, g.Groups)
	}
	ocg := g.OC / g.Groups
	ckk, ohw, chw, yimg := g.C/g.Groups*g.KH*g.KW, g.OH*g.OW, g.C*g.H*g.W, g.OC*g.OH*g.OW
	alpha := float32(a.Alpha)
	nin, nout, scratchAt := 3, 2, func() planner.BufID { return st.Out[1] }
	if bwd {
		nin, nout, scratchAt = 5, 3, func() planner.BufID { return st.In[4] }
	}
	if err := l.operands(st, nin, nout); err != nil {
		return err
	}
	cols := scratchAt()
	sb, err := l.buf(cols)
	if err != nil {
		return err
	}
	images, err := convRoundImages(g, sb.Size)
	if err != nil {
		return fmt.Errorf("scratch %q: %w", sb.Name, err)
	}
	direct := images == 1
	// round describes the images [first, first+r): the leading dimension
	// of its columns and output rows, and where the rows start.
	type round struct{ first, r, ld, rowsOff int }
	var rounds []round
	for first := 0; first < g.N; first += images {
		r := min(images, g.N-first)
		rounds = append(rounds, round{first, r, r * ohw, g.C * g.KH * g.KW * r * ohw})
	}
	weights := func(gi int) Matrix { return Matrix{st.In[1], gi * ocg * ckk, ocg, ckk, ckk} }
	colsOf := func(rd round, gi int) Matrix { return Matrix{cols, gi * ckk * rd.ld, ckk, rd.ld, rd.ld} }
	// rowsOf is group gi's output rows of a round: in the scratch after the
	// columns, or, lowering one image at a time, the image's block of out.
	rowsOf := func(rd round, gi int, out planner.BufID) Matrix {
		if direct {
			return Matrix{out, rd.first*yimg + gi*ocg*ohw, ocg, ohw, ohw}
		}
		return Matrix{cols, rd.rowsOff + gi*ocg*rd.ld, ocg, rd.ld, rd.ld}
	}
	if !bwd {
		x, b, y := st.In[0], st.In[2], st.Out[0]
		for _, rd := range rounds {
			if err := l.launch("im2col", im2colKernel(g, rd.r), nil, at(x, rd.first*chw), whole(cols)); err != nil {
				return err
			}
			for gi := 0; gi < g.Groups; gi++ {
				if err := l.gemm(Gemm{M: ocg, N: rd.ld, K: ckk, Alpha: 1, A: weights(gi), B: colsOf(rd, gi), C: rowsOf(rd, gi, y)}); err != nil {
					return err
				}
			}
			if direct {
				continue
			}
			k, err := convScatterKernel(rd.r, g.OC, ohw, present(b), a.Act, alpha)
			ops := []operand{at(cols, rd.rowsOff), at(y, rd.first*yimg)}
			if present(b) {
				ops = append(ops, whole(b))
			}
			if err := l.launch("conv_epilogue", k, err, ops...); err != nil {
				return err
			}
		}
		if direct && (present(b) || a.Act != "") {
			k, err := biasActKernel(g.N*yimg, g.OC, ohw, present(b), a.Act, alpha)
			ops := []operand{whole(y)}
			if present(b) {
				ops = append(ops, whole(b))
			}
			return l.launch("bias_act", k, err, ops...)
		}
		return nil
	}
	x, y, dy := st.In[0], st.In[2], st.In[3]
	dx, dw, db := st.Out[0], st.Out[1], st.Out[2]
	// With the whole batch in one round, the activation's derivative is
	// applied while dy is gathered into the GEMMs' rows, and the bias
	// gradient sums those rows (contiguous per channel).
	rowsAct := !direct && len(rounds) == 1 && (present(dw) || present(dx))
	if rowsAct {
		rd := rounds[0]
		k, err := convRowsKernel(rd.r, g.OC, ohw, a.Act, alpha)
		ops := []operand{at(dy, 0), at(cols, rd.rowsOff)}
		if a.Act != "" {
			ops = append(ops, at(y, 0))
		}
		if err := l.launch("conv_rows", k, err, ops...); err != nil {
			return err
		}
		if present(db) {
			if err := l.launch("bias_grad", channelSumKernel(1, g.OC, rd.ld), nil, at(cols, rd.rowsOff), whole(db)); err != nil {
				return err
			}
		}
	}
	if a.Act != "" && !rowsAct {
		k, err := actBwdKernel(g.N*yimg, a.Act, alpha)
		if err := l.launch("act_bwd", k, err, whole(y), whole(dy)); err != nil {
			return err
		}
	}
	if present(db) && !rowsAct {
		if err := l.launch("bias_grad", channelSumKernel(g.N, g.OC, ohw), nil, whole(dy), whole(db)); err != nil {
			return err
		}
	}
	if !present(dw) && !present(dx) {
		return nil
	}
	for n, rd := range rounds {
		if !direct && !rowsAct {
			k, err := transposeKernel([]int{rd.r, g.OC, ohw}, []int{1, 0, 2})
			if err := l.launch("conv_rows", k, err, at(dy, rd.first*yimg), at(cols, rd.rowsOff)); err != nil {
				return err
			}
		}
		if present(dw) {
			// With Attr.KeptCols and one round, the forward step's columns
			// of the whole batch are still in the workspace.
			if !a.KeptCols || len(rounds) > 1 {
				if err := l.launch("im2col", im2colKernel(g, rd.r), nil, at(x, rd.first*chw), whole(cols)); err != nil {
					return err
				}
			}
			beta := float32(1)
			if n == 0 {
				beta = 0
			}
			// One round with room after its rows (convScratchWithin): a
			// long K is split, each group's partial sums after the rows.
			chunks := splitKChunks(ocg, ckk, rd.ld)
			part := rd.rowsOff + g.OC*rd.ld
			split := !direct && len(rounds) == 1 && chunks > 1 && part+g.Groups*chunks*ocg*ckk <= sb.Size
			for gi := 0; gi < g.Groups; gi++ {
				dwg := Matrix{dw, gi * ocg * ckk, ocg, ckk, ckk}
				if split {
					kc, pg := rd.ld/chunks, part+gi*chunks*ocg*ckk
					a, b := rowsOf(rd, gi, dy), colsOf(rd, gi)
					a.Cols, b.Cols = kc, kc
					if err := l.gemm(Gemm{TransB: true, M: ocg, N: ckk, K: kc, Alpha: 1, Batch: chunks, Stride: [3]int{kc, kc, ocg * ckk},
						A: a, B: b, C: Matrix{cols, pg, ocg, ckk, ckk}}); err != nil {
						return err
					}
					if err := l.launch("splitk_sum", splitKSumKernel(chunks, ocg*ckk), nil, at(cols, pg), at(dw, gi*ocg*ckk)); err != nil {
						return err
					}
					continue
				}
				if err := l.gemm(Gemm{TransB: true, M: ocg, N: ckk, K: rd.ld, Alpha: 1, Beta: beta,
					A: rowsOf(rd, gi, dy), B: colsOf(rd, gi), C: dwg}); err != nil {
					return err
				}
			}
		}
		if present(dx) {
			for gi := 0; gi < g.Groups; gi++ {
				if err := l.gemm(Gemm{TransA: true, M: ckk, N: rd.ld, K: ocg, Alpha: 1,
					A: weights(gi), B: rowsOf(rd, gi, dy), C: colsOf(rd, gi)}); err != nil {
					return err
				}
			}
			if err := l.launch("col2im", col2imKernel(g, rd.r), nil, whole(cols), at(dx, rd.first*chw)); err != nil {
				return err
			}
		}
	}
	return nil
}

// convBwd lowers a convolution's backward; a step whose dy already
// carries the activation's derivative is lowered as one without it.
func (l *lowering) convBwd(st *planner.Step) error {
	a := st.Attr
	if a.ActApplied {
		// dy carries the activation's derivative (the max pool's
		// backward applied it): lower the step without one.
		plain := *st
		plain.Attr.Act, plain.Attr.Alpha, plain.Attr.ActApplied = "", 0, false
		return l.conv(&plain, true)
	}
	return l.conv(st, true)
}
