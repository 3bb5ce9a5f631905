package fakecuda

import (
	"encoding/binary"
	"math"
	"slices"
	"unsafe"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// blasNames are cuBLAS's status names.
var blasNames = map[cuda.BLASStatus]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 7: "CUBLAS_STATUS_INVALID_VALUE",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
}

// blasNotSupported is CUBLAS_STATUS_NOT_SUPPORTED.
const blasNotSupported cuda.BLASStatus = 15

// fastPrecisions are the compute types GemmEx takes and the rounding each
// applies to A's and B's elements (f32: none).
var fastPrecisions = map[int32]gpuhost.Precision{
	cuda.Compute32F:      gpuhost.PrecisionF32,
	cuda.ComputeFast16BF: gpuhost.PrecisionBF16,
	cuda.ComputeFastTF32: gpuhost.PrecisionTF32,
}

// gemmCall is one cublasSgemm, its scalars read at the call (host pointer
// mode: a captured GEMM keeps the values it was captured with).
type gemmCall struct {
	ta, tb      cuda.Operation
	m, n, k     int
	alpha, beta float32
	a, b, c     uint64
	lda, ldb    int
	ldc         int
	// batch products, the i-th on matrices stride·i elements on
	batch      int
	sa, sb, sc int64
	// ex is set for a cublasGemmEx, whose operands are rounded to
	// precision and whose products are summed in float32.
	ex        bool
	precision gpuhost.Precision
	// bf16 marks a GemmEx of CUDA_R_16BF A and B: their elements are 2
	// bytes, lda, ldb, sa and sb count them, and each is decoded exactly
	// (the top 16 bits of a float32).
	bf16 bool
}

// blas is the fake cuBLAS: column-major SGEMM in Go on device memory.
func (f *Fake) blas() *cuda.BLASAPI {
	withHandle := func(h cuda.BLASHandle, do func(*blasHandle) cuda.BLASStatus) cuda.BLASStatus {
		defer f.mu.Unlock()
		if r := f.enter(true); r != 0 {
			return cuda.BLASExecFailed
		}
		bh := f.handles[h]
		if bh == nil {
			return cuda.BLASNotInitialized
		}
		return do(bh)
	}
	sgemmEx := f.sgemm(withHandle)
	sgemm := func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, lda int32, sa int64,
		b cuda.DevicePtr, ldb int32, sb int64, beta *float32, c cuda.DevicePtr, ldc int32, sc int64, batch int32) cuda.BLASStatus {
		return sgemmEx(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch, notEx)
	}
	return &cuda.BLASAPI{
		Create: func(h *cuda.BLASHandle) cuda.BLASStatus {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return cuda.BLASNotInitialized
			}
			*h = cuda.BLASHandle(f.handle())
			f.handles[*h] = &blasHandle{}
			return 0
		},
		Destroy: func(h cuda.BLASHandle) cuda.BLASStatus {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.handles[h] == nil {
				return cuda.BLASNotInitialized
			}
			delete(f.handles, h)
			return 0
		},
		GetVersion: func(h cuda.BLASHandle, v *int32) cuda.BLASStatus {
			return withHandle(h, func(*blasHandle) cuda.BLASStatus {
				*v = f.opts.NVRTCMajor*10000 + f.opts.NVRTCMinor*100
				return 0
			})
		},
		SetStream: func(h cuda.BLASHandle, s cuda.Stream) cuda.BLASStatus {
			return withHandle(h, func(bh *blasHandle) cuda.BLASStatus {
				if s != 0 && f.streams[s] == nil {
					return cuda.BLASInvalidValue
				}
				bh.stream = s
				return 0
			})
		},
		SetMathMode: func(h cuda.BLASHandle, mode int32) cuda.BLASStatus {
			return withHandle(h, func(bh *blasHandle) cuda.BLASStatus {
				switch mode {
				case cuda.BLASDefaultMath, cuda.BLASPedanticMath, cuda.BLASTF32TensorOpMath:
					bh.math = mode
					return 0
				}
				return cuda.BLASInvalidValue
			})
		},
		SetWorkspace: func(h cuda.BLASHandle, ws cuda.DevicePtr, n uintptr) cuda.BLASStatus {
			return withHandle(h, func(bh *blasHandle) cuda.BLASStatus {
				if n > 0 && f.find(uint64(ws), uint64(n)) == nil {
					return cuda.BLASInvalidValue
				}
				bh.workspace = uint64(ws)
				return 0
			})
		},
		GetStatusName: func(s cuda.BLASStatus) string {
			if n, ok := blasNames[s]; ok {
				return n
			}
			return "CUBLAS_STATUS_UNKNOWN"
		},
		Sgemm: func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, lda int32,
			b cuda.DevicePtr, ldb int32, beta *float32, c cuda.DevicePtr, ldc int32) cuda.BLASStatus {
			return sgemm(h, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1)
		},
		SgemmStridedBatched: func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, lda int32, sa int64,
			b cuda.DevicePtr, ldb int32, sb int64, beta *float32, c cuda.DevicePtr, ldc int32, sc int64, batch int32) cuda.BLASStatus {
			return sgemm(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch)
		},
		GemmEx: func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, aType, lda int32,
			b cuda.DevicePtr, bType, ldb int32, beta *float32, c cuda.DevicePtr, cType, ldc int32, compute, algo int32) cuda.BLASStatus {
			p, s := exTypes(aType, bType, cType, compute, algo)
			if s != 0 {
				return s
			}
			return sgemmEx(h, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1, p)
		},
		GemmStridedBatchedEx: func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, aType, lda int32, sa int64,
			b cuda.DevicePtr, bType, ldb int32, sb int64, beta *float32, c cuda.DevicePtr, cType, ldc int32, sc int64,
			batch, compute, algo int32) cuda.BLASStatus {
			p, s := exTypes(aType, bType, cType, compute, algo)
			if s != 0 {
				return s
			}
			return sgemmEx(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch, p)
		},
	}
}

