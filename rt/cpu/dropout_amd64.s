//go:build !purego

#include "textflag.h"
#include "avx512_amd64.h"

// The constants of dropoutUniform (dropout.go), then the lane numbers.
DATA dropoutConst<>+0(SB)/4, $0x9E3779B9
DATA dropoutConst<>+4(SB)/4, $0x85EBCA6B
DATA dropoutConst<>+8(SB)/4, $0x7FEB352D
DATA dropoutConst<>+12(SB)/4, $0x846CA68B
DATA dropoutConst<>+16(SB)/4, $0x33800000 // 2⁻²⁴
DATA dropoutConst<>+20(SB)/4, $16
DATA dropoutConst<>+24(SB)/4, $0
DATA dropoutConst<>+28(SB)/4, $0
DATA dropoutConst<>+32(SB)/4, $0
DATA dropoutConst<>+36(SB)/4, $0
DATA dropoutConst<>+40(SB)/4, $0
DATA dropoutConst<>+44(SB)/4, $0
DATA dropoutConst<>+48(SB)/4, $0
DATA dropoutConst<>+52(SB)/4, $0
DATA dropoutConst<>+56(SB)/4, $0
DATA dropoutConst<>+60(SB)/4, $0
DATA dropoutConst<>+64(SB)/4, $0
DATA dropoutConst<>+68(SB)/4, $1
DATA dropoutConst<>+72(SB)/4, $2
DATA dropoutConst<>+76(SB)/4, $3
DATA dropoutConst<>+80(SB)/4, $4
DATA dropoutConst<>+84(SB)/4, $5
DATA dropoutConst<>+88(SB)/4, $6
DATA dropoutConst<>+92(SB)/4, $7
DATA dropoutConst<>+96(SB)/4, $8
DATA dropoutConst<>+100(SB)/4, $9
DATA dropoutConst<>+104(SB)/4, $10
DATA dropoutConst<>+108(SB)/4, $11
DATA dropoutConst<>+112(SB)/4, $12
DATA dropoutConst<>+116(SB)/4, $13
DATA dropoutConst<>+120(SB)/4, $14
DATA dropoutConst<>+124(SB)/4, $15
GLOBL dropoutConst<>(SB), RODATA|NOPTR, $128

// MIX is dropoutMix on the 16 lanes of h; clobbers t.
#define MIX(h, t) \
	VPSRLD $16, h, t; \
	VPXORD t, h, h; \
	VPMULLD Z26, h, h; \
	VPSRLD $15, h, t; \
	VPXORD t, h, h; \
	VPMULLD Z27, h, h; \
	VPSRLD $16, h, t; \
	VPXORD t, h, h

// DROPOUTLANES is dropoutMask for the 16 lanes whose indices idx holds:
// m = the mask, x = x·mask from x in x; clobbers h, t and k.
#define DROPOUTLANES(idx, h, t, m, x, k) \
	VPMULLD Z23, idx, h; \
	VPXORD Z24, h, h; \
	MIX(h, t); \
	VPXORD Z25, h, h; \
	MIX(h, t); \
	VPSRLD $8, h, h; \
	VCVTDQ2PS h, h; \
	VMULPS Z28, h, h; \
	VCMPPS $5, Z29, h, k; \
	VMOVAPS.Z Z30, k, m; \
	VMULPS m, x, x

// DROPOUT16 is DROPOUTLANES for the lanes of Z21: Z3 the mask, Z4 x·mask.
#define DROPOUT16 DROPOUTLANES(Z21, Z1, Z2, Z3, Z4, K3)

// func dropoutAVX512(x, y, mask *float32, n int, base, seed, step uint32, rate, keep float32)
// The mask and y = x·mask of elements base … base+n−1 (dropoutMask).
TEXT ·dropoutAVX512(SB), NOSPLIT, $0-52
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ mask+16(FP), DX
	MOVQ n+24(FP), R9
	LEAQ dropoutConst<>(SB), R8
	VPBROADCASTD 0(R8), Z23
	VPBROADCASTD 8(R8), Z26
	VPBROADCASTD 12(R8), Z27
	VPBROADCASTD 16(R8), Z28
	VPBROADCASTD 20(R8), Z22
	MOVL base+32(FP), AX
	VPBROADCASTD AX, Z21
	VPADDD 64(R8), Z21, Z21
	MOVL seed+36(FP), AX
	VPBROADCASTD AX, Z24
	MOVL step+40(FP), AX
	IMULL 4(R8), AX
	VPBROADCASTD AX, Z25
	VBROADCASTSS rate+44(FP), Z29
	VBROADCASTSS keep+48(FP), Z30
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ dotail
	VPADDD Z22, Z21, Z11 // the next 16 lanes' indices
	VPADDD Z22, Z22, Z12 // 32

dopair:
	// Two vectors a round, their hash chains independent (one chain of
	// five multiplies left the multiplier idle, waiting on its latency).
	CMPQ R9, $2
	JLT dovec
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z14
	DROPOUT16
	DROPOUTLANES(Z11, Z15, Z16, Z13, Z14, K4)
	VMOVUPS Z3, (DX)
	VMOVUPS Z13, 64(DX)
	VMOVUPS Z4, (DI)
	VMOVUPS Z14, 64(DI)
	VPADDD Z12, Z21, Z21
	VPADDD Z12, Z11, Z11
	ADDQ $128, SI
	ADDQ $128, DI
	ADDQ $128, DX
	SUBQ $2, R9
	JMP dopair

dovec:
	TESTQ R9, R9
	JEQ dotail
	VMOVUPS (SI), Z4
	DROPOUT16
	VMOVUPS Z3, (DX)
	VMOVUPS Z4, (DI)
	VPADDD Z22, Z21, Z21
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, DX
	DECQ R9
	JNZ dovec

dotail:
	KORTESTW K1, K1
	JZ dodone
	VMOVUPS.Z (SI), K1, Z4
	DROPOUT16
	VMOVUPS Z3, K1, (DX)
	VMOVUPS Z4, K1, (DI)

dodone:
	VZEROUPPER
	RET
