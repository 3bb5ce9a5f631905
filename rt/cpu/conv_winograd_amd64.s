//go:build !purego

#include "textflag.h"

// The Winograd F(2×2,5×5) transforms (conv_winograd.go), vectorised across
// channels: 16 per zmm, 8 per ymm. Each computes what winoInputGo and
// winoOutputGo compute, operation for operation (multiplications by 5 are
// rounded before they are subtracted, as in Go), so the results are the
// same bits.

// BT applies Bᵀ to R0..R5 into R6..R11, with R12, R13 as temporaries and
// FOUR, FIVE holding 4 and 5 in every lane:
//   o0 = (4z0 + z4) − 5z2, o5 = (4z1 + z5) − 5z3,
//   s1 = z4 − 4z2, s2 = 4z1 − z3: o1 = s1 − s2, o2 = s1 + s2,
//   s3 = z4 − z2, s4 = (z1 − z3) + (z1 − z3): o3 = s3 − s4, o4 = s3 + s4.
#define BT(R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10, R11, R12, R13, FOUR, FIVE) \
	VMOVAPS R4, R6 \
	VFMADD231PS FOUR, R0, R6 \
	VMULPS FIVE, R2, R12 \
	VSUBPS R12, R6, R6 \
	VMOVAPS R5, R11 \
	VFMADD231PS FOUR, R1, R11 \
	VMULPS FIVE, R3, R12 \
	VSUBPS R12, R11, R11 \
	VMOVAPS R4, R12 \
	VFNMADD231PS FOUR, R2, R12 \
	VMULPS FOUR, R1, R13 \
	VSUBPS R3, R13, R13 \
	VSUBPS R13, R12, R7 \
	VADDPS R13, R12, R8 \
	VSUBPS R2, R4, R12 \
	VSUBPS R3, R1, R13 \
	VADDPS R13, R13, R13 \
	VSUBPS R13, R12, R9 \
	VADDPS R13, R12, R10

// LOAD6 and STORE6 move six vectors at P, P+S, P+2S, P+3S, P+4S, P+5S,
// with S3 = 3S and S5 = 5S.
#define LOAD6(P, S, S3, S5, R0, R1, R2, R3, R4, R5) \
	VMOVUPS (P), R0 \
	VMOVUPS (P)(S*1), R1 \
	VMOVUPS (P)(S*2), R2 \
	VMOVUPS (P)(S3*1), R3 \
	VMOVUPS (P)(S*4), R4 \
	VMOVUPS (P)(S5*1), R5

#define STORE6(P, S, S3, S5, R0, R1, R2, R3, R4, R5) \
	VMOVUPS R0, (P) \
	VMOVUPS R1, (P)(S*1) \
	VMOVUPS R2, (P)(S*2) \
	VMOVUPS R3, (P)(S3*1) \
	VMOVUPS R4, (P)(S*4) \
	VMOVUPS R5, (P)(S5*1)

// COL6 loads or stores the six vectors of one column of the transformed
// tile: ξ = j, j+6, …, j+30 from BX (at ξ = j), AX = BX + 18·ldXi and
// R12 = 3·ldXi bytes.
#define LOADCOL(R0, R1, R2, R3, R4, R5) \
	VMOVUPS (BX), R0 \
	VMOVUPS (BX)(R12*2), R1 \
	VMOVUPS (BX)(R12*4), R2 \
	VMOVUPS (AX), R3 \
	VMOVUPS (BX)(R12*8), R4 \
	VMOVUPS (AX)(R12*4), R5

#define STORECOL(R0, R1, R2, R3, R4, R5) \
	VMOVUPS R0, (BX) \
	VMOVUPS R1, (BX)(R12*2) \
	VMOVUPS R2, (BX)(R12*4) \
	VMOVUPS R3, (AX) \
	VMOVUPS R4, (BX)(R12*8) \
	VMOVUPS R5, (AX)(R12*4)

// COLBASE sets AX = BX + 18·ldXi.
#define COLBASE \
	LEAQ (BX)(R12*2), AX \
	LEAQ (AX)(R12*4), AX

