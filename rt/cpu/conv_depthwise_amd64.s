//go:build !purego

#include "textflag.h"

// func depthwiseFwdAVX512(taps int, offs *int, w, x, y *float32, n int)
// y[j] = Σ_t w[t]·x[offs[t]+j] for j < n, n a multiple of 16: blocks
// of 8 vectors (128 positions) in 8 accumulators while the taps stream
// (one broadcast weight and 8 fused multiply-adds a tap), then blocks of
// 4 vectors, then single vectors.
TEXT ·depthwiseFwdAVX512(SB), NOSPLIT, $0-48
	MOVQ taps+0(FP), R10
	MOVQ offs+8(FP), R11
	MOVQ w+16(FP), R12
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ n+40(FP), DX
	SHRQ $4, DX

depthwiseFwdAVX512b8:
	CMPQ DX, $8
	JLT depthwiseFwdAVX512b4
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ R10, CX
	MOVQ R11, R8
	MOVQ R12, R9
depthwiseFwdAVX512b8t:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z31
	VFMADD231PS (BX), Z31, Z0
	VFMADD231PS 64(BX), Z31, Z1
	VFMADD231PS 128(BX), Z31, Z2
	VFMADD231PS 192(BX), Z31, Z3
	VFMADD231PS 256(BX), Z31, Z4
	VFMADD231PS 320(BX), Z31, Z5
	VFMADD231PS 384(BX), Z31, Z6
	VFMADD231PS 448(BX), Z31, Z7
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ depthwiseFwdAVX512b8t
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	ADDQ $512, SI
	ADDQ $512, DI
	SUBQ $8, DX
	JMP depthwiseFwdAVX512b8

depthwiseFwdAVX512b4:
	CMPQ DX, $4
	JLT depthwiseFwdAVX512b1
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ R10, CX
	MOVQ R11, R8
	MOVQ R12, R9
depthwiseFwdAVX512b4t:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z31
	VFMADD231PS (BX), Z31, Z0
	VFMADD231PS 64(BX), Z31, Z1
	VFMADD231PS 128(BX), Z31, Z2
	VFMADD231PS 192(BX), Z31, Z3
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ depthwiseFwdAVX512b4t
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $4, DX
	JMP depthwiseFwdAVX512b4

depthwiseFwdAVX512b1:
	CMPQ DX, $1
	JLT depthwiseFwdAVX512done
	VPXORD Z0, Z0, Z0
	MOVQ R10, CX
	MOVQ R11, R8
	MOVQ R12, R9
depthwiseFwdAVX512b1t:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Z31
	VFMADD231PS (BX), Z31, Z0
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ depthwiseFwdAVX512b1t
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $1, DX
	JMP depthwiseFwdAVX512b1

depthwiseFwdAVX512done:
	VZEROUPPER
	RET

// func depthwiseFwdAVX2(taps int, offs *int, w, x, y *float32, n int)
// y[j] = Σ_t w[t]·x[offs[t]+j] for j < n, n a multiple of 8: blocks
// of 8 vectors (64 positions) in 8 accumulators while the taps stream
// (one broadcast weight and 8 fused multiply-adds a tap), then blocks of
// 4 vectors, then single vectors.
TEXT ·depthwiseFwdAVX2(SB), NOSPLIT, $0-48
	MOVQ taps+0(FP), R10
	MOVQ offs+8(FP), R11
	MOVQ w+16(FP), R12
	MOVQ x+24(FP), SI
	MOVQ y+32(FP), DI
	MOVQ n+40(FP), DX
	SHRQ $3, DX

depthwiseFwdAVX2b8:
	CMPQ DX, $8
	JLT depthwiseFwdAVX2b4
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ R10, CX
	MOVQ R11, R8
	MOVQ R12, R9
depthwiseFwdAVX2b8t:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Y15
	VFMADD231PS (BX), Y15, Y0
	VFMADD231PS 32(BX), Y15, Y1
	VFMADD231PS 64(BX), Y15, Y2
	VFMADD231PS 96(BX), Y15, Y3
	VFMADD231PS 128(BX), Y15, Y4
	VFMADD231PS 160(BX), Y15, Y5
	VFMADD231PS 192(BX), Y15, Y6
	VFMADD231PS 224(BX), Y15, Y7
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ depthwiseFwdAVX2b8t
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $8, DX
	JMP depthwiseFwdAVX2b8

depthwiseFwdAVX2b4:
	CMPQ DX, $4
	JLT depthwiseFwdAVX2b1
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ R10, CX
	MOVQ R11, R8
	MOVQ R12, R9
depthwiseFwdAVX2b4t:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Y15
	VFMADD231PS (BX), Y15, Y0
	VFMADD231PS 32(BX), Y15, Y1
	VFMADD231PS 64(BX), Y15, Y2
	VFMADD231PS 96(BX), Y15, Y3
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ depthwiseFwdAVX2b4t
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $4, DX
	JMP depthwiseFwdAVX2b4

depthwiseFwdAVX2b1:
	CMPQ DX, $1
	JLT depthwiseFwdAVX2done
	VXORPS Y0, Y0, Y0
	MOVQ R10, CX
	MOVQ R11, R8
	MOVQ R12, R9
depthwiseFwdAVX2b1t:
	MOVQ (R8), AX
	LEAQ (SI)(AX*4), BX
	VBROADCASTSS (R9), Y15
	VFMADD231PS (BX), Y15, Y0
	ADDQ $8, R8
	ADDQ $4, R9
	DECQ CX
	JNZ depthwiseFwdAVX2b1t
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $1, DX
	JMP depthwiseFwdAVX2b1

depthwiseFwdAVX2done:
	VZEROUPPER
	RET
