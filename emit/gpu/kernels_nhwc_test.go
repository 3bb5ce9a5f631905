package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// toLayout returns a copy of the NCHW [outer, c, inner] tensor x in the
// layout an operand is given in: NHWC when nhwc, else NCHW.
func toLayout(x []float32, outer, c, inner int, nhwc bool) []float32 {
	if !nhwc {
		return slices.Clone(x)
	}
	y := make([]float32, len(x))
	for n := 0; n < outer; n++ {
		for ch := 0; ch < c; ch++ {
			for s := 0; s < inner; s++ {
				y[(n*inner+s)*c+ch] = x[(n*c+ch)*inner+s]
			}
		}
	}
	return y
}

// groupPartials is the float64 reference of a split into groups of
// rowsPer rows (the last shorter, those past the rows empty): per group
// and channel f's sum and g's sum over the group's elements, where f and
// g see an element's NCHW index and the group's values of the channel.
func groupPartials(outer, c, inner, groups int, first, second func(e int, vals []int) float64) []float32 {
	rows := outer * inner
	rowsPer := ceilDiv(rows, groups)
	part := make([]float32, 2*groups*c)
	for g := 0; g < groups; g++ {
		for ch := 0; ch < c; ch++ {
			var es []int
			for r := g * rowsPer; r < min(rows, (g+1)*rowsPer); r++ {
				es = append(es, (r/inner*c+ch)*inner+r%inner)
			}
			var s1, s2 float64
			for _, e := range es {
				s1 += first(e, es)
				s2 += second(e, es)
			}
			part[g*c+ch], part[(groups+g)*c+ch] = float32(s1), float32(s2)
		}
	}
	return part
}

// groupMean is the float64 mean of x over the NCHW indices es.
func groupMean(x []float32, es []int) float64 {
	var s float64
	for _, e := range es {
		s += float64(x[e])
	}
	return s / float64(len(es))
}

// renameStores makes every store to from a store to to, and to's
// parameter mutable, dropping from's: the kernel as it runs with the two
// bound to one buffer (dx over dy, y over x).
func renameStores(k *Kernel, from, to string) *Kernel {
	var walk func(ss []Stmt) []Stmt
	walk = func(ss []Stmt) []Stmt {
		out := make([]Stmt, len(ss))
		for i, s := range ss {
			switch s := s.(type) {
			case Store:
				if s.Buf == from {
					s.Buf = to
				}
				out[i] = s
			case Store4:
				if s.Buf == from {
					s.Buf = to
				}
				out[i] = s
			case If:
				out[i] = If{s.Cond, walk(s.Then), walk(s.Else)}
			case For:
				s.Body = walk(s.Body)
				out[i] = s
			default:
				out[i] = s
			}
		}
		return out
	}
	r := *k
	r.Body = walk(k.Body)
	r.Params = nil
	for _, p := range k.Params {
		switch p.Name {
		case from:
			continue
		case to:
			p.Mutable = true
		}
		r.Params = append(r.Params, p)
	}
	return &r
}

