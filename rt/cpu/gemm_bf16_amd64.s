//go:build !purego

#include "textflag.h"

// The bfloat16 path of gemm_bf16.go: its VDPBF16PS register tile and the
// packers that round float32 panels to bfloat16 pairs.

// DPZ(d, v, m) is VDPBF16PS Zd, Zv, Zm for any d, v, m < 32 (lane i of Zd
// += Zv.bf16[2i+1]·Zm.bf16[2i+1], then += Zv.bf16[2i]·Zm.bf16[2i]), in
// bytes: Go's assembler has no AVX512-BF16. EVEX 62 P0 P1 P2 (map 0F38,
// prefix F3, W0, 512 bits), opcode 52, ModRM 11 d m. P0 holds the inverted
// bits 3 of d (R) and m (B), 4 of m (X) and 4 of d (R'); P1 the inverted
// low four bits of v; P2 the inverted bit 4 of v (V'). Checked against GNU
// as for d, v, m from both halves of the register file.
#define DPZ(d, v, m) \
	BYTE $0x62; \
	BYTE $(0x02 | ((1-(((d)>>3)&1))<<7) | ((1-(((m)>>4)&1))<<6) | ((1-(((m)>>3)&1))<<5) | ((1-(((d)>>4)&1))<<4)); \
	BYTE $(((15-((v)&15))<<3) | 6); \
	BYTE $(0x40 | ((1-(((v)>>4)&1))<<3)); \
	BYTE $0x52; \
	BYTE $(0xc0 | (((d)&7)<<3) | ((m)&7))

// The tile's rows of C: DX, DX+ldc, DX+2ldc, DX+3ldc (R9), R10 = DX+4ldc and
// its three; R8 is ldc in bytes.