// Registers of the input transforms: SI src, DI dst (both at the current
// channels), DX ldRow, R8 ldCol, R9 3·ldCol, R10 5·ldCol, R11 ldXi, R12
// 3·ldXi, R13 5·ldXi (bytes), CX vectors left.
#define INPUT_SETUP(LANEBYTES) \
	MOVQ src+0(FP), SI \
	MOVQ ldRow+8(FP), DX \
	MOVQ ldCol+16(FP), R8 \
	MOVQ dst+24(FP), DI \
	MOVQ ldXi+32(FP), R11 \
	MOVQ n+40(FP), CX \
	SHLQ $2, DX \
	SHLQ $2, R8 \
	SHLQ $2, R11 \
	LEAQ (R8)(R8*2), R9 \
	LEAQ (R8)(R8*4), R10 \
	LEAQ (R11)(R11*2), R12 \
	LEAQ (R11)(R11*4), R13

// INPUT_ROW transforms the row at AX into ξ = 6k..6k+5 at BX, then moves
// both on.
#define INPUT_ROW(R0, R1, R2, R3, R4, R5, R6, R7, R8_, R9_, R10_, R11_, T0, T1, FOUR, FIVE) \
	LOAD6(AX, R8, R9, R10, R0, R1, R2, R3, R4, R5) \
	BT(R0, R1, R2, R3, R4, R5, R6, R7, R8_, R9_, R10_, R11_, T0, T1, FOUR, FIVE) \
	STORE6(BX, R11, R12, R13, R6, R7, R8_, R9_, R10_, R11_) \
	ADDQ DX, AX \
	ADDQ R12, BX \
	ADDQ R12, BX

#define INPUT_COL(R0, R1, R2, R3, R4, R5, R6, R7, R8_, R9_, R10_, R11_, T0, T1, FOUR, FIVE) \
	COLBASE \
	LOADCOL(R0, R1, R2, R3, R4, R5) \
	BT(R0, R1, R2, R3, R4, R5, R6, R7, R8_, R9_, R10_, R11_, T0, T1, FOUR, FIVE) \
	STORECOL(R6, R7, R8_, R9_, R10_, R11_) \
	ADDQ R11, BX

// The output transforms. Registers: SI src, DI dst (at the current
// channels), R8 bias, R11 ldXi, R12 3·ldXi, DX ldRow, R9 ldCol (bytes),
// R10 relu, CX vectors left.
#define OUTPUT_SETUP \
	MOVQ src+0(FP), SI \
	MOVQ ldXi+8(FP), R11 \
	MOVQ dst+16(FP), DI \
	MOVQ ldRow+24(FP), DX \
	MOVQ ldCol+32(FP), R9 \
	MOVQ bias+40(FP), R8 \
	MOVQ relu+48(FP), R10 \
	MOVQ n+56(FP), CX \
	SHLQ $2, R11 \
	SHLQ $2, DX \
	SHLQ $2, R9 \
	LEAQ (R11)(R11*2), R12

// SUM0 is row 0 of Aᵀ over column BX: ((((m0 + m1) + m2) + m3) + m4).
#define SUM0(R) \
	COLBASE \
	VMOVUPS (BX), R \
	VADDPS (BX)(R12*2), R, R \
	VADDPS (BX)(R12*4), R, R \
	VADDPS (AX), R, R \
	VADDPS (BX)(R12*8), R, R \
	ADDQ R11, BX

// SUM1 is row 1: ((m1 − m2) + m5) + 2(m3 − m4), T a temporary, TWO 2s.
#define SUM1(R, T, TWO) \
	COLBASE \
	VMOVUPS (BX)(R12*2), R \
	VSUBPS (BX)(R12*4), R, R \
	VADDPS (AX)(R12*4), R, R \
	VMOVUPS (AX), T \
	VSUBPS (BX)(R12*8), T, T \
	VFMADD231PS TWO, T, R \
	ADDQ R11, BX

