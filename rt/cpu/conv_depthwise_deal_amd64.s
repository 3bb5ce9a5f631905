//go:build !purego

#include "textflag.h"

// func dealPairsAVX512(src, even, odd *float32, pairs int, idx *int32)
// For j < pairs (a multiple of 16): even[j] = src[2j], odd[j] = src[2j+1].
// idx holds the 32 lane indices of VPERMT2PS: 0, 2, …, 30 for the even
// floats of two vectors, then 1, 3, …, 31 for the odd ones.
TEXT ·dealPairsAVX512(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), SI
	MOVQ even+8(FP), DI
	MOVQ odd+16(FP), DX
	MOVQ pairs+24(FP), CX
	MOVQ idx+32(FP), R8
	VMOVDQU32 (R8), Z30
	VMOVDQU32 64(R8), Z31
	SHRQ $4, CX
	JEQ dpdone

dploop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVAPS Z0, Z2
	VPERMT2PS Z1, Z30, Z0
	VPERMT2PS Z1, Z31, Z2
	VMOVUPS Z0, (DI)
	VMOVUPS Z2, (DX)
	ADDQ $128, SI
	ADDQ $64, DI
	ADDQ $64, DX
	DECQ CX
	JNZ dploop

dpdone:
	VZEROUPPER
	RET

// func dealRowsAVX512(src, even, odd *float32, rows, pairs, srcStride, dstStride int, idx *int32)
// For r < rows and j < pairs: even[r·dstStride + j] = src[r·srcStride + 2j]
// and odd[r·dstStride + j] = src[r·srcStride + 2j + 1] (strides in
// floats): dealPairsAVX512 over every row, the last pairs mod 16 of a row
// through masked loads and stores, reading and writing nothing past them.
TEXT ·dealRowsAVX512(SB), NOSPLIT, $0-64
	MOVQ src+0(FP), SI
	MOVQ even+8(FP), DI
	MOVQ odd+16(FP), DX
	MOVQ rows+24(FP), R9
	MOVQ pairs+32(FP), R10
	MOVQ srcStride+40(FP), R11
	MOVQ dstStride+48(FP), R12
	MOVQ idx+56(FP), R8
	VMOVDQU32 (R8), Z30
	VMOVDQU32 64(R8), Z31
	SHLQ $2, R11
	SHLQ $2, R12
	// K1: the last pairs mod 16 lanes of a store; K2, K3: the 2·(pairs
	// mod 16) floats they come from, in two vectors.
	MOVQ R10, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	SHLL $1, CX
	MOVQ $1, AX
	SHLQ CX, AX
	DECQ AX
	KMOVW AX, K2
	SHRQ $16, AX
	KMOVW AX, K3
	MOVQ R10, R13
	SHRQ $4, R13               // whole blocks of 16 pairs a row
	TESTQ R9, R9
	JEQ drdone

drrow:
	MOVQ SI, AX
	MOVQ DI, BX
	MOVQ DX, R14
	MOVQ R13, CX
	TESTQ CX, CX
	JEQ drtail

drloop:
	VMOVUPS (AX), Z0
	VMOVUPS 64(AX), Z1
	VMOVAPS Z0, Z2
	VPERMT2PS Z1, Z30, Z0
	VPERMT2PS Z1, Z31, Z2
	VMOVUPS Z0, (BX)
	VMOVUPS Z2, (R14)
	ADDQ $128, AX
	ADDQ $64, BX
	ADDQ $64, R14
	DECQ CX
	JNZ drloop

drtail:
	KORTESTW K1, K1
	JZ drnext
	VMOVUPS.Z (AX), K2, Z0
	VMOVUPS.Z 64(AX), K3, Z1
	VMOVAPS Z0, Z2
	VPERMT2PS Z1, Z30, Z0
	VPERMT2PS Z1, Z31, Z2
	VMOVUPS Z0, K1, (BX)
	VMOVUPS Z2, K1, (R14)

drnext:
	ADDQ R11, SI
	ADDQ R12, DI
	ADDQ R12, DX
	DECQ R9
	JNZ drrow

drdone:
	VZEROUPPER
	RET

// func copyRowsAVX512(src, dst *float32, rows, n, srcStride, dstStride int)
// For r < rows and j < n: dst[r·dstStride + j] = src[r·srcStride + j]
// (strides in floats), each row's last n mod 16 floats through a masked
// load and store, reading and writing nothing past them.
TEXT ·copyRowsAVX512(SB), NOSPLIT, $0-48
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ rows+16(FP), R9
	MOVQ n+24(FP), R10
	MOVQ srcStride+32(FP), R11
	MOVQ dstStride+40(FP), R12
	SHLQ $2, R11
	SHLQ $2, R12
	MOVQ R10, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	MOVQ R10, R13
	SHRQ $4, R13
	TESTQ R9, R9
	JEQ crdone

crrow:
	MOVQ SI, AX
	MOVQ DI, BX
	MOVQ R13, CX
	TESTQ CX, CX
	JEQ crtail

crloop:
	VMOVUPS (AX), Z0
	VMOVUPS Z0, (BX)
	ADDQ $64, AX
	ADDQ $64, BX
	DECQ CX
	JNZ crloop

crtail:
	KORTESTW K1, K1
	JZ crnext
	VMOVUPS.Z (AX), K1, Z0
	VMOVUPS Z0, K1, (BX)

crnext:
	ADDQ R11, SI
	ADDQ R12, DI
	DECQ R9
	JNZ crrow

crdone:
	VZEROUPPER
	RET
