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