// nhwcCases are the NHWC kernels' cases: every kernel on shapes whose rows
// do not divide into the groups (one with an empty group), channels not a
// multiple of the 32-channel chunk (24, 36, 37: a chunk with a lane past
// the channels) and 32, 64 and 96 (four channels a thread where every
// operand is NHWC), inner 1, 9, 16 and 40, against rt/cpu's NCHW batch
// norm on the same values (converted to each operand's layout) and
// float64 sums for the scratch. Every layout combination runs on the
// first shape, all-NHWC and NCHW-in/NHWC-out on the others.
//
// Tolerances, measured as checkCases does (|got − want|/(1 + |want|)):
// the scratch's float32 sums of a group's terms, at most R = outer·inner
// of them, get 2e-6·sqrt(R) (the worst seen was 3.1e-6 against 2.4e-5,
// a group's Σ(x − mean_g)² of 29 rows); the outputs, which read the
// float64 scratch, 1e-5 (the worst seen 5.9e-7, dx), but y of values
// near 1000 2.5e-4 (two float32 ulps of 1000 in its mean: 1.4e-4 seen);
// the pool 1e-6.
func nhwcCases() []gpuCase {
	r := rand.New(rand.NewPCG(7, 11))
	var cases []gpuCase
	addCase := func(c gpuCase) { cases = append(cases, c) }
	bools := []bool{false, true}
	for si, sh := range []struct {
		outer, c, inner, groups int
		offset                  float32 // added to x
	}{
		{3, 24, 9, 4, 0},   // 27 rows: groups of 7, the last of 6
		{2, 36, 16, 5, 0},  // 32 rows: groups of 7, the last of 4
		{5, 64, 1, 3, 0},   // inner 1
		{8, 24, 16, 2, 0},  // 64 rows a group: two rounds of 10 row-lanes × 4 ways
		{2, 37, 1, 3, 0},   // 2 rows in 3 groups: group 2 is empty
		{16, 64, 9, 5, 0},  // 144 rows, groups of 29
		{4, 36, 9, 36, 0},  // a row a group
		{12, 37, 16, 1, 0}, // one group of 192 rows
		// channels in whole chunks: all-NHWC operands take four channels
		// a thread (bnTile.vectorised)
		{2, 32, 1, 3, 0},  // 2 rows in 3 groups: group 2 is empty
		{3, 96, 9, 4, 0},  // three chunks, groups of 7, the last of 6
		{4, 64, 40, 1, 0}, // one group of 160 rows: more than a sweep of 32 row-lanes × 4 ways
		// BatchNormGroups' own split (8 groups of 64 rows), and values far
		// from 0, whose variance Σx² − (Σx)²/n in float32 would lose
		{8, 64, 64, 0, 1000},
	} {
		outer, c, inner, groups := sh.outer, sh.c, sh.inner, sh.groups
		if groups == 0 {
			groups = BatchNormGroups(outer, c, inner)
		}
		n := outer * c * inner
		rows := outer * inner
		name := fmt.Sprintf("%dx%dx%d_g%d", outer, c, inner, groups)
		combos := [][3]bool{{true, true, true}, {false, true, true}}
		if si == 0 {
			combos = nil
			for _, a := range bools {
				for _, b := range bools {
					for _, d := range bools {
						combos = append(combos, [3]bool{a, b, d})
					}
				}
			}
		}
		partTol := 2e-6 * math.Sqrt(float64(rows))
		// y is (x − mean)·scale + beta with the mean in float32: far from 0
		// its rounding, a float32 ulp of the offset, reaches y
		yTol := 1e-5 + 2*float64(sh.offset)/(1<<23)
		x := randVec(r, n, sh.offset-2, sh.offset+3)
		gamma, beta := randVec(r, c, 0.5, 1.5), randVec(r, c, -1, 1)
		rm, rv := randVec(r, c, -0.1, 0.1), randVec(r, c, 0.9, 1.1)
		wrm, wrv, y, sm, sinv := slices.Clone(rm), slices.Clone(rv), zeros(n), zeros(c), zeros(c)
		cpu.BatchNormFwd(x, gamma, beta, wrm, wrv, y, sm, sinv, outer, c, inner, 1e-5, 0.1, true)
		ye := zeros(n)
		cpu.BatchNormFwd(x, gamma, beta, slices.Clone(rm), slices.Clone(rv), ye, nil, nil, outer, c, inner, 1e-5, 0.1, false)
		dy := randVec(r, n, -1, 1)
		dx, dg, dbt := zeros(n), zeros(c), zeros(c)
		cpu.BatchNormBwd(x, gamma, sm, sinv, dy, dx, dg, dbt, outer, c, inner)
		// with a fused ReLU (planner/fuse_norm_act.go)
		yr, yer := zeros(n), zeros(n)
		cpu.BatchNormReLUFwd(x, gamma, beta, slices.Clone(rm), slices.Clone(rv), yr, zeros(c), zeros(c), outer, c, inner, 1e-5, 0.1, true)
		cpu.BatchNormReLUFwd(x, gamma, beta, slices.Clone(rm), slices.Clone(rv), yer, nil, nil, outer, c, inner, 1e-5, 0.1, false)
		dxr, dgr, dbr := zeros(n), zeros(c), zeros(c)
		cpu.BatchNormReLUBwd(x, gamma, beta, sm, sinv, dy, dxr, dgr, dbr, outer, c, inner)
		if zs := countZeros(yr); zs < n/5 || zs > 4*n/5 {
			panic(fmt.Sprintf("%s: the fused ReLU's reference zeroed %d of %d values", name, zs, n))
		}

		// the scratch: per group Σx and Σ(x − mean_g)²; Σdy and Σdy·x̂
		fwdPart := groupPartials(outer, c, inner, groups,
			func(e int, _ []int) float64 { return float64(x[e]) },
			func(e int, es []int) float64 { d := float64(x[e]) - groupMean(x, es); return d * d })
		bwdPart := groupPartials(outer, c, inner, groups,
			func(e int, _ []int) float64 { return float64(dy[e]) },
			func(e int, _ []int) float64 {
				ch := e / inner % c
				return float64(dy[e]) * (float64(x[e]) - float64(sm[ch])) * float64(sinv[ch])
			})
		dym := slices.Clone(dy) // dy as the fused ReLU's backward sees it
		for e := range dym {
			if ch := e / inner % c; !cpu.BatchNormReLUKeeps(x[e], sm[ch], sinv[ch], gamma[ch], beta[ch]) {
				dym[e] = 0
			}
		}
		bwdPartReLU := groupPartials(outer, c, inner, groups,
			func(e int, _ []int) float64 { return float64(dym[e]) },
			func(e int, _ []int) float64 {
				ch := e / inner % c
				return float64(dym[e]) * (float64(x[e]) - float64(sm[ch])) * float64(sinv[ch])
			})

		for _, xl := range bools {
			addCase(gpuCase{name: fmt.Sprintf("bn_stats_%s_x%s", name, layoutName(xl)),
				k:    batchNormStatsNHWCKernel(outer, c, inner, xl, groups),
				in:   [][]float32{toLayout(x, outer, c, inner, xl), zeros(2 * groups * c)},
				want: map[int][]float32{1: fwdPart}, tol: partTol})
		}
		for _, xl := range bools {
			for _, dyl := range bools {
				if si > 0 && !(xl == dyl || (!xl && dyl)) {
					continue
				}
				addCase(gpuCase{name: fmt.Sprintf("bn_bwdsums_%s_x%s_dy%s", name, layoutName(xl), layoutName(dyl)),
					k:    batchNormBwdSumsNHWCKernel(outer, c, inner, xl, dyl, groups, false),
					in:   [][]float32{toLayout(x, outer, c, inner, xl), sm, sinv, toLayout(dy, outer, c, inner, dyl), zeros(2 * groups * c)},
					want: map[int][]float32{4: bwdPart}, tol: partTol})
				if xl != dyl {
					continue // the fused ReLU's mask is layout-blind: one layout each suffices
				}
				addCase(gpuCase{name: fmt.Sprintf("bn_bwdsums_relu_%s_x%s_dy%s", name, layoutName(xl), layoutName(dyl)),
					k:    batchNormBwdSumsNHWCKernel(outer, c, inner, xl, dyl, groups, true),
					in:   [][]float32{toLayout(x, outer, c, inner, xl), sm, sinv, toLayout(dy, outer, c, inner, dyl), zeros(2 * groups * c), gamma, beta},
					want: map[int][]float32{4: bwdPartReLU}, tol: partTol})
			}
		}
		seenFwd := map[[2]bool]bool{}
		for _, cb := range combos {
			xl, yl, dxl := cb[0], cb[1], cb[2]
			if !seenFwd[[2]bool{xl, yl}] {
				seenFwd[[2]bool{xl, yl}] = true
				addCase(gpuCase{name: fmt.Sprintf("bn_apply_%s_x%s_y%s", name, layoutName(xl), layoutName(yl)),
					k: batchNormApplyNHWCKernel(outer, c, inner, xl, yl, groups, 1e-5, 0.1, false),
					in: [][]float32{toLayout(x, outer, c, inner, xl), gamma, beta, slices.Clone(rm), slices.Clone(rv),
						zeros(n), zeros(c), zeros(c), fwdPart},
					want: map[int][]float32{3: wrm, 4: wrv, 5: toLayout(y, outer, c, inner, yl), 6: sm, 7: sinv}, tol: 1e-5,
					tols: map[int]float64{5: yTol}})
				addCase(gpuCase{name: fmt.Sprintf("bn_eval_%s_x%s_y%s", name, layoutName(xl), layoutName(yl)),
					k:    batchNormEvalNHWCKernel(outer, c, inner, xl, yl, 1e-5, false),
					in:   [][]float32{toLayout(x, outer, c, inner, xl), gamma, beta, rm, rv, zeros(n)},
					want: map[int][]float32{5: toLayout(ye, outer, c, inner, yl)}, tol: 1e-5})
				if xl == yl { // the fused ReLU is layout-blind: one layout each suffices
					addCase(gpuCase{name: fmt.Sprintf("bn_apply_relu_%s_x%s_y%s", name, layoutName(xl), layoutName(yl)),
						k: batchNormApplyNHWCKernel(outer, c, inner, xl, yl, groups, 1e-5, 0.1, true),
						in: [][]float32{toLayout(x, outer, c, inner, xl), gamma, beta, slices.Clone(rm), slices.Clone(rv),
							zeros(n), zeros(c), zeros(c), fwdPart},
						want: map[int][]float32{3: wrm, 4: wrv, 5: toLayout(yr, outer, c, inner, yl), 6: sm, 7: sinv}, tol: 1e-5,
						tols: map[int]float64{5: yTol}})
					addCase(gpuCase{name: fmt.Sprintf("bn_eval_relu_%s_x%s_y%s", name, layoutName(xl), layoutName(yl)),
						k:    batchNormEvalNHWCKernel(outer, c, inner, xl, yl, 1e-5, true),
						in:   [][]float32{toLayout(x, outer, c, inner, xl), gamma, beta, rm, rv, zeros(n)},
						want: map[int][]float32{5: toLayout(yer, outer, c, inner, yl)}, tol: 1e-5})
				}
			}
			// dy in dx's layout: the backward's gradient arrives as its forward's output was stored
			addCase(gpuCase{name: fmt.Sprintf("bn_bwdapply_%s_x%s_dy%s_dx%s", name, layoutName(xl), layoutName(yl), layoutName(dxl)),
				k: batchNormBwdApplyNHWCKernel(outer, c, inner, xl, yl, dxl, groups, false),
				in: [][]float32{toLayout(x, outer, c, inner, xl), gamma, sm, sinv, toLayout(dy, outer, c, inner, yl),
					zeros(n), zeros(c), zeros(c), bwdPart},
				want: map[int][]float32{5: toLayout(dx, outer, c, inner, dxl), 6: dg, 7: dbt}, tol: 1e-5})
			if xl != yl || yl != dxl {
				continue
			}
			addCase(gpuCase{name: fmt.Sprintf("bn_bwdapply_relu_%s_x%s_dy%s_dx%s", name, layoutName(xl), layoutName(yl), layoutName(dxl)),
				k: batchNormBwdApplyNHWCKernel(outer, c, inner, xl, yl, dxl, groups, true),
				in: [][]float32{toLayout(x, outer, c, inner, xl), gamma, sm, sinv, toLayout(dy, outer, c, inner, yl),
					zeros(n), zeros(c), zeros(c), bwdPartReLU, beta},
				want: map[int][]float32{5: toLayout(dxr, outer, c, inner, dxl), 6: dgr, 7: dbr}, tol: 1e-5})
		}
		// a residual summed after the normalisation (fuse_norm_sum.go),
		// every tensor NHWC, and with y over z
		z := randVec(r, n, -1, 1)
		for _, relu := range bools {
			ys := zeros(n)
			cpu.BatchNormSumFwd(x, gamma, beta, slices.Clone(rm), slices.Clone(rv), z, ys, zeros(c), zeros(c), outer, c, inner, 1e-5, 0.1, true, relu)
			k := batchNormSumNHWCKernel(outer, c, inner, groups, 1e-5, 0.1, relu)
			in := func() [][]float32 {
				return [][]float32{toLayout(x, outer, c, inner, true), gamma, beta, slices.Clone(rm), slices.Clone(rv),
					zeros(n), zeros(c), zeros(c), fwdPart, toLayout(z, outer, c, inner, true)}
			}
			addCase(gpuCase{name: fmt.Sprintf("bn_sum_%s_relu%v", name, relu), k: k, in: in(),
				want: map[int][]float32{3: wrm, 4: wrv, 5: toLayout(ys, outer, c, inner, true), 6: sm, 7: sinv}, tol: 1e-5,
				tols: map[int]float64{5: yTol}})
			inPlace := in()
			inPlace = append(inPlace[:5], inPlace[6:]...)
			addCase(gpuCase{name: fmt.Sprintf("bn_sum_inplace_%s_relu%v", name, relu), k: renameStores(k, "y", "z"), in: inPlace,
				want: map[int][]float32{3: wrm, 4: wrv, 8: toLayout(ys, outer, c, inner, true)}, tol: 1e-5,
				tols: map[int]float64{8: yTol}})
		}
		for _, l := range bools {
			// dx over dy and y over x, one buffer each
			addCase(gpuCase{name: fmt.Sprintf("bn_bwdapply_inplace_%s_%s", name, layoutName(l)),
				k: renameStores(batchNormBwdApplyNHWCKernel(outer, c, inner, !l, l, l, groups, false), "dx", "dy"),
				in: [][]float32{toLayout(x, outer, c, inner, !l), gamma, sm, sinv, toLayout(dy, outer, c, inner, l),
					zeros(c), zeros(c), bwdPart},
				want: map[int][]float32{4: toLayout(dx, outer, c, inner, l), 5: dg, 6: dbt}, tol: 1e-5})
			addCase(gpuCase{name: fmt.Sprintf("bn_apply_inplace_%s_%s", name, layoutName(l)),
				k: renameStores(batchNormApplyNHWCKernel(outer, c, inner, l, l, groups, 1e-5, 0.1, false), "y", "x"),
				in: [][]float32{toLayout(x, outer, c, inner, l), gamma, beta, slices.Clone(rm), slices.Clone(rv),
					zeros(c), zeros(c), fwdPart},
				want: map[int][]float32{0: toLayout(y, outer, c, inner, l), 3: wrm, 4: wrv}, tol: 1e-5, tols: map[int]float64{0: yTol}})
		}

		// the global average pool: the mean over inner of each (n, ch)
		pool := zeros(outer * c)
		for p := range pool {
			var s float64
			for j := 0; j < inner; j++ {
				s += float64(x[p*inner+j])
			}
			pool[p] = float32(s / float64(inner))
		}
		addCase(gpuCase{name: "gap_" + name, k: globalAvgPoolNHWCKernel(outer, c, inner),
			in: [][]float32{toLayout(x, outer, c, inner, true), zeros(outer * c)}, want: map[int][]float32{1: pool}, tol: 1e-6})
		dpool := randVec(r, outer*c, -1, 1)
		dxp := zeros(n)
		for e := range dxp {
			dxp[e] = dpool[e/inner] / float32(inner)
		}
		addCase(gpuCase{name: "gap_bwd_" + name, k: globalAvgPoolBwdNHWCKernel(outer, c, inner),
			in: [][]float32{dpool, zeros(n)}, want: map[int][]float32{1: toLayout(dxp, outer, c, inner, true)}, tol: 1e-6})
	}
	return cases
}

