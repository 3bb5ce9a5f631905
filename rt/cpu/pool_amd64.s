//go:build !purego

#include "textflag.h"
#include "avx512_amd64.h"

// The 2×2 stride-2 max pool, eight windows (sixteen input columns) per
// step, on row pairs: row pair i is input rows 2i and 2i+1 (row stride w
// floats, so pair i starts at x + 2i·w) and output row i (stride ow).
// The last vector of a row is masked: K1 holds its input lanes, K2 its
// output lanes.

// Lane indexes for VPERMPS: the even and odd lanes of a vector, then each
// of the low eight lanes twice.
DATA poolEven<>+0(SB)/4, $0
DATA poolEven<>+4(SB)/4, $2
DATA poolEven<>+8(SB)/4, $4
DATA poolEven<>+12(SB)/4, $6
DATA poolEven<>+16(SB)/4, $8
DATA poolEven<>+20(SB)/4, $10
DATA poolEven<>+24(SB)/4, $12
DATA poolEven<>+28(SB)/4, $14
DATA poolEven<>+32(SB)/4, $0
DATA poolEven<>+36(SB)/4, $0
DATA poolEven<>+40(SB)/4, $0
DATA poolEven<>+44(SB)/4, $0
DATA poolEven<>+48(SB)/4, $0
DATA poolEven<>+52(SB)/4, $0
DATA poolEven<>+56(SB)/4, $0
DATA poolEven<>+60(SB)/4, $0
GLOBL poolEven<>(SB), RODATA|NOPTR, $64

DATA poolOdd<>+0(SB)/4, $1
DATA poolOdd<>+4(SB)/4, $3
DATA poolOdd<>+8(SB)/4, $5
DATA poolOdd<>+12(SB)/4, $7
DATA poolOdd<>+16(SB)/4, $9
DATA poolOdd<>+20(SB)/4, $11
DATA poolOdd<>+24(SB)/4, $13
DATA poolOdd<>+28(SB)/4, $15
DATA poolOdd<>+32(SB)/4, $1
DATA poolOdd<>+36(SB)/4, $1
DATA poolOdd<>+40(SB)/4, $1
DATA poolOdd<>+44(SB)/4, $1
DATA poolOdd<>+48(SB)/4, $1
DATA poolOdd<>+52(SB)/4, $1
DATA poolOdd<>+56(SB)/4, $1
DATA poolOdd<>+60(SB)/4, $1
GLOBL poolOdd<>(SB), RODATA|NOPTR, $64

DATA poolTwice<>+0(SB)/4, $0
DATA poolTwice<>+4(SB)/4, $0
DATA poolTwice<>+8(SB)/4, $1
DATA poolTwice<>+12(SB)/4, $1
DATA poolTwice<>+16(SB)/4, $2
DATA poolTwice<>+20(SB)/4, $2
DATA poolTwice<>+24(SB)/4, $3
DATA poolTwice<>+28(SB)/4, $3
DATA poolTwice<>+32(SB)/4, $4
DATA poolTwice<>+36(SB)/4, $4
DATA poolTwice<>+40(SB)/4, $5
DATA poolTwice<>+44(SB)/4, $5
DATA poolTwice<>+48(SB)/4, $6
DATA poolTwice<>+52(SB)/4, $6
DATA poolTwice<>+56(SB)/4, $7
DATA poolTwice<>+60(SB)/4, $7
GLOBL poolTwice<>(SB), RODATA|NOPTR, $64

// POOLMASKS sets K1 (the 2·(ow mod 8) input lanes of a row's last vector)
// and K2 (its ow mod 8 output lanes) from ow in R9. Clobbers AX and CX.
#define POOLMASKS \
	MOVQ R9, CX; \
	ANDQ $7, CX; \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K2; \
	SHLQ $1, CX; \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K1

// NANMAX sets dst to the larger of a and b, or to a NaN when either is one
// (as Go's max and PyTorch): VMAXPS alone returns its second source then.
#define NANMAX(a, b, dst) \
	VCMPPS $3, b, a, K3; \
	VMAXPS b, a, dst; \
	VADDPS b, a, K3, dst

