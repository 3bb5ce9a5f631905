//go:build !purego

#include "textflag.h"

// The transform kernels of Winograd F(4×4,5×5) (conv_winograd4.go),
// vectorised across channels: 16 per zmm, 8 per ymm: Bᵀ (BT8, whole
// tiles: BTTILE), E, G2 without its row scales (E8, whole tiles: ETILE),
// and Aᵀ (AT8, a pass), each with its constants repeated across the lanes
// so that they are memory operands.
//
// Registers: SI src and DI dst at the current channels, AX the line's
// source, DX the line's destination, BX a walker, CX ldJ and R10 ldR
// (bytes), R8 the constants, R9 the whole-tile kernels' scratch, R11
// lines left, R12 channel vectors left, R13 bias (0 when none).
#define PASS_SETUP(LOG) \
	MOVQ src+16(FP), SI \
	MOVQ ldJ+24(FP), CX \
	SHLQ $2, CX \
	MOVQ dst+40(FP), DI \
	MOVQ ldR+48(FP), R10 \
	SHLQ $2, R10 \
	MOVQ bias+72(FP), R13 \
	MOVQ n+88(FP), R12 \
	SHRQ $LOG, R12

// LINE_START points AX, DX at the first line and loads the line count.
#define LINE_START \
	MOVQ SI, AX \
	MOVQ DI, DX \
	MOVQ lines+64(FP), R11

// LOAD8 and LOAD4 read the line's inputs at AX, AX + ldJ, ….
#define LOAD4(R0, R1, R2, R3) \
	MOVQ AX, BX \
	VMOVUPS (BX), R0 \
	ADDQ CX, BX \
	VMOVUPS (BX), R1 \
	ADDQ CX, BX \
	VMOVUPS (BX), R2 \
	ADDQ CX, BX \
	VMOVUPS (BX), R3

#define LOAD8(R0, R1, R2, R3, R4, R5, R6, R7) \
	LOAD4(R0, R1, R2, R3) \
	ADDQ CX, BX \
	VMOVUPS (BX), R4 \
	ADDQ CX, BX \
	VMOVUPS (BX), R5 \
	ADDQ CX, BX \
	VMOVUPS (BX), R6 \
	ADDQ CX, BX \
	VMOVUPS (BX), R7

// FINISH adds the bias (when R13 is not 0), clears negative lanes (when
// relu is not 0) and stores ACC at BX, moving BX on by ldR; T a temporary.
#define FINISH(ACC, T, ANDN, L1, L2) \
	TESTQ R13, R13 \
	JZ L1 \
	VADDPS (R13), ACC, ACC \
L1: \
	CMPQ relu+80(FP), $0 \
	JEQ L2 \
	VPSRAD $31, ACC, T \
	ANDN ACC, T, ACC \
L2: \
	VMOVUPS ACC, (BX) \
	ADDQ R10, BX

// LINE_END moves AX and DX to the next line and loops to L.
#define LINE_END(L) \
	MOVQ ldLine+32(FP), BX \
	SHLQ $2, BX \
	ADDQ BX, AX \
	MOVQ ldLineOut+56(FP), BX \
	SHLQ $2, BX \
	ADDQ BX, DX \
	DECQ R11 \
	JNZ L

// GROUP_END moves to the next vector of channels and loops to L.
#define GROUP_END(VB, L, L1) \
	ADDQ $VB, SI \
	ADDQ $VB, DI \
	TESTQ R13, R13 \
	JZ L1 \
	ADDQ $VB, R13 \
L1: \
	DECQ R12 \
	JNZ L

