package cpu

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// bf16Chain is gemm_bf16.go's contract written out for one product, from
// the float32 operands: each C[i][j] the float32 chain over k's pairs,
// the second product of a pair first, operands rounded by RoundBF16 and
// read as zero when subnormal, sums flushed below the smallest normal.
func bf16Chain(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int) []float32 {
	at := func(i, p int) float32 {
		if p >= k {
			return 0
		}
		if transA {
			return a[p*lda+i]
		}
		return a[i*lda+p]
	}
	bt := func(p, j int) float32 {
		if p >= k {
			return 0
		}
		if transB {
			return b[j*ldb+p]
		}
		return b[p*ldb+j]
	}
	op := func(v float32) float32 { return bf16Operand(uint32(bf16Bits(v))) }
	c := make([]float32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float32
			for p := 0; p < k; p += 2 {
				s = flushDenormal(s + op(at(i, p+1))*op(bt(p+1, j)))
				s = flushDenormal(s + op(at(i, p))*op(bt(p, j)))
			}
			c[i*n+j] = s
		}
	}
	return c
}

// bf16Case is one product of the bfloat16 path's tests, with strides
// wider than the matrices.
type bf16Case struct {
	transA, transB bool
	m, n, k        int
}

func (c bf16Case) String() string {
	return fmt.Sprintf("%dx%dx%d transA %v transB %v", c.m, c.n, c.k, c.transA, c.transB)
}

// operands returns random A and B for c and their strides.
func (c bf16Case) operands(seed uint64) (a []float32, lda int, b []float32, ldb int) {
	rng := newTestRand(seed)
	rowsA, lda, rowsB, ldb := c.m, c.k+3, c.k, c.n+1
	if c.transA {
		rowsA, lda = c.k, c.m+2
	}
	if c.transB {
		rowsB, ldb = c.n, c.k+5
	}
	return randSlice(rng, rowsA*lda, 1), lda, randSlice(rng, rowsB*ldb, 1), ldb
}

// bf16Cases are the shapes the bfloat16 path is checked on, in every
// transpose: single elements, odd k, tiles cut by every edge, k across
// cache blocks (kc 512) and up to 16384, rows across mc (96), columns
// across nc (2016).
func bf16Cases() []bf16Case {
	var cases []bf16Case
	for _, s := range [][3]int{{1, 1, 1}, {1, 1, 2}, {3, 5, 7}, {8, 48, 256}, {9, 49, 257}, {16, 96, 16},
		{37, 45, 70}, {17, 97, 513}, {200, 100, 301}, {5, 2100, 40}, {16, 50, 16384}, {9, 7, 16383}} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			cases = append(cases, bf16Case{tr[0], tr[1], s[0], s[1], s[2]})
		}
	}
	return cases
}

// TestGemmBF16 checks BF16's products on this machine's path (AMX, the
// AVX512-BF16 path or rounded copies) against float64 sums of the rounded
// operands: each entry within (k+1)·2⁻²⁴ of its scale Σ|a·b| (the bound
// of k+1 float32 additions), and, for 32 ≤ k ≤ 1024, farther than 10⁻⁴ of
// it from the unrounded operands' product (the rounding's part shrinks as
// 1/√k; for larger k, the bits compared with bf16Chain show it). Where the bfloat16 path runs, the
// entries must also be bf16Chain's, bit for bit, on one and two threads.
func TestGemmBF16(t *testing.T) {
	defer SetThreads(Threads())
	for _, c := range bf16Cases() {
		a, lda, b, ldb := c.operands(uint64(c.m*7 + c.n*3 + c.k))
		ref, scale := bf16Ref(c.transA, c.transB, c.m, c.n, c.k, a, lda, b, ldb, true)
		exact, _ := bf16Ref(c.transA, c.transB, c.m, c.n, c.k, a, lda, b, ldb, false)
		var chain []float32
		if bf16Path() != nil && !BF16Native() {
			chain = bf16Chain(c.transA, c.transB, c.m, c.n, c.k, a, lda, b, ldb)
		}
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			got := make([]float32, c.m*c.n)
			for i := range got {
				got[i] = float32(math.NaN()) // beta 0: C must not be read
			}
			BF16.gemm(c.transA, c.transB, c.m, c.n, c.k, a, lda, b, ldb, got, c.n)
			bound := float64(c.k+1) * 0x1p-24
			var worst, fromExact float64
			for i, v := range got {
				if chain != nil && math.Float32bits(v) != math.Float32bits(chain[i]) {
					t.Fatalf("%v, %d threads: C[%d][%d] = %v, the contract's chain gives %v", c, threads, i/c.n, i%c.n, v, chain[i])
				}
				d := math.Abs(float64(v)-ref[i]) / scale[i]
				if !(d <= bound) {
					t.Fatalf("%v, %d threads: C[%d][%d] = %v is %.3g of its scale %.3g from the rounded operands' product %v (bound %.3g)", c, threads, i/c.n, i%c.n, v, d, scale[i], ref[i], bound)
				}
				worst = max(worst, d)
				fromExact = max(fromExact, math.Abs(float64(v)-exact[i])/scale[i])
			}
			if c.k >= 32 && c.k <= 1024 && fromExact < 1e-4 {
				t.Errorf("%v: within %.3g of the float32 operands' product: were the operands rounded?", c, fromExact)
			}
		}
	}
}