// func gemmKernel8x48BF16(k int, a, b, c *float32, ldc int, alpha, beta float32)
// An 8×48 tile of C from k steps of packed pairs: a holds 8 pairs a step
// (one per row), b 48 (one per column), as uint32. The sums start from
// beta·C (zero, C unread, when beta is ±0) in Z0-Z23 (row r in Z3r-Z3r+2)
// and each step adds, per row, its broadcast pair dotted with B's three
// registers; alpha is ignored (gemmBF16 passes 1).
TEXT ·gemmKernel8x48BF16(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9
	LEAQ (DX)(R8*4), R10
	MOVL beta+44(FP), R11
	TESTL $0x7fffffff, R11
	JNZ  fromc
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	JMP  steps

fromc:
	VBROADCASTSS beta+44(FP), Z31
	VMULPS (DX), Z31, Z0
	VMULPS 64(DX), Z31, Z1
	VMULPS 128(DX), Z31, Z2
	VMULPS (DX)(R8*1), Z31, Z3
	VMULPS 64(DX)(R8*1), Z31, Z4
	VMULPS 128(DX)(R8*1), Z31, Z5
	VMULPS (DX)(R8*2), Z31, Z6
	VMULPS 64(DX)(R8*2), Z31, Z7
	VMULPS 128(DX)(R8*2), Z31, Z8
	VMULPS (DX)(R9*1), Z31, Z9
	VMULPS 64(DX)(R9*1), Z31, Z10
	VMULPS 128(DX)(R9*1), Z31, Z11
	VMULPS (R10), Z31, Z12
	VMULPS 64(R10), Z31, Z13
	VMULPS 128(R10), Z31, Z14
	VMULPS (R10)(R8*1), Z31, Z15
	VMULPS 64(R10)(R8*1), Z31, Z16
	VMULPS 128(R10)(R8*1), Z31, Z17
	VMULPS (R10)(R8*2), Z31, Z18
	VMULPS 64(R10)(R8*2), Z31, Z19
	VMULPS 128(R10)(R8*2), Z31, Z20
	VMULPS (R10)(R9*1), Z31, Z21
	VMULPS 64(R10)(R9*1), Z31, Z22
	VMULPS 128(R10)(R9*1), Z31, Z23

steps:
	TESTQ CX, CX
	JZ    store

loop:
	VMOVDQU32 (BX), Z24
	VMOVDQU32 64(BX), Z25
	VMOVDQU32 128(BX), Z26
	VPBROADCASTD 0(AX), Z27
	DPZ(0, 24, 27)
	DPZ(1, 25, 27)
	DPZ(2, 26, 27)
	VPBROADCASTD 4(AX), Z28
	DPZ(3, 24, 28)
	DPZ(4, 25, 28)
	DPZ(5, 26, 28)
	VPBROADCASTD 8(AX), Z29
	DPZ(6, 24, 29)
	DPZ(7, 25, 29)
	DPZ(8, 26, 29)
	VPBROADCASTD 12(AX), Z30
	DPZ(9, 24, 30)
	DPZ(10, 25, 30)
	DPZ(11, 26, 30)
	VPBROADCASTD 16(AX), Z27
	DPZ(12, 24, 27)
	DPZ(13, 25, 27)
	DPZ(14, 26, 27)
	VPBROADCASTD 20(AX), Z28
	DPZ(15, 24, 28)
	DPZ(16, 25, 28)
	DPZ(17, 26, 28)
	VPBROADCASTD 24(AX), Z29
	DPZ(18, 24, 29)
	DPZ(19, 25, 29)
	DPZ(20, 26, 29)
	VPBROADCASTD 28(AX), Z30
	DPZ(21, 24, 30)
	DPZ(22, 25, 30)
	DPZ(23, 26, 30)
	ADDQ $32, AX
	ADDQ $192, BX
	DECQ CX
	JNZ  loop

store:
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, (DX)(R8*1)
	VMOVUPS Z4, 64(DX)(R8*1)
	VMOVUPS Z5, 128(DX)(R8*1)
	VMOVUPS Z6, (DX)(R8*2)
	VMOVUPS Z7, 64(DX)(R8*2)
	VMOVUPS Z8, 128(DX)(R8*2)
	VMOVUPS Z9, (DX)(R9*1)
	VMOVUPS Z10, 64(DX)(R9*1)
	VMOVUPS Z11, 128(DX)(R9*1)
	VMOVUPS Z12, (R10)
	VMOVUPS Z13, 64(R10)
	VMOVUPS Z14, 128(R10)
	VMOVUPS Z15, (R10)(R8*1)
	VMOVUPS Z16, 64(R10)(R8*1)
	VMOVUPS Z17, 128(R10)(R8*1)
	VMOVUPS Z18, (R10)(R8*2)
	VMOVUPS Z19, 64(R10)(R8*2)
	VMOVUPS Z20, 128(R10)(R8*2)
	VMOVUPS Z21, (R10)(R9*1)
	VMOVUPS Z22, 64(R10)(R9*1)
	VMOVUPS Z23, 128(R10)(R9*1)
	VZEROUPPER
	RET

// The conversion of amx_amd64.s's packers: Z31 holds 0x7fff in every
// lane, Z30 1, Z29 0x40.
#define BF16CONSTS \
	MOVL         $0x7fff, AX \
	VPBROADCASTD AX, Z31     \
	MOVL         $1, AX      \
	VPBROADCASTD AX, Z30     \
	MOVL         $0x40, AX   \
	VPBROADCASTD AX, Z29

// BF16ROUND rounds the 16 float32 of in to bfloat16 as bf16Bits does (to
// nearest, ties to even; a NaN stays a quiet NaN), leaving each in the low
// half of out's lanes; tmp is clobbered, and K2.
#define BF16ROUND(in, out, tmp) \
	VPSRLD  $16, in, tmp         \
	VPANDD  Z30, tmp, tmp        \
	VPADDD  Z31, in, out         \
	VPADDD  tmp, out, out        \
	VPSRLD  $16, out, out        \
	VCMPPS  $3, in, in, K2       \
	VPSRLD  $16, in, K2, out     \
	VPORD   Z29, out, K2, out

// PAIR16(off, k) pairs the 16 floats at off(SI) (the even row) with those
// at off(SI)(R9*1) (the odd row) under mask k and stores them at off(DI).
#define PAIR16(off, k) \
	VMOVUPS.Z   off(SI), k, Z0        \
	VMOVUPS.Z   off(SI)(R9*1), k, Z3  \
	BF16ROUND(Z0, Z2, Z1)             \
	BF16ROUND(Z3, Z4, Z1)             \
	VPSLLD      $16, Z4, Z4           \
	VPORD       Z2, Z4, Z4            \
	VMOVDQU32   Z4, k, off(DI)

// func bf16PairRows(dst *uint32, ldd int, src *float32, lds int, mask uint64, steps int)
// dst[s·ldd+j] = bf16(src[2s·lds+j]) | bf16(src[(2s+1)·lds+j])<<16 for the
// lanes j set in mask (its low 48 bits: K1, K3, K4 for lanes 0-15, 16-31,
// 32-47) and s < steps, steps > 0 (pairRowsGo). Masked loads do not fault,
// so lanes past the mask are never read.
TEXT ·bf16PairRows(SB), NOSPLIT, $0-48
	MOVQ  dst+0(FP), DI
	MOVQ  ldd+8(FP), R8
	SHLQ  $2, R8
	MOVQ  src+16(FP), SI
	MOVQ  lds+24(FP), R9
	SHLQ  $2, R9
	MOVQ  steps+40(FP), CX
	MOVQ  mask+32(FP), AX
	KMOVW AX, K1
	SHRQ  $16, AX
	KMOVW AX, K3
	MOVQ  AX, DX
	SHRQ  $16, AX
	KMOVW AX, K4
	BF16CONSTS
	TESTQ DX, DX
	JNZ   wide

narrow:
	PAIR16(0, K1)
	LEAQ (SI)(R9*2), SI
	ADDQ R8, DI
	DECQ CX
	JNZ  narrow
	VZEROUPPER
	RET

wide:
	PAIR16(0, K1)
	PAIR16(64, K3)
	PAIR16(128, K4)
	LEAQ (SI)(R9*2), SI
	ADDQ R8, DI
	DECQ CX
	JNZ  wide
	VZEROUPPER
	RET

// func bf16PairPanels8(dst *uint32, panel int, src *float32, lds int, steps int)
// bf16PairRows for 16 lanes split into two panels of 8 (pairPanels8Go):
// step s's pairs of lanes 0-7 at dst[8s:], of lanes 8-15 at
// dst[panel+8s:], steps > 0.
TEXT ·bf16PairPanels8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ panel+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	SHLQ $2, R9
	MOVQ steps+32(FP), CX
	BF16CONSTS

panelloop:
	VMOVUPS        (SI), Z0
	VMOVUPS        (SI)(R9*1), Z3
	BF16ROUND(Z0, Z2, Z1)
	BF16ROUND(Z3, Z4, Z1)
	VPSLLD         $16, Z4, Z4
	VPORD          Z2, Z4, Z4
	VMOVDQU        Y4, (DI)
	VEXTRACTI64X4  $1, Z4, Y5
	VMOVDQU        Y5, (DI)(R8*1)
	LEAQ           (SI)(R9*2), SI
	ADDQ           $32, DI
	DECQ           CX
	JNZ            panelloop
	VZEROUPPER
	RET

// func bf16PairColumns8(dst *uint32, ldd int, src *float32, lds int, steps int)
// dst[s·ldd+j] = bf16(src[j·lds+2s]) | bf16(src[j·lds+2s+1])<<16 for the
// 8 rows j < 8 and s < steps, a positive multiple of 8 (pairColumnsGo):
// each row's next 16 floats rounded and narrowed (VPMOVDW) to 8 pairs in
// Y0-Y7, then transposed as transpose8x8AVX does and stored as 8 steps.
TEXT ·bf16PairColumns8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	SHLQ $2, R9
	MOVQ steps+32(FP), CX
	LEAQ (R9)(R9*2), R10
	LEAQ (SI)(R9*4), R11
	LEAQ (R8)(R8*2), R12
	LEAQ (DI)(R8*4), R13
	BF16CONSTS

cloop:
	VMOVUPS (SI), Z16
	BF16ROUND(Z16, Z17, Z18)
	VPMOVDW Z17, Y0
	VMOVUPS (SI)(R9*1), Z16
	BF16ROUND(Z16, Z17, Z18)
	VPMOVDW Z17, Y1
	VMOVUPS (SI)(R9*2), Z16
	BF16ROUND(Z16, Z17, Z18)
	VPMOVDW Z17, Y2
	VMOVUPS (SI)(R10*1), Z16
	BF16ROUND(Z16, Z17, Z18)
	VPMOVDW Z17, Y3
	VMOVUPS (R11), Z16
	BF16ROUND(Z16, Z17, Z18)
	VPMOVDW Z17, Y4
	VMOVUPS (R11)(R9*1), Z16
	BF16ROUND(Z16, Z17, Z18)
	VPMOVDW Z17, Y5
	VMOVUPS (R11)(R9*2), Z16
	BF16ROUND(Z16, Z17, Z18)
	VPMOVDW Z17, Y6
	VMOVUPS (R11)(R10*1), Z16
	BF16ROUND(Z16, Z17, Z18)
	VPMOVDW Z17, Y7
	VUNPCKLPS  Y1, Y0, Y8
	VUNPCKHPS  Y1, Y0, Y9
	VUNPCKLPS  Y3, Y2, Y10
	VUNPCKHPS  Y3, Y2, Y11
	VSHUFPS    $0x44, Y10, Y8, Y0
	VSHUFPS    $0xee, Y10, Y8, Y1
	VSHUFPS    $0x44, Y11, Y9, Y2
	VSHUFPS    $0xee, Y11, Y9, Y3
	VUNPCKLPS  Y5, Y4, Y12
	VUNPCKHPS  Y5, Y4, Y13
	VUNPCKLPS  Y7, Y6, Y14
	VUNPCKHPS  Y7, Y6, Y15
	VSHUFPS    $0x44, Y14, Y12, Y4
	VSHUFPS    $0xee, Y14, Y12, Y5
	VSHUFPS    $0x44, Y15, Y13, Y6
	VSHUFPS    $0xee, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y12
	VMOVDQU    Y12, (DI)
	VPERM2F128 $0x20, Y5, Y1, Y12
	VMOVDQU    Y12, (DI)(R8*1)
	VPERM2F128 $0x20, Y6, Y2, Y12
	VMOVDQU    Y12, (DI)(R8*2)
	VPERM2F128 $0x20, Y7, Y3, Y12
	VMOVDQU    Y12, (DI)(R12*1)
	VPERM2F128 $0x31, Y4, Y0, Y12
	VMOVDQU    Y12, (R13)
	VPERM2F128 $0x31, Y5, Y1, Y12
	VMOVDQU    Y12, (R13)(R8*1)
	VPERM2F128 $0x31, Y6, Y2, Y12
	VMOVDQU    Y12, (R13)(R8*2)
	VPERM2F128 $0x31, Y7, Y3, Y12
	VMOVDQU    Y12, (R13)(R12*1)
	ADDQ $64, SI
	ADDQ $64, R11
	LEAQ (DI)(R8*8), DI
	LEAQ (R13)(R8*8), R13
	SUBQ $8, CX
	JNZ  cloop
	VZEROUPPER
	RET
