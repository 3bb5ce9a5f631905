//go:build !purego

package cpu

import (
	"bytes"
	"sync"
	"unsafe"
)

// Intel AMX: BF16's products on tiles, where the CPU has AMX-BF16 and the
// kernel lets this process use the tile registers (Linux asks a process to
// request them: arch_prctl ARCH_REQ_XCOMP_PERM).
//
// A product C = A·B (m×k times k×n) packs A and B as bfloat16 in the tiles'
// order (amx_layout.go: mp = m, kp = k and np = n rounded up to 32,
// zero-padded), then amxPanelBlock multiplies 32-row blocks of C (two
// panels of A) by 32-column blocks (two panels of B) in tiles. B is packed
// first, by all threads, and so is A where it is read transposed; else
// each thread packs its rows of A just before it multiplies them, while
// they are in its cache. A thread's rows go in groups of amxGroupBlocks
// 32-row blocks, each group multiplied by amxChunkBlocks 32-column blocks
// of B at a time (all of B when 0), so that a chunk of B stays in cache for
// the whole group. Whole blocks of C are stored in place; the blocks that
// C's edges cut go through a scratch and are copied.

var amx struct {
	once sync.Once
	ok   bool
	cfg  [64]byte // the tile configuration: palette 1, tmm0-7 16 rows of 64 bytes
}

func amxSetup() {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return
	}
	_, _, ecx1, _ := cpuid(1, 0)
	if ecx1&(1<<27) == 0 { // no OSXSAVE: no XGETBV
		return
	}
	_, _, _, edx7 := cpuid(7, 0)
	const amxBF16, amxTile = 1 << 22, 1 << 24
	if edx7&(amxBF16|amxTile) != amxBF16|amxTile {
		return
	}
	xcr0, _ := xgetbv()
	const tileState = 3 << 17 // XTILECFG and XTILEDATA
	if xcr0&tileState != tileState {
		return
	}
	if !amxPermit() {
		return
	}
	amx.cfg[0] = 1 // palette 1
	for t := 0; t < 8; t++ {
		amx.cfg[16+2*t] = 64 // bytes a row
		amx.cfg[48+t] = 16   // rows
	}
	amx.ok = true
}

// BF16Native reports whether BF16 products run on Intel AMX tiles here;
// where they don't, they run with VDPBF16PS where the CPU has AVX512-BF16
// (gemm_bf16.go, the same numbers), else in float32 on rounded operands.
func BF16Native() bool {
	amx.once.Do(amxSetup)
	return amx.ok
}

//go:noescape
func amxPanelBlock(cfg *byte, a *uint16, b *uint32, c *float32, nBlocks, kTiles, aHalf, bHalf, bNext, ldc, acc int)

// The blocking of amxGemm's work (see the top of this file); variables for
// BenchmarkAMXBlocking, which chose them on the H200 host's Xeon (48 KB L1,
// 2 MB L2 a core) for models/gpt.cue's products: one 32-row block at a time
// against all of B was the fastest or near it on 1 thread (940 GFLOP/s for
// 16384×1536×384, against 470–650 with groups of 8 or 16 blocks, whose A
// no longer stays in L1 across B's blocks), and on 2 threads within the
// run's noise of the best.
//
// amxKChunk is the k-tiles a pass takes where k is long (the weight
// gradients' 16,384 tokens): C's 32-row block is added to pass after pass,
// so that a pass's B (n × 32·amxKChunk bfloat16, 768 KB with n = 384)
// stays in L2 for all of the thread's row blocks, where all of B (12 MB)
// came from L3 for each block.
var (
	amxGroupBlocks = 1
	amxChunkBlocks = 0
	amxKChunk      = 32
)

// amxBuffers are the packed operands and the edges' scratch, reused.
var amxBuffers amxBufferSet