// BT8 applies F(4×4,5×5)'s Bᵀ to the line's inputs Z0..Z7 and stores the
// eight results at BX, BX + ldR, …, with A, B, T as temporaries and the
// constants at R8 (VB bytes each, repeated across the lanes): 21/4, 17/4,
// 1/4, 5/4, 1/2, 5/2, 2, 4, 5. The rows pair up around the points ±p:
//   o0 = (z6 − z0) + 21/4·(z2 − z4),  o7 = (z7 − z1) + 21/4·(z3 − z5),
//   a = (z2 + z6) − 17/4·z4,  b = (z1 + z5) − 17/4·z3:  o1, o2 = a ± b,
//   a = z6 + 1/4·z2 − 5/4·z4,  b = 1/2·z1 − 5/2·z3 + 2·z5:  o3, o4 = a ± b,
//   a = z6 + 4·z2 − 5·z4,  b = 2·z1 − 5/2·z3 + 1/2·z5:  o5, o6 = a ± b.
#define BT8(VB, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, A, B, T) \
	VSUBPS Z0, Z6, A \
	VSUBPS Z4, Z2, T \
	VFMADD231PS (0*VB)(R8), T, A \
	VMOVUPS A, (BX) \
	ADDQ R10, BX \
	VADDPS Z6, Z2, A \
	VFNMADD231PS (1*VB)(R8), Z4, A \
	VADDPS Z5, Z1, B \
	VFNMADD231PS (1*VB)(R8), Z3, B \
	VADDPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VSUBPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VMOVAPS Z6, A \
	VFMADD231PS (2*VB)(R8), Z2, A \
	VFNMADD231PS (3*VB)(R8), Z4, A \
	VMULPS (4*VB)(R8), Z1, B \
	VFNMADD231PS (5*VB)(R8), Z3, B \
	VFMADD231PS (6*VB)(R8), Z5, B \
	VADDPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VSUBPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VMOVAPS Z6, A \
	VFMADD231PS (7*VB)(R8), Z2, A \
	VFNMADD231PS (8*VB)(R8), Z4, A \
	VMULPS (6*VB)(R8), Z1, B \
	VFNMADD231PS (5*VB)(R8), Z3, B \
	VFMADD231PS (4*VB)(R8), Z5, B \
	VADDPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VSUBPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VSUBPS Z1, Z7, A \
	VSUBPS Z5, Z3, T \
	VFMADD231PS (0*VB)(R8), T, A \
	VMOVUPS A, (BX)

// E8 applies E (G2 of F(5×5,4×4) without its row scales: the points 0,
// ±1, ±2, ±1/2 to the powers 0 to 3, ∞ the last power only) to the line's
// inputs Z0..Z3 and stores the eight results at BX, BX + ldR, …, with A,
// B, T as temporaries and the constants at R8 (VB bytes each, repeated
// across the lanes): 4, 2, 8, 1/4, 1/2, 1/8. The rows pair up around ±p:
//   o0 = z0,  o7 = z3,
//   a = z0 + z2,  b = z1 + z3:  o1, o2 = a ± b,
//   a = z0 + 4·z2,  b = 2·z1 + 8·z3:  o3, o4 = a ± b,
//   a = z0 + 1/4·z2,  b = 1/2·z1 + 1/8·z3:  o5, o6 = a ± b.
// The products are exact, so the results are winoE8's bits.
#define E8(VB, Z0, Z1, Z2, Z3, A, B, T) \
	VMOVUPS Z0, (BX) \
	ADDQ R10, BX \
	VADDPS Z2, Z0, A \
	VADDPS Z3, Z1, B \
	VADDPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VSUBPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VMOVAPS Z0, A \
	VFMADD231PS (0*VB)(R8), Z2, A \
	VMULPS (1*VB)(R8), Z1, B \
	VFMADD231PS (2*VB)(R8), Z3, B \
	VADDPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VSUBPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VMOVAPS Z0, A \
	VFMADD231PS (3*VB)(R8), Z2, A \
	VMULPS (4*VB)(R8), Z1, B \
	VFMADD231PS (5*VB)(R8), Z3, B \
	VADDPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VSUBPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VMOVUPS Z3, (BX)

