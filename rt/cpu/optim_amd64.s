//go:build !purego

#include "textflag.h"

// func adamStepAVX2(param, grad, m, v *float32, blocks int, k *adamConsts)
// Updates blocks·8 parameters with the same operations, in the same order
// and with the same roundings (no FMA), as adamStepGo.
TEXT ·adamStepAVX2(SB), NOSPLIT, $0-48
	MOVQ param+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), BX
	MOVQ blocks+32(FP), CX
	MOVQ k+40(FP), R8
	VBROADCASTSS 0(R8), Y6   // beta1
	VBROADCASTSS 4(R8), Y7   // 1 - beta1
	VBROADCASTSS 8(R8), Y8   // beta2
	VBROADCASTSS 12(R8), Y9  // 1 - beta2
	VBROADCASTSS 16(R8), Y10 // sqrt(bias correction 2)
	VBROADCASTSS 20(R8), Y11 // eps
	VBROADCASTSS 24(R8), Y12 // step size
	VBROADCASTSS 28(R8), Y13 // shrink (AdamW), else 1
	VBROADCASTSS 32(R8), Y14 // L2 weight decay (Adam), else 0
	TESTQ CX, CX
	JEQ done

loop:
	VMOVUPS (DI), Y0         // p
	VMOVUPS (SI), Y1         // g
	VMULPS Y14, Y0, Y2
	VADDPS Y2, Y1, Y1        // g += wd·p
	VMULPS Y13, Y0, Y0       // p *= shrink
	VMOVUPS (DX), Y2
	VMULPS Y6, Y2, Y2        // beta1·m
	VMULPS Y7, Y1, Y3        // (1-beta1)·g
	VADDPS Y3, Y2, Y2        // m
	VMOVUPS Y2, (DX)
	VMOVUPS (BX), Y3
	VMULPS Y8, Y3, Y3        // beta2·v
	VMULPS Y9, Y1, Y4        // (1-beta2)·g
	VMULPS Y1, Y4, Y4        // ·g
	VADDPS Y4, Y3, Y3        // v
	VMOVUPS Y3, (BX)
	VSQRTPS Y3, Y4
	VDIVPS Y10, Y4, Y4       // sqrt(v)/sqrt(bc2)
	VADDPS Y11, Y4, Y4       // + eps
	VMULPS Y12, Y2, Y5       // stepSize·m
	VDIVPS Y4, Y5, Y5        // / denom
	VSUBPS Y5, Y0, Y0        // p - step
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	DECQ CX
	JNZ loop

done:
	VZEROUPPER
	RET
