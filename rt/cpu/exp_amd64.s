//go:build !purego

#include "textflag.h"
#include "avx512_amd64.h"

// The constants of expCore (exp.go).
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
GLOBL expConst<>(SB), RODATA|NOPTR, $52

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

// func expShiftAVX512(x, y *float32, n int, m float32)
// y[i] = e^(x[i]−m) for i < n; y may alias x.
TEXT ·expShiftAVX512(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	VBROADCASTSS m+24(FP), Z15
	EXPSETUP
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ extail

exvec:
	VMOVUPS (SI), Z0
	VSUBPS Z15, Z0, Z0
	EXPCORE
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ exvec

extail:
	KORTESTW K1, K1
	JZ exdone
	VMOVUPS.Z (SI), K1, Z0
	VSUBPS Z15, Z0, Z0
	EXPCORE
	VMOVUPS Z1, K1, (DI)

exdone:
	VZEROUPPER
	RET