// TestGemmBF16Splits runs the bfloat16 path divided every way runParallel
// can, forced, and checks the bits against bf16Chain, and which split
// products of each kind get.
func TestGemmBF16Splits(t *testing.T) {
	if bf16Path() == nil {
		t.Skip("no AVX512-BF16 path on this machine (TestGemmBF16GoPath runs the pure-Go one)")
	}
	checkPairPathSplits(t, bf16Path(), []bf16Case{{false, true, 300, 200, 600}, {true, false, 100, 300, 700}, {true, true, 37, 45, 3001}})
	for _, want := range []struct {
		m, n, k int
		split   gemmSplit
	}{
		{16384, 384, 384, splitSharedB}, // tall
		{384, 384, 16384, splitSharedB}, // deep: past gemmPairSharedMinFlops
		{1536, 384, 16384, splitSharedB},
		{512, 512, 512, splitColumns},
		{250, 512, 784, splitColumns},
		{128, 128, 128, splitColumns},
		{5, 2000, 5000, splitColumns}, // too short to share rows
	} {
		g := &gemmCall{p: bf16Path(), m: want.m, n: want.n, k: want.k}
		if got := g.split(2); got != want.split {
			t.Errorf("%d×%d×%d on 2 threads splits as %d; want %d", want.m, want.n, want.k, got, want.split)
		}
	}
}

// TestGemmBF16GoPath runs gemm_bf16.go's blocking with the pure-Go kernel
// and packers on a 3×5 tile and tiny cache blocks, so that every edge of
// every block is crossed, and checks the bits against bf16Chain.
func TestGemmBF16GoPath(t *testing.T) {
	p := &gemmPath{name: "bf16-go", mr: 3, nr: 5, kc: 6, mc: 7, nc: 11, kernel: pairKernelGo(3, 5),
		pairs: &pairPackers{packA: packPairsA, packB: packPairsB, rows: pairRowsGo, columns8: pairColumnsGo}}
	p8 := &gemmPath{name: "bf16-go-8", mr: 8, nr: 5, kc: 6, mc: 40, nc: 11, kernel: pairKernelGo(8, 5),
		pairs: &pairPackers{packA: packPairsA, packB: packPairsB, rows: pairRowsGo, panels8: pairPanels8Go, columns8: pairColumnsGo}}
	checkPairPathSplits(t, p8, []bf16Case{{true, false, 37, 9, 13}, {true, true, 40, 6, 8}})
	checkPairPathSplits(t, p, []bf16Case{{false, false, 20, 23, 19}, {false, true, 13, 30, 34}, {true, false, 1, 1, 1}, {true, true, 31, 12, 40}})
}

