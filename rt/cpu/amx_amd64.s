//go:build !purego

#include "textflag.h"

// AMX instructions the Go assembler does not know, as their bytes (checked
// against GNU as and objdump); the registers are fixed by the encodings.
#define LDTILECFG_AX BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00
#define TILERELEASE BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0
#define TILEZERO_T0 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0
#define TILEZERO_T1 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8
#define TILEZERO_T2 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd0
#define TILEZERO_T3 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd8
// TILELOADD tmm4, [SI+R9]; tmm5, [R12+R9]; tmm6, [DI+R10]; tmm7, [R13+R10]
#define LOAD_T4 BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x0e
#define LOAD_T5 BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x0c
#define LOAD_T6 BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x17
#define LOAD_T7 BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x7c; BYTE $0x15; BYTE $0x00
// TDPBF16PS tmm0, tmm4, tmm6; tmm1, tmm4, tmm7; tmm2, tmm5, tmm6; tmm3, tmm5, tmm7
#define DP_T0 BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xc4
#define DP_T1 BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xcc
#define DP_T2 BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xd5
#define DP_T3 BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xdd
// TILESTORED [R8+R11], tmm0; [SI+R11], tmm1; [R12+R11], tmm2; [R13+R11], tmm3
#define STORE_T0 BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x18
#define STORE_T1 BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x0c; BYTE $0x1e
#define STORE_T2 BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x14; BYTE $0x1c
#define STORE_T3 BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x5c; BYTE $0x1d; BYTE $0x00

// func amxRowBlock(cfg *byte, a *uint16, b *uint32, c *float32, nBlocks, kTiles, lda, ldb, ldc int)
//
// C[32 rows][32·nBlocks] = A[32][32·kTiles] · B, one 32×32 block of C at a
// time in tiles tmm0-3 (16×16 float32 each), k 32 at a time: tmm4 and tmm5
// hold A's two 16-row halves (16 rows of 32 bfloat16), tmm6 and tmm7 B's
// two 16-column halves (16 k-pairs of 16 columns, each a bfloat16 pair).
// lda, ldb and ldc are row strides in bytes. The tile configuration is
// loaded and released here, so no tile state outlives the call.
TEXT ·amxRowBlock(SB), NOSPLIT, $0-72
	MOVQ cfg+0(FP), AX
	LDTILECFG_AX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), R8
	MOVQ nBlocks+32(FP), DX
	MOVQ lda+48(FP), R9
	MOVQ ldb+56(FP), R10
	MOVQ ldc+64(FP), R11

nloop:
	TILEZERO_T0
	TILEZERO_T1
	TILEZERO_T2
	TILEZERO_T3
	MOVQ AX, SI
	LEAQ (SI)(R9*8), R12
	LEAQ (R12)(R9*8), R12 // A's second half: 16 rows down
	MOVQ BX, DI
	LEAQ 64(DI), R13 // B's second half: 16 columns right
	MOVQ kTiles+40(FP), CX

kloop:
	LOAD_T4
	LOAD_T5
	LOAD_T6
	LOAD_T7
	DP_T0
	DP_T1
	DP_T2
	DP_T3
	ADDQ $64, SI
	ADDQ $64, R12
	LEAQ (DI)(R10*8), DI
	LEAQ (DI)(R10*8), DI   // 16 k-pairs down
	LEAQ (R13)(R10*8), R13
	LEAQ (R13)(R10*8), R13
	DECQ CX
	JNZ  kloop

	STORE_T0
	LEAQ 64(R8), SI
	STORE_T1
	LEAQ (R8)(R11*8), R12
	LEAQ (R12)(R11*8), R12
	STORE_T2
	LEAQ 64(R12), R13
	STORE_T3
	ADDQ $128, BX
	ADDQ $128, R8
	DECQ DX
	JNZ  nloop

	TILERELEASE
	RET

// The packers' conversion: Z31 holds 0x7fff in every lane, Z30 1, Z29 0x40.
#define BF16CONSTS \
	MOVL         $0x7fff, AX \
	VPBROADCASTD AX, Z31     \
	MOVL         $1, AX      \
	VPBROADCASTD AX, Z30     \
	MOVL         $0x40, AX   \
	VPBROADCASTD AX, Z29

// BF16ROUND rounds the 16 float32 of in to bfloat16 (to nearest, ties to
// even; a NaN stays a quiet NaN), leaving each in the low half of out's
// lanes; tmp is clobbered, and K2.
#define BF16ROUND(in, out, tmp) \
	VPSRLD  $16, in, tmp         \
	VPANDD  Z30, tmp, tmp        \
	VPADDD  Z31, in, out         \
	VPADDD  tmp, out, out        \
	VPSRLD  $16, out, out        \
	VCMPPS  $3, in, in, K2       \
	VPSRLD  $16, in, K2, out     \
	VPORD   Z29, out, K2, out

