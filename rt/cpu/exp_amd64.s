//go:build !purego

#include "textflag.h"
#include "avx512_amd64.h"

// The constants of expCore (exp.go), then those sigmoidCore and tanhCore
// (sigmoid.go) add.
DATA expConst<>+0(SB)/4, $0xc2d00000 // −104
DATA expConst<>+4(SB)/4, $0x42b20000 // 89
DATA expConst<>+8(SB)/4, $0x3fb8aa3b // log2 e
DATA expConst<>+12(SB)/4, $0x4b400000 // 1.5·2²³
DATA expConst<>+16(SB)/4, $0x3f318000 // ln 2 high
DATA expConst<>+20(SB)/4, $0xb95e8083 // ln 2 low
DATA expConst<>+24(SB)/4, $0x3f800000 // e^r c0
DATA expConst<>+28(SB)/4, $0x3f800000 // e^r c1
DATA expConst<>+32(SB)/4, $0x3efffffd // e^r c2
DATA expConst<>+36(SB)/4, $0x3e2aaa05 // e^r c3
DATA expConst<>+40(SB)/4, $0x3d2aac4d // e^r c4
DATA expConst<>+44(SB)/4, $0x3c09367b // e^r c5
DATA expConst<>+48(SB)/4, $0x3ab55c82 // e^r c6
DATA expConst<>+52(SB)/4, $0x80000000 // sign bit
DATA expConst<>+56(SB)/4, $0x3f666666 // tanhSmall
DATA expConst<>+60(SB)/4, $0xbeaaaa82 // tanh P c0
DATA expConst<>+64(SB)/4, $0x3e0880be // tanh P c1
DATA expConst<>+68(SB)/4, $0xbd5c0b21 // tanh P c2
DATA expConst<>+72(SB)/4, $0x3cab3f77 // tanh P c3
DATA expConst<>+76(SB)/4, $0xbbe0cbf1 // tanh P c4
DATA expConst<>+80(SB)/4, $0x3aaaec87 // tanh P c5
GLOBL expConst<>(SB), RODATA|NOPTR, $84

// EXPCORE is expCore for the 16 lanes of Z0 into Z1; Z16–Z28 hold the
// constants in expConst's order. Clobbers Z2 and Z3. MAXPS and MINPS
// return their second source (the first operand here) when either is NaN,
// so NaN stays NaN as in Go's min and max; SCALEFPS multiplies by 2ⁿ
// rounding once, as the Go twin's float64 product does.
#define EXPCORE \
	VMAXPS Z0, Z16, Z1; \
	VMINPS Z1, Z17, Z1; \
	VMULPS Z18, Z1, Z2; \
	VADDPS Z19, Z2, Z2; \
	VSUBPS Z19, Z2, Z2; \
	VMULPS Z20, Z2, Z3; \
	VSUBPS Z3, Z1, Z1; \
	VMULPS Z21, Z2, Z3; \
	VSUBPS Z3, Z1, Z1; \
	VMULPS Z1, Z28, Z3; \
	VADDPS Z27, Z3, Z3; \
	VMULPS Z1, Z3, Z3; \
	VADDPS Z26, Z3, Z3; \
	VMULPS Z1, Z3, Z3; \
	VADDPS Z25, Z3, Z3; \
	VMULPS Z1, Z3, Z3; \
	VADDPS Z24, Z3, Z3; \
	VMULPS Z1, Z3, Z3; \
	VADDPS Z23, Z3, Z3; \
	VMULPS Z1, Z3, Z3; \
	VADDPS Z22, Z3, Z3; \
	VSCALEFPS Z2, Z3, Z1

#define EXPSETUP \
	BROADCAST13(expConst<>)

// func expShiftSumAVX512(x, y *float32, n int, m float32) float32
// y[i] = e^(x[i]−m) for i < n, and returns Σ y[i], summed in 16 lanes
// (lane i mod 16) whose sums are then added in halves; y may alias x.
TEXT ·expShiftSumAVX512(SB), NOSPLIT, $0-36
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	VBROADCASTSS m+24(FP), Z15
	EXPSETUP
	VPXORD Z14, Z14, Z14
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ estail

esvec:
	VMOVUPS (SI), Z0
	VSUBPS Z15, Z0, Z0
	EXPCORE
	VMOVUPS Z1, (DI)
	VADDPS Z1, Z14, Z14
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ esvec

estail:
	KORTESTW K1, K1
	JZ esdone
	VMOVUPS.Z (SI), K1, Z0
	VSUBPS Z15, Z0, Z0
	EXPCORE
	VMOVUPS Z1, K1, (DI)
	VADDPS Z1, Z14, K1, Z14

esdone:
	VEXTRACTF32X8 $1, Z14, Y0
	VADDPS Y0, Y14, Y14
	VEXTRACTF128 $1, Y14, X0
	VADDPS X0, X14, X14
	VMOVHLPS X14, X0, X0
	VADDPS X0, X14, X14
	VMOVSHDUP X14, X0
	VADDSS X0, X14, X14
	VMOVSS X14, ret+32(FP)
	VZEROUPPER
	RET

// SIGMOIDSETUP loads EXPSETUP's constants, the sign bit into Z29, tanhSmall
// into Z30 and zero into Z31.
#define SIGMOIDSETUP \
	EXPSETUP; \
	VBROADCASTSS 52(R8), Z29; \
	VBROADCASTSS 56(R8), Z30; \
	VPXORD Z31, Z31, Z31