type amxBufferSet struct {
	sync.Mutex
	pa []uint16
	pb []uint32
	pc []float32 // C's column edge (mp rows of 32), then its row edge (32 rows of np)
	pt []uint32  // a transposed operand before its transpose
	// kept holds BF16Inference's packed B operands by the address of
	// their first element, each with a copy of the float32 elements it was
	// packed from: the address only finds the candidate, the comparison
	// decides.
	kept map[uintptr]*amxKept
}

// amxKept is one packed B operand of BF16Inference.
type amxKept struct {
	trans     bool
	k, n, ldb int
	src       []float32 // B's rows×cols elements when packed, rows packed together
	pb        []uint32
}

// amxKeptMax bounds the kept operands; past it they are dropped and packed
// again as they come (a program's inference plans have a few dense layers).
const amxKeptMax = 64

// keptB returns B packed as packBF16BVec would, from the kept tiles when B's
// elements equal, bit for bit, those they were packed from, else packing
// them again and keeping them.
func (s *amxBufferSet) keptB(trans bool, b []float32, ldb, k, n, kp, np int) []uint32 {
	rows, cols := k, n
	if trans {
		rows, cols = n, k
	}
	key := uintptr(unsafe.Pointer(&b[0]))
	e := s.kept[key]
	if e != nil && e.trans == trans && e.k == k && e.n == n && e.ldb == ldb {
		same := true
		for r := 0; r < rows && same; r++ {
			same = bytes.Equal(f32Bytes(b[r*ldb:r*ldb+cols]), f32Bytes(e.src[r*cols:r*cols+cols]))
		}
		if same {
			return e.pb
		}
	}
	if e == nil {
		if s.kept == nil || len(s.kept) >= amxKeptMax {
			s.kept = map[uintptr]*amxKept{}
		}
		e = &amxKept{}
		s.kept[key] = e
	}
	*e = amxKept{trans: trans, k: k, n: n, ldb: ldb, src: growF32(e.src, rows*cols), pb: growU32(e.pb, kp/2*np)}
	for r := 0; r < rows; r++ {
		copy(e.src[r*cols:r*cols+cols], b[r*ldb:r*ldb+cols])
	}
	packBF16BVec(trans, b, ldb, k, n, e.pb, kp, np, s.pt)
	return e.pb
}

// f32Bytes is x's memory as bytes, for an exact comparison (NaNs and the
// sign of zero included).
func f32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// amxGemm is C = A·B on AMX tiles; false where the CPU has none. With
// keepB, B's packed tiles are kept (amxKept) and reused while B is
// unchanged.
func amxGemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, keepB bool) bool {
	return amxGemmRows(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, keepB, nil)
}

// amxGemmRows is amxGemm calling rows(i0, i1), when not nil, for each
// 32-row block of C (the last cut at m) once its products are stored, on
// the thread that stored them (Precision.gemmRows); false, with nothing
// done, where the CPU has no tiles or C is empty.
func amxGemmRows(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, keepB bool, rows func(i0, i1 int)) bool {
	if k <= 0 || m <= 0 || n <= 0 || !BF16Native() {
		return false
	}
	amxGemmWith(amxPanelBlock, transA, transB, m, n, k, a, lda, b, ldb, c, ldc, keepB, false, rows)
	return true
}

// amxGemmAdd is C += A·B on AMX tiles (the tiles load C's blocks before
// adding the products); false, with nothing done, where the CPU has none.
func amxGemmAdd(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) bool {
	if m <= 0 || n <= 0 || !BF16Native() {
		return false
	}
	if k > 0 {
		amxGemmWith(amxPanelBlock, transA, transB, m, n, k, a, lda, b, ldb, c, ldc, false, true, nil)
	}
	return true
}