// TestNHWCKernelsOnCPU runs the NHWC batch norm and pool kernels in both
// dialects through the CPU shims against rt/cpu's NCHW batch norm.
func TestNHWCKernelsOnCPU(t *testing.T) {
	cases := nhwcCases()
	for _, d := range []*Dialect{CUDA, Metal} {
		t.Run(d.Name, func(t *testing.T) {
			checkCases(t, d, cases, runCases(t, d, cases))
		})
	}
}

// TestNHWCBatchNormGroups checks that the kernels' scratch is
// BatchNormScratch floats with BatchNormGroups groups, and that CIFAR
// ResNet-18's layers at batch 128 get the groups and threadgroups
// BatchNormGroups' comment claims.
func TestNHWCBatchNormGroups(t *testing.T) {
	for _, sh := range []struct{ outer, c, inner, groups, grid int }{
		{128, 64, 1024, 128, 256}, {128, 128, 256, 64, 256}, {128, 256, 64, 32, 256}, {128, 512, 16, 16, 256},
		{2, 24, 9, 1, 1}, {1, 36, 1, 1, 2}, {1000, 7, 1, 11, 11},
	} {
		g := BatchNormGroups(sh.outer, sh.c, sh.inner)
		if g != sh.groups {
			t.Errorf("BatchNormGroups(%d, %d, %d) = %d, want %d", sh.outer, sh.c, sh.inner, g, sh.groups)
		}
		scratch := BatchNormScratch(sh.outer, sh.c, sh.inner)
		for _, k := range []*Kernel{
			batchNormStatsNHWCKernel(sh.outer, sh.c, sh.inner, true, g),
			batchNormApplyNHWCKernel(sh.outer, sh.c, sh.inner, false, true, g, 1e-5, 0.1, false),
			batchNormBwdSumsNHWCKernel(sh.outer, sh.c, sh.inner, true, true, g, true),
			batchNormBwdApplyNHWCKernel(sh.outer, sh.c, sh.inner, true, true, true, g, true),
		} {
			i := slices.IndexFunc(k.Params, func(p Param) bool { return p.Name == "part" })
			if i < 0 || k.Params[i].Size != scratch {
				t.Errorf("%s: part is %v, want %d floats (BatchNormScratch)", k.Doc, k.Params, scratch)
			}
			if k.Groups != sh.grid || k.Threadgroup > tgReduce {
				t.Errorf("%s: %d threadgroups of %d, want %d of at most %d", k.Doc, k.Groups, k.Threadgroup, sh.grid, tgReduce)
			}
		}
	}
}

