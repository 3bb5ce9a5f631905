//go:build !purego

#include "textflag.h"

// func convDirectFwd2x128AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)
// Two output channels at 128 flat positions: for every tap t,
// y[r][j] += w[r·ldw+t]·x[offs[t]+j] (r = 0, 1; j = 0..127), the sums start
// from zero, row 1 is stored ldy floats after row 0. 16 zmm accumulators,
// 8 zmm of input per tap, two broadcast weights.
TEXT ·convDirectFwd2x128AVX512(SB), NOSPLIT, $0-56
	MOVQ taps+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ w+16(FP), R9
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ ldw+40(FP), R11
	MOVQ ldy+48(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

fwd512loop:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z30
	VBROADCASTSS (R9)(R11*4), Z31
	VMOVUPS (BX), Z16
	VMOVUPS 64(BX), Z17
	VMOVUPS 128(BX), Z18
	VMOVUPS 192(BX), Z19
	VMOVUPS 256(BX), Z20
	VMOVUPS 320(BX), Z21
	VMOVUPS 384(BX), Z22
	VMOVUPS 448(BX), Z23
	VFMADD231PS Z16, Z30, Z0
	VFMADD231PS Z17, Z30, Z1
	VFMADD231PS Z18, Z30, Z2
	VFMADD231PS Z19, Z30, Z3
	VFMADD231PS Z20, Z30, Z4
	VFMADD231PS Z21, Z30, Z5
	VFMADD231PS Z22, Z30, Z6
	VFMADD231PS Z23, Z30, Z7
	VFMADD231PS Z16, Z31, Z8
	VFMADD231PS Z17, Z31, Z9
	VFMADD231PS Z18, Z31, Z10
	VFMADD231PS Z19, Z31, Z11
	VFMADD231PS Z20, Z31, Z12
	VFMADD231PS Z21, Z31, Z13
	VFMADD231PS Z22, Z31, Z14
	VFMADD231PS Z23, Z31, Z15
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ fwd512loop

	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z8, (DI)
	VMOVUPS Z9, 64(DI)
	VMOVUPS Z10, 128(DI)
	VMOVUPS Z11, 192(DI)
	VMOVUPS Z12, 256(DI)
	VMOVUPS Z13, 320(DI)
	VMOVUPS Z14, 384(DI)
	VMOVUPS Z15, 448(DI)
	VZEROUPPER
	RET

// func convDirectFwd2x32AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)
// convDirectFwd2x128AVX512 for the last 32 to 96 positions of a plane, 32
// at a time, so that planes are rounded up to 32 positions, not 128.
TEXT ·convDirectFwd2x32AVX512(SB), NOSPLIT, $0-56
	MOVQ taps+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ w+16(FP), R9
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ ldw+40(FP), R11
	MOVQ ldy+48(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	// Two taps per iteration (a second set of accumulators) when the
	// count is even, to keep eight FMA chains in flight.
	TESTQ $1, CX
	JZ fwd32pair
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z30
	VBROADCASTSS (R9)(R11*4), Z31
	VMOVUPS (BX), Z16
	VMOVUPS 64(BX), Z17
	VFMADD231PS Z16, Z30, Z0
	VFMADD231PS Z17, Z30, Z1
	VFMADD231PS Z16, Z31, Z2
	VFMADD231PS Z17, Z31, Z3
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JZ fwd32done

fwd32pair:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	MOVQ 8(R8), AX
	LEAQ (SI)(AX*4), R10
	VBROADCASTSS (R9), Z28
	VBROADCASTSS (R9)(R11*4), Z29
	VBROADCASTSS 4(R9), Z30
	VBROADCASTSS 4(R9)(R11*4), Z31
	VMOVUPS (BX), Z16
	VMOVUPS 64(BX), Z17
	VMOVUPS (R10), Z18
	VMOVUPS 64(R10), Z19
	VFMADD231PS Z16, Z28, Z0
	VFMADD231PS Z17, Z28, Z1
	VFMADD231PS Z16, Z29, Z2
	VFMADD231PS Z17, Z29, Z3
	VFMADD231PS Z18, Z30, Z4
	VFMADD231PS Z19, Z30, Z5
	VFMADD231PS Z18, Z31, Z6
	VFMADD231PS Z19, Z31, Z7
	ADDQ $16, R8
	ADDQ $8, R9
	SUBQ $2, CX
	JNZ fwd32pair

fwd32done:
	VADDPS Z4, Z0, Z0
	VADDPS Z5, Z1, Z1
	VADDPS Z6, Z2, Z2
	VADDPS Z7, Z3, Z3
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z2, (DI)
	VMOVUPS Z3, 64(DI)
	VZEROUPPER
	RET

// func convDirectFwd2x64AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)
// convDirectFwd2x128AVX512 for the last 64 positions of a plane in one
// pass (8 zmm accumulators), where 2 calls of the 32-position
// kernel would load every weight 2 times.
TEXT ·convDirectFwd2x64AVX512(SB), NOSPLIT, $0-56
	MOVQ taps+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ w+16(FP), R9
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ ldw+40(FP), R11
	MOVQ ldy+48(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

fwd64loop:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z30
	VBROADCASTSS (R9)(R11*4), Z31
	VMOVUPS (BX), Z16
	VMOVUPS 64(BX), Z17
	VMOVUPS 128(BX), Z18
	VMOVUPS 192(BX), Z19
	VFMADD231PS Z16, Z30, Z0
	VFMADD231PS Z17, Z30, Z1
	VFMADD231PS Z18, Z30, Z2
	VFMADD231PS Z19, Z30, Z3
	VFMADD231PS Z16, Z31, Z4
	VFMADD231PS Z17, Z31, Z5
	VFMADD231PS Z18, Z31, Z6
	VFMADD231PS Z19, Z31, Z7
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ fwd64loop

	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z4, (DI)
	VMOVUPS Z5, 64(DI)
	VMOVUPS Z6, 128(DI)
	VMOVUPS Z7, 192(DI)
	VZEROUPPER
	RET

// func convDirectFwd4x64AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)
// convDirectFwd2x64AVX512 for four output channels (rows r = 0..3 of w,
// ldw floats apart, and of y, ldy apart): 16 zmm accumulators, 4 zmm of
// input and 4 broadcast weights per tap, so each input load feeds four
// multiply-adds where the two-channel kernels feed two.
TEXT ·convDirectFwd4x64AVX512(SB), NOSPLIT, $0-56
	MOVQ taps+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ w+16(FP), R9
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ ldw+40(FP), R11
	MOVQ ldy+48(FP), DX
	SHLQ $2, R11              // ldw in bytes
	LEAQ (R11)(R11*2), R12    // 3·ldw in bytes
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

fwd4x64loop:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z28
	VBROADCASTSS (R9)(R11*1), Z29
	VBROADCASTSS (R9)(R11*2), Z30
	VBROADCASTSS (R9)(R12*1), Z31
	VMOVUPS (BX), Z16
	VMOVUPS 64(BX), Z17
	VMOVUPS 128(BX), Z18
	VMOVUPS 192(BX), Z19
	VFMADD231PS Z16, Z28, Z0
	VFMADD231PS Z17, Z28, Z1
	VFMADD231PS Z18, Z28, Z2
	VFMADD231PS Z19, Z28, Z3
	VFMADD231PS Z16, Z29, Z4
	VFMADD231PS Z17, Z29, Z5
	VFMADD231PS Z18, Z29, Z6
	VFMADD231PS Z19, Z29, Z7
	VFMADD231PS Z16, Z30, Z8
	VFMADD231PS Z17, Z30, Z9
	VFMADD231PS Z18, Z30, Z10
	VFMADD231PS Z19, Z30, Z11
	VFMADD231PS Z16, Z31, Z12
	VFMADD231PS Z17, Z31, Z13
	VFMADD231PS Z18, Z31, Z14
	VFMADD231PS Z19, Z31, Z15
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ fwd4x64loop

	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z4, (DI)
	VMOVUPS Z5, 64(DI)
	VMOVUPS Z6, 128(DI)
	VMOVUPS Z7, 192(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z8, (DI)
	VMOVUPS Z9, 64(DI)
	VMOVUPS Z10, 128(DI)
	VMOVUPS Z11, 192(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z12, (DI)
	VMOVUPS Z13, 64(DI)
	VMOVUPS Z14, 128(DI)
	VMOVUPS Z15, 192(DI)
	VZEROUPPER
	RET

// func convDirectFwd4x56AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)
// convDirectFwd4x64AVX512 for the first 56 positions only (a 7×7 plane
// padded by 1, whose last 8 of 64 are past its last row): the fourth
// vector of each channel is a ymm, which a core that splits zmm
// operations into two 256-bit halves (AMD Zen 4) multiplies in half the
// time. y's positions 56..63 are not written.
TEXT ·convDirectFwd4x56AVX512(SB), NOSPLIT, $0-56
	MOVQ taps+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ w+16(FP), R9
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ ldw+40(FP), R11
	MOVQ ldy+48(FP), DX
	SHLQ $2, R11              // ldw in bytes
	LEAQ (R11)(R11*2), R12    // 3·ldw in bytes
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

fwd4x56loop:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z28
	VBROADCASTSS (R9)(R11*1), Z29
	VBROADCASTSS (R9)(R11*2), Z30
	VBROADCASTSS (R9)(R12*1), Z31
	VMOVUPS (BX), Z16
	VMOVUPS 64(BX), Z17
	VMOVUPS 128(BX), Z18
	VMOVUPS 192(BX), Y19
	VFMADD231PS Z16, Z28, Z0
	VFMADD231PS Z17, Z28, Z1
	VFMADD231PS Z18, Z28, Z2
	VFMADD231PS Y19, Y28, Y3
	VFMADD231PS Z16, Z29, Z4
	VFMADD231PS Z17, Z29, Z5
	VFMADD231PS Z18, Z29, Z6
	VFMADD231PS Y19, Y29, Y7
	VFMADD231PS Z16, Z30, Z8
	VFMADD231PS Z17, Z30, Z9
	VFMADD231PS Z18, Z30, Z10
	VFMADD231PS Y19, Y30, Y11
	VFMADD231PS Z16, Z31, Z12
	VFMADD231PS Z17, Z31, Z13
	VFMADD231PS Z18, Z31, Z14
	VFMADD231PS Y19, Y31, Y15
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ fwd4x56loop

	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Y3, 192(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z4, (DI)
	VMOVUPS Z5, 64(DI)
	VMOVUPS Z6, 128(DI)
	VMOVUPS Y7, 192(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z8, (DI)
	VMOVUPS Z9, 64(DI)
	VMOVUPS Z10, 128(DI)
	VMOVUPS Y11, 192(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z12, (DI)
	VMOVUPS Z13, 64(DI)
	VMOVUPS Z14, 128(DI)
	VMOVUPS Y15, 192(DI)
	VZEROUPPER
	RET

// func convDirectFwd2x96AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)
// convDirectFwd2x128AVX512 for the last 96 positions of a plane in one
// pass (12 zmm accumulators), where 3 calls of the 32-position
// kernel would load every weight 3 times.
TEXT ·convDirectFwd2x96AVX512(SB), NOSPLIT, $0-56
	MOVQ taps+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ w+16(FP), R9
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ ldw+40(FP), R11
	MOVQ ldy+48(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11

fwd96loop:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z30
	VBROADCASTSS (R9)(R11*4), Z31
	VMOVUPS (BX), Z16
	VMOVUPS 64(BX), Z17
	VMOVUPS 128(BX), Z18
	VMOVUPS 192(BX), Z19
	VMOVUPS 256(BX), Z20
	VMOVUPS 320(BX), Z21
	VFMADD231PS Z16, Z30, Z0
	VFMADD231PS Z17, Z30, Z1
	VFMADD231PS Z18, Z30, Z2
	VFMADD231PS Z19, Z30, Z3
	VFMADD231PS Z20, Z30, Z4
	VFMADD231PS Z21, Z30, Z5
	VFMADD231PS Z16, Z31, Z6
	VFMADD231PS Z17, Z31, Z7
	VFMADD231PS Z18, Z31, Z8
	VFMADD231PS Z19, Z31, Z9
	VFMADD231PS Z20, Z31, Z10
	VFMADD231PS Z21, Z31, Z11
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ fwd96loop

	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z6, (DI)
	VMOVUPS Z7, 64(DI)
	VMOVUPS Z8, 128(DI)
	VMOVUPS Z9, 192(DI)
	VMOVUPS Z10, 256(DI)
	VMOVUPS Z11, 320(DI)
	VZEROUPPER
	RET

// func convDirectFwd2x48AVX2(taps int, offs *int, w, x, y *float32, ldw, ldy int)
// convDirectFwd2x128AVX512 with 48 positions: 12 ymm accumulators.
TEXT ·convDirectFwd2x48AVX2(SB), NOSPLIT, $0-56
	MOVQ taps+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ w+16(FP), R9
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ ldw+40(FP), R11
	MOVQ ldy+48(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

fwd256loop:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Y12
	VBROADCASTSS (R9)(R11*4), Y13
	VMOVUPS (BX), Y14
	VFMADD231PS Y14, Y12, Y0
	VFMADD231PS Y14, Y13, Y6
	VMOVUPS 32(BX), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y7
	VMOVUPS 64(BX), Y14
	VFMADD231PS Y14, Y12, Y2
	VFMADD231PS Y14, Y13, Y8
	VMOVUPS 96(BX), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y9
	VMOVUPS 128(BX), Y14
	VFMADD231PS Y14, Y12, Y4
	VFMADD231PS Y14, Y13, Y10
	VMOVUPS 160(BX), Y15
	VFMADD231PS Y15, Y12, Y5
	VFMADD231PS Y15, Y13, Y11
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ fwd256loop

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, 32(DI)
	VMOVUPS Y8, 64(DI)
	VMOVUPS Y9, 96(DI)
	VMOVUPS Y10, 128(DI)
	VMOVUPS Y11, 160(DI)
	VZEROUPPER
	RET

// func convDirectDW4x4AVX512(n int, offs *int, x, dy *float32, lddy int, acc *float32)
// Sixteen dot products at once, of four dy rows (lddy floats apart) with
// x shifted by four tap offsets, over n·16 positions: lane-wise partial
// sums acc[(4r+t)·16 + lane] += Σ dy[r][16i+lane]·x[offs[t]+16i+lane].
// acc is loaded and stored whole, so it carries the sums across calls.
TEXT ·convDirectDW4x4AVX512(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ dy+24(FP), DI
	MOVQ lddy+32(FP), DX
	MOVQ acc+40(FP), R9
	SHLQ $2, DX
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), R10
	MOVQ 8(R8), AX
	LEAQ (SI)(AX*4), R11
	MOVQ 16(R8), AX
	LEAQ (SI)(AX*4), R12
	MOVQ 24(R8), AX
	LEAQ (SI)(AX*4), R13
	LEAQ (DI)(DX*1), SI
	LEAQ (SI)(DX*1), R8
	LEAQ (R8)(DX*1), BX
	VMOVUPS (R9), Z0
	VMOVUPS 64(R9), Z1
	VMOVUPS 128(R9), Z2
	VMOVUPS 192(R9), Z3
	VMOVUPS 256(R9), Z4
	VMOVUPS 320(R9), Z5
	VMOVUPS 384(R9), Z6
	VMOVUPS 448(R9), Z7
	VMOVUPS 512(R9), Z8
	VMOVUPS 576(R9), Z9
	VMOVUPS 640(R9), Z10
	VMOVUPS 704(R9), Z11
	VMOVUPS 768(R9), Z12
	VMOVUPS 832(R9), Z13
	VMOVUPS 896(R9), Z14
	VMOVUPS 960(R9), Z15
	XORQ AX, AX

dw512loop:
	VMOVUPS (R10)(AX*1), Z20
	VMOVUPS (R11)(AX*1), Z21
	VMOVUPS (R12)(AX*1), Z22
	VMOVUPS (R13)(AX*1), Z23
	VMOVUPS (DI)(AX*1), Z16
	VMOVUPS (SI)(AX*1), Z17
	VMOVUPS (R8)(AX*1), Z18
	VMOVUPS (BX)(AX*1), Z19
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z21, Z16, Z1
	VFMADD231PS Z22, Z16, Z2
	VFMADD231PS Z23, Z16, Z3
	VFMADD231PS Z20, Z17, Z4
	VFMADD231PS Z21, Z17, Z5
	VFMADD231PS Z22, Z17, Z6
	VFMADD231PS Z23, Z17, Z7
	VFMADD231PS Z20, Z18, Z8
	VFMADD231PS Z21, Z18, Z9
	VFMADD231PS Z22, Z18, Z10
	VFMADD231PS Z23, Z18, Z11
	VFMADD231PS Z20, Z19, Z12
	VFMADD231PS Z21, Z19, Z13
	VFMADD231PS Z22, Z19, Z14
	VFMADD231PS Z23, Z19, Z15
	ADDQ $64, AX
	DECQ CX
	JNZ dw512loop

	VMOVUPS Z0, (R9)
	VMOVUPS Z1, 64(R9)
	VMOVUPS Z2, 128(R9)
	VMOVUPS Z3, 192(R9)
	VMOVUPS Z4, 256(R9)
	VMOVUPS Z5, 320(R9)
	VMOVUPS Z6, 384(R9)
	VMOVUPS Z7, 448(R9)
	VMOVUPS Z8, 512(R9)
	VMOVUPS Z9, 576(R9)
	VMOVUPS Z10, 640(R9)
	VMOVUPS Z11, 704(R9)
	VMOVUPS Z12, 768(R9)
	VMOVUPS Z13, 832(R9)
	VMOVUPS Z14, 896(R9)
	VMOVUPS Z15, 960(R9)
	VZEROUPPER
	RET

// func convDirectDW4x2AVX2(n int, offs *int, x, dy *float32, lddy int, acc *float32)
// convDirectDW4x4AVX512 for four dy rows and two taps over n·8 positions:
// acc[(2r+t)·8 + lane], 8 ymm accumulators.
TEXT ·convDirectDW4x2AVX2(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ dy+24(FP), DI
	MOVQ lddy+32(FP), DX
	MOVQ acc+40(FP), R9
	SHLQ $2, DX
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), R10
	MOVQ 8(R8), AX
	LEAQ (SI)(AX*4), R11
	LEAQ (DI)(DX*1), SI
	LEAQ (SI)(DX*1), R8
	LEAQ (R8)(DX*1), BX
	VMOVUPS (R9), Y0
	VMOVUPS 32(R9), Y1
	VMOVUPS 64(R9), Y2
	VMOVUPS 96(R9), Y3
	VMOVUPS 128(R9), Y4
	VMOVUPS 160(R9), Y5
	VMOVUPS 192(R9), Y6
	VMOVUPS 224(R9), Y7
	XORQ AX, AX

dw256loop:
	VMOVUPS (R10)(AX*1), Y12
	VMOVUPS (R11)(AX*1), Y13
	VMOVUPS (DI)(AX*1), Y8
	VMOVUPS (SI)(AX*1), Y9
	VMOVUPS (R8)(AX*1), Y10
	VMOVUPS (BX)(AX*1), Y11
	VFMADD231PS Y12, Y8, Y0
	VFMADD231PS Y13, Y8, Y1
	VFMADD231PS Y12, Y9, Y2
	VFMADD231PS Y13, Y9, Y3
	VFMADD231PS Y12, Y10, Y4
	VFMADD231PS Y13, Y10, Y5
	VFMADD231PS Y12, Y11, Y6
	VFMADD231PS Y13, Y11, Y7
	ADDQ $32, AX
	DECQ CX
	JNZ dw256loop

	VMOVUPS Y0, (R9)
	VMOVUPS Y1, 32(R9)
	VMOVUPS Y2, 64(R9)
	VMOVUPS Y3, 96(R9)
	VMOVUPS Y4, 128(R9)
	VMOVUPS Y5, 160(R9)
	VMOVUPS Y6, 192(R9)
	VMOVUPS Y7, 224(R9)
	VZEROUPPER
	RET

// func convDirectStoreAVX512(src, dst *float32, rows, ow, wp int, bias float32, relu int)
// Compacts rows of a flat output plane: dst[r·ow + i] = f(src[r·wp + i] +
// bias) for i < ow, where f clears negative values (sign bit set, so -0
// too, as applyAct does) when relu is 1, clamps to [0, 6] with NaN kept
// when relu is 2 (clampAVX512's operand order, as applyAct's ReLU6), and
// is the identity otherwise. Stores are masked, so nothing past a row is written; a row's
// tail reads a whole vector (up to 15 floats past it, still inside src)
// except on the last row, where the load is masked too.
TEXT ·convDirectStoreAVX512(SB), NOSPLIT, $0-56
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ rows+16(FP), R8
	MOVQ ow+24(FP), R9
	MOVQ wp+32(FP), R10
	VBROADCASTSS bias+40(FP), Z31
	MOVQ relu+48(FP), R11
	VPXORD Z29, Z29, Z29
	MOVL $0x40c00000, AX       // 6.0
	VPBROADCASTD AX, Z28
	// K1: the lanes of a row's last partial vector.
	MOVQ R9, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	SHLQ $2, R10
	MOVQ R9, R12
	ANDQ $-16, R12
	SHLQ $2, R12

storerow:
	XORQ AX, AX
	CMPQ AX, R12
	JEQ storetail

storevec:
	VADDPS (SI)(AX*1), Z31, Z0
	TESTQ R11, R11
	JZ storeplain
	CMPQ R11, $2
	JEQ storesix
	VPSRAD $31, Z0, Z1
	VPANDND Z0, Z1, Z0
	JMP storeplain

storesix:
	VMAXPS Z0, Z29, Z0
	VMINPS Z0, Z28, Z0

storeplain:
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ $64, AX
	CMPQ AX, R12
	JNE storevec

storetail:
	KORTESTW K1, K1
	JZ storenext
	CMPQ R8, $1
	JEQ storetaillast
	VMOVUPS (SI)(AX*1), Z0
	JMP storetailadd

storetaillast:
	VMOVUPS.Z (SI)(AX*1), K1, Z0

storetailadd:
	VADDPS Z0, Z31, Z0
	TESTQ R11, R11
	JZ storetailplain
	CMPQ R11, $2
	JEQ storetailsix
	VPSRAD $31, Z0, Z1
	VPANDND Z0, Z1, Z0
	JMP storetailplain

storetailsix:
	VMAXPS Z0, Z29, Z0
	VMINPS Z0, Z28, Z0

storetailplain:
	VMOVUPS Z0, K1, (DI)(AX*1)

storenext:
	ADDQ R10, SI
	LEAQ (DI)(R9*4), DI
	DECQ R8
	JNZ storerow
	VZEROUPPER
	RET

// func convDirectGradAVX512(dy, y, dyf *float32, rows, ow, wp, relu int, sums *float32)
// Spreads rows of an output gradient into a flat plane: dyf[r·wp + i] =
// dy[r·ow + i] for i < ow, zeroed where y[r·ow + i] is +0 when relu is
// not zero (the ReLU derivative from y, as actBackward takes it), and
// stores the 16 lane-wise partial sums of what it wrote to sums. dy is
// not modified; dyf's gaps between rows are left alone. Like
// convDirectStoreAVX512, only the last row's tail loads are masked.
TEXT ·convDirectGradAVX512(SB), NOSPLIT, $0-64
	MOVQ dy+0(FP), SI
	MOVQ y+8(FP), BX
	MOVQ dyf+16(FP), DI
	MOVQ rows+24(FP), R8
	MOVQ ow+32(FP), R9
	MOVQ wp+40(FP), R10
	MOVQ relu+48(FP), R11
	MOVQ sums+56(FP), R13
	MOVQ R9, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	MOVL $-1, AX
	KMOVW AX, K3
	SHLQ $2, R10
	MOVQ R9, R12
	ANDQ $-16, R12
	SHLQ $2, R12
	VPXORD Z2, Z2, Z2

gradrow:
	XORQ AX, AX
	CMPQ AX, R12
	JEQ gradtail

gradvec:
	KMOVW K3, K2
	TESTQ R11, R11
	JZ gradall
	VMOVUPS (BX)(AX*1), Z1
	VPTESTMD Z1, Z1, K2

gradall:
	VMOVUPS.Z (SI)(AX*1), K2, Z0
	VADDPS Z0, Z2, Z2
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ $64, AX
	CMPQ AX, R12
	JNE gradvec

gradtail:
	KORTESTW K1, K1
	JZ gradnext
	KMOVW K1, K2
	TESTQ R11, R11
	JZ gradtailall
	CMPQ R8, $1
	JEQ gradtaillastrelu
	VMOVUPS (BX)(AX*1), Z1
	JMP gradtailtest

gradtaillastrelu:
	VMOVUPS.Z (BX)(AX*1), K1, Z1

gradtailtest:
	VPTESTMD Z1, Z1, K2
	KANDW K1, K2, K2

gradtailall:
	// A masked load with an empty mask (dead ReLUs) is very slow on Zen 4:
	// with y all zero, MNIST conv2's backward pass took 53 ms, not 33.
	// Rows before the last read the whole vector, which stays inside dy,
	// and mask in a register; the last row skips an empty load.
	CMPQ R8, $1
	JEQ gradtaillast
	VMOVUPS (SI)(AX*1), Z0
	VMOVUPS.Z Z0, K2, Z0
	JMP gradtailsum

gradtaillast:
	VPXORD Z0, Z0, Z0
	KORTESTW K2, K2
	JZ gradtailsum
	VMOVUPS.Z (SI)(AX*1), K2, Z0

gradtailsum:
	VADDPS Z0, Z2, Z2
	VMOVUPS Z0, K1, (DI)(AX*1)

gradnext:
	ADDQ R10, DI
	LEAQ (SI)(R9*4), SI
	LEAQ (BX)(R9*4), BX
	DECQ R8
	JNZ gradrow
	VMOVUPS Z2, (R13)
	VZEROUPPER
	RET

// func convDirectFwd4x96AVX512(taps int, offs *int, w, x, y *float32, ldw, ldy int)
// The direct kernel for four output channels (rows r = 0..3 of w, ldw
// floats apart, and of y, ldy apart) over 96 positions: 24 zmm
// accumulators, each of the 6 input vectors of a tap loaded once for four
// multiply-adds (convDirectFwd2x128AVX512 loads 8 for two each: 8
// unaligned loads a 16 multiply-adds, most of them split over two cache
// lines, where this kernel does 6 a 24).
TEXT ·convDirectFwd4x96AVX512(SB), NOSPLIT, $0-56
	MOVQ taps+0(FP), CX
	MOVQ offs+8(FP), R8
	MOVQ w+16(FP), R9
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ ldw+40(FP), R11
	MOVQ ldy+48(FP), DX
	SHLQ $2, R11              // ldw in bytes
	LEAQ (R11)(R11*2), R12    // 3·ldw in bytes
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

fwd4x96loop:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z24
	VBROADCASTSS (R9)(R11*1), Z25
	VBROADCASTSS (R9)(R11*2), Z26
	VBROADCASTSS (R9)(R12*1), Z27
	VMOVUPS (BX), Z28
	VFMADD231PS Z28, Z24, Z0
	VFMADD231PS Z28, Z25, Z6
	VFMADD231PS Z28, Z26, Z12
	VFMADD231PS Z28, Z27, Z18
	VMOVUPS 64(BX), Z29
	VFMADD231PS Z29, Z24, Z1
	VFMADD231PS Z29, Z25, Z7
	VFMADD231PS Z29, Z26, Z13
	VFMADD231PS Z29, Z27, Z19
	VMOVUPS 128(BX), Z30
	VFMADD231PS Z30, Z24, Z2
	VFMADD231PS Z30, Z25, Z8
	VFMADD231PS Z30, Z26, Z14
	VFMADD231PS Z30, Z27, Z20
	VMOVUPS 192(BX), Z31
	VFMADD231PS Z31, Z24, Z3
	VFMADD231PS Z31, Z25, Z9
	VFMADD231PS Z31, Z26, Z15
	VFMADD231PS Z31, Z27, Z21
	VMOVUPS 256(BX), Z28
	VFMADD231PS Z28, Z24, Z4
	VFMADD231PS Z28, Z25, Z10
	VFMADD231PS Z28, Z26, Z16
	VFMADD231PS Z28, Z27, Z22
	VMOVUPS 320(BX), Z29
	VFMADD231PS Z29, Z24, Z5
	VFMADD231PS Z29, Z25, Z11
	VFMADD231PS Z29, Z26, Z17
	VFMADD231PS Z29, Z27, Z23
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ fwd4x96loop

	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z6, (DI)
	VMOVUPS Z7, 64(DI)
	VMOVUPS Z8, 128(DI)
	VMOVUPS Z9, 192(DI)
	VMOVUPS Z10, 256(DI)
	VMOVUPS Z11, 320(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z12, (DI)
	VMOVUPS Z13, 64(DI)
	VMOVUPS Z14, 128(DI)
	VMOVUPS Z15, 192(DI)
	VMOVUPS Z16, 256(DI)
	VMOVUPS Z17, 320(DI)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Z18, (DI)
	VMOVUPS Z19, 64(DI)
	VMOVUPS Z20, 128(DI)
	VMOVUPS Z21, 192(DI)
	VMOVUPS Z22, 256(DI)
	VMOVUPS Z23, 320(DI)
	VZEROUPPER
	RET