// AT8 applies F(4×4,5×5)'s Aᵀ to the line's inputs Z0..Z7 and finishes
// (FINISH: bias, ReLU) and stores the four results at BX, BX + ldR, …,
// with S1, D1, S2, D2, S3, D3, ACC, T as temporaries, B0..R3 the labels of
// the four FINISHes, and the constants at
// R8 (VB bytes each, repeated across the lanes): 2, 1/2, 4, 1/4, 8, 1/8.
// With s_k, d_k the sum and difference of the inputs at ±p (p = 1, 2, 1/2):
//   y0 = ((z0 + s1) + s2) + s3,  y1 = d1 + 2·d2 + 1/2·d3,
//   y2 = s1 + 4·s2 + 1/4·s3,  y3 = (d1 + z7) + 8·d2 + 1/8·d3.
#define AT8(VB, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, S1, D1, S2, D2, S3, D3, ACC, T, ANDN, B0, R0, B1, R1, B2, R2, B3, R3) \
	VADDPS Z2, Z1, S1 \
	VSUBPS Z2, Z1, D1 \
	VADDPS Z4, Z3, S2 \
	VSUBPS Z4, Z3, D2 \
	VADDPS Z6, Z5, S3 \
	VSUBPS Z6, Z5, D3 \
	VADDPS S1, Z0, ACC \
	VADDPS S2, ACC, ACC \
	VADDPS S3, ACC, ACC \
	FINISH(ACC, T, ANDN, B0, R0) \
	VMOVAPS D1, ACC \
	VFMADD231PS (0*VB)(R8), D2, ACC \
	VFMADD231PS (1*VB)(R8), D3, ACC \
	FINISH(ACC, T, ANDN, B1, R1) \
	VMOVAPS S1, ACC \
	VFMADD231PS (2*VB)(R8), S2, ACC \
	VFMADD231PS (3*VB)(R8), S3, ACC \
	FINISH(ACC, T, ANDN, B2, R2) \
	VADDPS Z7, D1, ACC \
	VFMADD231PS (4*VB)(R8), D2, ACC \
	VFMADD231PS (5*VB)(R8), D3, ACC \
	FINISH(ACC, T, ANDN, B3, R3)

// LOAD6 reads the line's six inputs at AX, AX + ldJ, ….
#define LOAD6(R0, R1, R2, R3, R4, R5) \
	LOAD4(R0, R1, R2, R3) \
	ADDQ CX, BX \
	VMOVUPS (BX), R4 \
	ADDQ CX, BX \
	VMOVUPS (BX), R5

// AT6 applies F(4×4,3×3)'s Aᵀ (conv_winograd3.go) to the line's inputs
// Z0..Z5, the points 0, ±1, ±2 and ∞: AT8 without the points ±1/2, with
// the constants 2, 4, 8 at R8. With s_k, d_k the sum and difference of
// the inputs at ±k:
//   y0 = (z0 + s1) + s2,  y1 = d1 + 2·d2,  y2 = s1 + 4·s2,  y3 = (d1 + z5) + 8·d2.
#define AT6(VB, Z0, Z1, Z2, Z3, Z4, Z5, S1, D1, S2, D2, ACC, T, ANDN, B0, R0, B1, R1, B2, R2, B3, R3) \
	VADDPS Z2, Z1, S1 \
	VSUBPS Z2, Z1, D1 \
	VADDPS Z4, Z3, S2 \
	VSUBPS Z4, Z3, D2 \
	VADDPS S1, Z0, ACC \
	VADDPS S2, ACC, ACC \
	FINISH(ACC, T, ANDN, B0, R0) \
	VMOVAPS D1, ACC \
	VFMADD231PS (0*VB)(R8), D2, ACC \
	FINISH(ACC, T, ANDN, B1, R1) \
	VMOVAPS S1, ACC \
	VFMADD231PS (1*VB)(R8), S2, ACC \
	FINISH(ACC, T, ANDN, B2, R2) \
	VADDPS Z5, D1, ACC \
	VFMADD231PS (2*VB)(R8), D2, ACC \
	FINISH(ACC, T, ANDN, B3, R3)