// func maxPool2x2FwdAVX512(x, y *float32, rows, w, ow int)
TEXT ·maxPool2x2FwdAVX512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ rows+16(FP), R8
	MOVQ ow+32(FP), R9
	MOVQ w+24(FP), R10
	SHLQ $2, R10              // w in bytes
	POOLMASKS
	VMOVUPS poolEven<>(SB), Z30
	VMOVUPS poolOdd<>(SB), Z29
	TESTQ R8, R8
	JEQ fwddone

fwdrow:
	LEAQ (SI)(R10*1), R11     // second input row
	XORQ AX, AX               // input byte offset
	XORQ BX, BX               // output byte offset
	MOVQ R9, CX
	SHRQ $3, CX               // whole vectors per row
	JEQ fwdtail

fwdvec:
	VMOVUPS (SI)(AX*1), Z0
	VMOVUPS (R11)(AX*1), Z1
	NANMAX(Z0, Z1, Z2)        // vertical maxima
	VPERMPS Z2, Z30, Z3
	VPERMPS Z2, Z29, Z4
	NANMAX(Z3, Z4, Z5)        // horizontal pairs
	VMOVUPS Y5, (DI)(BX*1)
	ADDQ $64, AX
	ADDQ $32, BX
	DECQ CX
	JNZ fwdvec

fwdtail:
	KORTESTW K2, K2
	JZ fwdnext
	VMOVUPS.Z (SI)(AX*1), K1, Z0
	VMOVUPS.Z (R11)(AX*1), K1, Z1
	NANMAX(Z0, Z1, Z2)
	VPERMPS Z2, Z30, Z3
	VPERMPS Z2, Z29, Z4
	NANMAX(Z3, Z4, Z5)
	VMOVUPS Z5, K2, (DI)(BX*1)

fwdnext:
	LEAQ (SI)(R10*2), SI
	LEAQ (DI)(R9*4), DI
	DECQ R8
	JNZ fwdrow

fwddone:
	VZEROUPPER
	RET

// WINNERS turns K4 (lanes of the first row equal to their window's output)
// and K5 (the same for the second row) into the window winners, the first
// match in scan order: K4 keeps a right pixel only where its left one did
// not match; K5 keeps lanes only of windows with no match in the first row,
// and a right pixel only where its left one did not match. Clobbers R12-R14.
#define WINNERS \
	KMOVW K4, R12; \
	KMOVW K5, R13; \
	MOVL R12, R14; \
	ANDL $0x5555, R14; \
	SHLL $1, R14; \
	NOTL R14; \
	ANDL R12, R14; \
	KMOVW R14, K4; \
	MOVL R12, R14; \
	SHRL $1, R14; \
	ORL R12, R14; \
	ANDL $0x5555, R14; \
	MOVL R14, R12; \
	SHLL $1, R12; \
	ORL R14, R12; \
	MOVL R13, R14; \
	ANDL $0x5555, R14; \
	SHLL $1, R14; \
	ORL R14, R12; \
	NOTL R12; \
	ANDL R13, R12; \
	KMOVW R12, K5

// MATCHES sets K4 and K5 to the lanes of the rows Z0 and Z1 equal to the
// window outputs in Z6 (each twice) or, where an output is NaN, holding a
// NaN. Clobbers K6 and K7.
#define MATCHES \
	VCMPPS $0, Z6, Z0, K4; \
	VCMPPS $0, Z6, Z1, K5; \
	VCMPPS $3, Z6, Z6, K6; \
	VCMPPS $3, Z0, Z0, K7; \
	KANDW K6, K7, K7; \
	KORW K7, K4, K4; \
	VCMPPS $3, Z1, Z1, K7; \
	KANDW K6, K7, K7; \
	KORW K7, K5, K5

