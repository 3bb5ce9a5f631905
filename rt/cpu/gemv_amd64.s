//go:build !purego

#include "textflag.h"

// func dotAVX2(x, y *float32, n int) float32
// The dot product of x[:n] and y[:n], n a multiple of 8, with four
// independent FMA accumulators of eight lanes each.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ CX, $32
	JLT tail8

loop32:
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	VMOVUPS 32(SI), Y5
	VFMADD231PS 32(DI), Y5, Y1
	VMOVUPS 64(SI), Y6
	VFMADD231PS 64(DI), Y6, Y2
	VMOVUPS 96(SI), Y7
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE loop32

tail8:
	CMPQ CX, $8
	JLT reduce
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP tail8

reduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// REDUCE8x4 sums the four accumulators a, b, c, d of one row into lane 0
// of X(a) exactly as dotAVX2's reduce does ((a+b)+(c+d), then the halves,
// then two horizontal adds), so each row's result is dotAVX2's bit for bit.
#define REDUCE8x4(a, b, c, d, xa, xb) \
	VADDPS b, a, a \
	VADDPS d, c, c \
	VADDPS c, a, a \
	VEXTRACTF128 $1, a, xb \
	VADDPS xb, xa, xa \
	VHADDPS xa, xa, xa \
	VHADDPS xa, xa, xa

// func dot4AVX512VL(x, w *float32, n, ldw int, out *float32)
// The dot products of x[:n] with the four rows w[i·ldw:][:n], i < 4, n a
// multiple of 8, into out[0..3]: each row summed in dotAVX2's order (four
// eight-lane FMA accumulators over 32-element steps, the 8-element tail
// into the first, the same reduction), so a row's sum is dotAVX2's. Each
// piece of x is loaded once for the four rows. The accumulators are
// Y0-Y15 and the pieces of x Y16-Y19, which take AVX-512VL.
TEXT ·dot4AVX512VL(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ ldw+24(FP), DX
	SHLQ $2, DX
	LEAQ (DI)(DX*1), R8
	LEAQ (R8)(DX*1), R9
	LEAQ (R9)(DX*1), R10
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
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	CMPQ CX, $32
	JLT d4tail8

d4loop32:
	VMOVUPS (SI), Y16
	VMOVUPS 32(SI), Y17
	VMOVUPS 64(SI), Y18
	VMOVUPS 96(SI), Y19
	VFMADD231PS (DI), Y16, Y0
	VFMADD231PS 32(DI), Y17, Y1
	VFMADD231PS 64(DI), Y18, Y2
	VFMADD231PS 96(DI), Y19, Y3
	VFMADD231PS (R8), Y16, Y4
	VFMADD231PS 32(R8), Y17, Y5
	VFMADD231PS 64(R8), Y18, Y6
	VFMADD231PS 96(R8), Y19, Y7
	VFMADD231PS (R9), Y16, Y8
	VFMADD231PS 32(R9), Y17, Y9
	VFMADD231PS 64(R9), Y18, Y10
	VFMADD231PS 96(R9), Y19, Y11
	VFMADD231PS (R10), Y16, Y12
	VFMADD231PS 32(R10), Y17, Y13
	VFMADD231PS 64(R10), Y18, Y14
	VFMADD231PS 96(R10), Y19, Y15
	ADDQ $128, SI
	ADDQ $128, DI
	ADDQ $128, R8
	ADDQ $128, R9
	ADDQ $128, R10
	SUBQ $32, CX
	CMPQ CX, $32
	JGE d4loop32

d4tail8:
	CMPQ CX, $8
	JLT d4reduce
	VMOVUPS (SI), Y16
	VFMADD231PS (DI), Y16, Y0
	VFMADD231PS (R8), Y16, Y4
	VFMADD231PS (R9), Y16, Y8
	VFMADD231PS (R10), Y16, Y12
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	SUBQ $8, CX
	JMP d4tail8

d4reduce:
	MOVQ out+32(FP), AX
	REDUCE8x4(Y0, Y1, Y2, Y3, X0, X1)
	VMOVSS X0, (AX)
	REDUCE8x4(Y4, Y5, Y6, Y7, X4, X5)
	VMOVSS X4, 4(AX)
	REDUCE8x4(Y8, Y9, Y10, Y11, X8, X9)
	VMOVSS X8, 8(AX)
	REDUCE8x4(Y12, Y13, Y14, Y15, X12, X13)
	VMOVSS X12, 12(AX)
	VZEROUPPER
	RET