// E6 applies F(3×3,4×4)'s E (conv_winograd3.go) to the line's inputs
// Z0..Z3 and stores the six results at BX, BX + R10, …: E8 without the
// points ±1/2, with the constants 4, 2, 8 at R8 (winoF4EConsts' first
// three). The products are exact, so the results are winoE6's bits.
#define E6(VB, Z0, Z1, Z2, Z3, A, B, T) \
	VMOVUPS Z0, (BX) \
	ADDQ R10, BX \
	VADDPS Z2, Z0, A \
	VADDPS Z3, Z1, B \
	VADDPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VSUBPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VMOVAPS Z0, A \
	VFMADD231PS (0*VB)(R8), Z2, A \
	VMULPS (1*VB)(R8), Z1, B \
	VFMADD231PS (2*VB)(R8), Z3, B \
	VADDPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VSUBPS B, A, T \
	VMOVUPS T, (BX) \
	ADDQ R10, BX \
	VMOVUPS Z3, (BX)

// E6TILE is ETILE for F(3×3,4×4): D = E g Eᵀ of a 4×4 block g of dy for
// each vector of channels in turn, the row pass into the scratch (24
// vectors: t[a][j] at scratch + (6a + j)·VB), then the column pass from
// the scratch into D (ξ = 6i + j at dst + ξ·ldXi).
#define E6TILE(VB, LOG, Z0, Z1, Z2, Z3, A, B, T, LGROUP, LROW, LCOL, LDONE) \
	MOVQ consts+0(FP), R8 \
	MOVQ src+8(FP), SI \
	MOVQ dst+32(FP), DI \
	MOVQ scratch+56(FP), R9 \
	MOVQ n+48(FP), R12 \
	SHRQ $LOG, R12 \
	JZ LDONE \
LGROUP: \
	MOVQ ldCol+24(FP), CX \
	SHLQ $2, CX \
	MOVQ $VB, R10 \
	MOVQ SI, AX \
	MOVQ R9, DX \
	MOVQ $4, R11 \
LROW: \
	LOAD4(Z0, Z1, Z2, Z3) \
	MOVQ DX, BX \
	E6(VB, Z0, Z1, Z2, Z3, A, B, T) \
	MOVQ ldRow+16(FP), BX \
	SHLQ $2, BX \
	ADDQ BX, AX \
	ADDQ $(6*VB), DX \
	DECQ R11 \
	JNZ LROW \
	MOVQ $(6*VB), CX \
	MOVQ ldXi+40(FP), R10 \
	LEAQ (R10)(R10*2), R10 \
	SHLQ $3, R10 \
	MOVQ R9, AX \
	MOVQ DI, DX \
	MOVQ $6, R11 \
LCOL: \
	LOAD4(Z0, Z1, Z2, Z3) \
	MOVQ DX, BX \
	E6(VB, Z0, Z1, Z2, Z3, A, B, T) \
	ADDQ $VB, AX \
	MOVQ ldXi+40(FP), BX \
	SHLQ $2, BX \
	ADDQ BX, DX \
	DECQ R11 \
	JNZ LCOL \
	ADDQ $VB, SI \
	ADDQ $VB, DI \
	DECQ R12 \
	JNZ LGROUP \
LDONE: \
	VZEROUPPER \
	RET

// BTTILE is the whole input transform of one tile, Bᵀ d B, for each vector
// of channels in turn: the row pass into the scratch (64 vectors, in L1:
// t[i][r] at scratch + (8i + r)·VB), then the column pass from the scratch
// into V (ξ = 8r + s at dst + ξ·ldXi), so that V is written once. Registers
// as the passes', R9 the scratch.
#define BTTILE(VB, LOG, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, A, B, T, LGROUP, LROW, LCOL, LDONE) \
	MOVQ consts+0(FP), R8 \
	MOVQ src+8(FP), SI \
	MOVQ dst+32(FP), DI \
	MOVQ scratch+56(FP), R9 \
	MOVQ n+48(FP), R12 \
	SHRQ $LOG, R12 \
	JZ LDONE \
LGROUP: \
	MOVQ ldCol+24(FP), CX \
	SHLQ $2, CX \
	MOVQ $VB, R10 \
	MOVQ SI, AX \
	MOVQ R9, DX \
	MOVQ $8, R11 \
