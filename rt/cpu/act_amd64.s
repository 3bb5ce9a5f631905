//go:build !purego

#include "textflag.h"
#include "avx512_amd64.h"

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

// The AVX2 forms, eight lanes per step; the last step of a row is masked
// with VMASKMOVPS (masked-off lanes are neither read nor written).

// actLanes holds eight all-ones lanes then eight zero lanes: the 32 bytes
// from actLanes + 4·(8-n) are the mask of the first n lanes.
DATA actLanes<>+0(SB)/4, $-1
DATA actLanes<>+4(SB)/4, $-1
DATA actLanes<>+8(SB)/4, $-1
DATA actLanes<>+12(SB)/4, $-1
DATA actLanes<>+16(SB)/4, $-1
DATA actLanes<>+20(SB)/4, $-1
DATA actLanes<>+24(SB)/4, $-1
DATA actLanes<>+28(SB)/4, $-1
DATA actLanes<>+32(SB)/4, $0
DATA actLanes<>+36(SB)/4, $0
DATA actLanes<>+40(SB)/4, $0
DATA actLanes<>+44(SB)/4, $0
DATA actLanes<>+48(SB)/4, $0
DATA actLanes<>+52(SB)/4, $0
DATA actLanes<>+56(SB)/4, $0
DATA actLanes<>+60(SB)/4, $0
GLOBL actLanes<>(SB), RODATA|NOPTR, $64

// TAILMASK8 sets Y15 to the mask of the low (reg mod 8) lanes, from the
// count in reg. Clobbers AX and CX.
#define TAILMASK8(reg) \
	MOVQ reg, CX; \
	ANDQ $7, CX; \
	NEGQ CX; \
	LEAQ actLanes<>(SB), AX; \
	VMOVUPS 32(AX)(CX*4), Y15

