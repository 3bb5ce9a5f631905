//go:build !purego

#include "textflag.h"

// expCore's constants (exp.go) eight times each, 32 bytes apart, for
// AVX2's memory operands (it has no broadcast ones), then 1, the sign bit
// and the float64 exponent bias 1023 as four int64.
#define C8(off, v) \
	DATA exp8<>+(off+0)(SB)/4, v; DATA exp8<>+(off+4)(SB)/4, v; \
	DATA exp8<>+(off+8)(SB)/4, v; DATA exp8<>+(off+12)(SB)/4, v; \
	DATA exp8<>+(off+16)(SB)/4, v; DATA exp8<>+(off+20)(SB)/4, v; \
	DATA exp8<>+(off+24)(SB)/4, v; DATA exp8<>+(off+28)(SB)/4, v

C8(0, $0xc2d00000)   // −104
C8(32, $0x42b20000)  // 89
C8(64, $0x3fb8aa3b)  // log2 e
C8(96, $0x4b400000)  // 1.5·2²³
C8(128, $0x3f318000) // ln 2 high
C8(160, $0xb95e8083) // ln 2 low
C8(192, $0x3f800000) // e^r c0, and 1
C8(224, $0x3f800000) // e^r c1
C8(256, $0x3efffffd) // e^r c2
C8(288, $0x3e2aaa05) // e^r c3
C8(320, $0x3d2aac4d) // e^r c4
C8(352, $0x3c09367b) // e^r c5
C8(384, $0x3ab55c82) // e^r c6
C8(416, $0x80000000) // sign bit
DATA exp8<>+448(SB)/8, $1023
DATA exp8<>+456(SB)/8, $1023
DATA exp8<>+464(SB)/8, $1023
DATA exp8<>+472(SB)/8, $1023
GLOBL exp8<>(SB), RODATA|NOPTR, $480

// EXPCORE8 is expCore for the 8 lanes of Y0 into Y1, the exp_amd64.s
// kernel's operations in its order: MAXPS and MINPS take the constant as
// their first source, so a NaN lane returns the lane (Go's min and max
// keep NaN); the scaling by 2ⁿ is a float64 product rounded once to
// float32, as in the Go twin, four lanes at a time. Clobbers Y2, Y3 and
// Y5–Y8.
#define EXPCORE8 \
	VMOVUPS exp8<>+0(SB), Y1; \
	VMAXPS Y0, Y1, Y1; \
	VMOVUPS exp8<>+32(SB), Y2; \
	VMINPS Y1, Y2, Y1; \
	VMULPS exp8<>+64(SB), Y1, Y2; \
	VADDPS exp8<>+96(SB), Y2, Y2; \
	VSUBPS exp8<>+96(SB), Y2, Y2; \
	VMULPS exp8<>+128(SB), Y2, Y3; \
	VSUBPS Y3, Y1, Y1; \
	VMULPS exp8<>+160(SB), Y2, Y3; \
	VSUBPS Y3, Y1, Y1; \
	VMULPS exp8<>+384(SB), Y1, Y3; \
	VADDPS exp8<>+352(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS exp8<>+320(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS exp8<>+288(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS exp8<>+256(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS exp8<>+224(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS exp8<>+192(SB), Y3, Y3; \
	VCVTPS2DQ Y2, Y5; \
	VCVTPS2PD X3, Y6; \
	VPMOVSXDQ X5, Y7; \
	VPADDQ exp8<>+448(SB), Y7, Y7; \
	VPSLLQ $52, Y7, Y7; \
	VMULPD Y7, Y6, Y6; \
	VCVTPD2PSY Y6, X6; \
	VEXTRACTF128 $1, Y3, X7; \
	VCVTPS2PD X7, Y7; \
	VEXTRACTI128 $1, Y5, X8; \
	VPMOVSXDQ X8, Y8; \
	VPADDQ exp8<>+448(SB), Y8, Y8; \
	VPSLLQ $52, Y8, Y8; \
	VMULPD Y8, Y7, Y7; \
	VCVTPD2PSY Y7, X7; \
	VINSERTF128 $1, X7, Y6, Y1

// SIGMOID8 is sigmoidCore for the 8 lanes of Y4 into Y3: t = e^(−|x|),
// then t/(1+t) where x < 0 (a NaN compares false) and 1/(1+t)
// elsewhere. Needs Y9 zero; clobbers Y0–Y2, Y5–Y8, Y10 and Y11.
#define SIGMOID8 \
	VORPS exp8<>+416(SB), Y4, Y0; \
	EXPCORE8; \
	VMOVUPS exp8<>+192(SB), Y11; \
	VADDPS Y11, Y1, Y2; \
	VCMPPS $1, Y9, Y4, Y10; \
	VBLENDVPS Y10, Y1, Y11, Y3; \
	VDIVPS Y2, Y3, Y3

// func sigmoidAVX2(x, y *float32, n int)
// y[i] = sigmoidCore(x[i]) for i < n − n mod 8 (the caller does the rest);
// y may alias x.
TEXT ·sigmoidAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	VXORPS Y9, Y9, Y9
	SHRQ $3, R9
	JEQ sg2done

sg2vec:
	VMOVUPS (SI), Y4
	SIGMOID8
	VMOVUPS Y3, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ R9
	JNZ sg2vec

sg2done:
	VZEROUPPER
	RET

// func siluAVX2(x, y *float32, n int)
// y[i] = x[i]·sigmoidCore(x[i]) for i < n − n mod 8 (the caller does the
// rest); y may alias x.
TEXT ·siluAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	VXORPS Y9, Y9, Y9
	SHRQ $3, R9
	JEQ sl2done

sl2vec:
	VMOVUPS (SI), Y4
	SIGMOID8
	VMULPS Y3, Y4, Y3
	VMOVUPS Y3, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ R9
	JNZ sl2vec

sl2done:
	VZEROUPPER
	RET
