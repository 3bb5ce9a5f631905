//go:build !purego

#include "textflag.h"

// TAILMASK sets K1 to the low (reg mod 16) lanes, from the count in reg.
// Clobbers AX and CX.
#define TAILMASK(reg) \
	MOVQ reg, CX; \
	ANDQ $15, CX; \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K1

// func biasActRowsAVX512(y, bias *float32, rows, cols, flags int)
// For each of rows rows of y (cols floats each, contiguous): y += bias
// (when flags&1) and then the ReLU of biasActRows (when flags&2): the bits
// of values with the sign bit set are cleared.
TEXT ·biasActRowsAVX512(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ bias+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ cols+24(FP), R9
	MOVQ flags+32(FP), R10
	TAILMASK(R9)
	MOVQ R9, R11
	ANDQ $-16, R11
	SHLQ $2, R11              // bytes of whole vectors per row
	TESTQ R8, R8
	JEQ done

row:
	XORQ AX, AX
	CMPQ AX, R11
	JEQ tail

vec:
	VMOVUPS (DI)(AX*1), Z0
	TESTQ $1, R10
	JZ vecrelu
	VADDPS (SI)(AX*1), Z0, Z0

vecrelu:
	TESTQ $2, R10
	JZ vecstore
	VPSRAD $31, Z0, Z1
	VPANDND Z0, Z1, Z0

vecstore:
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ $64, AX
	CMPQ AX, R11
	JNE vec

tail:
	KORTESTW K1, K1
	JZ next
	VMOVUPS.Z (DI)(AX*1), K1, Z0
	TESTQ $1, R10
	JZ tailrelu
	VMOVUPS.Z (SI)(AX*1), K1, Z2
	VADDPS Z2, Z0, Z0

tailrelu:
	TESTQ $2, R10
	JZ tailstore
	VPSRAD $31, Z0, Z1
	VPANDND Z0, Z1, Z0

tailstore:
	VMOVUPS Z0, K1, (DI)(AX*1)

next:
	LEAQ (DI)(R9*4), DI
	DECQ R8
	JNZ row

done:
	VZEROUPPER
	RET

// func reluBwdAVX512(y, dy *float32, n int)
// dy[i] = 0 where y[i] is +0 (all bits clear), as actBackward's ReLU.
TEXT ·reluBwdAVX512(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), SI
	MOVQ dy+8(FP), DI
	MOVQ n+16(FP), R9
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ rbtail

rbvec:
	VMOVUPS (SI), Z0
	VPTESTMD Z0, Z0, K2
	VMOVUPS.Z (DI), K2, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ rbvec

rbtail:
	KORTESTW K1, K1
	JZ rbdone
	VMOVUPS.Z (SI), K1, Z0
	VPTESTMD Z0, Z0, K2
	VMOVUPS.Z (DI), K2, Z1
	VMOVUPS Z1, K1, (DI)

rbdone:
	VZEROUPPER
	RET

// func sumRowsAVX512(m, dst *float32, rows, cols, ld int)
// dst[j] = Σ_r m[r·ld + j] for j < cols, summed in row order (as sumRows).
TEXT ·sumRowsAVX512(SB), NOSPLIT, $0-40
	MOVQ m+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ rows+16(FP), R8
	MOVQ cols+24(FP), R9
	MOVQ ld+32(FP), R10
	SHLQ $2, R10
	TAILMASK(R9)
	SHRQ $4, R9

srvec:
	TESTQ R9, R9
	JEQ srtail
	VPXORD Z0, Z0, Z0
	MOVQ SI, BX
	MOVQ R8, CX
	TESTQ CX, CX
	JEQ srstore

srrow:
	VADDPS (BX), Z0, Z0
	ADDQ R10, BX
	DECQ CX
	JNZ srrow

srstore:
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JMP srvec

srtail:
	KORTESTW K1, K1
	JZ srdone
	VPXORD Z0, Z0, Z0
	MOVQ R8, CX
	TESTQ CX, CX
	JEQ srtailstore

srtailrow:
	VMOVUPS.Z (SI), K1, Z1
	VADDPS Z1, Z0, Z0
	ADDQ R10, SI
	DECQ CX
	JNZ srtailrow

srtailstore:
	VMOVUPS Z0, K1, (DI)

srdone:
	VZEROUPPER
	RET
