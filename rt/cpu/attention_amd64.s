//go:build !purego

#include "textflag.h"

// func attnDsAVX512(p, ds, mask *float32, n int, scale, dl float32)
TEXT ·attnDsAVX512(SB), NOSPLIT, $0-40
	MOVQ p+0(FP), SI
	MOVQ ds+8(FP), DI
	MOVQ mask+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS scale+32(FP), Z16
	VBROADCASTSS dl+36(FP), Z17
	SHRQ $4, CX
	JEQ done
	TESTQ DX, DX
	JEQ nomask

mloop:
	VMOVUPS (DX), Z0
	VMULPS (DI), Z0, Z0 // mask·ds
	VSUBPS Z17, Z0, Z0  // − dl
	VMULPS (SI), Z16, Z1 // scale·p
	VMULPS Z0, Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, DX
	DECQ CX
	JNZ mloop
	JMP done

nomask:
	VMOVUPS (DI), Z0
	VSUBPS Z17, Z0, Z0 // ds − dl
	VMULPS (SI), Z16, Z1 // scale·p
	VMULPS Z0, Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ nomask

done:
	VZEROUPPER
	RET

// func attnRowMaxAVX512(x *float32, n int) float32
// Two running maxima, and in K2 whether any element was a NaN (then the
// answer is a NaN).
TEXT ·attnRowMaxAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Z0
	VMOVAPS Z0, Z1
	VCMPPS $3, Z0, Z0, K2
	SHRQ $4, CX

loop:
	VMOVUPS (SI), Z2
	VMAXPS Z2, Z0, Z0
	VCMPPS $3, Z2, Z2, K1
	KORW K1, K2, K2
	ADDQ $64, SI
	DECQ CX
	JZ reduce
	VMOVUPS (SI), Z3
	VMAXPS Z3, Z1, Z1
	VCMPPS $3, Z3, Z3, K1
	KORW K1, K2, K2
	ADDQ $64, SI
	DECQ CX
	JNZ loop

reduce:
	VMAXPS Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	KORTESTW K2, K2
	JEQ store
	MOVL $0x7fc00000, AX
	MOVL AX, X0

store:
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET
