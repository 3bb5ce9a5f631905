//go:build !purego

#include "textflag.h"
#include "avx512_amd64.h"

// The constants of geluCore (gelu.go), in the order GELUSETUP loads them.
DATA geluConst<>+0(SB)/4, $0x7fffffff // absolute-value mask
DATA geluConst<>+4(SB)/4, $0x41800000 // 16
DATA geluConst<>+8(SB)/4, $0x3f3504f3 // 1/√2
DATA geluConst<>+12(SB)/4, $0xfffff000 // 12-bit mask
DATA geluConst<>+16(SB)/4, $0x3f000000 // 0.5
DATA geluConst<>+20(SB)/4, $0x3fb8aa3b // log2 e
DATA geluConst<>+24(SB)/4, $0x4b400000 // 1.5·2²³
DATA geluConst<>+28(SB)/4, $0x3f318000 // ln 2 high
DATA geluConst<>+32(SB)/4, $0xb95e8083 // ln 2 low
DATA geluConst<>+36(SB)/4, $0x3f800000 // 1
DATA geluConst<>+40(SB)/4, $0x3ecccccd // 0.4
DATA geluConst<>+44(SB)/4, $0x3ecc422a // 1/√(2π)
DATA geluConst<>+48(SB)/4, $0x80000000 // sign bit
DATA geluConst<>+52(SB)/4, $0x3f800000 // e^r c0
DATA geluConst<>+56(SB)/4, $0x3f800000 // e^r c1
DATA geluConst<>+60(SB)/4, $0x3efffffd // e^r c2
DATA geluConst<>+64(SB)/4, $0x3e2aaa05 // e^r c3
DATA geluConst<>+68(SB)/4, $0x3d2aac4d // e^r c4
DATA geluConst<>+72(SB)/4, $0x3c09367b // e^r c5
DATA geluConst<>+76(SB)/4, $0x3ab55c82 // e^r c6
DATA geluConst<>+80(SB)/4, $0x3e671fb7 // P c0
DATA geluConst<>+84(SB)/4, $0x3e6659cc // P c1
DATA geluConst<>+88(SB)/4, $0x3e5c13f2 // P c2
DATA geluConst<>+92(SB)/4, $0x3e04ca01 // P c3
DATA geluConst<>+96(SB)/4, $0x3e8b4d0f // P c4
DATA geluConst<>+100(SB)/4, $0xbe91997e // P c5
DATA geluConst<>+104(SB)/4, $0x3f0c2502 // P c6
DATA geluConst<>+108(SB)/4, $0xbeff642b // P c7
DATA geluConst<>+112(SB)/4, $0x3e4ac385 // P c8
DATA geluConst<>+116(SB)/4, $0xbcf26e8a // P c9
GLOBL geluConst<>(SB), RODATA|NOPTR, $120

// GELUSETUP loads the constants: Z16–Z28 the first thirteen of geluConst,
// Z31 zero, R8 the table (for the polynomials' coefficients).
#define GELUSETUP \
	BROADCAST13(geluConst<>); \
	VPXORD Z31, Z31, Z31