LROW: \
	LOAD8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7) \
	MOVQ DX, BX \
	BT8(VB, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, A, B, T) \
	MOVQ ldRow+16(FP), BX \
	SHLQ $2, BX \
	ADDQ BX, AX \
	ADDQ $(8*VB), DX \
	DECQ R11 \
	JNZ LROW \
	MOVQ $(8*VB), CX \
	MOVQ ldXi+40(FP), R10 \
	SHLQ $5, R10 \
	MOVQ R9, AX \
	MOVQ DI, DX \
	MOVQ $8, R11 \
LCOL: \
	LOAD8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7) \
	MOVQ DX, BX \
	BT8(VB, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, A, B, T) \
	ADDQ $VB, AX \
	MOVQ ldXi+40(FP), BX \
	SHLQ $2, BX \
	ADDQ BX, DX \
	DECQ R11 \
	JNZ LCOL \
	ADDQ $VB, SI \
	ADDQ $VB, DI \
	DECQ R12 \
	JNZ LGROUP \
LDONE: \
	VZEROUPPER \
	RET

// ETILE is the whole dy transform of one 4×4 block, E g Eᵀ, for each
// vector of channels in turn: the row pass into the scratch (32 vectors:
// t[a][s] at scratch + (8a + s)·VB), then the column pass from the
// scratch into D (ξ = 8r + s at dst + ξ·ldXi), as BTTILE.
#define ETILE(VB, LOG, Z0, Z1, Z2, Z3, A, B, T, LGROUP, LROW, LCOL, LDONE) \
	MOVQ consts+0(FP), R8 \
	MOVQ src+8(FP), SI \
	MOVQ dst+32(FP), DI \
	MOVQ scratch+56(FP), R9 \
	MOVQ n+48(FP), R12 \
	SHRQ $LOG, R12 \
	JZ LDONE \
LGROUP: \
	MOVQ ldCol+24(FP), CX \
	SHLQ $2, CX \
	MOVQ $VB, R10 \
	MOVQ SI, AX \
	MOVQ R9, DX \
	MOVQ $4, R11 \
LROW: \
	LOAD4(Z0, Z1, Z2, Z3) \
	MOVQ DX, BX \
	E8(VB, Z0, Z1, Z2, Z3, A, B, T) \
	MOVQ ldRow+16(FP), BX \
	SHLQ $2, BX \
	ADDQ BX, AX \
	ADDQ $(8*VB), DX \
	DECQ R11 \
	JNZ LROW \
	MOVQ $(8*VB), CX \
	MOVQ ldXi+40(FP), R10 \
	SHLQ $5, R10 \
	MOVQ R9, AX \
	MOVQ DI, DX \
	MOVQ $8, R11 \
LCOL: \
	LOAD4(Z0, Z1, Z2, Z3) \
	MOVQ DX, BX \
	E8(VB, Z0, Z1, Z2, Z3, A, B, T) \
	ADDQ $VB, AX \
	MOVQ ldXi+40(FP), BX \
	SHLQ $2, BX \
	ADDQ BX, DX \
	DECQ R11 \
	JNZ LCOL \
	ADDQ $VB, SI \
	ADDQ $VB, DI \
	DECQ R12 \
	JNZ LGROUP \
LDONE: \
	VZEROUPPER \
	RET

// func winoAT8AVX512(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)
// is winoPass with Aᵀ as the matrix (mat holds the constants, rows is 4
// and unread), computed as AT8 says.
TEXT ·winoAT8AVX512(SB), NOSPLIT, $0-96
	PASS_SETUP(4)
	JZ at8zdone

at8zgroup:
	LINE_START

at8zline:
	LOAD8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	MOVQ mat+0(FP), R8
	MOVQ DX, BX
	AT8(64, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z10, Z11, Z12, Z13, Z14, Z15, Z8, Z9, VPANDND, at8zb0, at8zr0, at8zb1, at8zr1, at8zb2, at8zr2, at8zb3, at8zr3)
	LINE_END(at8zline)
	GROUP_END(64, at8zgroup, at8zg)

