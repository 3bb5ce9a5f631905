package cpu

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

//go:generate go run gemm_gen.go

// gemmKernel computes one register tile, C[mr×nr] = alpha·Ap·Bp + beta·C,
// from a packed A micro-panel (k steps of mr floats) and a packed B
// micro-panel (k steps of nr floats); c points at the tile's first element
// and ldc is C's row stride. When beta is zero it must not read C, so that
// NaN garbage in an output buffer is overwritten as BLAS promises.
type gemmKernel func(k int, a, b, c *float32, ldc int, alpha, beta float32)

// gemmPath is one way of running Sgemm: a microkernel with its register tile
// (mr×nr) and the cache blocks it is fed (kc for the shared dimension, mc rows
// of packed A kept in L2, nc columns of packed B).
type gemmPath struct {
	name       string
	mr, nr     int
	kc, mc, nc int
	kernel     gemmKernel
	// transpose8 and transpose4, when set, transpose a block of 8 (or 4)
	// rows × 8 columns; packA uses them for untransposed A.
	transpose8, transpose4 blockTranspose
	// direct, when set, are the tiles of the small-product path (see
	// runSmall), widest first: the first has mr rows, the others the row
	// counts a remainder of fewer than mr rows is split into, down to 1.
	direct []directTile
	// directHalf, when set, are direct tiles of nr/2 columns, for a last
	// panel that narrow (the 10 classes of an output layer, say), which
	// the full tiles would compute at half their width or less.
	directHalf []directTile
	// pairs, when set, makes this a bfloat16 path (gemm_bf16.go): its
	// panels hold bfloat16 pairs along k, one pair in each float32 slot,
	// written by these packers; its kernel counts k in pairs, carries on
	// the sums from beta·C and ignores alpha (gemmBF16 passes 1).
	pairs *pairPackers
}

// steps is how many kernel steps kb of the shared dimension make: kb, or
// on a bfloat16 path its pairs, the last one padded with a zero when kb is
// odd.
func (p *gemmPath) steps(kb int) int {
	if p.pairs != nil {
		return (kb + 1) / 2
	}
	return kb
}

// packAPanels is packA, or on a bfloat16 path packPairsA.
func (p *gemmPath) packAPanels(trans bool, a []float32, lda, row0, col0, mb, kb int, dst []float32) {
	if p.pairs != nil {
		p.pairs.packA(p, trans, a, lda, row0, col0, mb, kb, dst)
		return
	}
	packA(p, trans, a, lda, row0, col0, mb, kb, dst)
}

// packBPanels is packB, or on a bfloat16 path packPairsB.
func (p *gemmPath) packBPanels(trans bool, b []float32, ldb, row0, col0, kb, nb int, dst []float32) {
	if p.pairs != nil {
		p.pairs.packB(p, trans, b, ldb, row0, col0, kb, nb, dst)
		return
	}
	packB(trans, b, ldb, row0, col0, kb, nb, p.nr, dst, p.transpose8)
}

// directTile is one small-product register tile of rows×nr.
type directTile struct {
	rows   int
	kernel directKernel
}

