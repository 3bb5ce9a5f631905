//go:build !purego

package cpu

// archEpilogue returns the assembly epilogue kernels that go with the
// amd64 GEMM path of that name, or nil for the Go loops.
func archEpilogue(path string) *epilogueKernels {
	switch path {
	case "avx512":
		return epilogueAVX512
	case "avx2":
		return epilogueAVX2
	}
	return nil
}

var (
	epilogueAVX512 = &epilogueKernels{biasAct: biasActRowsAVX512, reluBwd: reluBwdAVX512, sumRows: sumRowsAVX512, clamp: clampAVX512, clampTail: 0, rowBiasAct: rowBiasActAVX512, gelu: geluAVX512, geluBwd: geluBwdAVX512, expShift: expShiftAVX512, expShiftSum: expShiftSumAVX512, dropout: dropoutAVX512, sigmoid: sigmoidAVX512, tanh: tanhAVX512, silu: siluAVX512, siluBwd: siluBwdAVX512}
	epilogueAVX2   = &epilogueKernels{biasAct: biasActRowsAVX2, reluBwd: reluBwdAVX2, sumRows: sumRowsAVX2, clamp: clampAVX2, clampTail: 8, rowBiasAct: rowBiasActAVX2, rowBiasActTail: 8,
		sigmoid: sigmoidAVX2, silu: siluAVX2, sigmoidTail: 8}
)

//go:noescape
func biasActRowsAVX512(y, bias *float32, rows, cols, flags int)

//go:noescape
func reluBwdAVX512(y, dy *float32, n int)

//go:noescape
func sumRowsAVX512(m, dst *float32, rows, cols, ld int)

//go:noescape
func biasActRowsAVX2(y, bias *float32, rows, cols, flags int)

//go:noescape
func reluBwdAVX2(y, dy *float32, n int)

//go:noescape
func sumRowsAVX2(m, dst *float32, rows, cols, ld int)

//go:noescape
func clampAVX512(x, y *float32, n int, lo, hi float32)

//go:noescape
func clampAVX2(x, y *float32, n int, lo, hi float32)

//go:noescape
func rowBiasActAVX512(y, bias *float32, rows, cols, ld, flags int, lo, hi float32)

//go:noescape
func rowBiasActAVX2(y, bias *float32, rows, cols, ld, flags int, lo, hi float32)

//go:noescape
func sigmoidAVX2(x, y *float32, n int)

//go:noescape
func siluAVX2(x, y *float32, n int)