// func maxPool2x2BwdAVX512(x, y, dy, dx *float32, rows, w, ow int)
// Each window's gradient goes to its first pixel (scan order) equal to
// its output y, or to its first NaN when y is NaN; every other pixel of
// the row pairs' first 2·ow columns gets zero, and a last odd column too.
TEXT ·maxPool2x2BwdAVX512(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DX
	MOVQ dy+16(FP), BX
	MOVQ dx+24(FP), DI
	MOVQ rows+32(FP), R8
	MOVQ ow+48(FP), R9
	MOVQ w+40(FP), R10
	SHLQ $2, R10              // w in bytes
	POOLMASKS
	VMOVUPS poolTwice<>(SB), Z28
	VPXORD Z31, Z31, Z31
	TESTQ R8, R8
	JEQ bwddone

bwdrow:
	XORQ AX, AX               // input byte offset
	XORQ R11, R11             // output byte offset
	MOVQ R9, CX
	SHRQ $3, CX               // whole vectors per row
	JEQ bwdtail

bwdvec:
	VMOVUPS (SI)(AX*1), Z0
	ADDQ R10, SI
	VMOVUPS (SI)(AX*1), Z1
	SUBQ R10, SI
	VMOVUPS (DX)(R11*1), Y6
	VPERMPS Z6, Z28, Z6
	VMOVUPS (BX)(R11*1), Y7
	VPERMPS Z7, Z28, Z7
	MATCHES
	WINNERS
	VMOVUPS.Z Z7, K4, Z2
	VMOVUPS.Z Z7, K5, Z3
	VMOVUPS Z2, (DI)(AX*1)
	ADDQ R10, DI
	VMOVUPS Z3, (DI)(AX*1)
	SUBQ R10, DI
	ADDQ $64, AX
	ADDQ $32, R11
	DECQ CX
	JNZ bwdvec

bwdtail:
	KORTESTW K2, K2
	JZ bwdodd
	VMOVUPS.Z (SI)(AX*1), K1, Z0
	ADDQ R10, SI
	VMOVUPS.Z (SI)(AX*1), K1, Z1
	SUBQ R10, SI
	VMOVUPS.Z (DX)(R11*1), K2, Z6
	VPERMPS Z6, Z28, Z6
	VMOVUPS.Z (BX)(R11*1), K2, Z7
	VPERMPS Z7, Z28, Z7
	MATCHES
	WINNERS
	VMOVUPS.Z Z7, K4, Z2
	VMOVUPS.Z Z7, K5, Z3
	VMOVUPS Z2, K1, (DI)(AX*1)
	ADDQ R10, DI
	VMOVUPS Z3, K1, (DI)(AX*1)
	SUBQ R10, DI

bwdodd:
	// An odd last column belongs to no window.
	LEAQ (R9*8), AX
	CMPQ AX, R10
	JEQ bwdnext
	MOVL $0, (DI)(AX*1)
	ADDQ R10, DI
	MOVL $0, (DI)(AX*1)
	SUBQ R10, DI

bwdnext:
	LEAQ (SI)(R10*2), SI
	LEAQ (DI)(R10*2), DI
	LEAQ (DX)(R9*4), DX
	LEAQ (BX)(R9*4), BX
	DECQ R8
	JNZ bwdrow

bwddone:
	VZEROUPPER
	RET

// The AVX2 forms: four windows (eight input columns) per step, lanes
// masked by vectors (VMASKMOVPS) in a row's last step.

// poolLanes holds eight all-ones lanes then eight zero lanes: the 32 bytes
// from poolLanes + 4·(8-n) are the mask of the first n lanes.
DATA poolLanes<>+0(SB)/4, $-1
DATA poolLanes<>+4(SB)/4, $-1
DATA poolLanes<>+8(SB)/4, $-1
DATA poolLanes<>+12(SB)/4, $-1
DATA poolLanes<>+16(SB)/4, $-1
DATA poolLanes<>+20(SB)/4, $-1
DATA poolLanes<>+24(SB)/4, $-1
DATA poolLanes<>+28(SB)/4, $-1
DATA poolLanes<>+32(SB)/4, $0
DATA poolLanes<>+36(SB)/4, $0
DATA poolLanes<>+40(SB)/4, $0
DATA poolLanes<>+44(SB)/4, $0
DATA poolLanes<>+48(SB)/4, $0
DATA poolLanes<>+52(SB)/4, $0
DATA poolLanes<>+56(SB)/4, $0
DATA poolLanes<>+60(SB)/4, $0
GLOBL poolLanes<>(SB), RODATA|NOPTR, $64

// poolOddLanes is all ones in the odd lanes of a ymm.
DATA poolOddLanes<>+0(SB)/4, $0
DATA poolOddLanes<>+4(SB)/4, $-1
DATA poolOddLanes<>+8(SB)/4, $0
DATA poolOddLanes<>+12(SB)/4, $-1
DATA poolOddLanes<>+16(SB)/4, $0
DATA poolOddLanes<>+20(SB)/4, $-1
DATA poolOddLanes<>+24(SB)/4, $0
DATA poolOddLanes<>+28(SB)/4, $-1
GLOBL poolOddLanes<>(SB), RODATA|NOPTR, $32

// LANEMASKS sets Y14 to the mask of the 2·(ow mod 4) input lanes of a
// row's last step and Y13 to its ow mod 4 output lanes, from ow in R9.
// Clobbers AX and CX.
#define LANEMASKS \
	MOVQ R9, CX; \
	ANDQ $3, CX; \
	LEAQ poolLanes<>(SB), AX; \
	NEGQ CX; \
	VMOVUPS 32(AX)(CX*4), Y13; \
	VMOVUPS 32(AX)(CX*8), Y14

// NANMAX2 is NANMAX for ymm registers; clobbers Y11 and Y12.
#define NANMAX2(a, b, dst) \
	VCMPPS $3, b, a, Y11; \
	VADDPS b, a, Y12; \
	VMAXPS b, a, dst; \
	VBLENDVPS Y11, Y12, dst, dst

// POOLFWD2 pools the eight columns in Y0 (first row) and Y1 (second row)
// into the low four lanes of Y5.
#define POOLFWD2 \
	NANMAX2(Y0, Y1, Y2); \
	VPERMILPS $0xB1, Y2, Y3; \
	NANMAX2(Y2, Y3, Y4); \
	VPERMPS Y4, Y15, Y5

// func maxPool2x2FwdAVX2(x, y *float32, rows, w, ow int)
TEXT ·maxPool2x2FwdAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ rows+16(FP), R8
	MOVQ ow+32(FP), R9
	MOVQ w+24(FP), R10
	SHLQ $2, R10              // w in bytes
	LANEMASKS
	VMOVUPS poolEven<>(SB), Y15
	TESTQ R8, R8
	JEQ fwd2done

fwd2row:
	LEAQ (SI)(R10*1), R11     // second input row
	XORQ AX, AX               // input byte offset
	XORQ BX, BX               // output byte offset
	MOVQ R9, CX
	SHRQ $2, CX               // whole steps per row
	JEQ fwd2tail

fwd2vec:
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS (R11)(AX*1), Y1
	POOLFWD2
	VMOVUPS X5, (DI)(BX*1)
	ADDQ $32, AX
	ADDQ $16, BX
	DECQ CX
	JNZ fwd2vec

fwd2tail:
	MOVQ R9, CX
	ANDQ $3, CX
	JEQ fwd2next
	VMASKMOVPS (SI)(AX*1), Y14, Y0
	VMASKMOVPS (R11)(AX*1), Y14, Y1
	POOLFWD2
	VMASKMOVPS Y5, Y13, (DI)(BX*1)

fwd2next:
	LEAQ (SI)(R10*2), SI
	LEAQ (DI)(R9*4), DI
	DECQ R8
	JNZ fwd2row

fwd2done:
	VZEROUPPER
	RET

// POOLBWD2 writes to Y2 and Y3 the gradients of the first and second row
// (eight columns in Y0 and Y1) from the window outputs Y6 and gradients Y7
// (each twice), with the winners of WINNERS: the first match in scan
// order, matches being equal values or, for a NaN output, NaNs. Y10 holds
// the odd-lanes mask. Clobbers Y4, Y5, Y8, Y9, Y11, Y12.
#define POOLBWD2 \
	VCMPPS $0, Y6, Y0, Y4; \
	VCMPPS $0, Y6, Y1, Y5; \
	VCMPPS $3, Y6, Y6, Y8; \
	VCMPPS $3, Y0, Y0, Y9; \
	VANDPS Y8, Y9, Y9; \
	VORPS Y9, Y4, Y4; \
	VCMPPS $3, Y1, Y1, Y9; \
	VANDPS Y8, Y9, Y9; \
	VORPS Y9, Y5, Y5; \
	VPERMILPS $0xB1, Y4, Y8; \
	VANDPS Y10, Y8, Y9; \
	VANDNPS Y4, Y9, Y11; \
	VORPS Y8, Y4, Y12; \
	VPERMILPS $0xB1, Y5, Y8; \
	VANDPS Y10, Y8, Y9; \
	VORPS Y12, Y9, Y9; \
	VANDNPS Y5, Y9, Y12; \
	VANDPS Y7, Y11, Y2; \
	VANDPS Y7, Y12, Y3

// func maxPool2x2BwdAVX2(x, y, dy, dx *float32, rows, w, ow int)
// maxPool2x2BwdAVX512 with ymm registers.
TEXT ·maxPool2x2BwdAVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DX
	MOVQ dy+16(FP), BX
	MOVQ dx+24(FP), DI
	MOVQ rows+32(FP), R8
	MOVQ ow+48(FP), R9
	MOVQ w+40(FP), R10
	SHLQ $2, R10              // w in bytes
	LANEMASKS
	VMOVUPS poolTwice<>(SB), Y15
	VMOVUPS poolOddLanes<>(SB), Y10
	TESTQ R8, R8
	JEQ bwd2done

bwd2row:
	XORQ AX, AX               // input byte offset
	XORQ R11, R11             // output byte offset
	MOVQ R9, CX
	SHRQ $2, CX               // whole steps per row
	JEQ bwd2tail

bwd2vec:
	VMOVUPS (SI)(AX*1), Y0
	ADDQ R10, SI
	VMOVUPS (SI)(AX*1), Y1
	SUBQ R10, SI
	VMOVUPS (DX)(R11*1), X6
	VPERMPS Y6, Y15, Y6
	VMOVUPS (BX)(R11*1), X7
	VPERMPS Y7, Y15, Y7
	POOLBWD2
	VMOVUPS Y2, (DI)(AX*1)
	ADDQ R10, DI
	VMOVUPS Y3, (DI)(AX*1)
	SUBQ R10, DI
	ADDQ $32, AX
	ADDQ $16, R11
	DECQ CX
	JNZ bwd2vec

bwd2tail:
	MOVQ R9, CX
	ANDQ $3, CX
	JEQ bwd2odd
	VMASKMOVPS (SI)(AX*1), Y14, Y0
	ADDQ R10, SI
	VMASKMOVPS (SI)(AX*1), Y14, Y1
	SUBQ R10, SI
	VMASKMOVPS (DX)(R11*1), Y13, Y6
	VPERMPS Y6, Y15, Y6
	VMASKMOVPS (BX)(R11*1), Y13, Y7
	VPERMPS Y7, Y15, Y7
	POOLBWD2
	VMASKMOVPS Y2, Y14, (DI)(AX*1)
	ADDQ R10, DI
	VMASKMOVPS Y3, Y14, (DI)(AX*1)
	SUBQ R10, DI

bwd2odd:
	// An odd last column belongs to no window.
	LEAQ (R9*8), AX
	CMPQ AX, R10
	JEQ bwd2next
	MOVL $0, (DI)(AX*1)
	ADDQ R10, DI
	MOVL $0, (DI)(AX*1)
	SUBQ R10, DI

bwd2next:
	LEAQ (SI)(R10*2), SI
	LEAQ (DI)(R10*2), DI
	LEAQ (DX)(R9*4), DX
	LEAQ (BX)(R9*4), BX
	DECQ R8
	JNZ bwd2row

bwd2done:
	VZEROUPPER
	RET

// The interior of a max pool's output row for windows of 3 columns at
// stride 2 over the column maxima of 3 input rows, eight outputs a step:
// y[i] = max over c in {2i−1, 2i, 2i+1} of max(r0[c], r1[c], r2[c]). The
// 16 lanes at 2i (the windows' centre and right columns) and the 16 at
// 2i−1 (their left and centre columns) are loaded from each row; the last
// vector is masked (K1: 2·(n mod 8) input lanes, K2: n mod 8 outputs).

// func maxPool3s2RowAVX512(r0, r1, r2, y *float32, n int)
TEXT ·maxPool3s2RowAVX512(SB), NOSPLIT, $0-40
	MOVQ r0+0(FP), SI
	MOVQ r1+8(FP), DX
	MOVQ r2+16(FP), R11
	MOVQ y+24(FP), DI
	MOVQ n+32(FP), R9
	POOLMASKS
	VMOVUPS poolEven<>(SB), Z30
	VMOVUPS poolOdd<>(SB), Z29
	XORQ AX, AX               // input byte offset
	XORQ BX, BX               // output byte offset
	MOVQ R9, CX
	SHRQ $3, CX               // whole steps
	JEQ row3tail

row3vec:
	VMOVUPS (SI)(AX*1), Z0
	VMOVUPS (DX)(AX*1), Z1
	NANMAX(Z0, Z1, Z2)
	VMOVUPS (R11)(AX*1), Z1
	NANMAX(Z2, Z1, Z3)        // column maxima at 2i, 2i+1
	VMOVUPS -4(SI)(AX*1), Z0
	VMOVUPS -4(DX)(AX*1), Z1
	NANMAX(Z0, Z1, Z2)
	VMOVUPS -4(R11)(AX*1), Z1
	NANMAX(Z2, Z1, Z4)        // column maxima at 2i−1, 2i
	VPERMPS Z3, Z30, Z5       // centre columns
	VPERMPS Z3, Z29, Z6       // right columns
	VPERMPS Z4, Z30, Z7       // left columns
	NANMAX(Z5, Z6, Z8)
	NANMAX(Z7, Z8, Z9)
	VMOVUPS Y9, (DI)(BX*1)
	ADDQ $64, AX
	ADDQ $32, BX
	DECQ CX
	JNZ row3vec

row3tail:
	KORTESTW K2, K2
	JZ row3done
	VMOVUPS.Z (SI)(AX*1), K1, Z0
	VMOVUPS.Z (DX)(AX*1), K1, Z1
	NANMAX(Z0, Z1, Z2)
	VMOVUPS.Z (R11)(AX*1), K1, Z1
	NANMAX(Z2, Z1, Z3)
	VMOVUPS.Z -4(SI)(AX*1), K1, Z0
	VMOVUPS.Z -4(DX)(AX*1), K1, Z1
	NANMAX(Z0, Z1, Z2)
	VMOVUPS.Z -4(R11)(AX*1), K1, Z1
	NANMAX(Z2, Z1, Z4)
	VPERMPS Z3, Z30, Z5
	VPERMPS Z3, Z29, Z6
	VPERMPS Z4, Z30, Z7
	NANMAX(Z5, Z6, Z8)
	NANMAX(Z7, Z8, Z9)
	VMOVUPS Z9, K2, (DI)(BX*1)

row3done:
	VZEROUPPER
	RET

// func planeMeansAVX512(x, y *float32, planes, n int, scale float32)
// y[p] = scale·Σ_{i<n} x[p·n+i] for p < planes: per plane four vectors of
// partial sums over blocks of 64 floats, the whole vectors after them into
// the first, the last n mod 16 floats (masked) into the second, then the
// four added pairwise and the sixteen lanes in halves.
TEXT ·planeMeansAVX512(SB), NOSPLIT, $0-36
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ planes+16(FP), R8
	MOVQ n+24(FP), R9
	VMOVSS scale+32(FP), X15
	TAILMASK(R9)
	MOVQ R9, R10
	SHRQ $6, R10               // blocks of 64 floats
	MOVQ R9, R11
	SHRQ $4, R11
	ANDQ $3, R11               // whole vectors after them
	MOVQ R9, R12
	ANDQ $15, R12
	SHLQ $2, R12               // bytes of the masked tail
	TESTQ R8, R8
	JEQ pmdone

pmplane:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ R10, CX
	TESTQ CX, CX
	JEQ pmvecs

pmblock:
	VADDPS (SI), Z0, Z0
	VADDPS 64(SI), Z1, Z1
	VADDPS 128(SI), Z2, Z2
	VADDPS 192(SI), Z3, Z3
	ADDQ $256, SI
	DECQ CX
	JNZ pmblock

pmvecs:
	MOVQ R11, CX
	TESTQ CX, CX
	JEQ pmtail

pmvec:
	VADDPS (SI), Z0, Z0
	ADDQ $64, SI
	DECQ CX
	JNZ pmvec

pmtail:
	KORTESTW K1, K1
	JZ pmreduce
	VMOVUPS.Z (SI), K1, Z4
	VADDPS Z4, Z1, Z1
	ADDQ R12, SI

pmreduce:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VADDPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VADDSS X1, X0, X0
	VMULSS X15, X0, X0
	VMOVSS X0, (DI)
	ADDQ $4, DI
	DECQ R8
	JNZ pmplane

pmdone:
	VZEROUPPER
	RET
