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
// TILELOADD tmm0, [R8+R11]; tmm1, [SI+R11]; tmm2, [R12+R11]; tmm3, [R13+R11]
#define LOADC_T0 BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x04; BYTE $0x18
#define LOADC_T1 BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x0c; BYTE $0x1e
#define LOADC_T2 BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x14; BYTE $0x1c
#define LOADC_T3 BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x5c; BYTE $0x1d; BYTE $0x00
// TILESTORED [R8+R11], tmm0; [SI+R11], tmm1; [R12+R11], tmm2; [R13+R11], tmm3
#define STORE_T0 BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x18
#define STORE_T1 BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x0c; BYTE $0x1e
#define STORE_T2 BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x14; BYTE $0x1c
#define STORE_T3 BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x5c; BYTE $0x1d; BYTE $0x00

// C_TILES runs t0-t3 on the four 16×16 tiles of a 32×32 block of C at R8
// (row stride R11): t0 at R8, t1 at SI = R8+64, t2 at R12 = R8+16 rows,
// t3 at R13 = R12+64, the addresses the TILELOADD and TILESTORED bytes
// above name.
#define C_TILES(t0, t1, t2, t3) \
	t0; \
	LEAQ 64(R8), SI; \
	t1; \
	LEAQ (R8)(R11*8), R12; \
	LEAQ (R12)(R11*8), R12; \
	t2; \
	LEAQ 64(R12), R13; \
	t3

// func amxPanelBlock(cfg *byte, a *uint16, b *uint32, c *float32, nBlocks, kTiles, aHalf, bHalf, bNext, ldc, acc int)
//
// C[32 rows][32·nBlocks] = A[32][32·kTiles] · B on operands packed in the
// tiles' order (amx_layout.go), one 32×32 block of C at a time in tiles
// tmm0-3 (16×16 float32 each), k 32 at a time: tmm4 and tmm5 hold A's two
// 16-row panels' tiles (a, and aHalf bytes on), tmm6 and tmm7 B's two
// 16-column panels' tiles (b, and bHalf bytes on; bNext bytes on for the
// next 32 columns). Every tile is 1 KB of consecutive memory (rows of 64
// bytes) and the next k-tile is the next 1 KB. ldc is C's row stride in
// bytes. With acc ≠ 0 the product is added to C (its tiles loaded first),
// else it replaces C. The tile configuration is loaded and released here,
// so no tile state outlives the call.
TEXT ·amxPanelBlock(SB), NOSPLIT, $0-88
	MOVQ cfg+0(FP), AX
	LDTILECFG_AX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), R8
	MOVQ nBlocks+32(FP), DX
	MOVQ $64, R9 // the tiles' row stride, A's and B's
	MOVQ $64, R10
	MOVQ ldc+72(FP), R11

nloop:
	CMPQ acc+80(FP), $0
	JEQ  zero
	C_TILES(LOADC_T0, LOADC_T1, LOADC_T2, LOADC_T3)
	JMP  ready

zero:
	TILEZERO_T0
	TILEZERO_T1
	TILEZERO_T2
	TILEZERO_T3

ready:
	MOVQ AX, SI
	MOVQ AX, R12
	ADDQ aHalf+48(FP), R12 // A's second panel: rows 16-31
	MOVQ BX, DI
	MOVQ BX, R13
	ADDQ bHalf+56(FP), R13 // B's second panel: columns 16-31
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
	ADDQ $1024, SI
	ADDQ $1024, R12
	ADDQ $1024, DI
	ADDQ $1024, R13
	DECQ CX
	JNZ  kloop

	C_TILES(STORE_T0, STORE_T1, STORE_T2, STORE_T3)
	ADDQ bNext+64(FP), BX
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