// amxGemmWith is amxGemm's work with the tiles' kernel given, adding to C
// with add (amxGemmAdd), and rows, when not nil, called as amxGemmRows
// says.
func amxGemmWith(kernel amxKernel, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, keepB, add bool, rows func(i0, i1 int)) {
	checkGemmOperands(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	mp, np, kp := gemmRoundUp(m, 32), gemmRoundUp(n, 32), gemmRoundUp(k, 32)
	s := &amxBuffers
	s.Lock()
	defer s.Unlock()
	s.pa = growU16(s.pa, mp*kp)
	s.pc = growF32(s.pc, mp*32+32*np)
	s.pt = growU32(s.pt, max(kp/2*mp, np*kp/2))
	pa, colEdge, rowEdge := s.pa, s.pc[:mp*32], s.pc[mp*32:]
	var pb []uint32
	if keepB {
		pb = s.keptB(transB, b, ldb, k, n, kp, np)
	} else {
		s.pb = growU32(s.pb, kp/2*np)
		pb = s.pb
		packBF16BVec(transB, b, ldb, k, n, pb, kp, np, s.pt)
	}
	if transA {
		packBF16AVec(true, a, lda, m, k, pa, mp, kp, s.pt)
	}
	// Byte offsets in the packed operands: a panel of A or of B is 32·kp
	// bytes, and a block of 32 columns two panels of B.
	aHalf, bHalf, bNext := 32*kp, 32*kp, 64*kp
	nBlocks, nFull := np/32, n/32
	chunk := amxChunkBlocks
	if chunk <= 0 {
		chunk = nBlocks
	}
	cfg := &amx.cfg[0]
	acc := 0 // 1: the tiles load C's blocks and add to them
	if add {
		acc = 1
	}
	// blocks multiplies the 32-row block mb of A by B's 32-column blocks
	// [nb0, nb1) into C.
	blocks := func(mb, nb0, nb1 int) {
		i0, ap := mb*32, &pa[mb*32*kp]
		bp := &pb[nb0*16*kp]
		if i0+32 > m { // C's last rows, through the row edge's scratch
			kernel(cfg, ap, bp, &rowEdge[nb0*32], nb1-nb0, kp/32, aHalf, bHalf, bNext, np*4, 0)
			j1 := min(nb1*32, n)
			for i := i0; i < m; i++ {
				storeEdge(c[i*ldc+nb0*32:i*ldc+j1], rowEdge[(i-i0)*np+nb0*32:(i-i0)*np+j1], add)
			}
			return
		}
		if full := min(nb1, nFull) - nb0; full > 0 {
			kernel(cfg, ap, bp, &c[i0*ldc+nb0*32], full, kp/32, aHalf, bHalf, bNext, ldc*4, acc)
		}
		if nb1 > nFull { // C's last columns, through the column edge's scratch
			kernel(cfg, ap, &pb[nFull*16*kp], &colEdge[i0*32], 1, kp/32, aHalf, bHalf, bNext, 32*4, 0)
			for i := i0; i < i0+32; i++ {
				storeEdge(c[i*ldc+nFull*32:i*ldc+n], colEdge[i*32:i*32+n-nFull*32], add)
			}
		}
	}
	if kTiles := kp / 32; amxKChunk > 0 && kTiles > 2*amxKChunk && m%32 == 0 && n%32 == 0 {
		// Long k, no edges: passes of amxKChunk k-tiles, each added to C.
		ParallelFor(mp/32, 1, func(lo, hi int) {
			if !transA {
				packBF16ARows(a, lda, m, k, pa, kp, lo*32, hi*32)
			}
			for kt0, acc := 0, acc; kt0 < kTiles; kt0, acc = kt0+amxKChunk, 1 {
				for mb := lo; mb < hi; mb++ {
					kernel(cfg, &pa[mb*32*kp+kt0*512], &pb[kt0*256], &c[mb*32*ldc], nBlocks, min(amxKChunk, kTiles-kt0), aHalf, bHalf, bNext, ldc*4, acc)
					if rows != nil && kt0+amxKChunk >= kTiles {
						rows(mb*32, mb*32+32)
					}
				}
			}
		})
		return
	}
	ParallelFor(mp/32, 1, func(lo, hi int) {
		for g0 := lo; g0 < hi; g0 += amxGroupBlocks {
			g1 := min(g0+amxGroupBlocks, hi)
			if !transA {
				packBF16ARows(a, lda, m, k, pa, kp, g0*32, g1*32)
			}
			for nb0 := 0; nb0 < nBlocks; nb0 += chunk {
				for mb := g0; mb < g1; mb++ {
					blocks(mb, nb0, min(nb0+chunk, nBlocks))
					if rows != nil && nb0+chunk >= nBlocks && mb*32 < m {
						rows(mb*32, min(mb*32+32, m))
					}
				}
			}
		}
	})
}

//go:noescape
func bf16Row(dst *uint16, src *float32, n int)

//go:noescape
func bf16RoundRow(dst, src *float32, n int)

// roundRow writes RoundBF16 of each of src into dst (as long), 16 at a
// time by bf16RoundRow where the CPU has AVX-512 (dotBF16Widen says so:
// a flag of its own, initialised by a call, would make the compiler
// initialise every package variable declared after it at run time, and
// link the Winograd tables and kernels into programs that never use them).
func roundRow(dst, src []float32) {
	done := 0
	if n := len(src) &^ 15; dotBF16Widen && n > 0 {
		_ = dst[n-1]
		bf16RoundRow(&dst[0], &src[0], n)
		done = n
	}
	for j := done; j < len(src); j++ {
		dst[j] = RoundBF16(src[j])
	}
}

//go:noescape
func bf16RowStrided(dst *uint16, src *float32, n, ldd int)

//go:noescape
func bf16PairsStrided(dst *uint32, lo, hi *float32, n, ldd int)

//go:noescape
func dwordT16(dst *uint32, ldd int, src *uint32, lds int, n int)

// packBF16AVec is packBF16A with AVX-512 conversions (every CPU with AMX
// has AVX-512): rows converted 32 at a time into their tiles (packBF16ARows);
// transposed, the pairs of A's columns (rows 2q and 2q+1 of the stored
// matrix) interleaved into the rows of pt (kp/2 rows of mp pairs), and pt
// transposed 16×16 pairs at a time into A's panels.
func packBF16AVec(trans bool, a []float32, lda, m, k int, pa []uint16, mp, kp int, pt []uint32) {
	if !trans {
		ParallelFor(mp/16, 1, func(lo, hi int) { packBF16ARows(a, lda, m, k, pa, kp, lo*16, hi*16) })
		return
	}
	ParallelFor(kp/32, 1, func(lo, hi int) { packBF16ATrans(a, lda, m, k, pa, mp, kp, pt, lo, hi) })
}

// packBF16ATrans packs k-tiles [lo, hi) of A read transposed (packBF16AVec's
// second way): 16 rows of pt at a time (16 KB with mp = 256), transposed
// while they are in L1.
func packBF16ATrans(a []float32, lda, m, k int, pa []uint16, mp, kp int, pt []uint32, lo, hi int) {
	m16 := m &^ 15
	pa32 := unsafe.Slice((*uint32)(unsafe.Pointer(&pa[0])), len(pa)/2)
	for q0 := lo * 16; q0 < hi*16; q0 += 16 {
		for q := q0; q < q0+16; q++ {
			row := pt[q*mp : q*mp+mp]
			i0 := 0
			if 2*q+1 < k && m16 > 0 {
				bf16PairsStrided(&row[0], &a[2*q*lda], &a[(2*q+1)*lda], m16, 16)
				i0 = m16
			}
			for i := i0; i < mp; i++ {
				row[i] = amxPair(a, true, lda, i, 2*q, m, k)
			}
		}
		for i := 0; i < mp; i += 16 {
			dwordT16(&pa32[amxAAt(i, 2*q0, kp)/2], 16, &pt[q0*mp+i], mp, 16)
		}
	}
}

// packBF16ARows packs rows [r0, r1) of A (not transposed), r0 and r1
// multiples of 16: A's rows converted 32 at a time into their tiles, the
// tail of k and the rows past m one at a time, the padding zeroed.
func packBF16ARows(a []float32, lda, m, k int, pa []uint16, kp, r0, r1 int) {
	k32 := k &^ 31
	for i := r0; i < r1; i++ {
		base := amxAAt(i, 0, kp)
		p0 := 0
		if i < m {
			if k32 > 0 {
				bf16RowStrided(&pa[base], &a[i*lda], k32, 512)
			}
			for p := k32; p < k; p++ {
				pa[base+(p/32)*512+p%32] = bf16Bits(a[i*lda+p])
			}
			p0 = k
		}
		for p := p0; p < kp; p++ {
			pa[base+(p/32)*512+p%32] = 0
		}
	}
}

// bf16ConvertRow writes src rounded to bfloat16 at the start of dst, 16 at a
// time by bf16Row, and zeros after it.
func bf16ConvertRow(dst []uint16, src []float32) {
	k16 := len(src) &^ 15
	if k16 > 0 {
		bf16Row(&dst[0], &src[0], k16)
	}
	for p := k16; p < len(src); p++ {
		dst[p] = bf16Bits(src[p])
	}
	clear(dst[len(src):])
}

// amxPair is A(i,p) and A(i,p+1) (zero outside m×k) as a bfloat16 pair.
func amxPair(a []float32, trans bool, lda, i, p, m, k int) uint32 {
	at := func(p int) uint32 {
		if i >= m || p >= k {
			return 0
		}
		if trans {
			return uint32(bf16Bits(a[p*lda+i]))
		}
		return uint32(bf16Bits(a[i*lda+p]))
	}
	return at(p) | at(p+1)<<16
}

// packBF16BVec is packBF16B with AVX-512 conversions: B's rows 2q and
// 2q+1 interleaved 16 columns at a time into their panels; transposed, each
// stored row converted (its consecutive bfloat16 are the pairs of its
// column of B) into a row of pt (np rows of kp/2 pairs), and pt transposed
// 16 columns at a time into their panel.
func packBF16BVec(trans bool, b []float32, ldb, k, n int, pb []uint32, kp, np int, pt []uint32) {
	if !trans {
		ParallelFor(kp/2, 8, func(lo, hi int) { packBF16BPairs(b, ldb, k, n, pb, kp, np, lo, hi) })
		return
	}
	ParallelFor(np/16, 1, func(lo, hi int) { packBF16BTrans(b, ldb, k, n, pb, kp, np, pt, lo, hi) })
}

// packBF16BPairs packs pair rows [lo, hi) of B (not transposed): rows 2q
// and 2q+1 interleaved 16 columns at a time into their panels.
func packBF16BPairs(b []float32, ldb, k, n int, pb []uint32, kp, np, lo, hi int) {
	n16 := n &^ 15
	for q := lo; q < hi; q++ {
		p := 2 * q
		j0 := 0
		if p+1 < k && n16 > 0 {
			bf16PairsStrided(&pb[amxBAt(q, 0, kp)], &b[p*ldb], &b[(p+1)*ldb], n16, kp/2*16)
			j0 = n16
		}
		for j := j0; j < np; j++ {
			pb[amxBAt(q, j, kp)] = amxPair(b, true, ldb, j, p, n, k)
		}
	}
}

// packBF16BTrans packs the 16-column panels [lo, hi) of B read transposed:
// 16 rows of pt at a time (25 KB with k = 784), transposed while they are
// in L1.
func packBF16BTrans(b []float32, ldb, k, n int, pb []uint32, kp, np int, pt []uint32, lo, hi int) {
	pt16 := unsafe.Slice((*uint16)(unsafe.Pointer(&pt[0])), 2*len(pt))
	for j0 := lo * 16; j0 < hi*16; j0 += 16 {
		for j := j0; j < j0+16; j++ {
			var src []float32
			if j < n {
				src = b[j*ldb : j*ldb+k]
			}
			bf16ConvertRow(pt16[j*kp:j*kp+kp], src)
		}
		dwordT16(&pb[amxBAt(0, j0, kp)], 16, &pt[j0*kp/2], kp/2, kp/2)
	}
}

// newAMXLocal returns a thread's AMX products, or nil where the CPU has no
// tiles.
func newAMXLocal() *amxLocal {
	if !BF16Native() {
		return nil
	}
	return &amxLocal{kernel: amxPanelBlock}
}

// packB packs B (k×n, read transposed with transB, as Sgemm reads it) into
// p for mulPacked.
func (s *amxLocal) packB(p *amxPackedB, transB bool, b []float32, ldb, k, n int) {
	p.k, p.n, p.kp = k, n, gemmRoundUp(k, 32)
	if k <= 0 || n <= 0 {
		return
	}
	kp, np := p.kp, gemmRoundUp(n, 32)
	p.pb = growU32(p.pb, kp/2*np)
	if transB {
		s.pt = growU32(s.pt, np*kp/2)
		packBF16BTrans(b, ldb, k, n, p.pb, kp, np, s.pt, 0, np/16)
		return
	}
	packBF16BPairs(b, ldb, k, n, p.pb, kp, np, 0, kp/2)
}

// mulPacked is C = A·B, or C += A·B with acc, of B's first k rows and n
// columns as packB packed them (k ≤ p.k, n ≤ p.n); A (m×k, read
// transposed with transA) is packed here. Where k is not a multiple of 32,
// A's padding multiplies B's rows past k, which must then be finite.
func (s *amxLocal) mulPacked(transA bool, m, n, k int, a []float32, lda int, p *amxPackedB, acc bool, c []float32, ldc int) {
	if k > p.k || n > p.n {
		panic("cpu: mulPacked past its packed B")
	}
	if m <= 0 || n <= 0 {
		return
	}
	if k <= 0 {
		if !acc {
			scaleMatrix(m, n, 0, c, ldc)
		}
		return
	}
	if transA { // A as stored
		checkGemmOperand("a", a, k, m, lda)
	} else {
		checkGemmOperand("a", a, m, k, lda)
	}
	mp, np, kp := gemmRoundUp(m, 32), gemmRoundUp(n, 32), gemmRoundUp(k, 32)
	s.pa = growU16(s.pa, mp*kp)
	if transA {
		s.pt = growU32(s.pt, kp/2*mp)
		packBF16ATrans(a, lda, m, k, s.pa, mp, kp, s.pt, 0, kp/32)
	} else {
		packBF16ARows(a, lda, m, k, s.pa, kp, 0, mp)
	}
	out, ldo, add := c, ldc, 0
	if acc {
		add = 1
	}
	edges := m != mp || n != np
	if edges { // the whole product through the scratch, then into C
		s.pc = growF32(s.pc, mp*np)
		out, ldo, add = s.pc, np, 0
	} else {
		checkGemmOperand("c", c, m, n, ldc)
	}
	// B's panels are p.kp deep: a product of fewer rows reads the first
	// kp/32 tiles of each.
	cfg := &amx.cfg[0]
	for mb := 0; mb < mp/32; mb++ {
		s.kernel(cfg, &s.pa[mb*32*kp], &p.pb[0], &out[mb*32*ldo], np/32, kp/32, 32*kp, 32*p.kp, 64*p.kp, ldo*4, add)
	}
	if !edges {
		return
	}
	for i := range m {
		storeEdge(c[i*ldc:i*ldc+n], s.pc[i*np:i*np+n], acc)
	}
}

// storeEdge copies a row of C that an edge's scratch holds into dst, or
// adds it to dst with add.
func storeEdge(dst, src []float32, add bool) {
	if !add {
		copy(dst, src)
		return
	}
	for j, v := range src {
		dst[j] += v
	}
}