at8zdone:
	VZEROUPPER
	RET

// func winoAT8AVX2(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)
TEXT ·winoAT8AVX2(SB), NOSPLIT, $0-96
	PASS_SETUP(3)
	JZ at8ydone

at8ygroup:
	LINE_START

at8yline:
	LOAD8(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	MOVQ mat+0(FP), R8
	MOVQ DX, BX
	AT8(32, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y10, Y11, Y12, Y13, Y14, Y15, Y8, Y9, VPANDN, at8yb0, at8yr0, at8yb1, at8yr1, at8yb2, at8yr2, at8yb3, at8yr3)
	LINE_END(at8yline)
	GROUP_END(32, at8ygroup, at8yg)

at8ydone:
	VZEROUPPER
	RET

// func winoBTTileAVX512(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)
TEXT ·winoBTTileAVX512(SB), NOSPLIT, $0-64
	BTTILE(64, 4, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, bttzgroup, bttzrow, bttzcol, bttzdone)

// func winoBTTileAVX2(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)
TEXT ·winoBTTileAVX2(SB), NOSPLIT, $0-64
	BTTILE(32, 3, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, bttygroup, bttyrow, bttycol, bttydone)

// func winoETileAVX512(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)
TEXT ·winoETileAVX512(SB), NOSPLIT, $0-64
	ETILE(64, 4, Z0, Z1, Z2, Z3, Z8, Z9, Z10, etzgroup, etzrow, etzcol, etzdone)

// func winoETileAVX2(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)
TEXT ·winoETileAVX2(SB), NOSPLIT, $0-64
	ETILE(32, 3, Y0, Y1, Y2, Y3, Y8, Y9, Y10, etygroup, etyrow, etycol, etydone)

// func winoAT6AVX512(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)
// is winoPass with F(4×4,3×3)'s Aᵀ as the matrix (mat holds the
// constants, rows is 4 and unread), computed as AT6 says.
TEXT ·winoAT6AVX512(SB), NOSPLIT, $0-96
	PASS_SETUP(4)
	JZ at6zdone

at6zgroup:
	LINE_START

at6zline:
	LOAD6(Z0, Z1, Z2, Z3, Z4, Z5)
	MOVQ mat+0(FP), R8
	MOVQ DX, BX
	AT6(64, Z0, Z1, Z2, Z3, Z4, Z5, Z10, Z11, Z12, Z13, Z8, Z9, VPANDND, at6zb0, at6zr0, at6zb1, at6zr1, at6zb2, at6zr2, at6zb3, at6zr3)
	LINE_END(at6zline)
	GROUP_END(64, at6zgroup, at6zg)

at6zdone:
	VZEROUPPER
	RET

// func winoAT6AVX2(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)
TEXT ·winoAT6AVX2(SB), NOSPLIT, $0-96
	PASS_SETUP(3)
	JZ at6ydone

at6ygroup:
	LINE_START

at6yline:
	LOAD6(Y0, Y1, Y2, Y3, Y4, Y5)
	MOVQ mat+0(FP), R8
	MOVQ DX, BX
	AT6(32, Y0, Y1, Y2, Y3, Y4, Y5, Y10, Y11, Y12, Y13, Y8, Y9, VPANDN, at6yb0, at6yr0, at6yb1, at6yr1, at6yb2, at6yr2, at6yb3, at6yr3)
	LINE_END(at6yline)
	GROUP_END(32, at6ygroup, at6yg)

at6ydone:
	VZEROUPPER
	RET

// func winoE6TileAVX512(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)
TEXT ·winoE6TileAVX512(SB), NOSPLIT, $0-64
	E6TILE(64, 4, Z0, Z1, Z2, Z3, Z8, Z9, Z10, e6zgroup, e6zrow, e6zcol, e6zdone)

// func winoE6TileAVX2(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)
TEXT ·winoE6TileAVX2(SB), NOSPLIT, $0-64
	E6TILE(32, 3, Y0, Y1, Y2, Y3, Y8, Y9, Y10, e6ygroup, e6yrow, e6ycol, e6ydone)