// directKernel computes C[rows×nr] = alpha·A·B + beta·C reading the
// operands in place: A[r][p] is a[r·aRow+p·aStep] (row-major A, transposed
// A and a packed panel are all strides of one kernel) and B[p][0:nr] starts
// at b[p·ldb]. Like gemmKernel it does not read C when beta is zero.
type directKernel func(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

// blockTranspose writes the transpose of a rows×8 block of src (row stride
// lds) to dst as 8 rows of rows floats (row stride ldd).
type blockTranspose func(src *float32, lds int, dst *float32, ldd int)

// genericGemmPath is the pure-Go path every GOARCH has.
var genericGemmPath = &gemmPath{name: "generic", mr: 4, nr: 4, kc: 256, mc: 128, nc: 1024, kernel: sgemmKernel4x4Go}

var (
	// gemmPathsSupported lists the paths this CPU can run, fastest first.
	gemmPathsSupported = append(archGemmPaths(), genericGemmPath)
	activeGemmPath     atomic.Pointer[gemmPath]
)

func init() { activeGemmPath.Store(gemmPathsSupported[0]) }

// GemmPaths lists the Sgemm implementations this CPU supports, fastest
// first: some of "avx512", "avx2", "neon", and always "generic". Tests use it
// to run every path the machine has.
func GemmPaths() []string {
	names := make([]string, len(gemmPathsSupported))
	for i, p := range gemmPathsSupported {
		names[i] = p.name
	}
	return names
}

// GemmPath names the implementation Sgemm uses now.
func GemmPath() string { return activeGemmPath.Load().name }

// SetGemmPath forces Sgemm onto one implementation (a name from GemmPaths),
// or back to the fastest with "". It exists so tests and benchmarks can check
// and compare every instruction set the machine has; programs never need it.
func SetGemmPath(name string) error {
	if name == "" {
		activeGemmPath.Store(gemmPathsSupported[0])
		return nil
	}
	for _, p := range gemmPathsSupported {
		if p.name == name {
			activeGemmPath.Store(p)
			return nil
		}
	}
	return fmt.Errorf("cpu.SetGemmPath: %q is not supported on this machine (supported: %s)", name, strings.Join(GemmPaths(), ", "))
}

// gemmParallelMinFlops is the smallest product worth splitting over
// goroutines (a 64³ product, about 4 µs on one core of the 2-core Xeon).
// When the shared-B split, with its barrier, took every parallel product,
// it was 1 << 21 (a 100³ product), which that split still needs
// (gemmSharedBMinFlops); split by rows or columns in place, where a
// worker that has not woken up is never waited for, two threads
// ran 64³–96³ 1.1–1.5 times as fast as one, and the small products of the
// flagship's last dense layer (250×10×128 and the like, 0.6–1.3 MFLOP)
// 1.2–1.6 times.
const gemmParallelMinFlops = 1 << 19

// gemmSharedBMinFlops is the smallest product runParallel splits with a
// shared B: below it (a 100³ product, about 20 µs on one core) handing out
// parts and meeting at the barrier cost more than a second core saves.
const gemmSharedBMinFlops = 1 << 21

// gemmArena holds one goroutine's packing buffers. Arenas are recycled
// through gemmArenas so that Sgemm does not allocate in steady state.
type gemmArena struct {
	a, b, tile []float32
}

var (
	gemmArenas = sync.Pool{New: func() any { return new(gemmArena) }}
	gemmCalls  = sync.Pool{New: func() any { return &gemmCall{barrier: newGemmBarrier()} }}
)

func (w *gemmArena) fit(p *gemmPath) {
	if need := gemmRoundUp(p.mc, p.mr) * p.kc; len(w.a) < need {
		w.a = make([]float32, need)
	}
	if need := gemmRoundUp(p.nc, p.nr) * p.kc; len(w.b) < need {
		w.b = make([]float32, need)
	}
	if need := p.mr * p.nr; len(w.tile) < need {
		w.tile = make([]float32, need)
	}
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on row-major matrices (see
// SgemmRef for the argument convention). Every kernel of this package that
// multiplies matrices goes through it.
//
// It packs panels of A and B into cache-sized blocks, runs a SIMD register
// tile over them (AVX-512, AVX2+FMA or NEON, chosen once at start-up; pure Go
// elsewhere) and splits large products over Threads() goroutines; products
// (or goroutines' blocks) that fit in cache are read in place instead, on
// the x86 paths (runSmall). When beta
// is zero C is only written, never read. It panics, naming the argument, when
// a slice is too short for the sizes and strides given: that is a bug in the
// caller, never user input.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gemmOn(activeGemmPath.Load(), Threads(), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemmOn1 is Sgemm on the calling goroutine alone, for callers that
// already split their work over the threads (a ParallelFor's part).
func sgemmOn1(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gemmOn(activeGemmPath.Load(), 1, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemmOn is Sgemm on the path p (Sgemm's active path, or the bfloat16
// path: gemmBF16) over threads goroutines: its operands checked, its
// empty and zero cases, then the product (over the goroutines when it is
// large enough to be worth splitting).
func gemmOn(p *gemmPath, threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	checkGemmOperand("c", c, m, n, ldc)
	if k <= 0 || alpha == 0 {
		scaleMatrix(m, n, beta, c, ldc)
		return
	}
	checkGemmOperands(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if p.pairs != nil && alpha != 1 {
		// A bfloat16 path's tiles ignore alpha (gemmPath.kernel); its edge
		// tiles would not.
		panic("cpu: a bfloat16 product with alpha ≠ 1")
	}
	g := gemmCalls.Get().(*gemmCall)
	*g = gemmCall{barrier: g.barrier, p: p, transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc}
	switch {
	case threads > 1 && 2*m*n*k >= gemmParallelMinFlops:
		g.runParallel(threads)
	default:
		g.run(0, m, 0, n)
	}
	*g = gemmCall{barrier: g.barrier} // drop the references to the caller's slices
	gemmCalls.Put(g)
}

// gemmCall is one Sgemm's arguments, shared read-only by its goroutines.
// Calls are recycled through gemmCalls so that handing one to the workers
// does not allocate.
type gemmCall struct {
	barrier        *gemmBarrier    // phases of a shared-B parallel run
	sharedB        [2][]float32    // B panels of a shared run, even and odd phases
	rowTiles       int             // register-tile rows of C (ceil(m/mr))
	rowBlocks      int             // dynamically scheduled blocks of them
	nextRowBlock   [2]atomic.Int64 // row-block counters, even and odd phases
	p              *gemmPath
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
}

// run computes rows [i0, i1) and columns [j0, j1) of C on the calling
// goroutine: a block small enough for gemmSmall in place with runSmall,
// others with the classic five-loop blocking: nc columns of B, kc of the
// shared dimension, mc rows of A, then nr×mr register tiles.
func (g *gemmCall) run(i0, i1, j0, j1 int) {
	if g.p.direct != nil && gemmSmall(i1-i0, j1-j0, g.k) {
		g.runSmall(i0, i1, j0, j1)
		return
	}
	g.runPacked(i0, i1, j0, j1)
}

// runPacked is run's packed blocking.
func (g *gemmCall) runPacked(i0, i1, j0, j1 int) {
	p := g.p
	w := gemmArenas.Get().(*gemmArena)
	w.fit(p)
	for jc := j0; jc < j1; jc += p.nc {
		nb := min(p.nc, j1-jc)
		for pc := 0; pc < g.k; pc += p.kc {
			kb := min(p.kc, g.k-pc)
			p.packBPanels(g.transB, g.b, g.ldb, pc, jc, kb, nb, w.b)
			for ic := i0; ic < i1; ic += p.mc {
				mb := min(p.mc, i1-ic)
				p.packAPanels(g.transA, g.a, g.lda, ic, pc, mb, kb, w.a)
				g.tiles(w, w.b, ic, mb, jc, nb, pc, kb)
			}
		}
	}
	gemmArenas.Put(w)
}

// tiles runs the register tiles of one packed block: rows [ic, ic+mb) of C
// from w.a against columns [jc, jc+nb) from the packed B panel bp, for the
// kb steps of the shared dimension that start at pc. Only the first kc
// block applies beta; later ones accumulate. A tile that C's edges cut is
// computed in w.tile and merged; on a bfloat16 path w.tile first takes
// beta·C's part, so that the kernel carries on C's sums there too.
func (g *gemmCall) tiles(w *gemmArena, bPanel []float32, ic, mb, jc, nb, pc, kb int) {
	p := g.p
	mr, nr := p.mr, p.nr
	beta := g.beta
	if pc > 0 {
		beta = 1
	}
	steps := p.steps(kb)
	for jr := 0; jr < nb; jr += nr {
		bp := &bPanel[jr*steps]
		cols := min(nr, nb-jr)
		for ir := 0; ir < mb; ir += mr {
			ap := &w.a[ir*steps]
			rows := min(mr, mb-ir)
			at := (ic+ir)*g.ldc + jc + jr
			if rows == mr && cols == nr {
				p.kernel(steps, ap, bp, &g.c[at], g.ldc, g.alpha, beta)
				continue
			}
			if p.pairs != nil {
				clear(w.tile[:mr*nr])
				if beta != 0 {
					mergeTile(g.c[at:], g.ldc, rows, cols, w.tile, nr, beta, 0)
				}
				p.kernel(steps, ap, bp, &w.tile[0], nr, 1, 1)
				mergeTile(w.tile, nr, rows, cols, g.c[at:], g.ldc, 1, 0)
				continue
			}
			p.kernel(kb, ap, bp, &w.tile[0], nr, 1, 0)
			mergeTile(w.tile, nr, rows, cols, g.c[at:], g.ldc, g.alpha, beta)
		}
	}
}

// packA copies op(A)[row0:row0+mb, col0:col0+kb] into dst as micro-panels of
// mr rows, each stored k-major (mr floats per step), padding the last panel
// with zeros so the kernel never needs a row count.
func packA(path *gemmPath, trans bool, a []float32, lda, row0, col0, mb, kb int, dst []float32) {
	mr := path.mr
	for ir := 0; ir < mb; ir += mr {
		rows := min(mr, mb-ir)
		d := dst[ir*kb : ir*kb+mr*kb]
		if trans {
			if rows == 12 && mr == 12 {
				// Fixed-size array copies compile to a few vector moves,
				// where copy() calls memmove once per step (a third
				// less time packing the MLP's weight-gradient operands).
				for p := 0; p < kb; p++ {
					at := (col0+p)*lda + row0 + ir
					*(*[12]float32)(d[p*12 : p*12+12]) = [12]float32(a[at : at+12])
				}
				continue
			}
			for p := 0; p < kb; p++ {
				src := a[(col0+p)*lda+row0+ir:]
				dp := d[p*mr : p*mr+mr]
				copy(dp, src[:rows])
				clear(dp[rows:])
			}
			continue
		}
		for r := 0; r < rows; {
			first := (row0+ir+r)*lda + col0
			done := 0
			switch {
			case path.transpose8 != nil && rows-r >= 8:
				for ; done+8 <= kb; done += 8 {
					path.transpose8(&a[first+done], lda, &d[done*mr+r], mr)
				}
				if done < kb {
					packRowsScalar(a[first+done:], lda, 8, kb-done, d[done*mr+r:], mr)
				}
				r += 8
			case path.transpose4 != nil && rows-r >= 4:
				for ; done+8 <= kb; done += 8 {
					path.transpose4(&a[first+done], lda, &d[done*mr+r], mr)
				}
				if done < kb {
					packRowsScalar(a[first+done:], lda, 4, kb-done, d[done*mr+r:], mr)
				}
				r += 4
			default:
				packRowsScalar(a[first:], lda, 1, kb, d[r:], mr)
				r++
			}
		}
		for r := rows; r < mr; r++ {
			for p := 0; p < kb; p++ {
				d[p*mr+r] = 0
			}
		}
	}
}

// packRowsScalar stores rows×cols of src (row stride lds) transposed into
// dst (row stride ldd): the element-by-element part of packA.
func packRowsScalar(src []float32, lds, rows, cols int, dst []float32, ldd int) {
	for r := 0; r < rows; r++ {
		row := src[r*lds : r*lds+cols]
		for p, v := range row {
			dst[p*ldd+r] = v
		}
	}
}

// packB copies op(B)[row0:row0+kb, col0:col0+nb] into dst as micro-panels of
// nr columns, each stored k-major (nr floats per step), zero-padded. When B
// is transposed and t8 (a path's transpose8) is set, whole 8×8 blocks are
// transposed with it: the element-by-element loop stores with a stride of nr
// floats and took a sixth of a 250×512×784 product (a dense layer's forward
// pass, whose weights are stored out×in).
func packB(trans bool, b []float32, ldb, row0, col0, kb, nb, nr int, dst []float32, t8 blockTranspose) {
	for jr := 0; jr < nb; jr += nr {
		cols := min(nr, nb-jr)
		d := dst[jr*kb : jr*kb+nr*kb]
		if !trans && cols == 32 && nr == 32 {
			// Fixed-size array copies compile to a few vector moves, where
			// copy() would call memmove once per step.
			for p := 0; p < kb; p++ {
				at := (row0+p)*ldb + col0 + jr
				*(*[32]float32)(d[p*32 : p*32+32]) = [32]float32(b[at : at+32])
			}
			continue
		}
		if !trans && cols == 16 && nr == 16 {
			for p := 0; p < kb; p++ {
				at := (row0+p)*ldb + col0 + jr
				*(*[16]float32)(d[p*16 : p*16+16]) = [16]float32(b[at : at+16])
			}
			continue
		}
		if !trans {
			for p := 0; p < kb; p++ {
				src := b[(row0+p)*ldb+col0+jr:]
				dp := d[p*nr : p*nr+nr]
				copy(dp, src[:cols])
				clear(dp[cols:])
			}
			continue
		}
		j0 := 0
		if t8 != nil && nr%8 == 0 {
			for ; j0+8 <= cols; j0 += 8 {
				first := (col0+jr+j0)*ldb + row0
				_ = b[first+7*ldb+kb-1] // the assembly does no bounds checks
				p := 0
				for ; p+8 <= kb; p += 8 {
					t8(&b[first+p], ldb, &d[p*nr+j0], nr)
				}
				if p < kb {
					packRowsScalar(b[first+p:], ldb, 8, kb-p, d[p*nr+j0:], nr)
				}
			}
		}
		for j := j0; j < cols; j++ {
			src := b[(col0+jr+j)*ldb+row0:]
			src = src[:kb]
			for p, v := range src {
				d[p*nr+j] = v
			}
		}
		for j := cols; j < nr; j++ {
			for p := 0; p < kb; p++ {
				d[p*nr+j] = 0
			}
		}
	}
}

// mergeTile writes the top-left rows×cols of a product tile (row stride
// ldt) into c as c = alpha·tile + beta·c, not reading c when beta is zero.
func mergeTile(tile []float32, ldt, rows, cols int, c []float32, ldc int, alpha, beta float32) {
	for r := 0; r < rows; r++ {
		t := tile[r*ldt : r*ldt+cols]
		cr := c[r*ldc : r*ldc+cols]
		if beta == 0 {
			for j, v := range t {
				cr[j] = alpha * v
			}
			continue
		}
		for j, v := range t {
			cr[j] = alpha*v + beta*cr[j]
		}
	}
}

// scaleMatrix sets C = beta·C, writing zeros without reading when beta is 0.
func scaleMatrix(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// checkGemmOperand panics with a readable message when x cannot hold a
// rows×cols row-major matrix with row stride ld, so that the assembly
// kernels, which do no bounds checks, never touch memory outside x.
// checkGemmOperands checks all three operands of C = op(A)·op(B) with
// checkGemmOperand.
func checkGemmOperands(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if transA {
		checkGemmOperand("a", a, k, m, lda)
	} else {
		checkGemmOperand("a", a, m, k, lda)
	}
	if transB {
		checkGemmOperand("b", b, n, k, ldb)
	} else {
		checkGemmOperand("b", b, k, n, ldb)
	}
	checkGemmOperand("c", c, m, n, ldc)
}

func checkGemmOperand(name string, x []float32, rows, cols, ld int) {
	if ld < max(cols, 1) {
		panic(fmt.Sprintf("cpu.Sgemm: ld%s = %d is smaller than the %d columns of %s as stored", name, ld, cols, name))
	}
	if rows > 0 && cols > 0 {
		if need := (rows-1)*ld + cols; len(x) < need {
			panic(fmt.Sprintf("cpu.Sgemm: %s has %d elements; %d×%d with stride %d needs %d", name, len(x), rows, cols, ld, need))
		}
	}
}

// sgemmKernel4x4Go is the pure-Go register tile. It walks k twice, two rows
// at a time: eight accumulators, four B values and one A value fit the
// sixteen float registers of amd64 without spilling, which a 4×4 tile in one
// pass does not.
func sgemmKernel4x4Go(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	ap := unsafe.Slice(a, 4*k)
	bp := unsafe.Slice(b, 4*k)
	var tile [16]float32
	sgemmRows2x4Go(ap, bp, tile[0:8])
	sgemmRows2x4Go(ap[2:], bp, tile[8:16])
	mergeTile(tile[:], 4, 4, 4, unsafe.Slice(c, 3*ldc+4), ldc, alpha, beta)
}

// sgemmRows2x4Go accumulates rows 0 and 1 of a 4-row packed A panel (ap
// starts at the first of the two rows) times a 4-column packed B panel into
// out[0:8].
func sgemmRows2x4Go(ap, bp, out []float32) {
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	for len(ap) >= 2 && len(bp) >= 4 {
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		a0 := ap[0]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		a1 := ap[1]
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		bp = bp[4:]
		if len(ap) < 4 {
			break
		}
		ap = ap[4:]
	}
	out[0], out[1], out[2], out[3] = c00, c01, c02, c03
	out[4], out[5], out[6], out[7] = c10, c11, c12, c13
}

func gemmRoundUp(x, to int) int { return gemmCeilDiv(x, to) * to }
func gemmCeilDiv(x, y int) int  { return (x + y - 1) / y }