// notEx marks the Sgemms for sgemm (no GemmEx: float64 sums, unrounded).
const notEx = gpuhost.Precision(255)

// bf16Ex marks a GemmEx of bfloat16 A and B for sgemm: the stored values,
// products summed in float32.
const bf16Ex = gpuhost.Precision(254)

// exTypes checks a GemmEx's data types, compute type and algorithm
// against what the fake computes, and returns how sgemm computes it: a
// fast precision on CUDA_R_32F matrices, or bf16Ex for CUDA_R_16BF A and
// B with a CUDA_R_32F C and CUBLAS_COMPUTE_32F (the one bfloat16
// combination cuBLAS documents that the fake takes; others are
// CUBLAS_STATUS_NOT_SUPPORTED).
func exTypes(aType, bType, cType, compute, algo int32) (gpuhost.Precision, cuda.BLASStatus) {
	p, ok := fastPrecisions[compute]
	if !ok || algo != cuda.GemmDefault {
		return 0, cuda.BLASInvalidValue
	}
	switch {
	case aType == cuda.DataR32F && bType == cuda.DataR32F && cType == cuda.DataR32F:
		return p, 0
	case aType == cuda.DataR16BF && bType == cuda.DataR16BF && cType == cuda.DataR32F && compute == cuda.Compute32F:
		return bf16Ex, 0
	}
	return 0, blasNotSupported
}

// sgemm returns the GEMM of every entry point: precision -1 for the
// Sgemms (Precision(255): float64 sums), else a GemmEx's.
func (f *Fake) sgemm(withHandle func(cuda.BLASHandle, func(*blasHandle) cuda.BLASStatus) cuda.BLASStatus) func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, lda int32, sa int64,
	b cuda.DevicePtr, ldb int32, sb int64, beta *float32, c cuda.DevicePtr, ldc int32, sc int64, batch int32, precision gpuhost.Precision) cuda.BLASStatus {
	return func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, lda int32, sa int64,
		b cuda.DevicePtr, ldb int32, sb int64, beta *float32, c cuda.DevicePtr, ldc int32, sc int64, batch int32, precision gpuhost.Precision) cuda.BLASStatus {
		return withHandle(h, func(bh *blasHandle) cuda.BLASStatus {
			rowsA, rowsB := m, k
			if ta == cuda.OpT {
				rowsA = k
			}
			if tb == cuda.OpT {
				rowsB = n
			}
			if ta < cuda.OpN || ta > cuda.OpT || tb < cuda.OpN || tb > cuda.OpT || m < 0 || n < 0 || k < 0 ||
				lda < max(1, rowsA) || ldb < max(1, rowsB) || ldc < max(1, m) || alpha == nil || beta == nil ||
				batch < 0 || sa < 0 || sb < 0 || sc < 0 {
				return cuda.BLASInvalidValue
			}
			g := &gemmCall{ta: ta, tb: tb, m: int(m), n: int(n), k: int(k), alpha: *alpha, beta: *beta,
				a: uint64(a), b: uint64(b), c: uint64(c), lda: int(lda), ldb: int(ldb), ldc: int(ldc),
				batch: int(batch), sa: sa, sb: sb, sc: sc, ex: precision != notEx, precision: precision}
			if precision == bf16Ex {
				g.precision, g.bf16 = gpuhost.PrecisionBF16, true
			}
			if m == 0 || n == 0 || batch == 0 {
				return 0
			}
			if st := f.streams[bh.stream]; st != nil && st.capturing {
				st.ops = append(st.ops, op{gemm: g})
				return 0
			}
			f.awaitAsync(f.streams[bh.stream])
			f.stats.Gemms++
			f.execute(op{gemm: g})
			return 0
		})
	}
}