// GELUCORE is geluCore for the 16 lanes of Z0: Z5 = Φ(x), Z6 = e^(−x²/2).
// Clobbers Z1–Z4, Z7–Z9 and K2. MINPS returns its second source (the
// first operand here) when either is NaN, so a NaN x stays NaN, as Go's
// min keeps it. SCALEFPS multiplies by 2^n rounding once, denormals and
// underflow to zero included, as the Go twin's float64 product does.
#define GELUCORE \
	VPANDD Z0, Z16, Z1; \
	VMINPS Z1, Z17, Z1; \
	VMULPS Z18, Z1, Z2; \
	VPANDD Z19, Z1, Z3; \
	VSUBPS Z3, Z1, Z4; \
	VMULPS Z4, Z3, Z7; \
	VMULPS Z4, Z4, Z4; \
	VMULPS Z20, Z4, Z4; \
	VADDPS Z4, Z7, Z7; \
	VMULPS Z3, Z3, Z3; \
	VMULPS Z20, Z3, Z3; \
	VPXORD Z28, Z3, Z3; \
	VMULPS Z21, Z3, Z8; \
	VADDPS Z22, Z8, Z8; \
	VSUBPS Z22, Z8, Z8; \
	VMULPS Z23, Z8, Z9; \
	VSUBPS Z9, Z3, Z3; \
	VMULPS Z24, Z8, Z9; \
	VSUBPS Z9, Z3, Z3; \
	VSUBPS Z7, Z3, Z3; \
	VBROADCASTSS 76(R8), Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 72(R8), Z6, Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 68(R8), Z6, Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 64(R8), Z6, Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 60(R8), Z6, Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 56(R8), Z6, Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 52(R8), Z6, Z6; \
	VSCALEFPS Z8, Z6, Z6; \
	VMULPS Z26, Z2, Z2; \
	VADDPS Z25, Z2, Z2; \
	VDIVPS Z2, Z25, Z2; \
	VBROADCASTSS 116(R8), Z4; \
	VMULPS Z2, Z4, Z4; \
	VADDPS.BCST 112(R8), Z4, Z4; \
	VMULPS Z2, Z4, Z4; \
	VADDPS.BCST 108(R8), Z4, Z4; \
	VMULPS Z2, Z4, Z4; \
	VADDPS.BCST 104(R8), Z4, Z4; \
	VMULPS Z2, Z4, Z4; \
	VADDPS.BCST 100(R8), Z4, Z4; \
	VMULPS Z2, Z4, Z4; \
	VADDPS.BCST 96(R8), Z4, Z4; \
	VMULPS Z2, Z4, Z4; \
	VADDPS.BCST 92(R8), Z4, Z4; \
	VMULPS Z2, Z4, Z4; \
	VADDPS.BCST 88(R8), Z4, Z4; \
	VMULPS Z2, Z4, Z4; \
	VADDPS.BCST 84(R8), Z4, Z4; \
	VMULPS Z2, Z4, Z4; \
	VADDPS.BCST 80(R8), Z4, Z4; \
	VMULPS Z4, Z2, Z4; \
	VMULPS Z6, Z4, Z4; \
	VMULPS Z20, Z4, Z4; \
	VSUBPS Z4, Z25, Z5; \
	VCMPPS $1, Z31, Z0, K2; \
	VMOVAPS Z4, K2, Z5

// func geluAVX512(x, y *float32, n int)
// y[i] = x[i]·Φ(x[i]) for i < n; y may alias x.
TEXT ·geluAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	GELUSETUP
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ gftail

gfvec:
	VMOVUPS (SI), Z0
	GELUCORE
	VMULPS Z5, Z0, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ gfvec

gftail:
	KORTESTW K1, K1
	JZ gfdone
	VMOVUPS.Z (SI), K1, Z0
	GELUCORE
	VMULPS Z5, Z0, Z1
	VMOVUPS Z1, K1, (DI)

gfdone:
	VZEROUPPER
	RET

// func geluBwdAVX512(x, dy, dx *float32, n int)
// dx[i] = dy[i]·(Φ(x[i]) + x[i]·(e^(−x[i]²/2)·(1/√(2π)))) for i < n; dx may
// alias dy.
TEXT ·geluBwdAVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ dy+8(FP), DX
	MOVQ dx+16(FP), DI
	MOVQ n+24(FP), R9
	GELUSETUP
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ gbtail

gbvec:
	VMOVUPS (SI), Z0
	GELUCORE
	VMULPS Z27, Z6, Z6
	VMULPS Z6, Z0, Z6
	VADDPS Z6, Z5, Z5
	VMULPS (DX), Z5, Z5
	VMOVUPS Z5, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ R9
	JNZ gbvec

gbtail:
	KORTESTW K1, K1
	JZ gbdone
	VMOVUPS.Z (SI), K1, Z0
	GELUCORE
	VMULPS Z27, Z6, Z6
	VMULPS Z6, Z0, Z6
	VADDPS Z6, Z5, Z5
	VMOVUPS.Z (DX), K1, Z1
	VMULPS Z1, Z5, Z5
	VMOVUPS Z5, K1, (DI)

gbdone:
	VZEROUPPER
	RET
