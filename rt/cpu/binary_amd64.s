//go:build !purego

#include "textflag.h"
#include "avx512_amd64.h"

// Element-wise binary rows in AVX-512 (binary_amd64.go's binaryKernels):
// one IEEE operation a lane, the same bits as binaryRow's and rowScalar's
// Go loops. The last n mod 16 elements go through a masked vector.
// func binaryRowAVX512(op int, a, b, y *float32, n int)
// y[i] = a[i] ∘ b[i] for i < n, ∘ the BinOp op (BAdd, BSub, BMul, BDiv).
TEXT ·binaryRowAVX512(SB), NOSPLIT, $0-40
	MOVQ op+0(FP), R10
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ y+24(FP), DI
	MOVQ n+32(FP), R9
	TAILMASK(R9)
	SHRQ $4, R9
	CMPQ R10, $0
	JEQ binaryRowAVX512add
	CMPQ R10, $1
	JEQ binaryRowAVX512sub
	CMPQ R10, $2
	JEQ binaryRowAVX512mul
	CMPQ R10, $3
	JEQ binaryRowAVX512div
	JMP binaryRowAVX512done
binaryRowAVX512add:
	TESTQ R9, R9
	JEQ binaryRowAVX512addtail
binaryRowAVX512addvec:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	VADDPS Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ R9
	JNZ binaryRowAVX512addvec
binaryRowAVX512addtail:
	KORTESTW K1, K1
	JZ binaryRowAVX512done
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	VADDPS Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
	JMP binaryRowAVX512done

binaryRowAVX512sub:
	TESTQ R9, R9
	JEQ binaryRowAVX512subtail
binaryRowAVX512subvec:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	VSUBPS Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ R9
	JNZ binaryRowAVX512subvec
binaryRowAVX512subtail:
	KORTESTW K1, K1
	JZ binaryRowAVX512done
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	VSUBPS Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
	JMP binaryRowAVX512done

binaryRowAVX512mul:
	TESTQ R9, R9
	JEQ binaryRowAVX512multail
binaryRowAVX512mulvec:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	VMULPS Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ R9
	JNZ binaryRowAVX512mulvec
binaryRowAVX512multail:
	KORTESTW K1, K1
	JZ binaryRowAVX512done
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	VMULPS Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
	JMP binaryRowAVX512done

binaryRowAVX512div:
	TESTQ R9, R9
	JEQ binaryRowAVX512divtail
binaryRowAVX512divvec:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	VDIVPS Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ R9
	JNZ binaryRowAVX512divvec
binaryRowAVX512divtail:
	KORTESTW K1, K1
	JZ binaryRowAVX512done
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	VDIVPS Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
	JMP binaryRowAVX512done

binaryRowAVX512done:
	VZEROUPPER
	RET

// func rowScalarAVX512(op int, a *float32, s float32, y *float32, n int)
// y[i] = a[i] ∘ s for i < n, ∘ the BinOp op (BAdd, BSub, BMul, BDiv).
TEXT ·rowScalarAVX512(SB), NOSPLIT, $0-40
	MOVQ op+0(FP), R10
	MOVQ a+8(FP), SI
	VBROADCASTSS s+16(FP), Z1
	MOVQ y+24(FP), DI
	MOVQ n+32(FP), R9
	TAILMASK(R9)
	SHRQ $4, R9
	CMPQ R10, $0
	JEQ rowScalarAVX512add
	CMPQ R10, $1
	JEQ rowScalarAVX512sub
	CMPQ R10, $2
	JEQ rowScalarAVX512mul
	CMPQ R10, $3
	JEQ rowScalarAVX512div
	JMP rowScalarAVX512done
rowScalarAVX512add:
	TESTQ R9, R9
	JEQ rowScalarAVX512addtail
rowScalarAVX512addvec:
	VMOVUPS (SI), Z0
	VADDPS Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ rowScalarAVX512addvec
rowScalarAVX512addtail:
	KORTESTW K1, K1
	JZ rowScalarAVX512done
	VMOVUPS.Z (SI), K1, Z0
	VADDPS Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
	JMP rowScalarAVX512done

rowScalarAVX512sub:
	TESTQ R9, R9
	JEQ rowScalarAVX512subtail
rowScalarAVX512subvec:
	VMOVUPS (SI), Z0
	VSUBPS Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ rowScalarAVX512subvec
rowScalarAVX512subtail:
	KORTESTW K1, K1
	JZ rowScalarAVX512done
	VMOVUPS.Z (SI), K1, Z0
	VSUBPS Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
	JMP rowScalarAVX512done

rowScalarAVX512mul:
	TESTQ R9, R9
	JEQ rowScalarAVX512multail
rowScalarAVX512mulvec:
	VMOVUPS (SI), Z0
	VMULPS Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ rowScalarAVX512mulvec
rowScalarAVX512multail:
	KORTESTW K1, K1
	JZ rowScalarAVX512done
	VMOVUPS.Z (SI), K1, Z0
	VMULPS Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
	JMP rowScalarAVX512done

rowScalarAVX512div:
	TESTQ R9, R9
	JEQ rowScalarAVX512divtail
rowScalarAVX512divvec:
	VMOVUPS (SI), Z0
	VDIVPS Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNZ rowScalarAVX512divvec
rowScalarAVX512divtail:
	KORTESTW K1, K1
	JZ rowScalarAVX512done
	VMOVUPS.Z (SI), K1, Z0
	VDIVPS Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
	JMP rowScalarAVX512done

rowScalarAVX512done:
	VZEROUPPER
	RET
