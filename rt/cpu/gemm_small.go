package cpu

// The small-product path. For products whose operands sit in L1 and L2
// anyway, packing them costs more than it saves: at 64³ on one AVX-512
// core packing A took a quarter of Sgemm's time and packing B a tenth.
// runSmall reads A in place for every transpose and B in place when it is
// stored k×n; only transposed B and a last panel narrower than nr are
// packed, one nr-column panel at a time.

// gemmSmallMaxK and gemmSmallMaxA bound the products runSmall takes: an
// in-place B panel (k rows of nr floats, 32 KiB at k = 256 and nr = 32)
// must stay in L1 while every row tile of A streams past it, and A
// (m·k floats, read again for each B panel) must stay in L2.
const (
	gemmSmallMaxK = 256
	gemmSmallMaxA = 256 * 256
)

// gemmSmall reports whether an m×n×k product (or one goroutine's block of
// a larger one) is small enough for runSmall.
func gemmSmall(m, n, k int) bool {
	return k >= 1 && k <= gemmSmallMaxK && m*k <= gemmSmallMaxA
}

// runSmall computes rows [i0, i1) and columns [j0, j1) of C on the
// calling goroutine with the path's direct tiles: for each panel of nr
// columns of B, the rows of C in tiles of mr rows, then the remainder in
// the smaller tiles (8+4+2+1 rows, say), so no tile reads a row of A
// beyond m. A last panel of nr/2 columns or
// fewer takes the half-width tiles where the path has them; a panel
// narrower than its tiles is computed into the arena's tile and merged, as
// in tiles.
func (g *gemmCall) runSmall(i0, i1, j0, j1 int) {
	p := g.p
	w := gemmArenas.Get().(*gemmArena)
	w.fit(p)
	aRow, aStep := g.lda, 1
	if g.transA {
		aRow, aStep = 1, g.lda
	}
	for jr := j0; jr < j1; jr += p.nr {
		cols := min(p.nr, j1-jr)
		nr, tiles := p.nr, p.direct
		if cols <= p.nr/2 && p.directHalf != nil {
			nr, tiles = p.nr/2, p.directHalf
		}
		bp, ldb := &g.b[0], g.ldb
		if g.transB || cols < nr {
			packB(g.transB, g.b, g.ldb, 0, jr, g.k, cols, nr, w.b, p.transpose8)
			bp, ldb = &w.b[0], nr
		} else {
			bp = &g.b[jr]
		}
		i := i0
		for _, t := range tiles {
			for ; i1-i >= t.rows; i += t.rows {
				a := &g.a[i*aRow]
				if cols == nr {
					t.kernel(g.k, a, aRow, aStep, bp, ldb, &g.c[i*g.ldc+jr], g.ldc, g.alpha, g.beta)
					continue
				}
				t.kernel(g.k, a, aRow, aStep, bp, ldb, &w.tile[0], nr, 1, 0)
				mergeTile(w.tile, nr, t.rows, cols, g.c[i*g.ldc+jr:], g.ldc, g.alpha, g.beta)
			}
		}
	}
	gemmArenas.Put(w)
}
