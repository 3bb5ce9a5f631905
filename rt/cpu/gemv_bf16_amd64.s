//go:build !purego

#include "textflag.h"

// DP(d, v, m) is VDPBF16PS Zd, Zv, Zm (lane i of Zd += Zv.bf16[2i+1]·
// Zm.bf16[2i+1], then += Zv.bf16[2i]·Zm.bf16[2i]) for d, v, m < 16, in
// bytes: Go's assembler has no AVX512-BF16. EVEX 62 P0 P1 48 (map 0F38,
// prefix F3, 512 bits), opcode 52, ModRM 11 d m; P0 holds the inverted
// top bits of d and m, P1 the inverted v.
#define DP(d, v, m) \
	BYTE $0x62; BYTE $(0x52 | ((1-((d)>>3))<<7) | ((1-((m)>>3))<<5)); \
	BYTE $(((15-(v))<<3) | 6); BYTE $0x48; BYTE $0x52; \
	BYTE $(0xc0 | (((d)&7)<<3) | ((m)&7))

// FOLD16(z, y, x, ty, tx) folds the 16 lanes of z into lane 0 of x as
// dotBF16Go does: l + l+8, l + l+4, l + l+2, l + l+1.
#define FOLD16(z, y, x, ty, tx) \
	VEXTRACTF64X4 $1, z, ty \
	VADDPS        ty, y, y \
	VEXTRACTF128  $1, y, tx \
	VADDPS        tx, x, x \
	VMOVHLPS      x, tx, tx \
	VADDPS        tx, x, x \
	VMOVSHDUP     x, tx \
	VADDSS        tx, x, x

// STORE4 folds the accumulators Z0-Z3 into out[0..3] (out in AX).
#define STORE4 \
	VADDPS Z10, Z0, Z0 \
	VADDPS Z11, Z1, Z1 \
	VADDPS Z12, Z2, Z2 \
	VADDPS Z13, Z3, Z3 \
	MOVQ out+32(FP), AX \
	FOLD16(Z0, Y0, X0, Y8, X8) \
	VMOVSS X0, 0(AX) \
	FOLD16(Z1, Y1, X1, Y8, X8) \
	VMOVSS X1, 4(AX) \
	FOLD16(Z2, Y2, X2, Y8, X8) \
	VMOVSS X2, 8(AX) \
	FOLD16(Z3, Y3, X3, Y8, X8) \
	VMOVSS X3, 12(AX) \
	VZEROUPPER

// ROWS4 loads x, the rows' pointers (DI, R8, R9, R10) and n (CX), and
// zeroes the accumulators Z0-Z3.
#define ROWS4 \
	MOVQ x+0(FP), SI \
	MOVQ w+8(FP), DI \
	MOVQ n+16(FP), CX \
	MOVQ ldw+24(FP), DX \
	SHLQ $1, DX \
	LEAQ (DI)(DX*1), R8 \
	LEAQ (R8)(DX*1), R9 \
	LEAQ (R9)(DX*1), R10 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13

// func dot4BF16DP(x, w *uint16, n, ldw int, out *float32)
// For the four rows w[r·ldw:][:n], r < 4, n a positive multiple of 32:
// two sets of 16-lane accumulators a row, Z0-Z3 for the even 32-element
// blocks and Z10-Z13 for the odd ones (two chains of VDPBF16PS a row, not
// one: its latency bound the loop), lane l of a block taking the pairs
// 2l+1 then 2l; each block of x loaded once for the four rows; the sets
// added and the lanes folded into out[r].
TEXT ·dot4BF16DP(SB), NOSPLIT, $0-40
	ROWS4
	CMPQ CX, $64
	JLT  dpone

