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
