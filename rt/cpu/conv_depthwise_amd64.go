//go:build !purego

package cpu

import "unsafe"

// archDepthwise returns the assembly depthwise kernel that goes with the
// amd64 GEMM path of that name, or nil for the Go one.
func archDepthwise(path string) *depthwiseKernels {
	switch path {
	case "avx512":
		return depthwiseAVX512
	case "avx2":
		return depthwiseAVX2
	}
	return nil
}

var (
	depthwiseAVX512 = &depthwiseKernels{fwd: depthwiseFwdAVX512, lanes: 16, rows: depthwiseRowsAVX512, dw: depthwiseDWAVX512, deal: dealPairs16,
		dealRows: dealRows16, copyRows: copyRows16, filterRows: groupedRowsAVX512, maxFilters: groupedFiltersAVX512,
		rows3x3: depthwise3x3RowsAVX512}
	depthwiseAVX2 = &depthwiseKernels{fwd: depthwiseFwdAVX2, lanes: 8, dw: depthwiseDWAVX2}
)

// dealLanes are dealPairsAVX512's lane indices: the even floats of two
// vectors, then the odd ones.
var dealLanes = func() (idx [32]int32) {
	for i := range 16 {
		idx[i], idx[16+i] = int32(2*i), int32(2*i+1)
	}
	return idx
}()

// dealPairs16 is depthwiseKernels.deal with AVX-512: dealPairsAVX512 over
// the whole vectors, the Go loop over the last pairs mod 16.
func dealPairs16(src, even, odd []float32) {
	n := len(even)
	if v := n &^ 15; v > 0 {
		_, _ = src[2*v-1], odd[v-1] // the assembly does no bounds checks
		dealPairsAVX512(&src[0], &even[0], &odd[0], v, &dealLanes[0])
	}
	for j := n &^ 15; j < n; j++ {
		even[j], odd[j] = src[2*j], src[2*j+1]
	}
}

// dealRows16 is depthwiseKernels.dealRows with AVX-512.
func dealRows16(src, even, odd []float32, rows, pairs, srcStride, dstStride int) {
	if rows <= 0 || pairs <= 0 {
		return
	}
	// The assembly does no bounds checks.
	_ = src[(rows-1)*srcStride+2*pairs-1]
	_, _ = even[(rows-1)*dstStride+pairs-1], odd[(rows-1)*dstStride+pairs-1]
	dealRowsAVX512(&src[0], &even[0], &odd[0], rows, pairs, srcStride, dstStride, &dealLanes[0])
}

// copyRows16 is depthwiseKernels.copyRows with AVX-512.
func copyRows16(src, dst []float32, rows, n, srcStride, dstStride int) {
	if rows <= 0 || n <= 0 {
		return
	}
	_, _ = src[(rows-1)*srcStride+n-1], dst[(rows-1)*dstStride+n-1] // the assembly does no bounds checks
	copyRowsAVX512(&src[0], &dst[0], rows, n, srcStride, dstStride)
}

// dealRowsAVX512 is dealRows16 without the checks, idx being dealLanes.
//
//go:noescape
func dealRowsAVX512(src, even, odd *float32, rows, pairs, srcStride, dstStride int, idx *int32)

// copyRowsAVX512 is copyRows16 without the checks.
//
//go:noescape
func copyRowsAVX512(src, dst *float32, rows, n, srcStride, dstStride int)

// dealPairsAVX512 sets even[j] = src[2j] and odd[j] = src[2j+1] for j <
// pairs, a multiple of 16, idx being dealLanes.
//
//go:noescape
func dealPairsAVX512(src, even, odd *float32, pairs int, idx *int32)

// depthwiseFwdAVX512 is depthwiseFwdGo for n a multiple of 16, in blocks
// of up to 8 zmm accumulators, each product fused with its add.
//
//go:noescape
func depthwiseFwdAVX512(taps int, offs *int, w, x, y *float32, n int)

// depthwiseFwdAVX2 is depthwiseFwdGo for n a multiple of 8, in blocks of
// up to 8 ymm accumulators, each product fused with its add.
//
//go:noescape
func depthwiseFwdAVX2(taps int, offs *int, w, x, y *float32, n int)

// depthwiseRowsAVX512 is depthwiseKernels.rows: it runs the row kernel
// for the vectors of one output row, and for rows wider than 8 vectors,
// which none of the zoo's layers has, each 128-output column block of
// them in turn.
func depthwiseRowsAVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int) {
	for j := 0; j < ow; j += 128 {
		n := min(128, ow-j)
		yj := unsafe.Add(unsafe.Pointer(y), 4*j)
		xj := unsafe.Add(unsafe.Pointer(x), 4*j)
		if n == ow {
			depthwiseRowKernels[(n+15)/16-1](taps, offs, w, x, wq, y, ow, rows, bias, relu)
			return
		}
		// A column block of rows ow apart: one row at a time.
		for r := 0; r < rows; r++ {
			depthwiseRowKernels[(n+15)/16-1](taps, offs, w, (*float32)(unsafe.Add(xj, 4*r*wq)), wq, (*float32)(unsafe.Add(yj, 4*r*ow)), n, 1, bias, relu)
		}
	}
}