// FINISH turns the row sums R0..R5 into the outputs at P and P+ldCol:
// ((((r0 + r1) + r2) + r3) + r4) + bias and (((r1 − r2) + r5) + 2(r3 − r4))
// + bias, negative ones cleared when R10 is not zero. Y0, Y1 outputs, T a
// temporary, B the bias.
#define FINISH(R0, R1, R2, R3, R4, R5, Y0, Y1, T, B, TWO, ANDN, P, L) \
	VADDPS R1, R0, Y0 \
	VADDPS R2, Y0, Y0 \
	VADDPS R3, Y0, Y0 \
	VADDPS R4, Y0, Y0 \
	VADDPS B, Y0, Y0 \
	VSUBPS R2, R1, Y1 \
	VADDPS R5, Y1, Y1 \
	VSUBPS R4, R3, T \
	VFMADD231PS TWO, T, Y1 \
	VADDPS B, Y1, Y1 \
	TESTQ R10, R10 \
	JZ L \
	VPSRAD $31, Y0, T \
	ANDN Y0, T, Y0 \
	VPSRAD $31, Y1, T \
	ANDN Y1, T, Y1 \
L: \
	VMOVUPS Y0, (P) \
	VMOVUPS Y1, (P)(R9*1)

// E applies the unscaled filter transform of F(5×5,2×2) to the pair
// (Z0, Z1) in place into R0..R5: z0, z0 + z1, z0 − z1, (z0 + z1) + z1,
// (z0 − z1) − z1, z1 (R0 is Z0 and R5 is Z1).
#define E(R0, R1, R2, R3, R4, R5) \
	VADDPS R5, R0, R1 \
	VSUBPS R5, R0, R2 \
	VADDPS R5, R1, R3 \
	VSUBPS R5, R2, R4

// EROW stores E of the pair (W0, W1) at BX, BX + ldXi, … BX + 5·ldXi with
// T1, T2 as temporaries, and moves BX on by 6·ldXi.
#define EROW(W0, W1, T1, T2) \
	VMOVUPS W0, (BX) \
	VADDPS W1, W0, T1 \
	VMOVUPS T1, (BX)(R11*1) \
	VSUBPS W1, W0, T2 \
	VMOVUPS T2, (BX)(R11*2) \
	VADDPS W1, T1, T1 \
	VMOVUPS T1, (BX)(R12*1) \
	VSUBPS W1, T2, T2 \
	VMOVUPS T2, (BX)(R11*4) \
	VMOVUPS W1, (BX)(R13*1) \
	ADDQ R12, BX \
	ADDQ R12, BX

// Registers of the dy transforms: SI src, DI dst, DX ldRow, R8 ldCol, R11
// ldXi, R12 3·ldXi, R13 5·ldXi (bytes), CX vectors left.
#define DY_SETUP \
	MOVQ src+0(FP), SI \
	MOVQ ldRow+8(FP), DX \
	MOVQ ldCol+16(FP), R8 \
	MOVQ dst+24(FP), DI \
	MOVQ ldXi+32(FP), R11 \
	MOVQ n+40(FP), CX \
	SHLQ $2, DX \
	SHLQ $2, R8 \
	SHLQ $2, R11 \
	LEAQ (R11)(R11*2), R12 \
	LEAQ (R11)(R11*4), R13

// DY_TILE transforms the 2×2 tile at SI into 36 vectors at DI: columns
// first (E down each column), then E along each of the six rows.
#define DY_TILE(A0, A1, A2, A3, A4, A5, B0, B1, B2, B3, B4, B5, T1, T2) \
	VMOVUPS (SI), A0 \
	VMOVUPS (SI)(R8*1), B0 \
	LEAQ (SI)(DX*1), AX \
	VMOVUPS (AX), A5 \
	VMOVUPS (AX)(R8*1), B5 \
	E(A0, A1, A2, A3, A4, A5) \
	E(B0, B1, B2, B3, B4, B5) \
	MOVQ DI, BX \
	EROW(A0, B0, T1, T2) \
	EROW(A1, B1, T1, T2) \
	EROW(A2, B2, T1, T2) \
	EROW(A3, B3, T1, T2) \
	EROW(A4, B4, T1, T2) \
	EROW(A5, B5, T1, T2)

// func winoInputAVX512(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)
TEXT ·winoInputAVX512(SB), NOSPLIT, $0-48
	INPUT_SETUP(64)
	SHRQ $4, CX
	MOVL $0x40800000, AX
	VPBROADCASTD AX, Z28
	MOVL $0x40a00000, AX
	VPBROADCASTD AX, Z29

