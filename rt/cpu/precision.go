package cpu

import (
	"math"
	"sync"
)

// Precision is how a dense layer or a GEMM-backed convolution multiplies
// its matrices: FP32, or BF16 (bfloat16 operands, float32 accumulation,
// float32 master weights: the layer's weights, activations and gradients
// stay float32 in memory and are rounded to bfloat16 only where a product
// reads them). The planner picks one per dense layer and convolution step,
// and the emitted program calls its GemmFwd and GemmBwd, or its
// convolution methods (conv_bf16.go).
type Precision struct {
	name string
	// bf16 says the products read bfloat16-rounded operands.
	bf16 bool
	// gemm is C = A·B (alpha 1, beta 0) in this precision, with Sgemm's
	// argument convention.
	gemm func(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int)
	// gemmRows, where set, is gemm calling rows(i0, i1) as soon as C's
	// rows [i0, i1) are final, on the thread that wrote them (while they
	// are in its cache), the calls covering [0, m) once; false, with
	// nothing done, where it cannot (gemm then runs).
	gemmRows func(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, rows func(i0, i1 int)) bool
	// gemmAdd is C += A·B in this precision.
	gemmAdd func(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int)
}

var (
	// FP32 multiplies in float32 (Sgemm).
	FP32 = &Precision{name: "f32", gemm: func(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		Sgemm(transA, transB, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
	}, gemmAdd: func(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		Sgemm(transA, transB, m, n, k, 1, a, lda, b, ldb, 1, c, ldc)
	}}
	// BF16 rounds both operands of every product to bfloat16 (round to
	// nearest even) and accumulates in float32: on Intel AMX tiles where the
	// CPU has them (BF16Native), else with VDPBF16PS where it has
	// AVX512-BF16 (gemm_bf16.go), elsewhere by Sgemm on rounded copies,
	// which gives the same products at float32's speed.
	BF16 = &Precision{name: "bf16", bf16: true, gemm: sgemmBF16, gemmAdd: sgemmBF16Add, gemmRows: func(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, rows func(i0, i1 int)) bool {
		return amxGemmRows(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, false, rows)
	}}
	// BF16Inference is BF16 for the inference plans: on AMX it keeps each
	// weight matrix's packed tiles between calls, with a copy of the
	// float32 weights they came from, and a call whose weights equal the
	// copy bit for bit reuses the tiles (comparing costs a fraction of
	// packing); any other call packs again. The training plan uses BF16,
	// as its weights change every step. The results are BF16's.
	BF16Inference = &Precision{name: "bf16", bf16: true, gemm: sgemmBF16Cached, gemmAdd: sgemmBF16Add, gemmRows: func(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, rows func(i0, i1 int)) bool {
		return amxGemmRows(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, true, rows)
	}}
)

// String is the precision's name in specs and `mlbuild plan`: "f32" or "bf16".
func (p *Precision) String() string { return p.name }

// GemmFwd is the dense layer y = act(x·wᵀ + b) in this precision (see the
// package function GemmFwd for the layouts). A batch of one or two rows runs
// as float32 dot products in every precision.
func (p *Precision) GemmFwd(x, w, b, y []float32, batch, in, out int, act Act, alpha float32) {
	if batch <= gemvMaxBatch {
		gemvFwd(x, w, b, y, batch, in, out, act, alpha)
		return
	}
	if b == nil && act == ActNone {
		p.gemm(false, true, batch, out, in, x, in, w, in, y, out)
		return
	}
	epilogue := func(lo, hi int) { biasActRows(y[lo*out:hi*out], b, hi-lo, out, act, alpha) }
	if p.gemmRows != nil && p.gemmRows(false, true, batch, out, in, x, in, w, in, y, out, epilogue) {
		return // the bias and activation ran on each block of rows as the tiles stored it
	}
	p.gemm(false, true, batch, out, in, x, in, w, in, y, out)
	ParallelFor(batch, rowGrain(out), epilogue)
}

// GemmBwd is the backward pass of GemmFwd in this precision: it turns dy
// into the gradient of the pre-activation in place, then writes dw = dyᵀ·x
// (overwriting it), db = Σ_rows dy (float32 in every precision) and
// dx = dy·w; dx and db may be nil when nobody needs them.
func (p *Precision) GemmBwd(x, w, y, dy, dx, dw, db []float32, batch, in, out int, act Act, alpha float32) {
	p.gemmBwd(x, w, y, dy, dx, dw, db, batch, in, out, act, alpha, false)
}

// GemmBwdAdd is GemmBwd adding dy·w to what dx holds (dx +=, a GEMM with
// beta 1; on AMX the tiles load dx's blocks before adding): a dense layer
// whose input gradient goes into a sum (planner.Attr.AccumulateDx). dx may
// not alias dy.
func (p *Precision) GemmBwdAdd(x, w, y, dy, dx, dw, db []float32, batch, in, out int, act Act, alpha float32) {
	p.gemmBwd(x, w, y, dy, dx, dw, db, batch, in, out, act, alpha, true)
}

// gemmBwd is GemmBwd, or GemmBwdAdd with add.
func (p *Precision) gemmBwd(x, w, y, dy, dx, dw, db []float32, batch, in, out int, act Act, alpha float32, add bool) {
	if act != ActNone {
		ParallelFor(batch, rowGrain(out), func(lo, hi int) {
			actBackward(y[lo*out:hi*out], dy[lo*out:hi*out], act, alpha)
		})
	}
	p.gemm(true, false, out, in, batch, dy, out, x, in, dw, in)
	if db != nil {
		sumRows(dy, db, batch, out)
	}
	switch {
	case dx == nil:
	case add:
		p.gemmAdd(false, false, batch, in, out, dy, out, w, in, dx, in)
	default:
		p.gemm(false, false, batch, in, out, dy, out, w, in, dx, in)
	}
}

// RoundBF16 rounds f to the nearest bfloat16 (ties to even) and returns it
// as a float32: the value a BF16 product reads. NaNs stay NaNs (quiet) and
// infinities stay infinite; a finite value too large for bfloat16 becomes an
// infinity, as on the hardware.
func RoundBF16(f float32) float32 {
	return math.Float32frombits(uint32(bf16Bits(f)) << 16)
}

// bf16Bits is RoundBF16's bfloat16: the top half of the rounded float32.
func bf16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it one, quiet
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// bf16Scratch holds the rounded copies of the emulated path and the packed
// operands of the AMX path, reused between calls (the dense layers of one
// program run one at a time).
var bf16Scratch struct {
	sync.Mutex
	a, b []float32
}

// sgemmBF16 is BF16's product: on AMX where the CPU has it, else on the
// AVX512-BF16 path (gemmBF16), else Sgemm on copies of A and B rounded to
// bfloat16.
func sgemmBF16(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	bf16Product(false, transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
}

// sgemmBF16Add is BF16's C += A·B: sgemmBF16's paths, adding to C.
func sgemmBF16Add(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	bf16Product(true, transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
}

// bf16Product is sgemmBF16, or sgemmBF16Add with add.
func bf16Product(add bool, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	beta := float32(0)
	if add {
		beta = 1
		if amxGemmAdd(transA, transB, m, n, k, a, lda, b, ldb, c, ldc) {
			return
		}
	} else if amxGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, false) {
		return
	}
	if gemmBF16Beta(transA, transB, m, n, k, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	s := &bf16Scratch
	s.Lock()
	defer s.Unlock()
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	s.a = roundedCopy(s.a, a, lda, ar, ac)
	s.b = roundedCopy(s.b, b, ldb, br, bc)
	Sgemm(transA, transB, m, n, k, 1, s.a, ac, s.b, bc, beta, c, ldc)
}

// sgemmBF16Cached is BF16Inference's product: sgemmBF16 with B's packed
// tiles kept between calls on AMX.
func sgemmBF16Cached(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m > 0 && n > 0 && amxGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, true) {
		return
	}
	sgemmBF16(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
}

// roundedCopy writes the rows×cols matrix src (row stride lds) rounded to
// bfloat16 into dst, packed (row stride cols), growing dst if it must.
func roundedCopy(dst, src []float32, lds, rows, cols int) []float32 {
	if rows <= 0 || cols <= 0 {
		return dst[:0]
	}
	checkGemmOperand("a", src, rows, cols, lds)
	if cap(dst) < rows*cols {
		dst = make([]float32, rows*cols)
	}
	dst = dst[:rows*cols]
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) { roundRows(dst, src, lds, cols, lo, hi) })
	return dst
}

// roundRows is roundedCopy's work on rows [lo, hi), on the calling thread.
func roundRows(dst, src []float32, lds, cols, lo, hi int) {
	for r := lo; r < hi; r++ {
		roundRow(dst[r*cols:r*cols+cols], src[r*lds:r*lds+cols])
	}
}

// BF16Hardware names the instructions BF16 products run on here: "Intel
// AMX", "AVX512-BF16 (VDPBF16PS)", or "" where they are emulated in
// float32 on bfloat16-rounded operands (the same numbers, at float32's
// speed).
func BF16Hardware() string {
	switch {
	case BF16Native():
		return "Intel AMX"
	case bf16Path() != nil:
		return "AVX512-BF16 (VDPBF16PS)"
	}
	return ""
}