func checkPairPathSplits(t *testing.T, p *gemmPath, cases []bf16Case) {
	t.Helper()
	defer SetThreads(Threads())
	for _, c := range cases {
		a, lda, b, ldb := c.operands(uint64(c.k))
		want := bf16Chain(c.transA, c.transB, c.m, c.n, c.k, a, lda, b, ldb)
		for _, threads := range []int{1, 2, 3} {
			for _, split := range []gemmSplit{splitColumns, splitSharedB} {
				SetThreads(threads)
				got := make([]float32, c.m*c.n)
				g := &gemmCall{barrier: newGemmBarrier(), p: p, transA: c.transA, transB: c.transB, m: c.m, n: c.n, k: c.k, alpha: 1, a: a, lda: lda, b: b, ldb: ldb, c: got, ldc: c.n}
				if threads == 1 {
					g.run(0, c.m, 0, c.n)
				} else {
					g.runSplit(threads, split)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s, %v, %d threads, split %d: C[%d][%d] = %v, the contract's chain gives %v", p.name, c, threads, split, i/c.n, i%c.n, got[i], want[i])
					}
				}
			}
		}
	}
}

// awkwardFloats returns n float32 with the values a bfloat16 conversion
// can get wrong mixed among ordinary ones: ties, NaNs (one with its
// payload in the low half), infinities, the largest finite float32,
// subnormals, signed zeros.
func awkwardFloats(seed uint64, n int) []float32 {
	rng := newTestRand(seed)
	f := math.Float32frombits
	special := []float32{f(0x3f808000), f(0x3f818000), f(0xbf808001), f(0x7fc00000), f(0x7f800001), float32(math.Inf(-1)),
		f(0x7f7fffff), f(0x00000001), f(0x007fffff), f(0x80400000), f(0x80000000), 0, f(0x00800000)}
	x := randSlice(rng, n, 4)
	for i := range x {
		if rng.IntN(4) == 0 {
			x[i] = special[rng.IntN(len(special))]
		}
	}
	return x
}

// TestPairPackers checks the assembly packers against their Go twins bit
// for bit, on every lane count of the row packer (masks of 1-48 lanes), its
// two-panel form, and the column packer's blocks of 8 steps.
func TestPairPackers(t *testing.T) {
	if bf16Path() == nil {
		t.Skip("no AVX512-BF16 path on this machine")
	}
	pk := bf16Path().pairs
	src := awkwardFloats(13, 64*70)
	for lanes := 1; lanes <= 48; lanes++ {
		for _, steps := range []int{1, 5} {
			got, want := make([]uint32, steps*50), make([]uint32, steps*50)
			for i := range got {
				got[i], want[i] = 0xdeadbeef, 0xdeadbeef // lanes past the mask stay
			}
			pk.rows(got, 50, src[3:], 70, lanes, steps)
			pairRowsGo(want, 50, src[3:], 70, lanes, steps)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("rows, %d lanes, %d steps: dst[%d] = %#08x, want %#08x", lanes, steps, i, got[i], want[i])
				}
			}
		}
	}
	for _, steps := range []int{1, 6} {
		got, want := make([]uint32, 2*8*steps+3), make([]uint32, 2*8*steps+3)
		pk.panels8(got, 8*steps+3, src[5:], 70, steps)
		pairPanels8Go(want, 8*steps+3, src[5:], 70, steps)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("panels8, %d steps: dst[%d] = %#08x, want %#08x", steps, i, got[i], want[i])
			}
		}
	}
	for _, steps := range []int{8, 16, 32} {
		got, want := make([]uint32, steps*11), make([]uint32, steps*11)
		pk.columns8(got, 11, src[1:], 70, steps)
		pairColumnsGo(want, 11, src[1:], 70, steps)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("columns8, %d steps: dst[%d] = %#08x, want %#08x", steps, i, got[i], want[i])
			}
		}
	}
}

// TestPairKernel checks the assembly tile against pairKernelGo bit for bit,
// from zero and from beta·C, on pairs that include subnormal bfloat16.
func TestPairKernel(t *testing.T) {
	if bf16Path() == nil {
		t.Skip("no AVX512-BF16 path on this machine")
	}
	p := bf16Path()
	goKernel := pairKernelGo(p.mr, p.nr)
	rng := newTestRand(17)
	for _, k := range []int{0, 1, 2, 7, 128} {
		a, b := make([]uint32, k*p.mr), make([]uint32, k*p.nr)
		for i := range a {
			a[i] = pair(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
			if rng.IntN(16) == 0 {
				a[i] = 0x00050000 | uint32(rng.IntN(1<<16)) // a subnormal in the high half
			}
		}
		for i := range b {
			b[i] = pair(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
		}
		ldc := p.nr + 3
		for _, beta := range []float32{0, 1, -0.75} {
			c0 := randSlice(rng, p.mr*ldc, 2)
			if beta == 0 {
				for i := range c0 {
					c0[i] = float32(math.NaN())
				}
			}
			got, want := append([]float32(nil), c0...), append([]float32(nil), c0...)
			p.kernel(k, slots(a), slots(b), &got[0], ldc, 1, beta)
			goKernel(k, slots(a), slots(b), &want[0], ldc, 1, beta)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("k %d beta %v: C[%d][%d] = %v, pairKernelGo gives %v", k, beta, i/ldc, i%ldc, got[i], want[i])
				}
			}
		}
	}
}