dploop:
	VMOVDQU32 (SI), Z4
	VMOVDQU32 64(SI), Z14
	VMOVDQU32 (DI), Z5
	VMOVDQU32 64(DI), Z15
	DP(0, 4, 5)
	DP(10, 14, 15)
	VMOVDQU32 (R8), Z6
	VMOVDQU32 64(R8), Z7
	DP(1, 4, 6)
	DP(11, 14, 7)
	VMOVDQU32 (R9), Z8
	VMOVDQU32 64(R9), Z9
	DP(2, 4, 8)
	DP(12, 14, 9)
	VMOVDQU32 (R10), Z5
	VMOVDQU32 64(R10), Z15
	DP(3, 4, 5)
	DP(13, 14, 15)
	ADDQ $128, SI
	ADDQ $128, DI
	ADDQ $128, R8
	ADDQ $128, R9
	ADDQ $128, R10
	SUBQ $64, CX
	CMPQ CX, $64
	JGE  dploop
	TESTQ CX, CX
	JZ   dpdone

dpone: // a last (even) block of 32
	VMOVDQU32 (SI), Z4
	VMOVDQU32 (DI), Z5
	DP(0, 4, 5)
	VMOVDQU32 (R8), Z6
	DP(1, 4, 6)
	VMOVDQU32 (R9), Z7
	DP(2, 4, 7)
	VMOVDQU32 (R10), Z8
	DP(3, 4, 8)

dpdone:
	STORE4
	RET

// WIDEN(m, e, o) splits the 16 bfloat16 pairs at m into float32: the first
// of each pair (its low half) into e, the second into o (Z31 holds the
// mask of the top halves).
#define WIDEN(m, e, o) \
	VMOVDQU32 m, o \
	VPSLLD    $16, o, e \
	VPANDD    Z31, o, o

// PAIRS(m, xe, xo, acc) adds to acc the products of the block at m with
// the widened block of x in xe, xo: the second of each pair first.
#define PAIRS(m, xe, xo, acc) \
	WIDEN(m, Z20, Z21) \
	VFMADD231PS xo, Z21, acc \
	VFMADD231PS xe, Z20, acc

// func dot4BF16Widen(x, w *uint16, n, ldw int, out *float32)
// dot4BF16DP's sums on AVX-512F without AVX512-BF16: the pairs widened
// (a bfloat16 is the top half of its float32) into fused multiply-adds in
// the same order, the second of a pair first, the blocks into the same
// two sets. A product of two bfloat16 is exact in float32, so each FMA
// rounds as VDPBF16PS's add does; only a sum below the smallest normal
// float32 can differ (VDPBF16PS flushes it to zero).
TEXT ·dot4BF16Widen(SB), NOSPLIT, $0-40
	ROWS4
	MOVL         $0xffff0000, AX
	VPBROADCASTD AX, Z31
	CMPQ CX, $64
	JLT  wdone

wdloop:
	WIDEN((SI), Z16, Z17)
	WIDEN(64(SI), Z18, Z19)
	PAIRS((DI), Z16, Z17, Z0)
	PAIRS(64(DI), Z18, Z19, Z10)
	PAIRS((R8), Z16, Z17, Z1)
	PAIRS(64(R8), Z18, Z19, Z11)
	PAIRS((R9), Z16, Z17, Z2)
	PAIRS(64(R9), Z18, Z19, Z12)
	PAIRS((R10), Z16, Z17, Z3)
	PAIRS(64(R10), Z18, Z19, Z13)
	ADDQ $128, SI
	ADDQ $128, DI
	ADDQ $128, R8
	ADDQ $128, R9
	ADDQ $128, R10
	SUBQ $64, CX
	CMPQ CX, $64
	JGE  wdloop
	TESTQ CX, CX
	JZ   wddone

wdone: // a last (even) block of 32
	WIDEN((SI), Z16, Z17)
	PAIRS((DI), Z16, Z17, Z0)
	PAIRS((R8), Z16, Z17, Z1)
	PAIRS((R9), Z16, Z17, Z2)
	PAIRS((R10), Z16, Z17, Z3)

wddone:
	STORE4
	RET