// func bf16RoundRow(dst, src *float32, n int)
// dst[j] = RoundBF16(src[j]) for j < n, n a positive multiple of 16: the
// bfloat16 back in the top half of a float32.
TEXT ·bf16RoundRow(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	BF16CONSTS

roundloop:
	VMOVUPS (SI), Z0
	BF16ROUND(Z0, Z2, Z1)
	VPSLLD  $16, Z2, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JNZ     roundloop
	VZEROUPPER
	RET

// func bf16RowStrided(dst *uint16, src *float32, n, ldd int)
// dst[(j/32)·ldd + j%32] = bfloat16(src[j]) for j < n, n a positive
// multiple of 32: a row of A into its k-tiles (ldd in uint16s).
TEXT ·bf16RowStrided(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ ldd+24(FP), DX
	SHLQ $1, DX
	BF16CONSTS

srowloop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z3
	BF16ROUND(Z0, Z2, Z1)
	BF16ROUND(Z3, Z4, Z1)
	VPMOVDW Z2, (DI)
	VPMOVDW Z4, 32(DI)
	ADDQ    $128, SI
	ADDQ    DX, DI
	SUBQ    $32, CX
	JNZ     srowloop
	VZEROUPPER
	RET

// func bf16PairsStrided(dst *uint32, lo, hi *float32, n, ldd int)
// dst[(j/16)·ldd + j%16] = bfloat16(lo[j]) | bfloat16(hi[j])<<16 for
// j < n, n a positive multiple of 16: a row of B's pairs into its 16-column
// panels (ldd in uint32s), or with ldd 16 into consecutive pairs.
TEXT ·bf16PairsStrided(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ lo+8(FP), SI
	MOVQ hi+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ ldd+32(FP), R8
	SHLQ $2, R8
	BF16CONSTS

spairloop:
	VMOVUPS   (SI), Z0
	VMOVUPS   (DX), Z3
	BF16ROUND(Z0, Z2, Z1)
	BF16ROUND(Z3, Z4, Z1)
	VPSLLD    $16, Z4, Z4
	VPORD     Z2, Z4, Z4
	VMOVDQU32 Z4, (DI)
	ADDQ      $64, SI
	ADDQ      $64, DX
	ADDQ      R8, DI
	SUBQ      $16, CX
	JNZ       spairloop
	VZEROUPPER
	RET

// func dwordT16(dst *uint32, ldd int, src *uint32, lds int, n int)
// dst[j*ldd+r] = src[r*lds+j] for the 16 rows r of src and j < n, n a
// positive multiple of 16 (strides in uint32s): 16×16 blocks transposed in
// registers (32-bit, then 64-bit unpacks within 128-bit lanes, then two
// rounds of 128-bit lane shuffles), so every load and store is a whole
// 64-byte row.
TEXT ·dwordT16(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R12
	LEAQ (DI)(R8*4), R9
	LEAQ (R9)(R8*4), R10
	LEAQ (R10)(R8*4), R11
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), BX
	SHLQ $2, BX
	LEAQ (BX)(BX*2), R13
	LEAQ (SI)(BX*4), AX
	LEAQ (AX)(BX*4), DX
	LEAQ (DX)(BX*4), CX

tloop:
	VMOVDQU32 (SI), Z0
	VMOVDQU32 (SI)(BX*1), Z1
	VMOVDQU32 (SI)(BX*2), Z2
	VMOVDQU32 (SI)(R13*1), Z3
	VMOVDQU32 (AX), Z4
	VMOVDQU32 (AX)(BX*1), Z5
	VMOVDQU32 (AX)(BX*2), Z6
	VMOVDQU32 (AX)(R13*1), Z7
	VMOVDQU32 (DX), Z8
	VMOVDQU32 (DX)(BX*1), Z9
	VMOVDQU32 (DX)(BX*2), Z10
	VMOVDQU32 (DX)(R13*1), Z11
	VMOVDQU32 (CX), Z12
	VMOVDQU32 (CX)(BX*1), Z13
	VMOVDQU32 (CX)(BX*2), Z14
	VMOVDQU32 (CX)(R13*1), Z15
	VPUNPCKLDQ Z1, Z0, Z16
	VPUNPCKHDQ Z1, Z0, Z17
	VPUNPCKLDQ Z3, Z2, Z18
	VPUNPCKHDQ Z3, Z2, Z19
	VPUNPCKLDQ Z5, Z4, Z20
	VPUNPCKHDQ Z5, Z4, Z21
	VPUNPCKLDQ Z7, Z6, Z22
	VPUNPCKHDQ Z7, Z6, Z23
	VPUNPCKLDQ Z9, Z8, Z24
	VPUNPCKHDQ Z9, Z8, Z25
	VPUNPCKLDQ Z11, Z10, Z26
	VPUNPCKHDQ Z11, Z10, Z27
	VPUNPCKLDQ Z13, Z12, Z28
	VPUNPCKHDQ Z13, Z12, Z29
	VPUNPCKLDQ Z15, Z14, Z30
	VPUNPCKHDQ Z15, Z14, Z31
	VPUNPCKLQDQ Z18, Z16, Z0
	VPUNPCKHQDQ Z18, Z16, Z1
	VPUNPCKLQDQ Z19, Z17, Z2
	VPUNPCKHQDQ Z19, Z17, Z3
	VPUNPCKLQDQ Z22, Z20, Z4
	VPUNPCKHQDQ Z22, Z20, Z5
	VPUNPCKLQDQ Z23, Z21, Z6
	VPUNPCKHQDQ Z23, Z21, Z7
	VPUNPCKLQDQ Z26, Z24, Z8
	VPUNPCKHQDQ Z26, Z24, Z9
	VPUNPCKLQDQ Z27, Z25, Z10
	VPUNPCKHQDQ Z27, Z25, Z11
	VPUNPCKLQDQ Z30, Z28, Z12
	VPUNPCKHQDQ Z30, Z28, Z13
	VPUNPCKLQDQ Z31, Z29, Z14
	VPUNPCKHQDQ Z31, Z29, Z15
	VSHUFI32X4 $0x88, Z4, Z0, Z16
	VSHUFI32X4 $0xdd, Z4, Z0, Z17
	VSHUFI32X4 $0x88, Z12, Z8, Z18
	VSHUFI32X4 $0xdd, Z12, Z8, Z19
	VSHUFI32X4 $0x88, Z18, Z16, Z20
	VMOVDQU32 Z20, (DI)
	VSHUFI32X4 $0xdd, Z18, Z16, Z21
	VMOVDQU32 Z21, (R10)
	VSHUFI32X4 $0x88, Z19, Z17, Z22
	VMOVDQU32 Z22, (R9)
	VSHUFI32X4 $0xdd, Z19, Z17, Z23
	VMOVDQU32 Z23, (R11)
	VSHUFI32X4 $0x88, Z5, Z1, Z16
	VSHUFI32X4 $0xdd, Z5, Z1, Z17
	VSHUFI32X4 $0x88, Z13, Z9, Z18
	VSHUFI32X4 $0xdd, Z13, Z9, Z19
	VSHUFI32X4 $0x88, Z18, Z16, Z20
	VMOVDQU32 Z20, (DI)(R8*1)
	VSHUFI32X4 $0xdd, Z18, Z16, Z21
	VMOVDQU32 Z21, (R10)(R8*1)
	VSHUFI32X4 $0x88, Z19, Z17, Z22
	VMOVDQU32 Z22, (R9)(R8*1)
	VSHUFI32X4 $0xdd, Z19, Z17, Z23
	VMOVDQU32 Z23, (R11)(R8*1)
	VSHUFI32X4 $0x88, Z6, Z2, Z16
	VSHUFI32X4 $0xdd, Z6, Z2, Z17
	VSHUFI32X4 $0x88, Z14, Z10, Z18
	VSHUFI32X4 $0xdd, Z14, Z10, Z19
	VSHUFI32X4 $0x88, Z18, Z16, Z20
	VMOVDQU32 Z20, (DI)(R8*2)
	VSHUFI32X4 $0xdd, Z18, Z16, Z21
	VMOVDQU32 Z21, (R10)(R8*2)
	VSHUFI32X4 $0x88, Z19, Z17, Z22
	VMOVDQU32 Z22, (R9)(R8*2)
	VSHUFI32X4 $0xdd, Z19, Z17, Z23
	VMOVDQU32 Z23, (R11)(R8*2)
	VSHUFI32X4 $0x88, Z7, Z3, Z16
	VSHUFI32X4 $0xdd, Z7, Z3, Z17
	VSHUFI32X4 $0x88, Z15, Z11, Z18
	VSHUFI32X4 $0xdd, Z15, Z11, Z19
	VSHUFI32X4 $0x88, Z18, Z16, Z20
	VMOVDQU32 Z20, (DI)(R12*1)
	VSHUFI32X4 $0xdd, Z18, Z16, Z21
	VMOVDQU32 Z21, (R10)(R12*1)
	VSHUFI32X4 $0x88, Z19, Z17, Z22
	VMOVDQU32 Z22, (R9)(R12*1)
	VSHUFI32X4 $0xdd, Z19, Z17, Z23
	VMOVDQU32 Z23, (R11)(R12*1)
	ADDQ $64, SI
	ADDQ $64, AX
	ADDQ $64, DX
	ADDQ $64, CX
	LEAQ (DI)(R8*8), DI
	LEAQ (DI)(R8*8), DI
	LEAQ (R9)(R8*8), R9
	LEAQ (R9)(R8*8), R9
	LEAQ (R10)(R8*8), R10
	LEAQ (R10)(R8*8), R10
	LEAQ (R11)(R8*8), R11
	LEAQ (R11)(R8*8), R11
	SUBQ $16, n+32(FP)
	JNZ tloop
	VZEROUPPER
	RET