// floats is device memory [p, p+4n) as float32s, or nil with a fault
// recorded when it is not inside one allocation or not aligned.
func (f *Fake) floats(what string, p uint64, n int) []float32 {
	b := f.bytesAt(p, uint64(4*n))
	if b == nil {
		f.fault(cuda.ErrorIllegalAddress, "cublasSgemm, matrix %s: %d floats at %#x are not inside one live allocation", what, n, p)
		return nil
	}
	if p%4 != 0 {
		f.fault(716, "cublasSgemm, matrix %s: address %#x is not 4-byte aligned", what, p)
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// bf16s is device memory [p, p+2n) decoded from bfloat16 to float32s
// (exactly: each is the top half of its float32), or nil with a fault
// recorded when it is not inside one allocation or not 2-byte aligned.
func (f *Fake) bf16s(what string, p uint64, n int) []float32 {
	b := f.bytesAt(p, uint64(2*n))
	if b == nil {
		f.fault(cuda.ErrorIllegalAddress, "cublasGemmEx, matrix %s: %d bfloat16s at %#x are not inside one live allocation", what, n, p)
		return nil
	}
	if p%2 != 0 {
		f.fault(716, "cublasGemmEx, matrix %s: address %#x is not 2-byte aligned", what, p)
		return nil
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
	}
	return v
}

// runGemm computes C = alpha·op(A)·op(B) + beta·C column-major, as cuBLAS
// does (C is not read when beta is 0).
func (f *Fake) runGemm(g *gemmCall) {
	es := int64(4) // A's and B's element bytes
	if g.bf16 {
		es = 2
	}
	for i := range int64(max(g.batch, 1)) {
		one := *g
		one.a, one.b, one.c = g.a+uint64(es*i*g.sa), g.b+uint64(es*i*g.sb), g.c+uint64(4*i*g.sc)
		if !f.runGemm1(&one) {
			return
		}
	}
	f.stats.GemmRuns++
}

// runGemm1 runs one product of a GEMM; false when it faulted.
func (f *Fake) runGemm1(g *gemmCall) bool {
	extent := func(t cuda.Operation, rows, cols, ld int) int {
		if t == cuda.OpT {
			rows, cols = cols, rows
		}
		if cols == 0 || rows == 0 {
			return 0
		}
		return (cols-1)*ld + rows
	}
	operand := f.floats
	if g.bf16 {
		operand = f.bf16s
	}
	A := operand("A", g.a, extent(g.ta, g.m, g.k, g.lda))
	B := operand("B", g.b, extent(g.tb, g.k, g.n, g.ldb))
	C := f.floats("C", g.c, extent(cuda.OpN, g.m, g.n, g.ldc))
	if (A == nil && g.k > 0) || (B == nil && g.k > 0) || C == nil {
		return false
	}
	at := func(i, l int) float32 {
		if g.ta == cuda.OpT {
			return A[l+i*g.lda]
		}
		return A[i+l*g.lda]
	}
	bt := func(l, j int) float32 {
		if g.tb == cuda.OpT {
			return B[j+l*g.ldb]
		}
		return B[l+j*g.ldb]
	}
	if g.ex {
		// A tensor core's product: each operand element rounded to the
		// compute type's input format (on copies, once), the products
		// (exact in float32: at most 11+11 significant bits) summed in
		// float32.
		p := g.precision
		A, B = slices.Clone(A), slices.Clone(B)
		for _, x := range [][]float32{A, B} {
			for i, v := range x {
				x[i] = p.Round(v)
			}
		}
		for j := 0; j < g.n; j++ {
			for i := 0; i < g.m; i++ {
				var s float32
				for l := 0; l < g.k; l++ {
					s += at(i, l) * bt(l, j)
				}
				v := g.alpha * s
				if g.beta != 0 {
					v += g.beta * C[i+j*g.ldc]
				}
				C[i+j*g.ldc] = v
			}
		}
		return true
	}
	for j := 0; j < g.n; j++ {
		for i := 0; i < g.m; i++ {
			var s float64
			for l := 0; l < g.k; l++ {
				s += float64(at(i, l)) * float64(bt(l, j))
			}
			v := g.alpha * float32(s)
			if g.beta != 0 {
				v += g.beta * C[i+j*g.ldc]
			}
			C[i+j*g.ldc] = v
		}
	}
	return true
}
