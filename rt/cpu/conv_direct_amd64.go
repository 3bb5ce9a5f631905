//go:build !purego

package cpu

// archConvDirect returns the assembly direct-convolution kernels that go
// with the amd64 GEMM path of that name, or nil for the Go ones.
func archConvDirect(path string) *convDirectKernels {
	switch path {
	case "avx512":
		return convDirectAVX512
	case "avx2":
		return convDirectAVX2
	}
	return nil
}

var (
	convDirectAVX512 = &convDirectKernels{
		fwd: convDirectFwd2x128AVX512, fwdOC: 2, fwdPos: 128,
		fwdTail: convDirectFwd2x32AVX512, fwdTailPos: 32,
		fwdTail2: convDirectFwd2x64AVX512, fwdTail3: convDirectFwd2x96AVX512, fwd4Plane: convDirectFwd4x64AVX512,
		fwd4Plane56: convDirectFwd4x56AVX512, fwd4: convDirectFwd4x96AVX512, fwd4Pos: 96,
		dw: convDirectDW4x4AVX512, dwOC: 4, dwTaps: 4, dwLanes: 16,
		store: convDirectStoreAVX512, grad: convDirectGradAVX512,
	}
	convDirectAVX2 = &convDirectKernels{
		fwd: convDirectFwd2x48AVX2, fwdOC: 2, fwdPos: 48,
		dw: convDirectDW4x2AVX2, dwOC: 4, dwTaps: 2, dwLanes: 8,
	}
)

//go:noescape
func convDirectFwd2x128AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)

//go:noescape
func convDirectFwd2x32AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)

//go:noescape
func convDirectFwd2x64AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)

//go:noescape
func convDirectFwd4x64AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)

//go:noescape
func convDirectFwd4x56AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)

//go:noescape
func convDirectFwd4x96AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)

//go:noescape
func convDirectFwd2x96AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)

//go:noescape
func convDirectFwd2x48AVX2(taps int, offs *int, w, x, y *float32, ldw, ldy int)

//go:noescape
func convDirectDW4x4AVX512(n int, offs *int, x, dy *float32, lddy int, acc *float32)

//go:noescape
func convDirectDW4x2AVX2(n int, offs *int, x, dy *float32, lddy int, acc *float32)

//go:noescape
func convDirectStoreAVX512(src, dst *float32, rows, ow, wp int, bias float32, relu int)

//go:noescape
func convDirectGradAVX512(dy, y, dyf *float32, rows, ow, wp, relu int, sums *float32)