// depthwiseRowKernels[v-1] takes rows of v vectors.
var depthwiseRowKernels = [8]func(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int){
	depthwiseRows1AVX512, depthwiseRows2AVX512, depthwiseRows3AVX512, depthwiseRows4AVX512,
	depthwiseRows5AVX512, depthwiseRows6AVX512, depthwiseRows7AVX512, depthwiseRows8AVX512,
}

//go:noescape
func depthwiseRows1AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwiseRows2AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwiseRows3AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwiseRows4AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwiseRows5AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwiseRows6AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwiseRows7AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwiseRows8AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

// depthwiseDWAVX512 is depthwiseDWGo in 16 lanes, each product fused
// with its add.
//
//go:noescape
func depthwiseDWAVX512(groups int, offs *int, x, dy *float32, n int, acc *float32)

// depthwiseDWAVX2 is depthwiseDWGo in 8 lanes, each product fused with
// its add.
//
//go:noescape
func depthwiseDWAVX2(groups int, offs *int, x, dy *float32, n int, acc *float32)

// groupedRowsAVX512 is depthwiseKernels.filterRows: the generated kernel
// for rows of (ow+15)/16 vectors and r filters.
func groupedRowsAVX512(r, taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int) {
	groupedRowKernels[(ow+15)/16-1][r-1](taps, offs, w, x, wq, y, ldy, ow, rows, bias, relu)
}

// groupedFiltersAVX512 is depthwiseKernels.maxFilters: the generator's
// groupedFilters for rows of up to 8 vectors, none past them.
func groupedFiltersAVX512(ow int) int {
	if ow < 1 || ow > 128 {
		return 0
	}
	return len(groupedRowKernels[(ow+15)/16-1])
}

// groupedRowKernels[v-1][r-1] takes rows of v vectors and r filters.
var groupedRowKernels = [8][]func(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int){
	{groupedRows1x1AVX512, groupedRows1x2AVX512, groupedRows1x3AVX512, groupedRows1x4AVX512, groupedRows1x5AVX512, groupedRows1x6AVX512, groupedRows1x7AVX512, groupedRows1x8AVX512},
	{groupedRows2x1AVX512, groupedRows2x2AVX512, groupedRows2x3AVX512, groupedRows2x4AVX512, groupedRows2x5AVX512, groupedRows2x6AVX512, groupedRows2x7AVX512, groupedRows2x8AVX512},
	{groupedRows3x1AVX512, groupedRows3x2AVX512, groupedRows3x3AVX512, groupedRows3x4AVX512, groupedRows3x5AVX512, groupedRows3x6AVX512, groupedRows3x7AVX512, groupedRows3x8AVX512},
	{groupedRows4x1AVX512, groupedRows4x2AVX512, groupedRows4x3AVX512, groupedRows4x4AVX512, groupedRows4x5AVX512, groupedRows4x6AVX512},
	{groupedRows5x1AVX512, groupedRows5x2AVX512, groupedRows5x3AVX512, groupedRows5x4AVX512, groupedRows5x5AVX512},
	{groupedRows6x1AVX512, groupedRows6x2AVX512, groupedRows6x3AVX512, groupedRows6x4AVX512},
	{groupedRows7x1AVX512, groupedRows7x2AVX512, groupedRows7x3AVX512},
	{groupedRows8x1AVX512, groupedRows8x2AVX512},
}

//go:noescape
func groupedRows1x1AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows1x2AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows1x3AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows1x4AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows1x5AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows1x6AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows1x7AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows1x8AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows2x1AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows2x2AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows2x3AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows2x4AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows2x5AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows2x6AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows2x7AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows2x8AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows3x1AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows3x2AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows3x3AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows3x4AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows3x5AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows3x6AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows3x7AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows3x8AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows4x1AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows4x2AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows4x3AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows4x4AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows4x5AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows4x6AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows5x1AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows5x2AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows5x3AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows5x4AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows5x5AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows6x1AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows6x2AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows6x3AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows6x4AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows7x1AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows7x2AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows7x3AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows8x1AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

//go:noescape
func groupedRows8x2AVX512(taps int, offs *int, w, x *float32, wq int, y *float32, ldy, ow, rows int, bias *float32, relu int)

// depthwise3x3RowsAVX512 is depthwiseKernels.rows3x3: the generated
// kernel for rows of (ow+15)/16 vectors, ow at most 128.
func depthwise3x3RowsAVX512(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int) {
	depthwise3x3RowKernels[(ow+15)/16-1](w, x, wq, y, ow, rows, bias, relu)
}

// depthwise3x3RowKernels[v-1] takes rows of v vectors.
var depthwise3x3RowKernels = [8]func(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int){
	depthwise3x3Rows1AVX512, depthwise3x3Rows2AVX512, depthwise3x3Rows3AVX512, depthwise3x3Rows4AVX512,
	depthwise3x3Rows5AVX512, depthwise3x3Rows6AVX512, depthwise3x3Rows7AVX512, depthwise3x3Rows8AVX512,
}

//go:noescape
func depthwise3x3Rows1AVX512(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwise3x3Rows2AVX512(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwise3x3Rows3AVX512(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwise3x3Rows4AVX512(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwise3x3Rows5AVX512(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwise3x3Rows6AVX512(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwise3x3Rows7AVX512(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)

//go:noescape
func depthwise3x3Rows8AVX512(w, x *float32, wq int, y *float32, ow, rows int, bias float32, relu int)