// SIGMOID is sigmoidCore for the 16 lanes of Z4 into Z3: t = e^(−|x|),
// then t/(1+t) where x < 0 (a NaN compares false) and 1/(1+t) elsewhere.
// Clobbers Z0–Z2 and K2.
#define SIGMOID \
	VPORD Z29, Z4, Z0; \
	EXPCORE; \
	VADDPS Z22, Z1, Z2; \
	VCMPPS $1, Z31, Z4, K2; \
	VMOVAPS Z22, Z3; \
	VMOVAPS Z1, K2, Z3; \
	VDIVPS Z2, Z3, Z3

// func sigmoidAVX512(x, y *float32, n int)
// y[i] = sigmoidCore(x[i]) for i < n; y may alias x.
TEXT ·sigmoidAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	SIGMOIDSETUP
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ sgtail

sgvec:
	VMOVUPS (SI), Z4
	SIGMOID
	VMOVUPS Z3, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ sgvec

sgtail:
	KORTESTW K1, K1
	JZ sgdone
	VMOVUPS.Z (SI), K1, Z4
	SIGMOID
	VMOVUPS Z3, K1, (DI)

sgdone:
	VZEROUPPER
	RET

// TANH is tanhCore for the 16 lanes of Z4 into Z2: with a = |x|, the
// exponential's branch (1−t)/(1+t), t = e^(−2a), then the polynomial's
// a + a·(z·P(z)) over it where a < tanhSmall (a NaN compares false and
// keeps the exponential's NaN), then x's sign. Clobbers Z0, Z1, Z3, Z5–Z7
// and K2.
#define TANH \
	VPANDD Z29, Z4, Z7; \
	VPXORD Z7, Z4, Z5; \
	VCMPPS $1, Z30, Z5, K2; \
	VPORD Z29, Z4, Z0; \
	VADDPS Z0, Z0, Z0; \
	EXPCORE; \
	VSUBPS Z1, Z22, Z2; \
	VADDPS Z22, Z1, Z3; \
	VDIVPS Z3, Z2, Z2; \
	VMULPS Z5, Z5, Z3; \
	VBROADCASTSS 80(R8), Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 76(R8), Z6, Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 72(R8), Z6, Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 68(R8), Z6, Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 64(R8), Z6, Z6; \
	VMULPS Z3, Z6, Z6; \
	VADDPS.BCST 60(R8), Z6, Z6; \
	VMULPS Z6, Z3, Z6; \
	VMULPS Z6, Z5, Z6; \
	VADDPS Z6, Z5, Z6; \
	VMOVAPS Z6, K2, Z2; \
	VPORD Z7, Z2, Z2

// func tanhAVX512(x, y *float32, n int)
// y[i] = tanhCore(x[i]) for i < n; y may alias x.
TEXT ·tanhAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	SIGMOIDSETUP
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ thtail

thvec:
	VMOVUPS (SI), Z4
	TANH
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ thvec

thtail:
	KORTESTW K1, K1
	JZ thdone
	VMOVUPS.Z (SI), K1, Z4
	TANH
	VMOVUPS Z2, K1, (DI)

thdone:
	VZEROUPPER
	RET

// func siluAVX512(x, y *float32, n int)
// y[i] = x[i]·sigmoidCore(x[i]) for i < n; y may alias x.
TEXT ·siluAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	SIGMOIDSETUP
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ sltail

slvec:
	VMOVUPS (SI), Z4
	SIGMOID
	VMULPS Z3, Z4, Z3
	VMOVUPS Z3, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ slvec

sltail:
	KORTESTW K1, K1
	JZ sldone
	VMOVUPS.Z (SI), K1, Z4
	SIGMOID
	VMULPS Z3, Z4, Z3
	VMOVUPS Z3, K1, (DI)

sldone:
	VZEROUPPER
	RET

// SILUGRAD turns SIGMOID's σ(x) (Z3), 1+t (Z2), t (Z1) and x < 0 (K2)
// for the lanes of Z4 into SiLU'(x) = σ·(1 + x·(1−σ)) in Z0, 1−σ being
// t/(1+t) where x ≥ 0 and 1/(1+t) where x < 0 (sigmoidPair). Clobbers Z5.
#define SILUGRAD \
	VMOVAPS Z1, Z5; \
	VMOVAPS Z22, K2, Z5; \
	VDIVPS Z2, Z5, Z5; \
	VMULPS Z5, Z4, Z0; \
	VADDPS Z22, Z0, Z0; \
	VMULPS Z0, Z3, Z0

// func siluBwdAVX512(x, dy, dx *float32, n int)
// dx[i] = dy[i]·SiLU'(x[i]) for i < n; dx may alias dy.
TEXT ·siluBwdAVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ dy+8(FP), DX
	MOVQ dx+16(FP), DI
	MOVQ n+24(FP), R9
	SIGMOIDSETUP
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ sbtail

sbvec:
	VMOVUPS (SI), Z4
	SIGMOID
	SILUGRAD
	VMULPS (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ R9
	JNZ sbvec

sbtail:
	KORTESTW K1, K1
	JZ sbdone
	VMOVUPS.Z (SI), K1, Z4
	SIGMOID
	SILUGRAD
	VMOVUPS.Z (DX), K1, Z1
	VMULPS Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)

sbdone:
	VZEROUPPER
	RET