// slots is a packed panel of pairs as the kernels take it.
func slots(x []uint32) *float32 { return (*float32)(unsafe.Pointer(unsafe.SliceData(x))) }

// TestGemmBF16TakesPath checks that on a CPU with AVX512-BF16 and no AMX
// tiles, BF16's products run on the bfloat16 path and not on rounded
// copies in float32: its check must find the feature /proc/cpuinfo lists,
// and a subnormal bfloat16 operand must read as zero, which Sgemm on
// rounded copies would not do (2⁻¹³⁰·2¹⁰⁰ = 2⁻³⁰ there).
func TestGemmBF16TakesPath(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if runtime.GOOS != "linux" || err != nil {
		t.Skipf("no /proc/cpuinfo to compare with (%v)", err)
	}
	flags := strings.Fields(string(info))
	hasBF16 := false
	for _, f := range flags {
		hasBF16 = hasBF16 || f == "avx512_bf16"
	}
	if !hasBF16 || BF16Native() || len(archGemmPaths()) == 0 {
		t.Skipf("avx512_bf16 listed: %v, AMX: %v, assembly in this build: %v; the path is for AVX512-BF16 without AMX", hasBF16, BF16Native(), len(archGemmPaths()) > 0)
	}
	if bf16Path() == nil {
		t.Fatal("/proc/cpuinfo lists avx512_bf16 but the bfloat16 path is off: its CPUID check is wrong")
	}
	a := []float32{0x1p-130, 1}
	b := []float32{0x1p100, 0x1p-20}
	c := []float32{-1}
	BF16.gemm(false, false, 1, 1, 2, a, 2, b, 1, c, 1)
	if c[0] != 0x1p-20 {
		t.Fatalf("2⁻¹³⁰·2¹⁰⁰ + 1·2⁻²⁰ = %v in BF16; the bfloat16 path gives 2⁻²⁰ (a subnormal operand reads as zero)", c[0])
	}
}

// TestGemmBF16NoAllocs checks that the bfloat16 path, like Sgemm, reuses
// its arenas and call records: no allocation per product in steady state,
// on one thread and two, for every transpose.
func TestGemmBF16NoAllocs(t *testing.T) {
	if bf16Path() == nil {
		t.Skip("no AVX512-BF16 path on this machine")
	}
	if gemmRaceEnabled {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	defer SetThreads(Threads())
	n := 300
	rng := newTestRand(19)
	a, b, c := randSlice(rng, n*n, 1), randSlice(rng, n*n, 1), make([]float32, n*n)
	for _, threads := range []int{1, 2} {
		SetThreads(threads)
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			allocs := leastAllocs(10, func() {
				gemmBF16(tr[0], tr[1], n, n, n, a, n, b, n, c, n)
			})
			if allocs != 0 {
				t.Errorf("%d³ bf16 product, transposes %v, %d threads: %v allocations per call; want 0", n, tr, threads, allocs)
			}
		}
	}
}

// TestGemmBF16RefusesAlpha: a bfloat16 path's tiles ignore alpha and its
// edge tiles would not, so gemmOn refuses alpha ≠ 1 there rather than
// scale some of C.
func TestGemmBF16RefusesAlpha(t *testing.T) {
	p := bf16Path()
	if p == nil {
		t.Skip("no AVX512-BF16 path on this machine")
	}
	a, b, c := make([]float32, 40*40), make([]float32, 40*40), make([]float32, 40*40)
	defer func() {
		if recover() == nil {
			t.Fatal("gemmOn ran a bfloat16 product with alpha 0.5")
		}
	}()
	gemmOn(p, 1, false, false, 40, 40, 40, 0.5, a, 40, b, 40, 0, c, 40)
}