// TestNHWCStoredBF16 checks that the NHWC kernels survive storedBF16, the
// rewrite a bf16 plan gives the kernels around its convolutions: each
// kernel with its tensor parameters in bfloat16 memory gives, bit for bit,
// its float32 outputs on the same values rounded to bfloat16, in both
// dialects. The scratch part stays float32 (it holds sums).
func TestNHWCStoredBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rounded := func(n int, lo, hi float32) []float32 {
		v := randVec(r, n, lo, hi)
		for i := range v {
			v[i] = math.Float32frombits(uint32(bf16Want(v[i])) << 16)
		}
		return v
	}
	const outer, c, inner, groups = 3, 37, 9, 4
	n := outer * c * inner
	x, dy := rounded(n, -2, 3), rounded(n, -1, 1)
	gamma, beta := randVec(r, c, 0.5, 1.5), randVec(r, c, -1, 1)
	rm, rv := randVec(r, c, -0.1, 0.1), randVec(r, c, 0.9, 1.1)
	sm, si := randVec(r, c, 0, 1), randVec(r, c, 0.5, 1)
	part := groupPartials(outer, c, inner, groups,
		func(e int, _ []int) float64 { return float64(x[e]) },
		func(e int, es []int) float64 { d := float64(x[e]) - groupMean(x, es); return d * d })
	type kernelCase struct {
		name   string
		k      *Kernel
		stored []string
		in     [][]float32
	}
	kcs := []kernelCase{
		{"stats", batchNormStatsNHWCKernel(outer, c, inner, false, groups), []string{"x"}, [][]float32{x, zeros(2 * groups * c)}},
		{"apply", batchNormApplyNHWCKernel(outer, c, inner, false, true, groups, 1e-5, 0.1, false), []string{"x", "y"},
			[][]float32{x, gamma, beta, rm, rv, zeros(n), zeros(c), zeros(c), part}},
		{"apply_relu", batchNormApplyNHWCKernel(outer, c, inner, false, true, groups, 1e-5, 0.1, true), []string{"x", "y"},
			[][]float32{x, gamma, beta, rm, rv, zeros(n), zeros(c), zeros(c), part}},
		{"eval", batchNormEvalNHWCKernel(outer, c, inner, true, true, 1e-5, false), []string{"x", "y"}, [][]float32{x, gamma, beta, rm, rv, zeros(n)}},
		{"eval_relu", batchNormEvalNHWCKernel(outer, c, inner, true, true, 1e-5, true), []string{"x", "y"}, [][]float32{x, gamma, beta, rm, rv, zeros(n)}},
		{"bwdsums", batchNormBwdSumsNHWCKernel(outer, c, inner, true, true, groups, false), []string{"x", "dy"}, [][]float32{x, sm, si, dy, zeros(2 * groups * c)}},
		{"bwdsums_relu", batchNormBwdSumsNHWCKernel(outer, c, inner, true, true, groups, true), []string{"x", "dy"}, [][]float32{x, sm, si, dy, zeros(2 * groups * c), gamma, beta}},
		{"bwdapply", batchNormBwdApplyNHWCKernel(outer, c, inner, true, true, true, groups, false), []string{"x", "dy", "dx"},
			[][]float32{x, gamma, sm, si, dy, zeros(n), zeros(c), zeros(c), part}},
		{"bwdapply_relu", batchNormBwdApplyNHWCKernel(outer, c, inner, true, true, true, groups, true), []string{"x", "dy", "dx"},
			[][]float32{x, gamma, sm, si, dy, zeros(n), zeros(c), zeros(c), part, beta}},
		{"gap", globalAvgPoolNHWCKernel(outer, c, inner), []string{"x"}, [][]float32{x, zeros(outer * c)}},
		{"gapbwd", globalAvgPoolBwdNHWCKernel(outer, c, inner), []string{"dx"}, [][]float32{rounded(outer*c, -1, 1), zeros(n)}},
	}
	var cases []gpuCase
	for _, kc := range kcs {
		sk, err := storedBF16(kc.k, kc.stored)
		if err != nil {
			t.Fatal(err)
		}
		packed := make([][]float32, len(kc.in))
		for i, p := range kc.k.Params {
			packed[i] = kc.in[i]
			if slices.Contains(kc.stored, p.Name) {
				packed[i] = packBF16(kc.in[i])
			}
		}
		cases = append(cases, gpuCase{name: kc.name, k: kc.k, in: kc.in}, gpuCase{name: kc.name + "_stored", k: sk, in: packed})
	}
	for _, d := range []*Dialect{CUDA, Metal} {
		res := runCases(t, d, cases)
		for ci, kc := range kcs {
			checked := 0
			for i, p := range kc.k.Params {
				if !p.Mutable {
					continue
				}
				want, got := res[2*ci][i], res[2*ci+1][i]
				stored := slices.Contains(kc.stored, p.Name)
				bad := 0
				for j, w := range want {
					var g uint32
					if stored {
						g = uint32(bf16Halves(got)[j]) << 16
						w = math.Float32frombits(uint32(bf16Want(w)) << 16)
					} else {
						g = math.Float32bits(got[j])
					}
					checked++
					if g != math.Float32bits(w) {
						if bad < 3 {
							t.Errorf("%s %s: %s[%d] = %v, want %v", d.Name, kc.name, p.Name, j, math.Float32frombits(g), w)
						}
						bad++
					}
				}
			}
			if checked == 0 {
				t.Errorf("%s %s: nothing checked", d.Name, kc.name)
			}
		}
	}
}