// func biasActRowsAVX2(y, bias *float32, rows, cols, flags int)
TEXT ·biasActRowsAVX2(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ bias+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ cols+24(FP), R9
	MOVQ flags+32(FP), R10
	TAILMASK8(R9)
	MOVQ R9, R11
	ANDQ $-8, R11
	SHLQ $2, R11              // bytes of whole vectors per row
	MOVQ R9, R12
	ANDQ $7, R12              // lanes of the last, partial vector
	TESTQ R8, R8
	JEQ done2

row2:
	XORQ AX, AX
	CMPQ AX, R11
	JEQ tail2

vec2:
	VMOVUPS (DI)(AX*1), Y0
	TESTQ $1, R10
	JZ vec2relu
	VADDPS (SI)(AX*1), Y0, Y0

vec2relu:
	TESTQ $2, R10
	JZ vec2store
	VPSRAD $31, Y0, Y1
	VPANDN Y0, Y1, Y0

vec2store:
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	CMPQ AX, R11
	JNE vec2

tail2:
	TESTQ R12, R12
	JZ next2
	VMASKMOVPS (DI)(AX*1), Y15, Y0
	TESTQ $1, R10
	JZ tail2relu
	VMASKMOVPS (SI)(AX*1), Y15, Y2
	VADDPS Y2, Y0, Y0

tail2relu:
	TESTQ $2, R10
	JZ tail2store
	VPSRAD $31, Y0, Y1
	VPANDN Y0, Y1, Y0

tail2store:
	VMASKMOVPS Y0, Y15, (DI)(AX*1)

next2:
	LEAQ (DI)(R9*4), DI
	DECQ R8
	JNZ row2

done2:
	VZEROUPPER
	RET

// func reluBwdAVX2(y, dy *float32, n int)
TEXT ·reluBwdAVX2(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), SI
	MOVQ dy+8(FP), DI
	MOVQ n+16(FP), R9
	TAILMASK8(R9)
	VPXOR Y14, Y14, Y14
	MOVQ R9, R10
	ANDQ $7, R10
	SHRQ $3, R9
	JEQ rb2tail

rb2vec:
	VPCMPEQD (SI), Y14, Y0    // lanes where y is +0
	VPANDN (DI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ R9
	JNZ rb2vec

rb2tail:
	TESTQ R10, R10
	JZ rb2done
	VMASKMOVPS (SI), Y15, Y2
	VPCMPEQD Y2, Y14, Y0
	VMASKMOVPS (DI), Y15, Y3
	VPANDN Y3, Y0, Y1
	VMASKMOVPS Y1, Y15, (DI)

rb2done:
	VZEROUPPER
	RET

// func sumRowsAVX2(m, dst *float32, rows, cols, ld int)
TEXT ·sumRowsAVX2(SB), NOSPLIT, $0-40
	MOVQ m+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ rows+16(FP), R8
	MOVQ cols+24(FP), R9
	MOVQ ld+32(FP), R10
	SHLQ $2, R10
	TAILMASK8(R9)
	MOVQ R9, R11
	ANDQ $7, R11
	SHRQ $3, R9

sr2vec:
	TESTQ R9, R9
	JEQ sr2tail
	VXORPS Y0, Y0, Y0
	MOVQ SI, BX
	MOVQ R8, CX
	TESTQ CX, CX
	JEQ sr2store

sr2row:
	VADDPS (BX), Y0, Y0
	ADDQ R10, BX
	DECQ CX
	JNZ sr2row

sr2store:
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ R9
	JMP sr2vec

sr2tail:
	TESTQ R11, R11
	JZ sr2done
	VXORPS Y0, Y0, Y0
	MOVQ R8, CX
	TESTQ CX, CX
	JEQ sr2tailstore

sr2tailrow:
	VMASKMOVPS (SI), Y15, Y1
	VADDPS Y1, Y0, Y0
	ADDQ R10, SI
	DECQ CX
	JNZ sr2tailrow

sr2tailstore:
	VMASKMOVPS Y0, Y15, (DI)

sr2done:
	VZEROUPPER
	RET

// func clampAVX512(x, y *float32, n int, lo, hi float32)
// y[i] = min(hi, max(lo, x[i])) for i < n, x's NaN kept: MAXPS and MINPS
// return their second source when either is NaN, and x is that source.
TEXT ·clampAVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	VBROADCASTSS lo+24(FP), Z14
	VBROADCASTSS hi+28(FP), Z15
	TAILMASK(R9)
	SHRQ $4, R9
	JEQ cltail

clvec:
	VMOVUPS (SI), Z0
	VMAXPS Z0, Z14, Z1
	VMINPS Z1, Z15, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ clvec

cltail:
	KORTESTW K1, K1
	JZ cldone
	VMOVUPS.Z (SI), K1, Z0
	VMAXPS Z0, Z14, Z1
	VMINPS Z1, Z15, Z1
	VMOVUPS Z1, K1, (DI)

cldone:
	VZEROUPPER
	RET

// func clampAVX2(x, y *float32, n int, lo, hi float32)
// clampAVX512 over the first n − n mod 8 elements; the caller does the rest.
TEXT ·clampAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), R9
	VBROADCASTSS lo+24(FP), Y14
	VBROADCASTSS hi+28(FP), Y15
	SHRQ $3, R9
	JEQ cl2done

cl2vec:
	VMOVUPS (SI), Y0
	VMAXPS Y0, Y14, Y1
	VMINPS Y1, Y15, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ R9
	JNZ cl2vec

cl2done:
	VZEROUPPER
	RET

// func rowBiasActAVX512(y, bias *float32, rows, cols, ld, flags int, lo, hi float32)
// For each r < rows, over the cols floats at y[r·ld:]: y += bias[r] (when
// flags&1), then the ReLU of biasActRowsAVX512 (when flags&2), then
// min(hi, max(lo, y)) with y's NaN kept, as clampAVX512.
TEXT ·rowBiasActAVX512(SB), NOSPLIT, $0-56
	MOVQ y+0(FP), DI
	MOVQ bias+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ cols+24(FP), R9
	MOVQ ld+32(FP), R12
	SHLQ $2, R12              // bytes a row
	MOVQ flags+40(FP), R10
	VBROADCASTSS lo+48(FP), Z14
	VBROADCASTSS hi+52(FP), Z15
	TAILMASK(R9)
	MOVQ R9, R11
	ANDQ $-16, R11
	SHLQ $2, R11              // bytes of whole vectors a row
	VXORPS Z13, Z13, Z13
	TESTQ R8, R8
	JEQ rbdone

rbrow:
	TESTQ $1, R10
	JZ rbnobias
	VBROADCASTSS (SI), Z13
	ADDQ $4, SI

rbnobias:
	XORQ AX, AX
	CMPQ AX, R11
	JEQ rbtail

rbvec:
	VMOVUPS (DI)(AX*1), Z0
	TESTQ $1, R10
	JZ rbvecrelu
	VADDPS Z13, Z0, Z0

rbvecrelu:
	TESTQ $2, R10
	JZ rbvecclamp
	VPSRAD $31, Z0, Z1
	VPANDND Z0, Z1, Z0

rbvecclamp:
	VMAXPS Z0, Z14, Z0
	VMINPS Z0, Z15, Z0
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ $64, AX
	CMPQ AX, R11
	JNE rbvec

rbtail:
	KORTESTW K1, K1
	JZ rbnext
	VMOVUPS.Z (DI)(AX*1), K1, Z0
	TESTQ $1, R10
	JZ rbtailrelu
	VADDPS Z13, Z0, Z0

rbtailrelu:
	TESTQ $2, R10
	JZ rbtailclamp
	VPSRAD $31, Z0, Z1
	VPANDND Z0, Z1, Z0

rbtailclamp:
	VMAXPS Z0, Z14, Z0
	VMINPS Z0, Z15, Z0
	VMOVUPS Z0, K1, (DI)(AX*1)

rbnext:
	ADDQ R12, DI
	DECQ R8
	JNZ rbrow

rbdone:
	VZEROUPPER
	RET

// func rowBiasActAVX2(y, bias *float32, rows, cols, ld, flags int, lo, hi float32)
// rowBiasActAVX512's loop in 8-float vectors, over each row's first cols
// floats, cols a multiple of 8 (the caller does a row's last cols mod 8 in
// Go): y += bias[r] (when flags&1), the sign-bit ReLU (when flags&2), then
// min(hi, max(lo, y)) with y's NaN kept.
TEXT ·rowBiasActAVX2(SB), NOSPLIT, $0-56
	MOVQ y+0(FP), DI
	MOVQ bias+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ cols+24(FP), R11
	SHLQ $2, R11              // bytes of whole vectors a row
	MOVQ ld+32(FP), R12
	SHLQ $2, R12              // bytes a row
	MOVQ flags+40(FP), R10
	VBROADCASTSS lo+48(FP), Y14
	VBROADCASTSS hi+52(FP), Y15
	VXORPS Y13, Y13, Y13
	TESTQ R8, R8
	JEQ r2done
	TESTQ R11, R11
	JEQ r2done

r2row:
	TESTQ $1, R10
	JZ r2nobias
	VBROADCASTSS (SI), Y13
	ADDQ $4, SI

r2nobias:
	XORQ AX, AX

r2vec:
	VMOVUPS (DI)(AX*1), Y0
	TESTQ $1, R10
	JZ r2relu
	VADDPS Y13, Y0, Y0

r2relu:
	TESTQ $2, R10
	JZ r2clamp
	VPSRAD $31, Y0, Y1
	VPANDN Y0, Y1, Y0

r2clamp:
	VMAXPS Y0, Y14, Y0
	VMINPS Y0, Y15, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	CMPQ AX, R11
	JNE r2vec
	ADDQ R12, DI
	DECQ R8
	JNZ r2row

r2done:
	VZEROUPPER
	RET