// func bf16Row(dst *uint16, src *float32, n int)
// dst[j] = bfloat16(src[j]) for j < n, n a positive multiple of 16.
TEXT ·bf16Row(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	BF16CONSTS

rowloop:
	VMOVUPS (SI), Z0
	BF16ROUND(Z0, Z2, Z1)
	VPMOVDW Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $32, DI
	SUBQ    $16, CX
	JNZ     rowloop
	VZEROUPPER
	RET

// func bf16Pairs(dst *uint32, lo, hi *float32, n int)
// dst[j] = bfloat16(lo[j]) | bfloat16(hi[j])<<16 for j < n, n a positive
// multiple of 16.
TEXT ·bf16Pairs(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ lo+8(FP), SI
	MOVQ hi+16(FP), DX
	MOVQ n+24(FP), CX
	BF16CONSTS

pairloop:
	VMOVUPS   (SI), Z0
	VMOVUPS   (DX), Z3
	BF16ROUND(Z0, Z2, Z1)
	BF16ROUND(Z3, Z4, Z1)
	VPSLLD    $16, Z4, Z4
	VPORD     Z2, Z4, Z4
	VMOVDQU32 Z4, (DI)
	ADDQ      $64, SI
	ADDQ      $64, DX
	ADDQ      $64, DI
	SUBQ      $16, CX
	JNZ       pairloop
	VZEROUPPER
	RET

// func bf16PairsScatter(dst *uint32, stride int, lo, hi *float32, n int)
// dst[j*stride] = bfloat16(lo[j]) | bfloat16(hi[j])<<16 for j < n, n a
// positive multiple of 16 and 16·stride·4 below 2^31.
TEXT ·bf16PairsScatter(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), BX
	MOVQ lo+16(FP), SI
	MOVQ hi+24(FP), DX
	MOVQ n+32(FP), CX
	BF16CONSTS
	VPBROADCASTD BX, Z6
	VPMULLD      bf16Iota<>(SB), Z6, Z6 // lane t: t·stride
	SHLQ         $6, BX                  // 16 lanes of stride dwords, in bytes

scatterloop:
	VMOVUPS     (SI), Z0
	VMOVUPS     (DX), Z3
	BF16ROUND(Z0, Z2, Z1)
	BF16ROUND(Z3, Z4, Z1)
	VPSLLD      $16, Z4, Z4
	VPORD       Z2, Z4, Z4
	KXNORW      K1, K1, K1
	VPSCATTERDD Z4, K1, (DI)(Z6*4)
	ADDQ        $64, SI
	ADDQ        $64, DX
	ADDQ        BX, DI
	SUBQ        $16, CX
	JNZ         scatterloop
	VZEROUPPER
	RET

// func bf16RowPairsScatter(dst *uint32, stride int, src *float32, n int)
// dst[t*stride] = bfloat16(src[2t]) | bfloat16(src[2t+1])<<16 for t < n/2,
// n a positive multiple of 32 and 16·stride·4 below 2^31.
TEXT ·bf16RowPairsScatter(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), BX
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	BF16CONSTS
	VPBROADCASTD BX, Z6
	VPMULLD      bf16Iota<>(SB), Z6, Z6
	SHLQ         $6, BX

rowpairloop:
	VMOVUPS      (SI), Z0
	VMOVUPS      64(SI), Z3
	BF16ROUND(Z0, Z2, Z1)
	BF16ROUND(Z3, Z4, Z1)
	VPMOVDW      Z2, Y7
	VPMOVDW      Z4, Y8
	VINSERTI64X4 $1, Y8, Z7, Z5 // 32 bfloat16 in order: 16 pairs
	KXNORW       K1, K1, K1
	VPSCATTERDD  Z5, K1, (DI)(Z6*4)
	ADDQ         $128, SI
	ADDQ         BX, DI
	SUBQ         $32, CX
	JNZ          rowpairloop
	VZEROUPPER
	RET

DATA bf16Iota<>+0(SB)/4, $0
DATA bf16Iota<>+4(SB)/4, $1
DATA bf16Iota<>+8(SB)/4, $2
DATA bf16Iota<>+12(SB)/4, $3
DATA bf16Iota<>+16(SB)/4, $4
DATA bf16Iota<>+20(SB)/4, $5
DATA bf16Iota<>+24(SB)/4, $6
DATA bf16Iota<>+28(SB)/4, $7
DATA bf16Iota<>+32(SB)/4, $8
DATA bf16Iota<>+36(SB)/4, $9
DATA bf16Iota<>+40(SB)/4, $10
DATA bf16Iota<>+44(SB)/4, $11
DATA bf16Iota<>+48(SB)/4, $12
DATA bf16Iota<>+52(SB)/4, $13
DATA bf16Iota<>+56(SB)/4, $14
DATA bf16Iota<>+60(SB)/4, $15
GLOBL bf16Iota<>(SB), RODATA|NOPTR, $64
