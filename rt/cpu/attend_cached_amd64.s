//go:build !purego

#include "textflag.h"

// func weightedRowsAVX2(y, a *float32, n int, v *float32, ldv, m int)
// y[d] = Σ_{j<n} a[j]·v[j·ldv+d] for d < m, m a multiple of 8: the rows of
// v weighted by a, summed from zero in the order j = 0, 1, ..., each
// product rounded before its add (VMULPS then VADDPS, no FMA), which is Go's
// `y[d] += a[j] * v[...]` lane by lane, bit for bit. Columns go 32 at a
// time (four accumulators), then 8.
TEXT ·weightedRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), BX
	MOVQ n+16(FP), CX
	MOVQ v+24(FP), SI
	MOVQ ldv+32(FP), DX
	SHLQ $2, DX
	MOVQ m+40(FP), R11

wr32:
	CMPQ R11, $32
	JLT wr8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ SI, R8
	XORQ R9, R9
wr32j:
	CMPQ R9, CX
	JGE wr32store
	VBROADCASTSS (BX)(R9*4), Y4
	VMULPS (R8), Y4, Y5
	VADDPS Y5, Y0, Y0
	VMULPS 32(R8), Y4, Y6
	VADDPS Y6, Y1, Y1
	VMULPS 64(R8), Y4, Y7
	VADDPS Y7, Y2, Y2
	VMULPS 96(R8), Y4, Y8
	VADDPS Y8, Y3, Y3
	ADDQ DX, R8
	INCQ R9
	JMP wr32j
wr32store:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	SUBQ $32, R11
	JMP wr32

wr8:
	CMPQ R11, $8
	JLT wrdone
	VXORPS Y0, Y0, Y0
	MOVQ SI, R8
	XORQ R9, R9
wr8j:
	CMPQ R9, CX
	JGE wr8store
	VBROADCASTSS (BX)(R9*4), Y4
	VMULPS (R8), Y4, Y5
	VADDPS Y5, Y0, Y0
	ADDQ DX, R8
	INCQ R9
	JMP wr8j
wr8store:
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, R11
	JMP wr8

wrdone:
	VZEROUPPER
	RET