in512loop:
	MOVQ SI, AX
	MOVQ DI, BX
	INPUT_ROW(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_ROW(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_ROW(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_ROW(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_ROW(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_ROW(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	MOVQ DI, BX
	INPUT_COL(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_COL(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_COL(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_COL(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_COL(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	INPUT_COL(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z28, Z29)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ in512loop
	VZEROUPPER
	RET

// func winoInputAVX2(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)
TEXT ·winoInputAVX2(SB), NOSPLIT, $0-48
	INPUT_SETUP(32)
	SHRQ $3, CX
	MOVL $0x40800000, AX
	MOVQ AX, X14
	VBROADCASTSS X14, Y14
	MOVL $0x40a00000, AX
	MOVQ AX, X15
	VBROADCASTSS X15, Y15

in256loop:
	MOVQ SI, AX
	MOVQ DI, BX
	INPUT_ROW(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_ROW(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_ROW(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_ROW(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_ROW(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_ROW(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	MOVQ DI, BX
	INPUT_COL(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_COL(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_COL(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_COL(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_COL(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	INPUT_COL(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ in256loop
	VZEROUPPER
	RET

// func winoOutputAVX512(src *float32, ldXi int, dst *float32, ldRow, ldCol int, bias *float32, relu, n int)
TEXT ·winoOutputAVX512(SB), NOSPLIT, $0-64
	OUTPUT_SETUP
	SHRQ $4, CX
	MOVL $0x40000000, AX
	VPBROADCASTD AX, Z30

out512loop:
	VMOVUPS (R8), Z31
	MOVQ SI, BX
	SUM0(Z0)
	SUM0(Z1)
	SUM0(Z2)
	SUM0(Z3)
	SUM0(Z4)
	SUM0(Z5)
	FINISH(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z31, Z30, VPANDND, DI, out512row0)
	MOVQ SI, BX
	SUM1(Z0, Z8, Z30)
	SUM1(Z1, Z8, Z30)
	SUM1(Z2, Z8, Z30)
	SUM1(Z3, Z8, Z30)
	SUM1(Z4, Z8, Z30)
	SUM1(Z5, Z8, Z30)
	LEAQ (DI)(DX*1), AX
	FINISH(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z31, Z30, VPANDND, AX, out512row1)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, R8
	DECQ CX
	JNZ out512loop
	VZEROUPPER
	RET

// func winoOutputAVX2(src *float32, ldXi int, dst *float32, ldRow, ldCol int, bias *float32, relu, n int)
TEXT ·winoOutputAVX2(SB), NOSPLIT, $0-64
	OUTPUT_SETUP
	SHRQ $3, CX
	MOVL $0x40000000, AX
	MOVQ AX, X15
	VBROADCASTSS X15, Y15

out256loop:
	VMOVUPS (R8), Y14
	MOVQ SI, BX
	SUM0(Y0)
	SUM0(Y1)
	SUM0(Y2)
	SUM0(Y3)
	SUM0(Y4)
	SUM0(Y5)
	FINISH(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y14, Y15, VPANDN, DI, out256row0)
	MOVQ SI, BX
	SUM1(Y0, Y8, Y15)
	SUM1(Y1, Y8, Y15)
	SUM1(Y2, Y8, Y15)
	SUM1(Y3, Y8, Y15)
	SUM1(Y4, Y8, Y15)
	SUM1(Y5, Y8, Y15)
	LEAQ (DI)(DX*1), AX
	FINISH(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y14, Y15, VPANDN, AX, out256row1)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R8
	DECQ CX
	JNZ out256loop
	VZEROUPPER
	RET

// func winoDyAVX512(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)
TEXT ·winoDyAVX512(SB), NOSPLIT, $0-48
	DY_SETUP
	SHRQ $4, CX

dy512loop:
	DY_TILE(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ dy512loop
	VZEROUPPER
	RET

// func winoDyAVX2(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)
TEXT ·winoDyAVX2(SB), NOSPLIT, $0-48
	DY_SETUP
	SHRQ $3, CX

dy256loop:
	DY_TILE(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ dy256loop
	VZEROUPPER
	RET
