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