// TestNHWCLaneTree checks laneSum's rounds for every row-lane count a
// threadgroup can have: in no round does a row-lane read a slot that
// another writes (the CPU shims run a threadgroup's threads in order
// between barriers, so a kernel test cannot see such a race), no slot is
// read after it was added in, and slot 0 ends holding every partial once.
func TestNHWCLaneTree(t *testing.T) {
	for n := 1; n <= tgReduce; n++ {
		held := make([][]int, n) // the partials each slot holds
		for i := range held {
			held[i] = []int{i}
		}
		live := make([]bool, n) // whether a slot's partials are not yet added elsewhere
		for i := range live {
			live[i] = true
		}
		for _, rd := range laneTree(n) {
			written := map[int]bool{}
			for rl := 0; rl < rd.active; rl++ {
				written[rl] = true
			}
			for rl := 0; rl < rd.active; rl++ {
				src := rl + rd.stride
				if src >= n || written[src] || !live[src] || !live[rl] {
					t.Fatalf("n=%d, stride %d: row-lane %d adds slot %d (written this round %v, live %v)", n, rd.stride, rl, src, written[src], src < n && live[src])
				}
				held[rl] = append(held[rl], held[src]...)
				live[src] = false
			}
		}
		got := slices.Clone(held[0])
		slices.Sort(got)
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: slot 0 holds %v", n, got)
		}
	}
}

// TestNHWCBatchNormChained runs each pass as a step does: the first
// kernel's scratch, as the dialect computed it, feeds the second, and the
// pair must give rt/cpu's batch norm (tolerances as nhwcCases').
func TestNHWCBatchNormChained(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	type shape struct{ outer, c, inner int }
	shapes := []shape{{6, 36, 16}, {16, 64, 9}, {3, 24, 49}}
	for _, d := range []*Dialect{CUDA, Metal} {
		var first, second []gpuCase
		for _, sh := range shapes {
			outer, c, inner := sh.outer, sh.c, sh.inner
			n, g := outer*c*inner, BatchNormGroups(outer, c, inner)
			x := randVec(r, n, -2, 3)
			gamma, beta := randVec(r, c, 0.5, 1.5), randVec(r, c, -1, 1)
			rm, rv := randVec(r, c, -0.1, 0.1), randVec(r, c, 0.9, 1.1)
			wrm, wrv, y, sm, sinv := slices.Clone(rm), slices.Clone(rv), zeros(n), zeros(c), zeros(c)
			cpu.BatchNormFwd(x, gamma, beta, wrm, wrv, y, sm, sinv, outer, c, inner, 1e-5, 0.1, true)
			dy := randVec(r, n, -1, 1)
			dx, dg, dbt := zeros(n), zeros(c), zeros(c)
			cpu.BatchNormBwd(x, gamma, sm, sinv, dy, dx, dg, dbt, outer, c, inner)
			xs, ys := toLayout(x, outer, c, inner, false), toLayout(y, outer, c, inner, true) // the stem's layouts
			dys, dxs := toLayout(dy, outer, c, inner, true), toLayout(dx, outer, c, inner, true)
			first = append(first,
				gpuCase{k: batchNormStatsNHWCKernel(outer, c, inner, false, g), in: [][]float32{xs, zeros(2 * g * c)}},
				gpuCase{k: batchNormBwdSumsNHWCKernel(outer, c, inner, false, true, g, false), in: [][]float32{xs, sm, sinv, dys, zeros(2 * g * c)}})
			second = append(second,
				gpuCase{name: fmt.Sprintf("fwd_%dx%dx%d_g%d", outer, c, inner, g), k: batchNormApplyNHWCKernel(outer, c, inner, false, true, g, 1e-5, 0.1, false),
					in:   [][]float32{xs, gamma, beta, slices.Clone(rm), slices.Clone(rv), zeros(n), zeros(c), zeros(c), nil},
					want: map[int][]float32{3: wrm, 4: wrv, 5: ys, 6: sm, 7: sinv}, tol: 1e-5},
				gpuCase{name: fmt.Sprintf("bwd_%dx%dx%d_g%d", outer, c, inner, g), k: batchNormBwdApplyNHWCKernel(outer, c, inner, false, true, true, g, false),
					in:   [][]float32{xs, gamma, sm, sinv, dys, zeros(n), zeros(c), zeros(c), nil},
					want: map[int][]float32{5: dxs, 6: dg, 7: dbt}, tol: 1e-5})
		}
		for i := range first {
			first[i].name = "first_" + second[i].name
		}
		res := runCases(t, d, first)
		for i := range second {
			second[i].in[8] = res[i][len(res[i])-1] // part, the last parameter of both
		}
		checkCases(t, d, second, runCases(t, d, second))
	}
}

// countZeros is how many of v are 0.
func countZeros(v []float32) int {
	n := 0
	for _, x := range v {
		if x == 0 {
			n++
		}
	}
	return n
}
